//! [`RedisPool`]: blocking connections to one Redis server or a Redis
//! Cluster, pooled so that threads never wait on each other's round trips.

use std::fmt;
use std::future::{Future, ready};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use ::redis::cluster::ClusterClient;
use ::redis::cluster_routing::RoutingInfo;
use ::redis::{
    Client, Cmd, Connection, ConnectionInfo, ConnectionLike, IntoConnectionInfo, RedisError,
    RedisResult, Value, cmd,
};

use crate::cache::BackendError;
use crate::redis::batch::{Answers, Batch, Exchange, Replies, Sent};
use crate::redis::breaker::{Breaker, Circuit, Probe};
use crate::redis::counters::Topology;
use crate::redis::driver::{self, Driver, ready_now};
use crate::redis::flight::{Waited, Waiter};
use crate::redis::instance::{Instance, learn_instance};
use crate::redis::lock::Lease;
use crate::redis::pool::{InstanceCheck, cluster_client, impl_pool};
use crate::redis::resp;
use crate::redis::sync::cluster::ClusterConnections;
use crate::redis::sync::resp::RespConnection;
use crate::redis::timeouts::{Timeouts, at_least_a_millisecond};
use crate::redis::transport::{
    classify, closed, no_connection, no_free_connection, out_of_time, unreachable,
};

/// A pool of blocking connections to one Redis server or to a Redis
/// Cluster (feature `redis`), shared by the stores and caches made from it
/// (cloning it shares the pool).
///
/// Each call takes a connection of its own for its round trip, so `n`
/// threads make up to `n` round trips at once (up to
/// [`max_size`](RedisPoolBuilder::max_size) connections, 16 by default);
/// connections are opened as needed and kept. Every call is bounded by the
/// [`Timeouts`]: a hung server makes it an error within them, never a
/// hang. A call whose connection the server closed (a restart, an idle
/// timeout) is sent once more on a fresh connection, and every connection
/// kept from before is dropped: a restart costs callers no error.
///
/// On a cluster, a pooled connection is the `redis` crate's cluster
/// connection (which follows redirects, and runs your own commands) and a
/// connection to each primary the pool's batches have gone to, so that a
/// hit is one round trip: each primary's commands in one write, every
/// primary written to before any reply is read. A node connection the
/// server closed (a restart, an idle timeout) fails no call: its commands
/// go through the crate's connection, which connects again.
///
/// A connection to one server is the pool's own: it speaks RESP2 over TCP
/// or a Unix socket (no TLS) and reads its replies in place, authenticated
/// and in the database the URL gives (`redis://user:password@host/2`). A
/// user an ACL restricts needs the commands the cache sends (among them
/// `INFO`, `CLIENT SETNAME`, `CLIENT GETNAME`, `WAIT`, `EVALSHA`) and the
/// channel bumps publish on, `cache-key:counters` (`&cache-key:counters`:
/// a user made since Redis 7 has no channel).
///
/// ```no_run
/// use cache_key::redis::{RedisPool, Timeouts};
/// use std::time::Duration;
///
/// let pool = RedisPool::open("redis://127.0.0.1/")?;
/// let cluster = RedisPool::builder()
///     .max_size(32)
///     .timeouts(Timeouts::default().with_call(Duration::from_millis(200)))
///     .open_cluster(["redis://10.0.0.1:7000/", "redis://10.0.0.2:7000/"])?;
/// # Ok::<(), redis::RedisError>(())
/// ```
#[derive(Clone)]
pub struct RedisPool {
    pools: Arc<Pools>,
    timeouts: Timeouts,
    /// The ages of the pool's connections, shared with its manager.
    ages: Arc<Ages>,
    circuit: Arc<Circuit>,
    /// The last connection the pool failed to open, which a checkout
    /// waiting for one fails with at once.
    refusals: Arc<Refusals>,
    instance_check: InstanceCheck,
    /// Where a subscription connects: the server, or each node given.
    subscribers: Arc<[Client]>,
}

enum Pools {
    Server(r2d2::Pool<ServerManager>),
    Cluster(r2d2::Pool<ClusterManager>),
}

