//! [`AsyncRedisPool`]: async connections to one Redis server (pooled, one
//! call on a connection at a time) or a Redis Cluster (multiplexed).

use std::fmt;
use std::pin::pin;
use std::sync::Arc;
use std::time::Instant;

use ::redis::aio::ConnectionLike;
use ::redis::cluster_async::ClusterConnection;
use ::redis::cluster_routing::RoutingInfo;
use ::redis::{
    Client, Cmd, IntoConnectionInfo, Pipeline, RedisError, RedisFuture, RedisResult, Value, cmd,
};
use futures_util::future::join_all;
use tokio::runtime::Handle;

use crate::cache::BackendError;
use crate::redis::batch::{Answers, Batch, Replies, Sent};
use crate::redis::breaker::{Breaker, Circuit, Probe, ProbeFuture};
use crate::redis::counters::Topology;
use crate::redis::driver::Driver;
use crate::redis::flight::{Waited, Waiter};
use crate::redis::future::resp::AsyncRespConnection;
use crate::redis::future::server::{Server, Untaken};
use crate::redis::lock::Lease;
use crate::redis::pool::{InstanceCheck, cluster_client, impl_pool};
use crate::redis::resp;
use crate::redis::timeouts::Timeouts;
use crate::redis::transport::{classify, closed, no_free_connection};

/// Async connections to one Redis server or to a Redis Cluster (feature
/// `redis-async`), shared by the stores and caches made from it: what a pool
/// is to async code. Cloning it is cheap and shares the connections.
///
/// A server is reached through a pool of connections, each carrying one
/// call at a time (its commands in one pipeline), opened as calls need
/// them (an unreachable server is that call's error), up to
/// [`max_size`](AsyncRedisPoolBuilder::max_size), and kept; a call that
/// finds them all busy waits for one within its time bound. A connection
/// is the pool's own: it speaks RESP2 over TCP or a Unix socket (no TLS)
/// and reads its replies in place, authenticated and in the database the
/// URL gives, as a [`RedisPool`](crate::redis::RedisPool)'s does (which
/// says what an ACL must allow). A call dropped before its replies came
/// closes its connection; the pool opens another.
///
/// A cluster is reached through the `redis` crate's async cluster
/// connection, one multiplexed connection per node.
///
/// Every call is bounded by its [`Timeouts`]: a hung server makes it an
/// error, never a hang. A call whose connection the server closed (a
/// restart, an idle timeout) is sent once more on a fresh connection, and
/// every connection kept from before is dropped: a restart costs callers
/// no error.
///
/// ```no_run
/// # async fn run() -> redis::RedisResult<()> {
/// use cache_key::redis::AsyncRedisPool;
///
/// let pool = AsyncRedisPool::connect("redis://127.0.0.1/").await?;
/// let cluster = AsyncRedisPool::connect_cluster(["redis://10.0.0.1:7000/"]).await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct AsyncRedisPool {
    connection: Connection,
    /// The runtime the pool was connected on, where work that outlives a
    /// call (an eager refresh, a lease's release) runs.
    runtime: Handle,
    timeouts: Timeouts,
    circuit: Arc<Circuit>,
    instance_check: InstanceCheck,
    /// Where a subscription connects: the server, or each node given.
    subscribers: Arc<[Client]>,
}

#[derive(Clone)]
enum Connection {
    Server(Arc<Server>),
    Cluster(ClusterConnection),
}

impl fmt::Debug for AsyncRedisPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self.connection {
            Connection::Server(_) => "server",
            Connection::Cluster(_) => "cluster",
        };
        f.debug_struct("AsyncRedisPool")
            .field("kind", &kind)
            .field("timeouts", &self.timeouts)
            .finish()
    }
}

/// How an [`AsyncRedisPool`] is made: its size, [`Timeouts`], [`Breaker`]
/// and [`InstanceCheck`].
#[derive(Debug, Clone, Copy)]
pub struct AsyncRedisPoolBuilder {
    max_size: u32,
    timeouts: Timeouts,
    breaker: Breaker,
    instance_check: InstanceCheck,
}

impl Default for AsyncRedisPoolBuilder {
    /// 16 connections at most, [`Timeouts::default`], [`Breaker::default`],
    /// [`InstanceCheck::PerConnection`].
    fn default() -> Self {
        AsyncRedisPoolBuilder {
            max_size: 16,
            timeouts: Timeouts::default(),
            breaker: Breaker::default(),
            instance_check: InstanceCheck::default(),
        }
    }
}

