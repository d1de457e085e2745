//! Redis and Redis Cluster (feature `redis`; async drivers with feature
//! `redis-async`): generation counters, the typed cache, the envelope its
//! entries are stored in, and the sweep of old generations.
//!
//! | what | blocking | async (tokio) |
//! | --- | --- | --- |
//! | connections | [`RedisPool`] (a pool: one connection per call in flight) | [`AsyncRedisPool`] (one multiplexed connection per server or node, reconnecting) |
//! | counters | [`RedisGenerations`], a [`GenerationStore`](crate::GenerationStore) | [`AsyncRedisGenerations`], an [`AsyncGenerationStore`](crate::generation::AsyncGenerationStore) |
//! | typed cache | [`RedisCache`] | [`AsyncRedisCache`] |
//!
//! Both drivers send the same commands and judge the replies the same way:
//! the protocol is written once, as async functions over a driver that
//! only sends batches of commands and waits (the blocking driver's waits
//! block, so each of its futures is ready when polled). Processes of either kind share one Redis,
//! its counters and its entries. A [`Key`] is also a Redis argument as it
//! is (`ToRedisArgs`).
//!
//! # One round trip per hit
//!
//! A read sends the query's counters (an `MGET` on a server, costing it what
//! a `GET` does; on a cluster, or with [`InstanceCheck::PerRead`], an
//! `EVALSHA` of the counters' script, which runs the `MGET`) and the
//! entry's `GET` at the generation this process last saw for the query's
//! scope, together: one pipeline on a server; on a cluster, one command per
//! slot, all sent before any reply is awaited. When the counters still sum
//! to that generation the value came with them; when they moved (a bump), a
//! second `GET` at their sum. The value served is always the entry at the
//! generation the counters give, read after them, so a read that starts
//! after an invalidation returned never sees the old value. A miss adds one
//! round trip: the answer's `SET`.
//!
//! # Counters that never go back
//!
//! A key's generation is the sum of its scope's counters, and an old entry
//! stays unreachable only if no counter ever goes back. Redis can bring one
//! back three ways, and none of them makes a counter go back here:
//!
//! - **Lost** (`DEL`, eviction, `FLUSHALL`, a restart without
//!   persistence): a missing counter is made at the server's clock, in
//!   microseconds since 2020, above any value it had.
//! - **Restored** from `dump.rdb` or an AOF (Redis's default configuration
//!   saves snapshots), which bring back values from before the last bumps;
//! - **promoted**: a replica promoted after it missed a bump (replication is
//!   asynchronous);
//! - **resynced**: a primary demoted with `REPLICAOF` after a split brain,
//!   whose dataset a full resync replaced with the new primary's, which
//!   never had a bump it acknowledged.
//!
//! Every counter carries the instance id of the primary that wrote it, its
//! run id then its replication id (`<value>:<id>`): a restart changes the
//! run id, a promotion makes a new replication id and a demoted primary
//! takes its new primary's. A read trusts a counter only when the instance
//! answering it wrote it; any other is raised to this server's clock before
//! it is used. Which instance answers is known two ways. On a server, each
//! connection learns its server's instance id once, when it opens
//! ([`InstanceCheck::PerConnection`], the default): a connection stays with
//! one process for its life (a restart closes it, and the next one learns
//! again), so the counters come with a plain `MGET`, checked in the same
//! pipeline: `CLIENT GETNAME` answers the name the connection gave itself
//! when it learned its server (a proxy that moved it to another server
//! opened a connection without it), and `WAIT 0 0` shows the server is
//! still a primary (a primary demoted by `REPLICAOF` keeps its
//! connections while a resync replaces its counters; such a connection is
//! replaced once its server is a primary again). On a cluster (or with
//! [`InstanceCheck::PerRead`]) every read runs that process's own script:
//! Redis 7 keeps scripts in memory, per process, neither saved nor
//! replicated, so a restarted or promoted server does not have it and
//! answers `NOSCRIPT`, and its instance id is then learned (on a server,
//! the `WAIT 0 0` follows the script too: a demoted primary keeps its
//! scripts). Bumps and raises are always the script. Older servers are
//! refused (their scripts are saved and replicated).
//!
//! What this assumes, exactly:
//!
//! - a counter is bumped at most once per microsecond on average (a Redis
//!   server runs a few hundred thousand scripts a second at most);
//! - a server's clock does not go back, and after a failover the new
//!   primary's clock is not behind the old one's by more than the failover
//!   took;
//! - no failover moves a slot between the two commands that learn its
//!   server (a fixed script asking the instance id, then the `EVAL` that
//!   loads and checks that server's script): should one, the script sits
//!   on another server, which is found at once and its scripts flushed, a
//!   window of one round trip;
//! - a primary is not demoted, resynced and promoted again between two
//!   reads of one connection (or of one pool's script reads): no read saw
//!   it a replica, and only `INFO replication`, at some 15 to 25 times a
//!   `GET`'s server time, would show its replication id changed.
//!
//! Entries restored with their counters are unreachable after the raise:
//! after a restart from a snapshot or a failover the cache starts cold.
//!
//! # Faults
//!
//! - **Unreachable or hung server**: every call is an error within the
//!   pool's [`Timeouts`] (on by default), never a guessed generation, and
//!   the origin is not asked: without the counters nothing says whether a
//!   value was invalidated, so none is served, neither by the fail-safe nor
//!   by the level in process.
//! - **A foreign value under a key** (another Redis type, bytes that are not
//!   an envelope, another query's, value id's, schema's or version's envelope):
//!   a miss counted under its [`RejectReason`](crate::cache::RejectReason),
//!   which the next load overwrites.
//! - **An origin that panics**: its waiters' load is handed to one of them,
//!   which reads the entry again first; a [`LoadLock`] it held is released.
//!   An [eager refresh](RedisCache::get_or_refresh) whose origin fails
//!   or panics leaves the value it would have replaced until its TTL, and
//!   the next hit in the window starts another.
//! - **A value JSON cannot hold** (NaN or an infinite float, which serde_json
//!   writes as `null`): refused at insert
//!   ([`CacheError::Unstorable`](crate::cache::CacheError::Unstorable)),
//!   never stored to miss forever.

