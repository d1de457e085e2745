//! [`RedisGenerations`]: generation counters in Redis or a Redis Cluster,
//! read and bumped through a pool, blocking ([`RedisPool`]) or async
//! (`AsyncRedisPool`, feature `redis-async`).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use super::counters::{CounterExchange, CounterSource, Topology};
use super::driver::{self, Driver};
use super::listener;
use super::pool::Pool;
use super::sync::RedisPool;
use super::tags::{ClockRead, TagCheck};
use super::tracking::{Tracked, Tracking};
use crate::generation::{Counter, Counters, GenerationError, GenerationSum};
use crate::tag::{TagClock, Tags};

/// Generation counters in Redis or a Redis Cluster (feature `redis`),
/// shared by every process that uses the same Redis: a bump by one is seen
/// by the next read of all. On a [`RedisPool`] it is a
/// [`GenerationStore`](crate::GenerationStore); on an `AsyncRedisPool`
/// (feature `redis-async`; [`AsyncRedisGenerations`](super::AsyncRedisGenerations))
/// an [`AsyncGenerationStore`](crate::generation::AsyncGenerationStore). Both
/// speak the same protocol to the same counters, so processes of either
/// kind see each other's bumps.
///
/// Each counter is a Redis key named as
/// [`Counter::write_name`](crate::generation::Counter::write_name) says
/// (`library:g`, `library:g:t{branch-2}`, `library:g:t{branch-2}:list`):
/// every part escaped as in a key, the tenant always a hash tag, so a
/// tenant's counters sit in its cluster slot (the slot of its keys when the
/// query type uses `hash_tag`). Counter names are never keys.
///
/// A read of a query's counters is one `MGET` on a server (on a connection
/// that learned its server's instance id when it opened), one `EVALSHA` of the
/// counters' script per slot on a cluster, a bump one `EVALSHA` that raises, increments and
/// stamps the counter; [`RedisCache`](super::RedisCache) sends the read
/// together with the entry's `GET`. Counters lost, restored from an older
/// snapshot or promoted from a replica that missed a bump never go back
/// (see [the module](super#counters-that-never-go-back)).
///
/// When Redis cannot be reached, every read and bump is an error the caller
/// sees ([`GenerationErrorKind::Store`](crate::generation::GenerationErrorKind::Store),
/// the `redis` crate's error as its source), never generation 0 and never a
/// remembered value, within the pool's [`Timeouts`](super::Timeouts).
///
/// ```
/// use cache_key::{CacheKey, GenerationStore, Scopes};
/// use cache_key::redis::{RedisGenerations, RedisPool};
///
/// #[derive(CacheKey)]
/// #[cache_key(namespace = "library", operation = "list", hash_tag)]
/// struct BranchList { #[tenant] branch: u32, #[criterion] page: u32 }
///
/// let url = "redis://127.0.0.1/";
/// # let Some((_server, url)) = include!("doctest_server.rs") else { return Ok(()) };
/// let generations = RedisGenerations::new(RedisPool::open(url)?);
/// let key = generations.key_for(&BranchList { branch: 2, page: 1 })?;
/// generations.invalidate(&BranchList::tenant_scope(&2)?)?;   // branch 2's keys are unreachable
/// assert_ne!(generations.key_for(&BranchList { branch: 2, page: 1 })?, key);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct RedisGenerations<P = RedisPool> {
    pool: P,
    source: CounterSource,
}

impl<P: Pool> RedisGenerations<P> {
    /// A store keeping its counters in the Redis of `pool`.
    pub fn new(pool: P) -> Self {
        let topology = if pool.__is_cluster() {
            Topology::Cluster
        } else {
            Topology::Server
        };
        let plain = pool.__knows_instances();
        RedisGenerations {
            pool,
            source: CounterSource::new(topology, plain),
        }
    }

    /// Bounds how long a tag's counter is kept: `lifetime` after a bump
    /// or a read that made it, Redis drops it (`SET ... PX`). Redis then
    /// keeps counters for the entities read or changed lately, not for
    /// every entity ever seen (measured in BENCHMARKS.md). Namespace,
    /// tenant and operation counters are kept as before.
    ///
    /// Never a stale read: a missing tag counter is raised to the server's
    /// clock when read, so an entry whose tag's counter expired counts as
    /// bumped. A counter outlives every entry stored with its tag: a store
    /// (a cache's load or insert through this store) sends, with the
    /// entry's `SET`, a `PEXPIRE ... GT` that lengthens the counters of its
    /// query's and its value's tags to the entry's own time and a second.
    /// So an entity read all along keeps its counter, and one no longer
    /// cached loses it `lifetime` (or its last entry's time) later.
    pub fn with_tag_lifetime(mut self, lifetime: Duration) -> Self {
        let millis = u64::try_from(lifetime.as_millis()).unwrap_or(u64::MAX);
        self.source.tag_lifetime = Some(millis.max(1));
        self
    }

