//! `redis-server` processes of a test's own: one server, a primary with a
//! replica, or a three-primary Redis Cluster, on free loopback ports, in a
//! temporary directory, each stopped by its pid when dropped (also when the
//! test panics). Faults are real: `SIGKILL`, `SIGSTOP`, a restart that loads
//! the server's own `dump.rdb`, and a [`Proxy`] in front of a server
//! (`proxy.rs`) that moves its clients to another server, goes silent,
//! closes their connections or refuses new ones.
//!
//! Without `redis-server` on `PATH` a test is skipped with a message, except
//! under CI (`CI=true`), where that is a failure.

use std::fs::{self, File};
use std::io::{ErrorKind, Write as _};
use std::net::{Ipv4Addr, TcpListener};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use redis::Connection;
use redis::cluster::{ClusterClient, ClusterConnection};

// A file of its own beside this one; a child module, so that the benches
// that include this file by path get it too.
#[path = "proxy.rs"]
mod proxy;
pub use self::proxy::Proxy;

const NEEDS_REDIS: &str = "redis-server is not on PATH, so this test did not run: \
     install it (apt-get install redis-server redis-tools) and run it again";

/// Whether `redis-server` can be run; `false` (after saying so) when it is
/// not installed. Under CI a missing server is a failure.
pub fn redis_installed() -> bool {
    match Command::new("redis-server").arg("--version").output() {
        Ok(_) => true,
        Err(err) if err.kind() == ErrorKind::NotFound => {
            let ci = std::env::var("CI").is_ok_and(|ci| ci == "true" || ci == "1");
            assert!(!ci, "{NEEDS_REDIS} (CI is set, so this is an error)");
            // Straight to stderr: libtest captures `eprintln!` of passing tests.
            let _ = writeln!(std::io::stderr(), "skipped: {NEEDS_REDIS}");
            false
        }
        Err(err) => panic!("could not run redis-server: {err}"),
    }
}

/// A free loopback port (free when asked: another process may take it).
pub fn free_port() -> u16 {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|listener| listener.local_addr())
        .expect("a free loopback port")
        .port()
}

/// A `redis-server` of our own, killed (and its directory removed) on drop.
pub struct Server {
    child: Option<Child>,
    dir: PathBuf,
    port: u16,
    cluster: bool,
    /// The client port a cluster node announces instead of its own (a
    /// proxy's); its bus port stays its own.
    announced: Option<u16>,
}

impl Server {
    /// Starts a server (cluster-enabled with `cluster`), or returns `None`
    /// when `redis-server` is not installed.
    pub fn start(cluster: bool) -> Option<Server> {
        Self::start_with(cluster, None)
    }

    /// Starts a cluster-enabled server that tells clients (in `CLUSTER
    /// SLOTS`, `MOVED` and `ASK`) to reach it on `port` of 127.0.0.1, where
    /// a [`Proxy`] forwards to it; `None` without `redis-server`.
    pub fn start_announced(port: u16) -> Option<Server> {
        Self::start_with(true, Some(port))
    }

    fn start_with(cluster: bool, announced: Option<u16>) -> Option<Server> {
        if !redis_installed() {
            return None;
        }
        let mut last_log = String::new();
        for _ in 0..5 {
            match Self::try_start(free_port(), cluster, announced) {
                Ok(server) => return Some(server),
                // Most likely another process took the port in the meantime.
                Err(log) => last_log = log,
            }
        }
        panic!("redis-server did not start; its last log:\n{last_log}");
    }

