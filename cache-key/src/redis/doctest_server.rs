// A redis-server of its own for the Redis caches' rustdoc examples, which
// `include!` this block (it is no module of the crate): `Some((server, url))`
// with the server stopped when `server` drops, or `None` after saying so
// when redis-server is not installed (a failure under CI, as in tests/).
// On a unix socket in the temporary directory: no port to pick, none taken.
{
    struct DoctestServer {
        child: std::process::Child,
        socket: std::path::PathBuf,
    }
    impl Drop for DoctestServer {
        fn drop(&mut self) {
            let _ = self.child.kill();
            let _ = self.child.wait();
            let _ = std::fs::remove_file(&self.socket);
        }
    }
    let socket = std::env::temp_dir().join(format!(
        "cache-key-doctest-{}-{}.sock",
        std::process::id(),
        line!()
    ));
    let started = std::process::Command::new("redis-server")
        .args(["--port", "0", "--save", "", "--appendonly", "no", "--unixsocket"])
        .arg(&socket)
        .stdout(std::process::Stdio::null())
        .spawn();
    match started {
        Ok(child) => {
            let server = DoctestServer { child, socket };
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
            // Connected, not merely created: redis-server binds its socket
            // file before it listens on it.
            while std::os::unix::net::UnixStream::connect(&server.socket).is_err() {
                assert!(std::time::Instant::now() < deadline, "redis-server did not start");
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            let url = format!("redis+unix://{}", server.socket.display());
            Some((server, url))
        }
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            let ci = std::env::var("CI").is_ok_and(|ci| ci == "true" || ci == "1");
            assert!(!ci, "redis-server is not on PATH (CI is set, so this is an error)");
            eprintln!(
                "skipped: redis-server is not on PATH, so this example did not run: \
                 install it (apt-get install redis-server) and run it again"
            );
            None
        }
        Err(error) => panic!("could not run redis-server: {error}"),
    }
}