impl AsyncRedisPoolBuilder {
    /// The most connections to one server the pool opens (at least 1;
    /// default 16): as many calls are in flight at once. A call that finds
    /// them all busy waits for one within its time bound. A cluster's
    /// connections are multiplexed, and this does not bound them.
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

    /// A pool for the server at `url`. Nothing is connected yet: an
    /// unreachable server is an error of the first call. A URL the pool's
    /// connections cannot serve (`protocol=resp3`, TLS) is an error here.
    pub async fn connect(self, url: impl IntoConnectionInfo) -> RedisResult<AsyncRedisPool> {
        let runtime = current_runtime()?;
        let client = Client::open(url)?;
        let info = client.get_connection_info().clone();
        resp::check(&info)?;
        let learn_instance = self.instance_check == InstanceCheck::PerConnection;
        let server = Server::new(
            info.clone(),
            self.timeouts.connect(),
            learn_instance,
            self.max_size,
        );
        let bound = self.timeouts.connect() + self.timeouts.call();
        let probe = Probe::Async(
            runtime.clone(),
            Box::new(move || -> ProbeFuture {
                let info = info.clone();
                Box::pin(answers_within(bound, async move {
                    let mut connection = AsyncRespConnection::open(&info).await?;
                    cmd("PING").query_async::<Value>(&mut connection).await
                }))
            }),
        );
        Ok(AsyncRedisPool {
            runtime,
            connection: Connection::Server(Arc::new(server)),
            timeouts: self.timeouts,
            circuit: Circuit::new(self.breaker, probe),
            instance_check: self.instance_check,
            subscribers: Arc::new([client]),
        })
    }

    /// Connects to the Redis Cluster that `urls` belong to.
    pub async fn connect_cluster<T: IntoConnectionInfo>(
        self,
        urls: impl IntoIterator<Item = T>,
    ) -> RedisResult<AsyncRedisPool> {
        let runtime = current_runtime()?;
        let (client, subscribers) = cluster_client(urls, self.timeouts)?;
        let connection = Connection::Cluster(client.get_async_connection().await?);
        let bound = self.timeouts.connect() + self.timeouts.call();
        let probe = Probe::Async(
            runtime.clone(),
            Box::new(move || -> ProbeFuture {
                let client = client.clone();
                Box::pin(answers_within(bound, async move {
                    let mut connection = client.get_async_connection().await?;
                    cmd("PING").query_async::<Value>(&mut connection).await
                }))
            }),
        );
        Ok(AsyncRedisPool {
            runtime,
            connection,
            timeouts: self.timeouts,
            circuit: Circuit::new(self.breaker, probe),
            instance_check: self.instance_check,
            subscribers,
        })
    }
}

impl AsyncRedisPool {
    /// A builder with [`Timeouts::default`].
    pub fn builder() -> AsyncRedisPoolBuilder {
        AsyncRedisPoolBuilder::default()
    }

    /// Connects to the server at `url`, with the default timeouts.
    pub async fn connect(url: impl IntoConnectionInfo) -> RedisResult<AsyncRedisPool> {
        Self::builder().connect(url).await
    }

    /// Connects to the Redis Cluster `urls` belong to, with the default
    /// timeouts.
    pub async fn connect_cluster<T: IntoConnectionInfo>(
        urls: impl IntoIterator<Item = T>,
    ) -> RedisResult<AsyncRedisPool> {
        Self::builder().connect_cluster(urls).await
    }

    pub(crate) fn topology(&self) -> Topology {
        match self.connection {
            Connection::Server(_) => Topology::Server,
            Connection::Cluster(_) => Topology::Cluster,
        }
    }

    /// The runtime the pool was connected on.
    pub(crate) fn runtime(&self) -> &Handle {
        &self.runtime
    }

    /// The timeouts of every call.
    pub fn timeouts(&self) -> Timeouts {
        self.timeouts
    }

    /// Whether calls skip Redis now: its circuit is open, and the pool
    /// probes Redis in the background until it answers.
    pub fn is_skipping(&self) -> bool {
        self.circuit.is_open()
    }