impl fmt::Debug for RedisPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (kind, state) = match &*self.pools {
            Pools::Server(pool) => ("server", pool.state()),
            Pools::Cluster(pool) => ("cluster", pool.state()),
        };
        f.debug_struct("RedisPool")
            .field("kind", &kind)
            .field("connections", &state.connections)
            .field("idle", &state.idle_connections)
            .finish()
    }
}

/// How a [`RedisPool`] is made: its size, [`Timeouts`] and [`Breaker`].
#[derive(Debug, Clone, Copy)]
pub struct RedisPoolBuilder {
    max_size: u32,
    timeouts: Timeouts,
    breaker: Breaker,
    instance_check: InstanceCheck,
}

impl RedisPoolBuilder {
    /// The most connections the pool opens (at least 1; default 16). A call
    /// that finds them all busy waits for one up to the connect timeout.
    pub fn max_size(mut self, max_size: u32) -> Self {
        self.max_size = max_size.max(1);
        self
    }

    /// The timeouts of every call.
    pub fn timeouts(mut self, timeouts: Timeouts) -> Self {
        self.timeouts = timeouts;
        self
    }

    /// When calls stop going to a Redis they cannot reach, and when they
    /// try again.
    pub fn breaker(mut self, breaker: Breaker) -> Self {
        self.breaker = breaker;
        self
    }

    /// How the pool knows which Redis process answers it (default
    /// [`InstanceCheck::PerConnection`]).
    pub fn instance_check(mut self, check: InstanceCheck) -> Self {
        self.instance_check = check;
        self
    }

    /// A pool of connections to the server at `url`. Nothing is connected
    /// yet: an unreachable server is an error of the first call. A URL the
    /// pool's connections cannot serve (`protocol=resp3`, TLS) is an error
    /// here.
    pub fn open(self, url: impl IntoConnectionInfo) -> RedisResult<RedisPool> {
        let client = Client::open(url)?;
        resp::check(client.get_connection_info())?;
        let manager = ServerManager {
            info: client.get_connection_info().clone(),
            timeouts: self.timeouts,
            ages: Arc::default(),
            learn_instance: self.instance_check == InstanceCheck::PerConnection,
        };
        let refusals = Arc::<Refusals>::default();
        let (probed, timeouts) = (client.clone(), self.timeouts);
        let probe = Probe::Blocking(Box::new(move || {
            let ping = |mut connection: Connection| cmd("PING").query::<Value>(&mut connection);
            timeouts.open(&probed).and_then(ping).is_ok()
        }));
        Ok(RedisPool {
            ages: manager.ages.clone(),
            circuit: Circuit::new(self.breaker, probe),
            instance_check: self.instance_check,
            refusals: refusals.clone(),
            pools: Arc::new(Pools::Server(self.pool(manager, refusals))),
            timeouts: self.timeouts,
            subscribers: Arc::new([client]),
        })
    }

    /// A pool of connections to the Redis Cluster that `urls` belong to
    /// (any of its nodes; the others are found from them).
    pub fn open_cluster<T: IntoConnectionInfo>(
        self,
        urls: impl IntoIterator<Item = T>,
    ) -> RedisResult<RedisPool> {
        let infos = urls
            .into_iter()
            .map(IntoConnectionInfo::into_connection_info)
            .collect::<RedisResult<Vec<_>>>()?;
        let (client, subscribers) = cluster_client(infos.iter().cloned(), self.timeouts)?;
        let manager = ClusterManager {
            client,
            // `cluster_client` refused an empty list.
            template: infos.into_iter().next().expect("a node's URL"),
            timeouts: self.timeouts,
            ages: Arc::default(),
        };
        let refusals = Arc::<Refusals>::default();
        let probed = manager.client.clone();
        let probe = Probe::Blocking(Box::new(move || {
            let ping = |mut connection: ::redis::cluster::ClusterConnection| {
                cmd("PING").query::<Value>(&mut connection)
            };
            probed.get_connection().and_then(ping).is_ok()
        }));
        Ok(RedisPool {
            ages: manager.ages.clone(),
            circuit: Circuit::new(self.breaker, probe),
            instance_check: self.instance_check,
            refusals: refusals.clone(),
            pools: Arc::new(Pools::Cluster(self.pool(manager, refusals))),
            timeouts: self.timeouts,
            subscribers,
        })
    }

