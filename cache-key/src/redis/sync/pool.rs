//! [`RedisPool`]: blocking connections to one Redis server or a Redis
//! Cluster, pooled so that threads never wait on each other's round trips.

use std::fmt;
use std::sync::Arc;

use ::redis::cluster::ClusterClient;
use ::redis::cluster_routing::RoutingInfo;
use ::redis::{
    Client, Cmd, Connection, ConnectionInfo, ConnectionLike, ErrorKind, IntoConnectionInfo,
    Pipeline, RedisError, RedisResult, Value,
};

use crate::redis::batch::{Batch, Replies};
use crate::redis::counters::Topology;
use crate::redis::load::ReleaseLease;
use crate::redis::lock::Lease;
use crate::redis::pool::{cluster_client, impl_pool};
use crate::redis::read::Exchange;
use crate::redis::sync::cluster::ClusterConnections;
use crate::redis::timeouts::Timeouts;

/// A pool of blocking connections to one Redis server or to a Redis
/// Cluster (feature `redis`), shared by the stores and caches made from it
/// (cloning it shares the pool).
///
/// Each call takes a connection of its own for its round trip, so `n`
/// threads make up to `n` round trips at once (up to
/// [`max_size`](RedisPoolBuilder::max_size) connections, 16 by default);
/// connections are opened as needed and kept. Every connection has the
/// [`Timeouts`]: a hung server makes a call an error within them, never a
/// hang. A connection that failed is dropped, and the next call opens
/// another: after a restart, each kept connection fails one call.
///
/// On a cluster, a pooled connection is the `redis` crate's cluster
/// connection (which follows redirects, and runs your own commands) and a
/// connection to each primary the pool's batches have gone to, so that a
/// hit is one round trip: each primary's commands in one write, every
/// primary written to before any reply is read. A node connection the
/// server closed (a restart, an idle timeout) fails no call: its commands
/// go through the crate's connection, which connects again.
///
/// ```no_run
/// use cache_key::redis::{RedisPool, Timeouts};
/// use std::time::Duration;
///
/// let pool = RedisPool::open("redis://127.0.0.1/")?;
/// let cluster = RedisPool::builder()
///     .max_size(32)
///     .timeouts(Timeouts::default().read(Duration::from_millis(200)))
///     .open_cluster(["redis://10.0.0.1:7000/", "redis://10.0.0.2:7000/"])?;
/// # Ok::<(), redis::RedisError>(())
/// ```
#[derive(Clone)]
pub struct RedisPool {
    pools: Arc<Pools>,
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

/// How a [`RedisPool`] is made: its size and [`Timeouts`].
#[derive(Debug, Clone, Copy)]
pub struct RedisPoolBuilder {
    max_size: u32,
    timeouts: Timeouts,
}

impl RedisPoolBuilder {
    /// The most connections the pool opens (at least 1; default 16). A call
    /// that finds them all busy waits for one up to the connect timeout.
    pub fn max_size(mut self, max_size: u32) -> Self {
        self.max_size = max_size.max(1);
        self
    }

    /// The timeouts of every connection.
    pub fn timeouts(mut self, timeouts: Timeouts) -> Self {
        self.timeouts = timeouts;
        self
    }