    fn lay_out(&self, batch: Batch) -> Commands {
        match self.connection {
            Connection::Server(_) => {
                let (bytes, count) = batch.packed();
                Commands::Packed { bytes, count }
            }
            Connection::Cluster(_) => Commands::Concurrent(batch.into_commands().collect()),
        }
    }

    async fn send_once(&self, commands: &Commands, deadline: Instant) -> Result<Answers, Untaken> {
        match (&self.connection, commands) {
            (Connection::Server(server), Commands::Packed { bytes, count }) => {
                let mut taken = server.take(deadline).await?;
                let connection = taken.connection();
                connection.send(bytes).await.map_err(Untaken::Failed)?;
                let mut replies = Replies::with_capacity(*count);
                for _ in 0..*count {
                    let reply = connection.receive().await.map_err(Untaken::Failed)?;
                    replies.push(reply.extract_error());
                }
                let instance = taken.instance();
                taken.give_back();
                Ok(Answers { replies, instance })
            }
            (Connection::Cluster(connection), Commands::Concurrent(commands)) => {
                let sends = commands.iter().map(|command| {
                    let mut connection = connection.clone();
                    async move { command.query_async::<Value>(&mut connection).await }
                });
                Ok(Answers::unverified(join_all(sends).await))
            }
            _ => unreachable!("commands are laid out for the pool's own kind"),
        }
    }

    /// `command` on one of the server's connections, by `deadline`.
    async fn on_server(
        server: &Server,
        command: &Cmd,
        deadline: Instant,
    ) -> Result<Value, Untaken> {
        let mut taken = server.take(deadline).await?;
        let connection = taken.connection();
        connection
            .send(&command.get_packed_command())
            .await
            .map_err(Untaken::Failed)?;
        let reply = connection.receive().await.map_err(Untaken::Failed)?;
        taken.give_back();
        reply.extract_error().map_err(Untaken::Failed)
    }

    /// `untaken` as the caller sees it.
    fn failure(&self, untaken: Untaken) -> BackendError {
        let bound = self.timeouts.call();
        match untaken {
            Untaken::Busy(max_size) => no_free_connection(bound, max_size),
            Untaken::Failed(error) => classify(error, bound),
        }
    }
}

/// A batch laid out for sending, kept so that it can be sent twice.
enum Commands {
    /// For a server: the commands packed, and how many replies they get.
    Packed {
        bytes: Vec<u8>,
        count: usize,
    },
    Concurrent(Vec<Cmd>),
}