    fn pool<M>(&self, manager: M, refusals: Arc<Refusals>) -> r2d2::Pool<M>
    where
        M: r2d2::ManageConnection<Error = RedisError>,
    {
        r2d2::Pool::builder()
            .max_size(self.max_size)
            // Connections are opened as calls need them, not ahead.
            .min_idle(Some(0))
            // No `PING` (it would double each round trip): a checkout only
            // drops connections older than the last one found closed.
            .test_on_check_out(true)
            .connection_timeout(self.timeouts.connect())
            .error_handler(Box::new(NoteRefusals(refusals)))
            .build_unchecked(manager)
    }
}

impl RedisPool {
    /// A builder with the defaults: 16 connections at most,
    /// [`Timeouts::default`], [`Breaker::default`].
    pub fn builder() -> RedisPoolBuilder {
        RedisPoolBuilder {
            max_size: 16,
            timeouts: Timeouts::default(),
            breaker: Breaker::default(),
            instance_check: InstanceCheck::default(),
        }
    }

    /// A pool of connections to the server at `url`, with the defaults.
    pub fn open(url: impl IntoConnectionInfo) -> RedisResult<RedisPool> {
        Self::builder().open(url)
    }

    /// A pool of connections to the Redis Cluster `urls` belong to, with
    /// the defaults.
    pub fn open_cluster<T: IntoConnectionInfo>(
        urls: impl IntoIterator<Item = T>,
    ) -> RedisResult<RedisPool> {
        Self::builder().open_cluster(urls)
    }

    /// A connection of the pool, for commands of your own; it goes back to
    /// the pool when dropped. Waits for one at most the call timeout.
    pub fn get(&self) -> Result<PooledConnection, BackendError> {
        (self.checkout(self.timeouts.deadline())).map_err(|failed| self.failure(failed))
    }

