//! Keys in a real Redis: deleting one tenant's keys with `SCAN MATCH` and the
//! exact `KeyPattern::matches` filter, and hash-tagged keys sharing a cluster
//! slot.
//!
//! Each test starts its own `redis-server` on a free loopback port, without
//! persistence, in a temporary directory, and kills it when done. The tests
//! are ignored by default; run them with `cargo test -- --include-ignored`.
//! Without `redis-server` on `PATH` they are skipped with a message, except
//! under CI (`CI=true`), where that is a failure.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::fs::{self, File};
use std::io::{ErrorKind, Write as _};
use std::net::{Ipv4Addr, TcpListener};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use cache_key::{Key, KeyBuilder, KeyPattern};
use redis::{Commands, Connection};

const NEEDS_REDIS: &str =
    "redis-server not found on PATH: install it (apt-get install redis-server) to run this test";

/// A `redis-server` of our own, killed (and its directory removed) on drop.
struct Server {
    child: Child,
    dir: PathBuf,
    port: u16,
}

impl Server {
    /// Starts a server, or returns `None` (after saying so) when `redis-server`
    /// is not installed. Under CI a missing server is a failure.
    fn start(cluster: bool) -> Option<Server> {
        match Command::new("redis-server").arg("--version").output() {
            Ok(_) => {}
            Err(err) if err.kind() == ErrorKind::NotFound => {
                let ci = std::env::var("CI").is_ok_and(|ci| ci == "true" || ci == "1");
                assert!(!ci, "{NEEDS_REDIS} (CI is set, so this is an error)");
                // Straight to stderr: libtest captures `eprintln!` of passing tests.
                let _ = writeln!(std::io::stderr(), "skipped: {NEEDS_REDIS}");
                return None;
            }
            Err(err) => panic!("could not run redis-server: {err}"),
        }
        let mut last_log = String::new();
        for _ in 0..5 {
            match Self::try_start(cluster) {
                Ok(server) => return Some(server),
                // Most likely another process took the port in the meantime.
                Err(log) => last_log = log,
            }
        }
        panic!("redis-server did not start; its last log:\n{last_log}");
    }

    fn try_start(cluster: bool) -> Result<Server, String> {
        let port = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .and_then(|listener| listener.local_addr())
            .expect("a free loopback port")
            .port();
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("redis-{}-{port}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).expect("a temporary directory");
        let log_path = dir.join("redis.log");
        let log = File::create(&log_path).expect("a log file");

        let mut command = Command::new("redis-server");
        command
            .args(["--port", &port.to_string()])
            .args(["--bind", "127.0.0.1"])
            .args(["--save", ""])
            .args(["--appendonly", "no"])
            .arg("--dir")
            .arg(&dir)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("a log file"))
            .stderr(log);
        if cluster {
            command
                .args(["--cluster-enabled", "yes"])
                .arg("--cluster-config-file")
                .arg(dir.join("nodes.conf"));
        }
        let child = command.spawn().expect("redis-server starts");
        let mut server = Server { child, dir, port };

        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let ping = |mut connection: Connection| {
                redis::cmd("PING").query::<String>(&mut connection).is_ok()
            };
            if server.try_connect().is_ok_and(ping) {
                return Ok(server);
            }
            let exited = server.child.try_wait().ok().flatten().is_some();
            if exited || Instant::now() > deadline {
                let log = fs::read_to_string(&log_path).unwrap_or_default();
                return Err(log); // `server` is dropped: killed and cleaned up.
            }
            thread::sleep(Duration::from_millis(20));
        }
    }

    fn try_connect(&self) -> redis::RedisResult<Connection> {
        redis::Client::open(format!("redis://127.0.0.1:{}/", self.port))?
            .get_connection_with_timeout(Duration::from_secs(1))
    }

    fn connect(&self) -> Connection {
        self.try_connect()
            .expect("a connection to our redis-server")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = fs::remove_dir_all(&self.dir);
    }
}

/// Every key `SCAN` returns for `glob`.
fn scan(connection: &mut Connection, glob: &str) -> BTreeSet<String> {
    let mut keys = BTreeSet::new();
    let mut cursor = 0u64;
    loop {
        let (next, batch): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(glob)
            .arg("COUNT")
            .arg(100)
            .query(connection)
            .expect("SCAN");
        keys.extend(batch);
        if next == 0 {
            return keys;
        }
        cursor = next;
    }
}

fn key(
    namespace: &str,
    tenant: Option<&str>,
    schema: u32,
    generation: u64,
    operation: &str,
) -> Key {
    let mut builder = KeyBuilder::new(namespace, operation);
    builder
        .schema(schema)
        .generation(generation)
        .criterion("page", 1);
    match tenant {
        Some(tenant) => builder.tenant(tenant),
        None => builder.global(),
    }
    .build()
    .expect("a key")
}