    /// A pool of connections to the server at `url`. Nothing is connected
    /// yet: an unreachable server is an error of the first call.
    pub fn open(self, url: impl IntoConnectionInfo) -> RedisResult<RedisPool> {
        let client = Client::open(url)?;
        let manager = ServerManager {
            client: client.clone(),
            timeouts: self.timeouts,
        };
        Ok(RedisPool {
            pools: Arc::new(Pools::Server(self.pool(manager))),
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
        };
        Ok(RedisPool {
            pools: Arc::new(Pools::Cluster(self.pool(manager))),
            subscribers,
        })
    }

    fn pool<M: r2d2::ManageConnection>(&self, manager: M) -> r2d2::Pool<M> {
        r2d2::Pool::builder()
            .max_size(self.max_size)
            // Connections are opened as calls need them, not ahead.
            .min_idle(Some(0))
            // A `PING` on every checkout would double each round trip; a
            // connection found broken is dropped when it comes back.
            .test_on_check_out(false)
            .connection_timeout(self.timeouts.connect_timeout())
            .error_handler(Box::new(r2d2::NopErrorHandler))
            .build_unchecked(manager)
    }
}

impl RedisPool {
    /// A builder with the defaults: 16 connections at most, [`Timeouts::default`].
    pub fn builder() -> RedisPoolBuilder {
        RedisPoolBuilder {
            max_size: 16,
            timeouts: Timeouts::default(),
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
    /// the pool when dropped.
    pub fn get(&self) -> RedisResult<PooledConnection> {
        Ok(PooledConnection(match &*self.pools {
            Pools::Server(pool) => Pooled::Server(pool.get().map_err(pool_error)?),
            Pools::Cluster(pool) => Pooled::Cluster(pool.get().map_err(pool_error)?),
        }))
    }

    pub(crate) fn topology(&self) -> Topology {
        match &*self.pools {
            Pools::Server(_) => Topology::Server,
            Pools::Cluster(_) => Topology::Cluster,
        }
    }

    /// Sends `batch`: one pipeline to a server; to a cluster, one pipeline
    /// to each primary it goes to, all written before any reply is read.
    pub(crate) fn send(&self, batch: Batch) -> Result<Replies, RedisError> {
        // Everything found in process (tracked counters, the local level).
        if batch.commands().is_empty() {
            return Ok(Replies::new());
        }
        match self.get()?.0 {
            Pooled::Server(mut connection) => {
                let mut pipeline = Pipeline::with_capacity(batch.commands().len());
                for command in batch.into_commands() {
                    pipeline.add_command(command);
                }
                let values: Vec<Value> = pipeline.ignore_errors().query(&mut *connection)?;
                Ok(values.into_iter().map(Value::extract_error).collect())
            }
            Pooled::Cluster(mut connection) => connection.send(batch),
        }
    }

    /// Drives `exchange` to its end, a batch at a time.
    pub(crate) fn run<X: Exchange>(&self, exchange: &mut X) -> X::Output {
        loop {
            let mut batch = Batch::default();
            exchange.send(&mut batch);
            if let Some(output) = exchange.receive(self.send(batch)) {
                return output;
            }
        }
    }
}

/// r2d2 names a connection it could not give within the connect timeout.
fn pool_error(error: r2d2::Error) -> RedisError {
    RedisError::from((
        ErrorKind::Io,
        "no Redis connection within the connect timeout",
        error.to_string(),
    ))
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
            Pooled::Server(c) => c.req_command(command),
            Pooled::Cluster(c) => c.cluster.route_command(command, routing),
        }
    }
}

impl ConnectionLike for PooledConnection {
    fn req_packed_command(&mut self, cmd: &[u8]) -> RedisResult<Value> {
        match &mut self.0 {
            Pooled::Server(c) => c.req_packed_command(cmd),
            Pooled::Cluster(c) => c.cluster.req_packed_command(cmd),
        }
    }

    fn req_packed_commands(
        &mut self,
        cmd: &[u8],
        offset: usize,
        count: usize,
    ) -> RedisResult<Vec<Value>> {
        match &mut self.0 {
            Pooled::Server(c) => c.req_packed_commands(cmd, offset, count),
            Pooled::Cluster(c) => c.cluster.req_packed_commands(cmd, offset, count),
        }
    }

    fn req_command(&mut self, cmd: &Cmd) -> RedisResult<Value> {
        match &mut self.0 {
            Pooled::Server(c) => c.req_command(cmd),
            Pooled::Cluster(c) => c.cluster.req_command(cmd),
        }
    }

    fn get_db(&self) -> i64 {
        match &self.0 {
            Pooled::Server(c) => c.get_db(),
            Pooled::Cluster(c) => c.cluster.get_db(),
        }
    }

    fn check_connection(&mut self) -> bool {
        match &mut self.0 {
            Pooled::Server(c) => c.check_connection(),
            Pooled::Cluster(c) => c.cluster.check_connection(),
        }
    }

    fn is_open(&self) -> bool {
        match &self.0 {
            Pooled::Server(c) => c.is_open(),
            Pooled::Cluster(c) => c.cluster.is_open(),
        }
    }
}

/// Opens the connections of a pool to one server, with the pool's timeouts.
#[doc(hidden)]
pub struct ServerManager {
    client: Client,
    timeouts: Timeouts,
}

impl r2d2::ManageConnection for ServerManager {
    type Connection = Connection;
    type Error = RedisError;

    fn connect(&self) -> RedisResult<Connection> {
        self.timeouts.open(&self.client)
    }

    fn is_valid(&self, connection: &mut Connection) -> RedisResult<()> {
        ::redis::cmd("PING").query(connection)
    }

    fn has_broken(&self, connection: &mut Connection) -> bool {
        !connection.is_open()
    }
}

/// Opens the connections of a pool to a cluster, with the pool's timeouts.
#[doc(hidden)]
pub struct ClusterManager {
    client: ClusterClient,
    /// The first node's URL: the settings of each node connection.
    template: ConnectionInfo,
    timeouts: Timeouts,
}

impl r2d2::ManageConnection for ClusterManager {
    type Connection = ClusterConnections;
    type Error = RedisError;

    fn connect(&self) -> RedisResult<ClusterConnections> {
        let connection = self.client.get_connection()?;
        connection.set_read_timeout(Some(self.timeouts.read_timeout()))?;
        connection.set_write_timeout(Some(self.timeouts.write_timeout()))?;
        ClusterConnections::new(connection, self.template.clone(), self.timeouts)
    }

    fn is_valid(&self, connection: &mut ClusterConnections) -> RedisResult<()> {
        ::redis::cmd("PING").query(&mut connection.cluster)
    }

    fn has_broken(&self, connection: &mut ClusterConnections) -> bool {
        connection.is_broken()
    }
}

impl_pool!(RedisPool);

/// A lease a load abandoned is released at once, from this thread; should
/// that fail, the lease expires.
impl ReleaseLease for RedisPool {
    fn release(&self, lease: Lease) {
        let _ = self.send(lease.release_batch());
    }
}