    /// A connection, by `deadline`. r2d2 opens connections on threads of
    /// its own and retries a refused one until the wait ends: the wait is
    /// cut in slices, so that a connection refused meanwhile fails the call
    /// at once rather than at its bound. Only the first slice asks r2d2
    /// (each ask with no idle connection starts opening another); the
    /// others wait for one to be idle.
    fn checkout(&self, deadline: Instant) -> Result<PooledConnection, Failed> {
        // An idle connection, the usual case, is taken without a clock.
        let idle = match &*self.pools {
            Pools::Server(pool) => pool.try_get().map(Pooled::Server),
            Pools::Cluster(pool) => pool.try_get().map(Pooled::Cluster),
        };
        if let Some(pooled) = idle {
            return Ok(PooledConnection(pooled));
        }
        let bound = self.timeouts.call();
        let started = Instant::now();
        let mut ask = true;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(self.none_in_time(bound));
            }
            let wait = at_least_a_millisecond(left.min(CHECKOUT_SLICE));
            let (_, idle, _) = self.sizes();
            if ask || idle > 0 {
                ask = false;
                let taken = match &*self.pools {
                    Pools::Server(pool) => pool.get_timeout(wait).map(Pooled::Server),
                    Pools::Cluster(pool) => pool.get_timeout(wait).map(Pooled::Cluster),
                };
                if let Ok(pooled) = taken {
                    return Ok(PooledConnection(pooled));
                }
            } else {
                std::thread::sleep(wait);
            }
            if let Some(why) = self.refusals.since(started) {
                return Err(Failed::Checkout(no_connection(bound, why)));
            }
        }
    }

    /// The pool's open connections, how many of them are idle, and how
    /// many it may open.
    fn sizes(&self) -> (u32, u32, u32) {
        let (state, max_size) = match &*self.pools {
            Pools::Server(pool) => (pool.state(), pool.max_size()),
            Pools::Cluster(pool) => (pool.state(), pool.max_size()),
        };
        (state.connections, state.idle_connections, max_size)
    }

    /// The timeouts of every call.
    pub fn timeouts(&self) -> Timeouts {
        self.timeouts
    }

    /// Drops, as they are next taken, every connection opened until now:
    /// one was found closed by the server, so the others likely were too.
    fn forget_open_connections(&self) {
        self.ages.forget_older();
    }

    pub(crate) fn topology(&self) -> Topology {
        match &*self.pools {
            Pools::Server(_) => Topology::Server,
            Pools::Cluster(_) => Topology::Cluster,
        }
    }

    /// Sends `batch` by `deadline`: one pipeline to a server; to a cluster,
    /// one pipeline to each primary it goes to, all written before any
    /// reply is read. A batch whose
    /// connection the server had closed is sent once more, on a fresh one;
    /// none is sent while the circuit is open.
    pub(crate) fn send_now(&self, batch: Batch, deadline: Instant) -> Sent {
        // Everything found in process (tracked counters, the local level).
        if batch.is_empty() {
            return Ok(Answers::default());
        }
        self.circuit.admit()?;
        let commands = self.lay_out(batch);
        let sent = match self.send_once(&commands, deadline) {
            Err(Failed::Sending(error)) if closed(&error) => {
                self.forget_open_connections();
                self.send_once(&commands, deadline)
            }
            sent => sent,
        };
        // A pool with every connection busy has reached Redis all the same.
        let reached = match &sent {
            Ok(_) | Err(Failed::Busy(_)) => true,
            Err(Failed::Checkout(_) | Failed::OutOfTime) => false,
            Err(Failed::Sending(error)) => !unreachable(error),
        };
        let sent = sent.map_err(|failed| self.failure(failed));
        self.circuit.record(reached);
        sent
    }

    /// Whether calls skip Redis now: its circuit is open, and the pool
    /// probes Redis in the background until it answers.
    pub fn is_skipping(&self) -> bool {
        self.circuit.is_open()
    }

    /// Why no connection came by the deadline: every one the pool may open
    /// is open and taken (busy, Redis answering), or one was being opened
    /// and did not open in time (Redis not answering).
    fn none_in_time(&self, bound: Duration) -> Failed {
        let (connections, _, max_size) = self.sizes();
        match connections >= max_size {
            true => Failed::Busy(no_free_connection(bound, max_size)),
            false => Failed::Checkout(out_of_time(bound)),
        }
    }

    /// `failed` as the caller sees it.
    fn failure(&self, failed: Failed) -> BackendError {
        match failed {
            Failed::Checkout(error) | Failed::Busy(error) => error,
            Failed::Sending(error) => classify(error, self.timeouts.call()),
            Failed::OutOfTime => out_of_time(self.timeouts.call()),
        }
    }

    fn send_once(&self, commands: &Commands, deadline: Instant) -> Result<Answers, Failed> {
        let mut connection = self.checkout(deadline)?;
        let bound = self.timeouts.call();
        match (&mut connection.0, commands) {
            (Pooled::Server(connection), Commands::Packed { bytes, count }) => {
                let server = &mut connection.connection;
                let replies = server.exchange(bytes, *count, deadline);
                server.restore(bound);
                let instance = server.instance.clone();
                replies.map(|replies| Answers { replies, instance })
            }
            (Pooled::Cluster(connection), Commands::PerNode(commands)) => {
                // The connections' own timeouts are the call's; a later
                // round trip of the call gets what is left of it.
                let left = deadline.saturating_duration_since(Instant::now());
                let shortened = left < bound;
                if shortened {
                    (connection.connection)
                        .set_timeouts(at_least_a_millisecond(left))
                        .map_err(Failed::Sending)?;
                }
                let replies = connection.connection.send(commands);
                if shortened && replies.is_ok() {
                    // A connection that cannot be set back is dropped.
                    let _ = connection.connection.set_timeouts(bound);
                }
                replies.map(Answers::unverified).map_err(Failed::Sending)
            }
            _ => unreachable!("commands are laid out for the pool's own kind"),
        }
    }

    /// Drives `exchange` to its end, a batch at a time, all within one
    /// call's time bound.
    pub(crate) fn run<X: Exchange>(&self, exchange: &mut X) -> X::Output {
        ready_now(driver::exchange(self, exchange))
    }
}