    /// The pool the counters are read through.
    pub fn pool(&self) -> &P {
        &self.pool
    }

    /// Keeps counters in process, dropped when Redis says they changed
    /// (see [`Tracking`]): a read whose counters are all here makes no round
    /// trip for them, so a read of a [`RedisCache`](super::RedisCache) with
    /// an in-process level whose entry is there makes none at all.
    ///
    /// A weaker promise than the strict default: another process's bump is
    /// seen here once its message arrives (measured in BENCHMARKS.md), and
    /// when the subscription drops or stops answering, counters are read
    /// from Redis again until it is back (within two heartbeats of a silent
    /// failure). A bump made through this store is seen at once. Such a hit
    /// judges its entry's TTL on a coarse clock: it may be served up to one
    /// tick of it (1 to 10 ms on Linux, about 16 on Windows) past the TTL. A
    /// listener thread of its own holds the subscription while the store
    /// lives. Chosen when the store is made, so that every cache made from
    /// it, and every clone of it, keeps counters the same way.
    pub fn tracked(pool: P, tracking: Tracking) -> Self {
        let mut store = Self::new(pool);
        let invalidations = store.source.invalidations.clone();
        let tracked = Arc::new(Tracked::new(tracking, invalidations));
        listener::start(&tracked, store.pool.__subscribers(), tracking);
        store.source.tracked = Some(tracked);
        store
    }

    /// Whether counters kept in process are used now: tracking is on and
    /// its subscription alive.
    pub fn is_tracking(&self) -> bool {
        self.source
            .tracked
            .as_ref()
            .is_some_and(|tracked| tracked.is_alive())
    }

    /// How many invalidations made here Redis has not confirmed, each
    /// waiting to be sent again. One whose outcome is unknown (Redis not
    /// reached, no answer in time, its future dropped) is sent before the
    /// next batch of this store or a cache made from it, reads and bumps
    /// alike, and no counter kept in process is trusted until it returned;
    /// one Redis refused (`OOM`, `READONLY`) is sent again before each read
    /// of its own scope, which goes to the origin until Redis takes it.
    /// Until then, other processes may still read the entries they
    /// invalidate, for at most those entries' TTL.
    pub fn pending_invalidations(&self) -> usize {
        self.source.invalidations.pending_len()
    }

    pub(crate) fn source(&self) -> &CounterSource {
        &self.source
    }

    pub(crate) fn topology(&self) -> Topology {
        self.source.topology
    }
}

/// The store's exchanges, written once for both drivers (the blocking
/// store runs each to its end at once).
// Crate-private methods: the private bound names no type a user sees.
#[allow(private_bounds)]
impl<P: Pool + Driver> RedisGenerations<P> {
    /// Adds what `counters` hold now to `sum`.
    pub(crate) async fn read_counters(
        &self,
        counters: Counters<'_>,
        sum: &mut GenerationSum,
    ) -> Result<(), GenerationError> {
        let mut exchange = CounterExchange::read(counters, self.source());
        driver::exchange(self.pool(), &mut exchange).await?;
        exchange.add_to(sum);
        Ok(())
    }

    /// Bumps `counter`. Pending from before the future is first polled: a
    /// bump dropped at any point, even unsent, is sent again before the
    /// next batch (its outcome unknown to the caller).
    pub(crate) fn bump_counter<'a>(
        &'a self,
        counter: Counter<'a>,
    ) -> impl Future<Output = Result<(), GenerationError>> + Send + 'a {
        let bumping = self.source().bumping(counter);
        let mut exchange = CounterExchange::bump(counter, self.source());
        async move {
            let bumped = driver::exchange(self.pool(), &mut exchange).await;
            bumping.ended(&bumped);
            bumped
        }
    }

    /// The tag clock of `counters`' tenant and of every tenant.
    pub(crate) async fn read_tag_clock(
        &self,
        counters: Counters<'_>,
    ) -> Result<TagClock, GenerationError> {
        let mut clock = ClockRead::new(counters, self.topology());
        driver::exchange(self.pool(), &mut clock).await
    }

    /// Whether none of `tags` was bumped since `since`.
    pub(crate) async fn check_tags(
        &self,
        counters: Counters<'_>,
        tags: &Tags,
        since: TagClock,
    ) -> Result<bool, GenerationError> {
        let mut check = TagCheck::new(counters, tags, since, self.source());
        match check.is_done() {
            true => Ok(check.unchanged()),
            false => driver::exchange(self.pool(), &mut check).await,
        }
    }
}
