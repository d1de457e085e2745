//! [`AsyncRedisPool`]: async connections to one Redis server or a Redis
//! Cluster, multiplexed and reconnecting.

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
use crate::redis::batch::{Answers, Batch, Sent};
use crate::redis::breaker::{Breaker, Circuit, Probe, ProbeFuture};
use crate::redis::counters::Topology;
use crate::redis::driver::Driver;
use crate::redis::flight::{Waited, Waiter};
use crate::redis::future::resp::AsyncRespConnection;
use crate::redis::future::server::Server;
use crate::redis::lock::Lease;
use crate::redis::pool::{InstanceCheck, cluster_client, impl_pool};
use crate::redis::resp;
use crate::redis::timeouts::Timeouts;
use crate::redis::transport::{classify, closed};

/// Async connections to one Redis server or to a Redis Cluster (feature
/// `redis-async`), shared by the stores and caches made from it: what a pool
/// is to async code. Cloning it is cheap and shares the connections.
///
/// A server is reached through one multiplexed connection, which every task
/// pipelines its calls on (calls waiting together go in one write), opened
/// at the first call (an unreachable server is that call's error) and
/// again after a failure. It is the pool's own: it speaks RESP2 over TCP or
/// a Unix socket (no TLS) and reads its replies in place, authenticated and
/// in the database the URL gives, as a [`RedisPool`](crate::redis::RedisPool)'s
/// connections do (which says what an ACL must allow). A call dropped
/// before its replies came leaves them to be read and dropped.
///
/// A cluster is reached through the `redis` crate's async cluster
/// connection, one multiplexed connection per node.
///
/// Every call is bounded by its [`Timeouts`]: a hung server makes it an
/// error, never a hang. A call whose connection the server closed (a
/// restart, an idle timeout) is sent once more, on a connection opened
/// again: a restart costs callers no error.
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

/// How an [`AsyncRedisPool`] is made: its [`Timeouts`], [`Breaker`] and
/// [`InstanceCheck`].
#[derive(Debug, Clone, Copy, Default)]
pub struct AsyncRedisPoolBuilder {
    timeouts: Timeouts,
    breaker: Breaker,
    instance_check: InstanceCheck,
}

impl AsyncRedisPoolBuilder {
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
            runtime.clone(),
            learn_instance,
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

    async fn send_once(&self, commands: &Commands) -> Result<Answers, RedisError> {
        match (&self.connection, commands) {
            (Connection::Server(server), Commands::Packed { bytes, count }) => {
                let open = server.open().await?;
                match open.connection.call(bytes.clone(), *count).await {
                    Ok(values) => Ok(Answers {
                        replies: values.into_iter().map(resp::raise_errors).collect(),
                        instance: open.instance,
                    }),
                    Err(error) => {
                        server.forget(&open);
                        Err(error)
                    }
                }
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
/// call's time bound.
impl ConnectionLike for AsyncRedisPool {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match &mut self.connection {
            Connection::Server(server) => Box::pin(within(self.timeouts, async move {
                let open = server.open().await?;
                open.connection.call_one(cmd.get_packed_command()).await
            })),
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
            Connection::Server(server) => Box::pin(within(self.timeouts, async move {
                let open = server.open().await?;
                let packed = cmd.get_packed_pipeline();
                let replies = open.connection.call(packed, offset + count).await?;
                resp::pipeline_replies(replies, offset)
            })),
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

/// `call`, a command of your own, bounded by one call's time.
async fn within<T>(
    timeouts: Timeouts,
    call: impl std::future::Future<Output = RedisResult<T>>,
) -> RedisResult<T> {
    match tokio::time::timeout(timeouts.call(), call).await {
        Ok(answered) => answered,
        Err(_) => Err(RedisError::from(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            "Redis did not answer within the call's time bound",
        ))),
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
            match self.send_once(&commands).await {
                Err(error) if closed(&error) => self.send_once(&commands).await,
                sent => sent,
            }
        });
        let bound = self.timeouts.call();
        // The exchange pinned where it is made: the timeout holds a pointer
        // to it, not a copy of its state.
        let sent = match tokio::time::timeout_at(deadline.into(), sent).await {
            Ok(sent) => sent.map_err(|error| classify(error, bound)),
            Err(elapsed) => Err(BackendError::timeout(bound, Box::new(elapsed) as Box<_>)),
        };
        let reached = !matches!(&sent, Err(error) if error.is_unreachable());
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
        let sent = async {
            match &self.connection {
                Connection::Server(server) => {
                    let open = server.open().await?;
                    let reply = open.connection.call_one(command.get_packed_command()).await;
                    match reply {
                        Ok(reply) => resp::raise_errors(reply),
                        Err(error) => {
                            // As for a batch: a failed connection is not used again.
                            server.forget(&open);
                            Err(error)
                        }
                    }
                }
                Connection::Cluster(cluster) => {
                    let mut cluster = cluster.clone();
                    match routing {
                        Some(routing) => cluster.route_command(command.clone(), routing).await,
                        None => command.query_async::<Value>(&mut cluster).await,
                    }
                }
            }
        };
        let bound = self.timeouts.call();
        match tokio::time::timeout(bound, sent).await {
            Ok(sent) => sent.map_err(|error| classify(error, bound)),
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