/// A batch laid out for sending, kept so that it can be sent twice.
enum Commands {
    /// For a server: the commands packed, and how many replies they get.
    Packed { bytes: Vec<u8>, count: usize },
    /// For a cluster: sorted by primary when sent.
    PerNode(Vec<Cmd>),
}

impl RedisPool {
    /// `batch` as this pool sends it: a pipeline to a server, the commands
    /// as they are to a cluster.
    fn lay_out(&self, batch: Batch) -> Commands {
        match &*self.pools {
            Pools::Server(_) => {
                let (bytes, count) = batch.packed();
                Commands::Packed { bytes, count }
            }
            Pools::Cluster(_) => Commands::PerNode(batch.into_commands().collect()),
        }
    }
}

/// Why a batch was not answered: no connection could be opened, none was
/// free in time, the connection failed on the way, or the call's bound
/// passed between two replies.
enum Failed {
    Checkout(BackendError),
    Busy(BackendError),
    Sending(RedisError),
    OutOfTime,
}

/// A connection to one server, the instance id of the server it was
/// opened to (with [`InstanceCheck::PerConnection`]), and whether a batch
/// failed on it (replies may be left unread: never used again).
#[doc(hidden)]
pub struct ServerConnection {
    connection: RespConnection,
    instance: Option<Arc<Instance>>,
    broken: bool,
}

impl ServerConnection {
    /// Whether a read found this connection reaching another server
    /// process than the one it learned.
    fn is_moved(&self) -> bool {
        (self.instance.as_ref()).is_some_and(|instance| instance.is_moved())
    }

    /// Writes `packed` and reads its `count` replies, each wait on the
    /// socket bounded by what is left until `deadline`: a call's bound
    /// holds whatever its number of replies (`RespConnection::receive_by`).
    fn exchange(
        &mut self,
        packed: &[u8],
        count: usize,
        deadline: Instant,
    ) -> Result<Replies, Failed> {
        let exchanged = self.try_exchange(packed, count, deadline);
        self.broken |= exchanged.is_err();
        exchanged
    }

    fn try_exchange(
        &mut self,
        packed: &[u8],
        count: usize,
        deadline: Instant,
    ) -> Result<Replies, Failed> {
        match self.connection.fit(deadline) {
            Ok(true) => {}
            Ok(false) => return Err(Failed::OutOfTime),
            Err(error) => return Err(Failed::Sending(error)),
        }
        (self.connection.send(packed)).map_err(Failed::Sending)?;
        let mut replies = Replies::with_capacity(count);
        for _ in 0..count {
            let reply = self.connection.receive_by(deadline);
            replies.push(resp::raise_errors(reply.map_err(Failed::Sending)?));
        }
        Ok(replies)
    }

    /// The socket's timeouts back to the call's `bound`, for the next call.
    fn restore(&mut self, bound: Duration) {
        if self.connection.timeout() != bound && !self.broken {
            // A socket that cannot be set is not used again.
            self.broken = self.connection.set_timeout(bound).is_err();
        }
    }
}

/// A connection taken from a [`RedisPool`], for commands of your own (it
/// implements the `redis` crate's [`ConnectionLike`]); back to the pool
/// when dropped.
pub struct PooledConnection(Pooled);

// One lives on the stack per call: boxing it would cost an allocation each.
#[allow(clippy::large_enum_variant)]
enum Pooled {
    Server(r2d2::PooledConnection<ServerManager>),
    Cluster(r2d2::PooledConnection<ClusterManager>),
}

impl fmt::Debug for PooledConnection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self.0 {
            Pooled::Server(_) => "PooledConnection(server)",
            Pooled::Cluster(_) => "PooledConnection(cluster)",
        })
    }
}

impl PooledConnection {
    /// Sends `command` where `routing` says on a cluster; on a server, to it.
    pub(crate) fn route(&mut self, command: &Cmd, routing: RoutingInfo) -> RedisResult<Value> {
        match &mut self.0 {
            Pooled::Server(c) => c.connection.connection.req_command(command),
            Pooled::Cluster(c) => c.connection.cluster.route_command(command, routing),
        }
    }
}