#[test]
#[ignore = "needs redis-server: apt-get install redis-server, then cargo test -- --include-ignored"]
fn deleting_one_tenant_leaves_every_other_key_intact() {
    let Some(server) = Server::start(false) else {
        return;
    };
    let mut connection = server.connect();

    // Tenants a careless glob would confuse, and an operation named `tacme*`
    // whose segment a `*` of the glob can line up with.
    let tenants = [
        Some("acme"),
        Some("acme*"),
        Some("acme-corp"),
        Some("a:b"),
        None,
    ];
    let mut keys: Vec<(Key, bool)> = Vec::new();
    for tenant in tenants {
        for schema in [1, 2] {
            for generation in [4, 5] {
                for operation in ["list", "tacme*"] {
                    let key = key("library", tenant, schema, generation, operation);
                    keys.push((key, tenant == Some("acme*")));
                }
            }
        }
    }
    let summarized = KeyBuilder::new("library", "search")
        .generation(5)
        .tenant("acme*")
        .criterion("title", "x".repeat(60))
        .build()
        .expect("a key");
    assert!(summarized.as_str().contains(":c_"));
    keys.push((summarized, true));
    keys.push((key("other", Some("acme*"), 1, 4, "list"), false));

    for (key, _) in &keys {
        let () = connection.set(key, key.as_str()).expect("SET");
    }
    let count: usize = redis::cmd("DBSIZE").query(&mut connection).expect("DBSIZE");
    assert_eq!(count, keys.len());

    // Delete tenant `acme*` across schemas and generations.
    let pattern = KeyPattern::tenant("library", "acme*").expect("a pattern");
    let scanned = scan(&mut connection, &pattern.glob());
    let doomed: Vec<&String> = scanned.iter().filter(|key| pattern.matches(key)).collect();
    assert!(
        scanned.len() > doomed.len(),
        "the glob alone also matches other tenants' keys: {scanned:#?}"
    );
    assert!(scanned.contains("library:s1:g4:tacme:tacme*:page=1"));
    let deleted: usize = connection.del(&doomed).expect("DEL");

    let expected_gone: BTreeSet<&str> = keys
        .iter()
        .filter(|(_, doomed)| *doomed)
        .map(|(key, _)| key.as_str())
        .collect();
    assert_eq!(deleted, expected_gone.len());
    assert_eq!(
        doomed
            .iter()
            .map(|key| key.as_str())
            .collect::<BTreeSet<_>>(),
        expected_gone
    );

    let remaining = scan(&mut connection, "*");
    let expected_remaining: BTreeSet<String> = keys
        .iter()
        .filter(|(_, doomed)| !doomed)
        .map(|(key, _)| key.to_string())
        .collect();
    assert_eq!(remaining, expected_remaining);
    for (key, doomed) in &keys {
        let value: Option<String> = connection.get(key).expect("GET");
        let expected = (!doomed).then(|| key.to_string());
        assert_eq!(value, expected, "{key}");
    }
}

fn key_slot(connection: &mut Connection, key: &str) -> u16 {
    redis::cmd("CLUSTER")
        .arg("KEYSLOT")
        .arg(key)
        .query(connection)
        .expect("CLUSTER KEYSLOT")
}

#[test]
#[ignore = "needs redis-server: apt-get install redis-server, then cargo test -- --include-ignored"]
fn hash_tagged_keys_of_one_tenant_share_a_cluster_slot() {
    let Some(server) = Server::start(true) else {
        return;
    };
    let mut connection = server.connect();

    let keys_of = |tenant: &str, hash_tag: bool| -> Vec<Key> {
        let mut keys = Vec::new();
        for operation in ["list", "search", "tacme*"] {
            for generation in [1, 2, 3] {
                let builder = || {
                    let mut builder = KeyBuilder::new("library", operation);
                    builder
                        .generation(generation)
                        .tenant(tenant)
                        .hash_tag(hash_tag);
                    builder
                };
                keys.push(builder().build().expect("a key"));
                keys.push(
                    builder()
                        .criterion("page", generation)
                        .build()
                        .expect("a key"),
                );
                keys.push(
                    builder()
                        .criterion("title", "Sand: Borges {1}".repeat(4))
                        .criterion("tags", ["a", "b"])
                        .build()
                        .expect("a key"),
                );
            }
        }
        keys
    };

    for (tenant, escaped) in [("acme", "acme"), ("a:b", "a%3Ab"), ("acme*", "acme*")] {
        let slots: BTreeMap<u16, Vec<Key>> =
            keys_of(tenant, true)
                .into_iter()
                .fold(BTreeMap::new(), |mut slots, key| {
                    let slot = key_slot(&mut connection, key.as_str());
                    slots.entry(slot).or_default().push(key);
                    slots
                });
        assert_eq!(slots.len(), 1, "tenant {tenant}: {slots:#?}");
        // The hash tag is the escaped tenant: its slot is that text's slot.
        let tag_slot = key_slot(&mut connection, escaped);
        assert_eq!(slots.keys().next(), Some(&tag_slot));

        let untagged: HashSet<u16> = keys_of(tenant, false)
            .iter()
            .map(|key| key_slot(&mut connection, key.as_str()))
            .collect();
        assert!(
            untagged.len() > 1,
            "without hash tags, a tenant's keys spread"
        );
    }

    let tenant_slots: HashSet<u16> = (0..20)
        .map(|i| {
            let key = KeyBuilder::new("library", "list")
                .tenant(format!("tenant-{i}").as_str())
                .hash_tag(true)
                .build()
                .expect("a key");
            key_slot(&mut connection, key.as_str())
        })
        .collect();
    assert!(
        tenant_slots.len() > 1,
        "different tenants spread over slots: {tenant_slots:?}"
    );
}