    fn try_start(port: u16, cluster: bool, announced: Option<u16>) -> Result<Server, String> {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("redis-{}-{port}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).expect("a temporary directory");
        let mut server = Server {
            child: None,
            dir,
            port,
            cluster,
            announced,
        };
        server.spawn()?;
        Ok(server)
    }

    /// Starts the process and waits until it answers `PING`.
    fn spawn(&mut self) -> Result<(), String> {
        let log_path = self.dir.join("redis.log");
        let log = File::create(&log_path).expect("a log file");
        let mut command = Command::new("redis-server");
        command
            .args(["--port", &self.port.to_string()])
            .args(["--bind", "127.0.0.1"])
            .args(["--save", ""])
            .args(["--appendonly", "no"])
            // A replica's sync starts at once, not after 5 s of waiting for others.
            .args(["--repl-diskless-sync-delay", "0"])
            .args(["--enable-debug-command", "local"])
            .arg("--dir")
            .arg(&self.dir)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("a log file"))
            .stderr(log);
        if self.cluster {
            command
                .args(["--cluster-enabled", "yes"])
                .arg("--cluster-config-file")
                .arg(self.dir.join("nodes.conf"));
        }
        if let Some(announced) = self.announced {
            // The cluster bus is on the node's port + 10000, reached directly.
            command
                .args(["--cluster-announce-port", &announced.to_string()])
                .args([
                    "--cluster-announce-bus-port",
                    &(u32::from(self.port) + 10000).to_string(),
                ]);
        }
        self.child = Some(command.spawn().expect("redis-server starts"));

        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let ping = |mut connection: Connection| {
                redis::cmd("PING").query::<String>(&mut connection).is_ok()
            };
            if self.try_connect().is_ok_and(ping) {
                return Ok(());
            }
            let exited = self
                .child
                .as_mut()
                .and_then(|child| child.try_wait().ok().flatten())
                .is_some();
            if exited || Instant::now() > deadline {
                self.stop();
                return Err(fs::read_to_string(&log_path).unwrap_or_default());
            }
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// The server's port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `redis://127.0.0.1:<port>/`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    pub fn try_connect(&self) -> redis::RedisResult<Connection> {
        redis::Client::open(self.url())?.get_connection_with_timeout(Duration::from_secs(1))
    }

    pub fn connect(&self) -> Connection {
        self.try_connect()
            .expect("a connection to our redis-server")
    }

    /// `FLUSHALL`: every key gone, the server itself left running.
    pub fn flush(&self) {
        let () = redis::cmd("FLUSHALL")
            .query(&mut self.connect())
            .expect("FLUSHALL");
    }

    /// Kills the process (`SIGKILL`, by its pid) and waits for it: the
    /// server is gone, with everything it held in memory.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// The process's pid.
    pub fn pid(&self) -> i32 {
        let child = self.child.as_ref().expect("a running server");
        i32::try_from(child.id()).expect("a pid")
    }

    /// Stops the process with `SIGSTOP`: it holds its port and its
    /// connections, and answers nothing until [`resume`](Self::resume).
    pub fn pause(&self) {
        signal(self.pid(), libc::SIGSTOP);
    }

    /// Resumes a [`pause`](Self::pause)d process with `SIGCONT`.
    pub fn resume(&self) {
        signal(self.pid(), libc::SIGCONT);
    }

    /// The instance id a counter is stamped with: the server's run id, then
    /// its replication id.
    pub fn instance_id(&self) -> String {
        let info: String = redis::cmd("INFO")
            .arg("server")
            .arg("replication")
            .query(&mut self.connect())
            .expect("INFO");
        let field = |name: &str| {
            info.lines()
                .find_map(|line| line.strip_prefix(name))
                .unwrap_or_else(|| panic!("INFO names the {name}"))
                .trim()
                .to_owned()
        };
        field("run_id:") + &field("master_replid:")
    }

    /// `REPLICAOF NO ONE`: a primary, whatever its old primary does.
    pub fn promote(&self) {
        let () = redis::cmd("REPLICAOF")
            .arg("NO")
            .arg("ONE")
            .query(&mut self.connect())
            .expect("REPLICAOF NO ONE");
    }