impl ConnectionLike for PooledConnection {
    fn req_packed_command(&mut self, cmd: &[u8]) -> RedisResult<Value> {
        match &mut self.0 {
            Pooled::Server(c) => c.connection.connection.req_packed_command(cmd),
            Pooled::Cluster(c) => c.connection.cluster.req_packed_command(cmd),
        }
    }

    fn req_packed_commands(
        &mut self,
        cmd: &[u8],
        offset: usize,
        count: usize,
    ) -> RedisResult<Vec<Value>> {
        match &mut self.0 {
            Pooled::Server(c) => c
                .connection
                .connection
                .req_packed_commands(cmd, offset, count),
            Pooled::Cluster(c) => c.connection.cluster.req_packed_commands(cmd, offset, count),
        }
    }

    fn req_command(&mut self, cmd: &Cmd) -> RedisResult<Value> {
        match &mut self.0 {
            Pooled::Server(c) => c.connection.connection.req_command(cmd),
            Pooled::Cluster(c) => c.connection.cluster.req_command(cmd),
        }
    }

    fn get_db(&self) -> i64 {
        match &self.0 {
            Pooled::Server(c) => c.connection.connection.get_db(),
            Pooled::Cluster(c) => c.connection.cluster.get_db(),
        }
    }

    fn check_connection(&mut self) -> bool {
        match &mut self.0 {
            Pooled::Server(c) => c.connection.connection.check_connection(),
            Pooled::Cluster(c) => c.connection.cluster.check_connection(),
        }
    }

    fn is_open(&self) -> bool {
        match &self.0 {
            Pooled::Server(c) => c.connection.connection.is_open(),
            Pooled::Cluster(c) => c.connection.cluster.is_open(),
        }
    }
}

/// A connection, and when it was opened.
#[doc(hidden)]
pub struct Aged<C> {
    connection: C,
    born: u64,
}

/// When the connections of a pool were opened, and which are too old to
/// use: those opened before one was found closed.
#[derive(Debug, Default)]
struct Ages {
    opened: AtomicU64,
    forgotten_before: AtomicU64,
}

impl Ages {
    fn age<C>(&self, connection: C) -> Aged<C> {
        let born = self.opened.fetch_add(1, Ordering::Relaxed) + 1;
        Aged { connection, born }
    }

    fn forget_older(&self) {
        let now = self.opened.load(Ordering::Relaxed) + 1;
        self.forgotten_before.fetch_max(now, Ordering::Relaxed);
    }

    fn is_forgotten<C>(&self, connection: &Aged<C>) -> bool {
        connection.born < self.forgotten_before.load(Ordering::Relaxed)
    }
}

/// Why a connection is not taken: it was opened before one was found
/// closed by the server.
fn forgotten() -> RedisError {
    RedisError::from((::redis::ErrorKind::Io, FORGOTTEN))
}

const FORGOTTEN: &str = "opened before a restart";

/// How long a checkout waits on the pool before it looks for a refused
/// connection again.
const CHECKOUT_SLICE: Duration = Duration::from_millis(2);

/// When the pool last failed to open a connection, and why.
#[derive(Debug, Default)]
struct Refusals {
    last: std::sync::Mutex<Option<(Instant, String)>>,
}

impl Refusals {
    fn last(&self) -> std::sync::MutexGuard<'_, Option<(Instant, String)>> {
        // Every change is one assignment: a panic never leaves it half-made.
        self.last
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Why opening a connection failed after `started`, if it did.
    fn since(&self, started: Instant) -> Option<String> {
        match &*self.last() {
            Some((at, why)) if *at >= started => Some(why.clone()),
            _ => None,
        }
    }
}

/// r2d2's error handler: notes each connection it could not open (one
/// dropped on checkout for its age is no refusal).
#[derive(Debug)]
struct NoteRefusals(Arc<Refusals>);

impl r2d2::HandleError<RedisError> for NoteRefusals {
    fn handle_error(&self, error: RedisError) {
        let why = error.to_string();
        if !why.contains(FORGOTTEN) {
            *self.0.last() = Some((Instant::now(), why));
        }
    }
}

