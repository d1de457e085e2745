//! A PostgreSQL cluster of a test's own: `initdb` in a temporary directory,
//! `postgres` with `wal_level = logical` on a free loopback port, stopped by
//! its pid when dropped (also when the test panics). Faults are real:
//! `SIGKILL` and a restart from the same directory.
//!
//! The binaries are Debian's (`postgresql` package, in
//! `/usr/lib/postgresql/<version>/bin`, or `$PG_BIN`). `initdb` and
//! `postgres` refuse to run as root: run as root, the cluster runs as the
//! user `nobody` (uid and gid 65534, set on the child process), its
//! directory owned by that user. Without the binaries a test is skipped
//! with a message, except under CI (`CI=true`), where that is a failure.
//! The library example includes this file too (its change-log scenario).

use std::fs;
use std::io::Write as _;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

/// A free loopback port (free when asked: another process may take it).
fn free_port() -> u16 {
    std::net::TcpListener::bind(("127.0.0.1", 0))
        .and_then(|listener| listener.local_addr())
        .expect("a free loopback port")
        .port()
}

const NOBODY: u32 = 65534;

const NEEDS_POSTGRES: &str = "PostgreSQL's initdb and postgres were not found, so this test did \
     not run: install them (apt-get install postgresql) or set PG_BIN to their directory";

/// The directory holding `initdb` and `postgres`, if installed.
fn bin_dir() -> Option<PathBuf> {
    if let Ok(dir) = std::env::var("PG_BIN") {
        return Some(PathBuf::from(dir));
    }
    let mut found: Vec<PathBuf> = fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|entry| entry.ok().map(|entry| entry.path().join("bin")))
        .filter(|bin| bin.join("initdb").exists() && bin.join("postgres").exists())
        .collect();
    // The newest major version.
    found.sort_by_key(|bin| {
        let version = bin.parent().and_then(Path::file_name);
        version
            .and_then(|v| v.to_str()?.parse::<u32>().ok())
            .unwrap_or(0)
    });
    found.pop()
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// A command run as `nobody` when we are root, as ourselves otherwise.
fn command(program: &Path) -> Command {
    let mut command = Command::new(program);
    if is_root() {
        // std drops the supplementary groups when root sets a uid.
        command.uid(NOBODY).gid(NOBODY);
    }
    command
}

/// A running `postgres` of our own.
pub struct Postgres {
    child: Option<Child>,
    bin: PathBuf,
    dir: PathBuf,
    port: u16,
}

impl Postgres {
    /// `initdb`, then `postgres` on a free port; `None` (after saying so)
    /// when PostgreSQL is not installed, a failure under CI.
    pub fn start() -> Option<Postgres> {
        let Some(bin) = bin_dir() else {
            let ci = std::env::var("CI").is_ok_and(|ci| ci == "true" || ci == "1");
            assert!(!ci, "{NEEDS_POSTGRES} (CI is set, so this is an error)");
            let _ = writeln!(std::io::stderr(), "skipped: {NEEDS_POSTGRES}");
            return None;
        };
        let dir = std::env::temp_dir().join(format!(
            "cache-key-pg-{}-{}",
            std::process::id(),
            free_port()
        ));
        fs::create_dir_all(&dir).expect("a temporary directory");
        if is_root() {
            let path = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()).unwrap();
            // SAFETY: a valid NUL-terminated path.
            let chowned = unsafe { libc::chown(path.as_ptr(), NOBODY, NOBODY) };
            assert_eq!(chowned, 0, "chown of {}", dir.display());
        }
        let output = command(&bin.join("initdb"))
            .args([
                "-D",
                "data",
                "-U",
                "postgres",
                "-A",
                "trust",
                "--no-sync",
                "-E",
                "UTF8",
            ])
            .current_dir(&dir)
            .output()
            .expect("initdb runs");
        assert!(
            output.status.success(),
            "initdb failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let mut postgres = Postgres {
            child: None,
            bin,
            dir,
            port: free_port(),
        };
        postgres.spawn().expect("postgres starts");
        Some(postgres)
    }

    /// Starts the postmaster; its log when it exits before it accepts
    /// connections.
    fn spawn(&mut self) -> Result<(), String> {
        let log = fs::File::create(self.dir.join("log")).expect("a log file");
        if is_root() {
            let path = std::ffi::CString::new(self.dir.join("log").as_os_str().as_encoded_bytes())
                .unwrap();
            // SAFETY: a valid NUL-terminated path.
            unsafe { libc::chown(path.as_ptr(), NOBODY, NOBODY) };
        }
        let child = command(&self.bin.join("postgres"))
            .args(["-D", "data", "-p", &self.port.to_string()])
            .args([
                "-c",
                "listen_addresses=127.0.0.1",
                "-c",
                "unix_socket_directories=",
            ])
            .args(["-c", "wal_level=logical", "-c", "max_wal_senders=10"])
            .args(["-c", "max_replication_slots=10", "-c", "fsync=off"])
            .args(["-c", "wal_sender_timeout=10s"])
            .current_dir(&self.dir)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("postgres runs");
        self.child = Some(child);
        let log = || fs::read_to_string(self.dir.join("log")).unwrap_or_default();
        let deadline = Instant::now() + Duration::from_secs(30);
        // Accepting connections, not only listening: a server still
        // recovering answers "the database system is starting up".
        let ready = || {
            Command::new(self.bin.join("pg_isready"))
                .args(["-q", "-h", "127.0.0.1", "-p", &self.port.to_string()])
                .status()
                .is_ok_and(|status| status.success())
        };
        while !ready() {
            let child = self.child.as_mut().expect("just spawned");
            if child.try_wait().ok().flatten().is_some() {
                self.child = None;
                return Err(log());
            }
            assert!(
                Instant::now() < deadline,
                "postgres did not listen in 30 s: {}",
                log()
            );
            thread::sleep(Duration::from_millis(50));
        }
        Ok(())
    }

    /// The port it listens on (127.0.0.1).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// A `tokio-postgres` connection string.
    pub fn url(&self) -> String {
        format!(
            "host=127.0.0.1 port={} user=postgres dbname=postgres",
            self.port
        )
    }

    /// Kills the postmaster with `SIGKILL` and waits for it; its children
    /// leave once they notice. Then starts it again on the same directory
    /// and port: crash recovery from its own WAL.
    pub fn crash_and_restart(&mut self) {
        self.kill();
        // The backends exit when they see the postmaster gone; the shared
        // memory they hold keeps a new postmaster out until then.
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            match self.spawn() {
                Ok(()) => return,
                Err(log) => assert!(
                    Instant::now() < deadline,
                    "postgres did not come back in 30 s: {log}"
                ),
            }
            thread::sleep(Duration::from_millis(200));
        }
    }

    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        if let Some(child) = &self.child {
            // SIGQUIT: immediate shutdown, children included.
            // SAFETY: a pid of our own child.
            unsafe { libc::kill(child.id() as i32, libc::SIGQUIT) };
        }
        if let Some(mut child) = self.child.take() {
            let deadline = Instant::now() + Duration::from_secs(10);
            while child.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
                thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = fs::remove_dir_all(&self.dir);
    }
}