    /// `REPLICAOF` `primary`, then waits until the link is up: a full
    /// resync has replaced the dataset. Clients stay connected, as when a
    /// primary is demoted by hand (no `CLIENT KILL`).
    pub fn replicate(&self, primary: &Server) {
        let () = redis::cmd("REPLICAOF")
            .arg("127.0.0.1")
            .arg(primary.port())
            .query(&mut self.connect())
            .expect("REPLICAOF");
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let info: String = redis::cmd("INFO")
                .arg("replication")
                .query(&mut self.connect())
                .expect("INFO replication");
            if info.contains("master_link_status:up") {
                return;
            }
            assert!(Instant::now() < deadline, "never in sync: {info}");
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// `SAVE`: writes `dump.rdb` in the server's directory now.
    pub fn save(&self) {
        let () = redis::cmd("SAVE").query(&mut self.connect()).expect("SAVE");
    }

    /// Kills the process and starts another on the same port and directory,
    /// which loads the `dump.rdb` (or AOF) the old one left: a restart from
    /// the server's own files, with whatever they missed.
    pub fn restart_from_files(&mut self) {
        self.stop();
        self.respawn();
    }

    /// Starts a fresh, empty process on the same port, as after a restart
    /// without persistence.
    pub fn restart(&mut self) {
        self.stop();
        for file in ["nodes.conf", "dump.rdb"] {
            let _ = fs::remove_file(self.dir.join(file));
        }
        self.respawn();
    }

    fn respawn(&mut self) {
        let mut last_log = String::new();
        for _ in 0..5 {
            match self.spawn() {
                Ok(()) => return,
                Err(log) => last_log = log,
            }
            thread::sleep(Duration::from_millis(200));
        }
        panic!("redis-server did not restart; its last log:\n{last_log}");
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if self.child.is_some() {
            // A paused process would keep its port until killed; resume it
            // so that it dies at once.
            signal(self.pid(), libc::SIGCONT);
        }
        self.stop();
        let _ = fs::remove_dir_all(&self.dir);
    }
}

fn signal(pid: i32, signal: libc::c_int) {
    // SAFETY: `kill` only sends a signal to the pid of our own child.
    let sent = unsafe { libc::kill(pid, signal) };
    assert_eq!(sent, 0, "kill({pid}, {signal})");
}

/// A primary and its replica, each a [`Server`].
pub struct Replicated {
    pub primary: Server,
    pub replica: Server,
}

impl Replicated {
    /// Starts two servers, makes the second a replica of the first and
    /// waits until it is in sync; `None` without `redis-server`.
    pub fn start() -> Option<Replicated> {
        let primary = Server::start(false)?;
        let replica = Server::start(false)?;
        let () = redis::cmd("REPLICAOF")
            .arg("127.0.0.1")
            .arg(primary.port())
            .query(&mut replica.connect())
            .expect("REPLICAOF");
        let replicated = Replicated { primary, replica };
        replicated.wait_in_sync();
        Some(replicated)
    }

    /// Waits until the replica has every write the primary acknowledged:
    /// its link is up and its replication offset is the primary's. (`WAIT`
    /// on a connection of its own would wait for none of the writes: it
    /// waits for the offset of its connection's last write.)
    pub fn wait_in_sync(&self) {
        let deadline = Instant::now() + Duration::from_secs(10);
        let info = |server: &Server| -> String {
            redis::cmd("INFO")
                .arg("replication")
                .query(&mut server.connect())
                .expect("INFO replication")
        };
        let offset = |info: &str| {
            info.lines()
                .find_map(|line| line.strip_prefix("master_repl_offset:"))
                .map(|offset| offset.trim().to_owned())
        };
        loop {
            let (primary, replica) = (info(&self.primary), info(&self.replica));
            if replica.contains("master_link_status:up") && offset(&primary) == offset(&replica) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the replica never synced: {replica}"
            );
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// Cuts the replication link while the replica is paused: writes the
    /// primary acknowledges from now on never reach the replica.
    pub fn cut_link(&self) {
        self.replica.pause();
        let _: i64 = redis::cmd("CLIENT")
            .arg("KILL")
            .arg("TYPE")
            .arg("replica")
            .query(&mut self.primary.connect())
            .expect("CLIENT KILL TYPE replica");
    }

    /// Kills the primary and promotes the replica (`REPLICAOF NO ONE`), as a
    /// failover does.
    pub fn fail_over(&mut self) {
        self.primary.stop();
        self.replica.resume();
        self.replica.promote();
    }
}

/// A Redis Cluster of three primaries (no replicas), each a [`Server`]:
/// stopped by their pids when dropped.
pub struct Cluster {
    nodes: Vec<Server>,
    /// Behind proxies: the proxy of each node, in the same order, whose
    /// port the node announces as its own.
    proxies: Vec<Proxy>,
}

impl Cluster {
    /// Starts three cluster-enabled servers, joins them with `redis-cli
    /// --cluster create` and waits for `cluster_state:ok` on each; `None`
    /// when `redis-server` is not installed.
    pub fn start() -> Option<Cluster> {
        let mut nodes = Vec::new();
        for _ in 0..3 {
            // On a panic below, the servers already started are dropped.
            nodes.push(Server::start(true)?);
        }
        Self::create(nodes, Vec::new())
    }