mod batch;
mod breaker;
mod cache;
mod counters;
mod driver;
mod entry;
pub mod envelope;
mod finite;
mod flight;
#[cfg(feature = "redis-async")]
mod future;
mod generations;
mod insert;
mod instance;
mod invalidations;
mod listener;
mod load;
#[cfg(feature = "moka")]
mod local;
mod lock;
mod pool;
mod query_digest;
mod read;
mod resp;
mod state;
mod sweep;
mod sync;
mod tags;
mod timeouts;
mod tracking;
mod transport;

use ::redis::{RedisWrite, ToRedisArgs, ToSingleRedisArg};

use crate::key::Key;

pub use self::breaker::Breaker;
#[doc(hidden)]
pub use self::cache::MapSizes;
pub use self::cache::RedisCache;
pub use self::counters::NotACounter;
#[cfg(feature = "redis-async")]
pub use self::future::{
    AsyncRedisCache, AsyncRedisGenerations, AsyncRedisPool, AsyncRedisPoolBuilder,
};
pub use self::generations::RedisGenerations;
pub use self::lock::LoadLock;
pub use self::pool::{InstanceCheck, Pool};
pub use self::state::{EagerRefresh, FailSafe, FailurePolicy};
pub use self::sweep::{SweepOptions, SweepReport};
pub use self::sync::{PooledConnection, RedisPool, RedisPoolBuilder};
pub use self::timeouts::Timeouts;
pub use self::tracking::Tracking;

/// A key is one Redis argument: its text.
///
/// ```
/// use cache_key::KeyBuilder;
/// use redis::ToRedisArgs;
///
/// let key = KeyBuilder::new("library", "list").tenant("branch-2").build()?;
/// assert_eq!(key.to_redis_args(), [b"library:s1:g1:tbranch-2:list".to_vec()]);
///
/// let command = redis::cmd("GET").arg(&key).clone();
/// assert_eq!(command.args_iter().count(), 2);
/// # Ok::<(), cache_key::KeyError>(())
/// ```
impl ToRedisArgs for Key {
    fn write_redis_args<W>(&self, out: &mut W)
    where
        W: ?Sized + RedisWrite,
    {
        out.write_arg(self.as_str().as_bytes());
    }
}

/// A key is always exactly one argument, so commands taking a single key
/// (`GET`, `SET`, ...) accept it.
impl ToSingleRedisArg for Key {}