/// Commands of your own on the pool's connections, each call within one
/// call's time bound; on a server, a connection of the pool's own for the
/// call, given back when every reply was read.
impl ConnectionLike for AsyncRedisPool {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match &mut self.connection {
            Connection::Server(server) => {
                let (server, timeouts) = (server.clone(), self.timeouts);
                Box::pin(own_command(timeouts, async move {
                    let mut taken = server.take(timeouts.deadline()).await?;
                    let reply = taken.connection().req_packed_command(cmd).await;
                    let reply = reply.map_err(Untaken::Failed)?;
                    taken.give_back();
                    Ok(reply)
                }))
            }
            Connection::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        cmd: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match &mut self.connection {
            Connection::Server(server) => {
                let (server, timeouts) = (server.clone(), self.timeouts);
                Box::pin(own_command(timeouts, async move {
                    let mut taken = server.take(timeouts.deadline()).await?;
                    let connection = taken.connection();
                    let replies = connection.req_packed_commands(cmd, offset, count).await;
                    // A refused transaction is an `Err` with every reply
                    // read; the connection is dropped all the same.
                    let replies = replies.map_err(Untaken::Failed)?;
                    taken.give_back();
                    Ok(replies)
                }))
            }
            Connection::Cluster(c) => c.req_packed_commands(cmd, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match &self.connection {
            Connection::Server(server) => server.info().redis_settings().db(),
            Connection::Cluster(c) => c.get_db(),
        }
    }
}

/// A command of your own, bounded by one call's time: `Busy` and a timeout
/// as the `redis` crate's errors.
async fn own_command<T>(
    timeouts: Timeouts,
    call: impl std::future::Future<Output = Result<T, Untaken>>,
) -> RedisResult<T> {
    let timed_out = || {
        RedisError::from(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            "Redis did not answer within the call's time bound",
        ))
    };
    match tokio::time::timeout(timeouts.call(), call).await {
        Ok(Ok(reply)) => Ok(reply),
        Ok(Err(Untaken::Failed(error))) => Err(error),
        Ok(Err(Untaken::Busy(max_size))) => Err(RedisError::from((
            ::redis::ErrorKind::Io,
            "no free Redis connection within the call's time bound",
            format!("all {max_size} were busy"),
        ))),
        Err(_) => Err(timed_out()),
    }
}

impl_pool!(AsyncRedisPool);

/// The async driver, on tokio.
impl Driver for AsyncRedisPool {
    /// Sends `batch` by `deadline`: one pipeline to a server; to a cluster,
    /// each command routed on its own, all at once. A batch whose
    /// connection the server had closed is sent once more; none is sent
    /// while the circuit is open.
    async fn send(&self, batch: Batch, deadline: Instant) -> Sent {
        // Everything found in process (tracked counters, the local level).
        if batch.is_empty() {
            return Ok(Answers::default());
        }
        self.circuit.admit()?;
        let commands = self.lay_out(batch);
        let sent = pin!(async {
            match self.send_once(&commands, deadline).await {
                Err(Untaken::Failed(error)) if closed(&error) => {
                    if let Connection::Server(server) = &self.connection {
                        server.forget_open_connections();
                    }
                    self.send_once(&commands, deadline).await
                }
                sent => sent,
            }
        });
        let bound = self.timeouts.call();
        // The exchange pinned where it is made: the timeout holds a pointer
        // to it, not a copy of its state.
        let (sent, reached) = match tokio::time::timeout_at(deadline.into(), sent).await {
            Ok(Ok(answers)) => (Ok(answers), true),
            // A pool with every connection busy has reached Redis all the same.
            Ok(Err(busy @ Untaken::Busy(_))) => (Err(self.failure(busy)), true),
            Ok(Err(failed)) => {
                let error = self.failure(failed);
                let reached = !error.is_unreachable();
                (Err(error), reached)
            }
            Err(elapsed) => {
                let cause = Box::new(elapsed) as Box<_>;
                (Err(BackendError::timeout(bound, cause)), false)
            }
        };
        self.circuit.record(reached);
        sent
    }

    /// `command` on the server, or on a cluster where `routing` says (its
    /// keys' slots for `None`), within one call's time bound.
    async fn command(
        &self,
        command: &Cmd,
        routing: Option<RoutingInfo>,
    ) -> Result<Value, BackendError> {
        let deadline = self.timeouts.deadline();
        let sent = async {
            match &self.connection {
                Connection::Server(server) => Self::on_server(server, command, deadline).await,
                Connection::Cluster(cluster) => {
                    let mut cluster = cluster.clone();
                    let reply = match routing {
                        Some(routing) => cluster.route_command(command.clone(), routing).await,
                        None => command.query_async::<Value>(&mut cluster).await,
                    };
                    reply.map_err(Untaken::Failed)
                }
            }
        };
        let bound = self.timeouts.call();
        match tokio::time::timeout_at(deadline.into(), sent).await {
            Ok(sent) => sent.map_err(|untaken| self.failure(untaken)),
            Err(elapsed) => Err(BackendError::timeout(bound, Box::new(elapsed) as Box<_>)),
        }
    }

    fn deadline(&self) -> Instant {
        self.timeouts.deadline()
    }

    async fn wait<'f>(&self, waiter: Waiter<'f>) -> Waited<'f> {
        waiter.landed().await
    }

    async fn sleep(&self, pause: std::time::Duration) {
        tokio::time::sleep(pause).await;
    }

    /// Released from a task of its own on the pool's runtime.
    fn release(&self, lease: Lease) {
        let pool = self.clone();
        self.runtime.spawn(async move {
            let deadline = pool.timeouts.deadline();
            let _ = pool.send(lease.release_batch(), deadline).await;
        });
    }
}

/// Whether `probe` got Redis's answer within `bound`.
async fn answers_within(
    bound: std::time::Duration,
    probe: impl std::future::Future<Output = RedisResult<Value>>,
) -> bool {
    matches!(tokio::time::timeout(bound, probe).await, Ok(Ok(_)))
}

/// The tokio runtime connecting runs on, where the pool's connections and
/// the `redis` crate's async ones live.
fn current_runtime() -> RedisResult<Handle> {
    Handle::try_current().map_err(|_| {
        RedisError::from((
            ::redis::ErrorKind::Client,
            "an AsyncRedisPool connects on a tokio runtime",
        ))
    })
}