/// Opens the connections of a pool to one server, with the pool's timeouts.
#[doc(hidden)]
pub struct ServerManager {
    info: ConnectionInfo,
    timeouts: Timeouts,
    ages: Arc<Ages>,
    learn_instance: bool,
}

impl r2d2::ManageConnection for ServerManager {
    type Connection = Aged<ServerConnection>;
    type Error = RedisError;

    fn connect(&self) -> RedisResult<Aged<ServerConnection>> {
        let (connect, call) = (self.timeouts.connect(), self.timeouts.call());
        let mut connection = RespConnection::open(&self.info, connect, call)?;
        // Learned on this connection, which stays with that process: a
        // restart closes it.
        let instance = match self.learn_instance {
            true => Some(learn_instance(&mut connection)?),
            false => None,
        };
        let connection = ServerConnection {
            connection,
            instance,
            broken: false,
        };
        Ok(self.ages.age(connection))
    }

    /// On every checkout: no round trip, only the connection's age.
    /// A connection a read found moved to another server under it (after
    /// it went back to the pool) is not valid either.
    fn is_valid(&self, connection: &mut Aged<ServerConnection>) -> RedisResult<()> {
        match self.ages.is_forgotten(connection) || connection.connection.is_moved() {
            true => Err(forgotten()),
            false => Ok(()),
        }
    }

    /// A connection a read found moved to another server under it is
    /// broken too: it is dropped, and the next one learns its server.
    fn has_broken(&self, connection: &mut Aged<ServerConnection>) -> bool {
        let server = &connection.connection;
        server.broken || server.is_moved() || !server.connection.is_open()
    }
}

/// Opens the connections of a pool to a cluster, with the pool's timeouts.
#[doc(hidden)]
pub struct ClusterManager {
    client: ClusterClient,
    /// The first node's URL: the settings of each node connection.
    template: ConnectionInfo,
    timeouts: Timeouts,
    ages: Arc<Ages>,
}

impl r2d2::ManageConnection for ClusterManager {
    type Connection = Aged<ClusterConnections>;
    type Error = RedisError;

    fn connect(&self) -> RedisResult<Aged<ClusterConnections>> {
        let connection = self.client.get_connection()?;
        connection.set_read_timeout(Some(self.timeouts.call()))?;
        connection.set_write_timeout(Some(self.timeouts.call()))?;
        let connections =
            ClusterConnections::new(connection, self.template.clone(), self.timeouts)?;
        Ok(self.ages.age(connections))
    }

    /// On every checkout: no round trip, only the connection's age.
    fn is_valid(&self, connection: &mut Aged<ClusterConnections>) -> RedisResult<()> {
        match self.ages.is_forgotten(connection) {
            true => Err(forgotten()),
            false => Ok(()),
        }
    }

    fn has_broken(&self, connection: &mut Aged<ClusterConnections>) -> bool {
        connection.connection.is_broken()
    }
}

impl_pool!(RedisPool);

/// The blocking driver: each future is ready when made, the call having
/// blocked until then.
impl Driver for RedisPool {
    fn send(&self, batch: Batch, deadline: Instant) -> impl Future<Output = Sent> + Send {
        ready(self.send_now(batch, deadline))
    }

    fn command(
        &self,
        command: &Cmd,
        routing: Option<RoutingInfo>,
    ) -> impl Future<Output = Result<Value, BackendError>> + Send {
        let reply = || {
            let mut connection = self.get()?;
            let reply = match routing {
                Some(routing) => connection.route(command, routing),
                None => command.query(&mut connection),
            };
            reply.map_err(|error| classify(error, self.timeouts.call()))
        };
        ready(reply())
    }

    fn deadline(&self) -> Instant {
        self.timeouts.deadline()
    }

    fn wait<'f>(&self, waiter: Waiter<'f>) -> impl Future<Output = Waited<'f>> + Send {
        ready(waiter.wait())
    }

    fn sleep(&self, pause: Duration) -> impl Future<Output = ()> + Send {
        std::thread::sleep(pause);
        ready(())
    }

    /// Released at once, from this thread.
    fn release(&self, lease: Lease) {
        let _ = self.send_now(lease.release_batch(), self.timeouts.deadline());
    }
}