    /// [`start`](Self::start), each node behind a [`Proxy`] of its own
    /// whose port it announces as its address (`CLUSTER SLOTS`, `MOVED`,
    /// `ASK`): a client given [`urls`](Self::urls) reaches the nodes only
    /// through the proxies, so each proxy sees, counts and can break all
    /// of a client's traffic to its node. The nodes talk to each other
    /// directly, on their own bus ports.
    pub fn start_behind_proxies() -> Option<Cluster> {
        let (mut nodes, mut proxies) = (Vec::new(), Vec::new());
        for _ in 0..3 {
            // Pointed at its node once the node runs.
            let proxy = Proxy::to(0);
            let node = Server::start_announced(proxy.port())?;
            proxy.point_at(node.port());
            nodes.push(node);
            proxies.push(proxy);
        }
        Self::create(nodes, proxies)
    }

    fn create(nodes: Vec<Server>, proxies: Vec<Proxy>) -> Option<Cluster> {
        let cluster = Cluster { nodes, proxies };
        let addresses: Vec<String> = cluster
            .nodes
            .iter()
            .map(|node| format!("127.0.0.1:{}", node.port()))
            .collect();
        let output = Command::new("redis-cli")
            .args(["--cluster", "create"])
            .args(&addresses)
            .args(["--cluster-replicas", "0", "--cluster-yes"])
            .stdin(Stdio::null())
            .output()
            .expect("redis-cli runs (it comes with redis-server)");
        assert!(
            output.status.success(),
            "redis-cli --cluster create failed:\n{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        let deadline = Instant::now() + Duration::from_secs(30);
        for node in &cluster.nodes {
            let mut connection = node.connect();
            loop {
                let info: String = redis::cmd("CLUSTER")
                    .arg("INFO")
                    .query(&mut connection)
                    .expect("CLUSTER INFO");
                if info.contains("cluster_state:ok") {
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "the cluster never got ready: {info}"
                );
                thread::sleep(Duration::from_millis(50));
            }
        }
        Some(cluster)
    }

    pub fn nodes(&self) -> &[Server] {
        &self.nodes
    }

    /// The proxy in front of each node, in the order of [`nodes`](Self::nodes)
    /// (none unless [`start_behind_proxies`](Self::start_behind_proxies)).
    pub fn proxies(&self) -> &[Proxy] {
        &self.proxies
    }

    /// The node on `port`, to stop or pause.
    pub fn node_mut(&mut self, port: u16) -> &mut Server {
        self.nodes
            .iter_mut()
            .find(|node| node.port() == port)
            .expect("a node of this cluster")
    }

    /// `redis://127.0.0.1:<port>/` of each node, or of its proxy.
    pub fn urls(&self) -> Vec<String> {
        if self.proxies.is_empty() {
            self.nodes.iter().map(Server::url).collect()
        } else {
            self.proxies.iter().map(Proxy::url).collect()
        }
    }

    pub fn client(&self) -> ClusterClient {
        ClusterClient::builder(self.urls())
            .connection_timeout(Duration::from_secs(2))
            .response_timeout(Duration::from_secs(2))
            .build()
            .expect("a cluster client")
    }

    pub fn connect(&self) -> ClusterConnection {
        self.client()
            .get_connection()
            .expect("a connection to our cluster")
    }

    /// The node on `port`: its own, or its proxy's.
    fn node_on(&self, port: u16) -> &Server {
        let proxied = |at: usize| self.proxies.get(at).is_some_and(|p| p.port() == port);
        self.nodes
            .iter()
            .enumerate()
            .find(|(at, node)| node.port() == port || proxied(*at))
            .map(|(_, node)| node)
            .expect("a node of this cluster")
    }

    /// Moves every key of `slot` to the primary on `to` (its port, or its
    /// proxy's), the slot left to its owner, both marked as moving it
    /// (`MIGRATING`, `IMPORTING`): the owner answers `ASK` for a key it no
    /// longer holds, as in the middle of a resharding. How many keys moved.
    pub fn migrate_keys(&self, slot: u16, to: u16) -> usize {
        let (from, to) = (self.node_on(self.owner(slot)), self.node_on(to));
        let (mut source, mut target) = (from.connect(), to.connect());
        let setslot = |connection: &mut Connection, state: &str, id: &str| {
            let () = redis::cmd("CLUSTER")
                .arg("SETSLOT")
                .arg(slot)
                .arg(state)
                .arg(id)
                .query(connection)
                .expect("CLUSTER SETSLOT");
        };
        setslot(&mut target, "IMPORTING", &node_id(&mut source));
        setslot(&mut source, "MIGRATING", &node_id(&mut target));
        let keys: Vec<String> = redis::cmd("CLUSTER")
            .arg("GETKEYSINSLOT")
            .arg(slot)
            .arg(10_000)
            .query(&mut source)
            .expect("CLUSTER GETKEYSINSLOT");
        if !keys.is_empty() {
            let _: String = redis::cmd("MIGRATE")
                .arg("127.0.0.1")
                .arg(to.port())
                .arg("")
                .arg(0)
                .arg(5000)
                .arg("KEYS")
                .arg(&keys)
                .query(&mut source)
                .expect("MIGRATE");
        }
        keys.len()
    }

    /// Gives `slot` to the primary on `to` (its port, or its proxy's) on
    /// every node, the new owner first: the old one answers `MOVED`.
    pub fn assign(&self, slot: u16, to: u16) {
        let to = self.node_on(to);
        let id = node_id(&mut to.connect());
        let others = self.nodes.iter().filter(|node| node.port() != to.port());
        for node in std::iter::once(to).chain(others) {
            let () = redis::cmd("CLUSTER")
                .arg("SETSLOT")
                .arg(slot)
                .arg("NODE")
                .arg(&id)
                .query(&mut node.connect())
                .expect("CLUSTER SETSLOT NODE");
        }
    }

    /// The port of the primary owning `slot`, as the cluster announces it
    /// (its proxy's, behind proxies).
    pub fn owner(&self, slot: u16) -> u16 {
        let mut connection = self.nodes[0].connect();
        let ranges: Vec<(u16, u16, (String, u16))> = redis::cmd("CLUSTER")
            .arg("SLOTS")
            .query::<Vec<redis::Value>>(&mut connection)
            .expect("CLUSTER SLOTS")
            .into_iter()
            .map(|range| {
                let redis::Value::Array(range) = range else {
                    panic!("a slot range: {range:?}");
                };
                let start = redis::from_redis_value_ref(&range[0]).expect("a slot");
                let end = redis::from_redis_value_ref(&range[1]).expect("a slot");
                let redis::Value::Array(primary) = &range[2] else {
                    panic!("a primary: {range:?}");
                };
                let host = redis::from_redis_value_ref(&primary[0]).expect("a host");
                let port = redis::from_redis_value_ref(&primary[1]).expect("a port");
                (start, end, (host, port))
            })
            .collect();
        ranges
            .iter()
            .find(|(start, end, _)| (*start..=*end).contains(&slot))
            .map(|(_, _, (_, port))| *port)
            .expect("every slot has a primary")
    }
}

/// `CLUSTER MYID` of the node `connection` is to.
fn node_id(connection: &mut Connection) -> String {
    redis::cmd("CLUSTER")
        .arg("MYID")
        .query(connection)
        .expect("CLUSTER MYID")
}

/// `CLUSTER KEYSLOT key`.
pub fn key_slot(connection: &mut Connection, key: &str) -> u16 {
    redis::cmd("CLUSTER")
        .arg("KEYSLOT")
        .arg(key)
        .query(connection)
        .expect("CLUSTER KEYSLOT")
}

/// How many times each command ran on the server since its counts were
/// reset (`INFO commandstats`), by lowercase name: `mget`, `evalsha`, `get`...
/// The reset itself (`config|resetstat`, counted once it has run) is left out.
pub fn command_calls(connection: &mut Connection) -> std::collections::BTreeMap<String, u64> {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(connection)
        .expect("INFO commandstats");
    info.lines()
        .filter_map(|line| {
            let (name, stats) = line.strip_prefix("cmdstat_")?.split_once(':')?;
            if name == "config|resetstat" {
                return None;
            }
            let calls = stats
                .split(',')
                .find_map(|stat| stat.strip_prefix("calls="))?;
            Some((name.to_owned(), calls.parse().ok()?))
        })
        .collect()
}

/// Resets the command counts of `INFO commandstats`.
pub fn reset_command_calls(connection: &mut Connection) {
    let () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query(connection)
        .expect("CONFIG RESETSTAT");
}
