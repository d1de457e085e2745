//! [`RedisCache`]: the typed cache in Redis or a Redis Cluster, and what its
//! blocking and async drivers have alike.

use std::sync::Arc;
use std::time::Duration;

use super::generations::RedisGenerations;
use super::lock::LoadLock;
use super::pool::Pool;
use super::state::{CacheState, EagerRefresh, FailurePolicy};
use crate::cache::CachedQuery;
use crate::key::Key;

/// A typed cache whose entries live in Redis or a Redis Cluster (feature
/// `redis`), with their generation counters: on a [`RedisPool`](super::RedisPool)
/// (blocking), or on an `AsyncRedisPool` ([`AsyncRedisCache`](super::AsyncRedisCache),
/// feature `redis-async`, for async services whose threads must not block
/// on Redis; its futures are `Send` and need a tokio runtime). Both speak
/// the same protocol, share entries and invalidations, and count the same
/// [`Stats`](crate::cache::Stats).
///
/// The value type needs `Serialize` and `DeserializeOwned` besides what
/// [`CachedQuery`] asks: entries are JSON, in an
/// [envelope](crate::redis::envelope) checked on every read, so that an
/// entry another release, service or client bug put under the key (or
/// another Redis type there) is a miss counted under its
/// [`RejectReason`](crate::cache::RejectReason), never a wrong value, and
/// the next load overwrites it.
///
/// - **A hit is one round trip**: the counters and the entry go in one
///   pipeline (see [`redis`](crate::redis#one-round-trip-per-hit)); a miss
///   adds the `SET` of the answer.
/// - **One origin call per key in this process**: concurrent
///   [`get_or_load`](crate::cache::QueryCache::get_or_load) misses of one key wait for one
///   caller's origin call and get its answer or its error (not stored). An
///   origin that panics (or, async, a leader whose future is dropped) hands
///   the load to one of them, which reads the entry again first. With a [`LoadLock`] ([`with_lock`](Self::with_lock)),
///   processes sharing the Redis load a cold key once between them.
/// - **Threads do not wait on each other**: each call takes a connection of
///   the pool; a hung server is an error within its
///   [`Timeouts`](crate::redis::Timeouts).
/// - **Bounded in process, whatever callers do** (cancel, panic, meet an
///   error): a single flight is kept only while a caller leads or waits on
///   it; at most [`EagerRefresh::max_running`] refreshes run; the level in
///   process holds at most its capacity per value type; tracked counters at
///   most [`Tracking::max_counters`](crate::redis::Tracking::max_counters);
///   the generation last seen per scope sits in a fixed table of 4,096.
///
/// ```
/// use cache_key::{CacheKey, Scopes};
/// use cache_key::cache::{QueryCache, TypedCache};
/// use cache_key::redis::{RedisCache, RedisGenerations, RedisPool};
/// use serde::{Deserialize, Serialize};
///
/// // The value: `Clone` for the cache, `Serialize` and `Deserialize` for Redis.
/// #[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
/// struct Book { title: String }
///
/// #[derive(CacheKey)]
/// #[cache_key(namespace = "library", operation = "search", value = Vec<Book>, ttl = "5m")]
/// struct Search { #[tenant] branch: u32, #[criterion] title: String }
///
/// let url = "redis://127.0.0.1/"; // or RedisPool::open_cluster(nodes)
/// # let Some((_server, url)) = include!("doctest_server.rs") else { return Ok(()) };
/// let pool = RedisPool::open(url)?; // with default timeouts
/// let cache = RedisCache::new(RedisGenerations::new(pool));
///
/// let query = Search { branch: 2, title: "Dune".into() };
/// let books = cache.get_or_load(&query, || {
///     Ok::<_, std::io::Error>(vec![Book { title: "Dune".into() }]) // your database here
/// })?;
/// assert_eq!(cache.get(&query)?, Some(books));        // one round trip
/// cache.invalidate(&Search::tenant_scope(&2)?)?;       // branch 2, in every process
/// assert_eq!(cache.get(&query)?, None);
/// let stats = cache.stats();
/// assert_eq!((stats.hits, stats.misses, stats.loads), (1, 2, 1));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct RedisCache<G = RedisGenerations> {
    pub(super) generations: G,
    pub(super) state: CacheState,
}

impl<P: Pool> RedisCache<RedisGenerations<P>> {
    /// A cache whose entries and counters live in the Redis of `generations`.
    pub fn new(generations: RedisGenerations<P>) -> Self {
        let state = CacheState::new(generations.source().clone());
        RedisCache { generations, state }
    }

    /// Takes a [`LoadLock`] in Redis around each origin call, so that
    /// processes sharing this Redis load a cold key once between them.
    pub fn with_lock(mut self, lock: LoadLock) -> Self {
        self.state.lock = Some(lock);
        self
    }

    /// Adds a level in process, on moka (feature `moka`): at most
    /// `capacity` entries per value type, one per query, each served only
    /// at the generation it was kept at. A read whose entry is there at the
    /// current generation sends the counters alone (nothing at all when
    /// they are [tracked](super::RedisGenerations::tracked)) and
    /// takes no value from Redis; otherwise it reads Redis as before and
    /// keeps the value here. Strict as Redis alone: every read checks the
    /// counters, so an invalidation in any process is seen by the next read
    /// of every process.
    #[cfg(feature = "moka")]
    pub fn with_local(mut self, capacity: u64) -> Self {
        self.state.local = Some(super::local::Local::new(capacity));
        self
    }

    /// What a call does when Redis fails: by default
    /// ([`FailurePolicy::CallOrigin`]) it is answered without the cache and
    /// the failure reported; [`FailurePolicy::ReturnError`] returns it.
    pub fn with_failure_policy(mut self, policy: FailurePolicy) -> Self {
        self.state.failure_policy = policy;
        self
    }

    /// Calls `hook` with each failure a call answered around (the default
    /// [`FailurePolicy::CallOrigin`]): a read or write of Redis that
    /// failed, an answer that could not be stored. For an alert or a
    /// metric of your own; the failures are also counted in
    /// [`Stats::degraded`](crate::cache::Stats::degraded) and, with the
    /// `tracing` feature, events. It runs on the calling thread: keep it
    /// short.
    pub fn with_failure_hook(
        mut self,
        hook: impl Fn(&crate::cache::CacheError) + Send + Sync + 'static,
    ) -> Self {
        self.state.failure_hook = Some(Arc::new(hook));
        self
    }

    /// The most tags one entry keeps (default
    /// [`DEFAULT_MAX_TAGS`](crate::tag::DEFAULT_MAX_TAGS)): an answer holding
    /// more is returned but not stored (`get_or_load`, reported as a
    /// failure the call answered around) or refused (`insert`,
    /// [`TooManyTags`](crate::tag::TooManyTags) as
    /// [`CacheError::Unstorable`](crate::cache::CacheError::Unstorable)),
    /// never stored untagged.
    pub fn with_max_tags(mut self, max_tags: usize) -> Self {
        self.state.max_tags = max_tags;
        self
    }

    /// Overrides `Q`'s time to live ([`CachedQuery::TTL`]) in this cache.
    pub fn with_ttl<Q: CachedQuery + ?Sized>(mut self, ttl: Duration) -> Self {
        self.state.ttls.set::<Q>(ttl);
        self
    }

    /// The time to live this cache gives `Q`'s entries.
    pub fn ttl_for<Q: CachedQuery + ?Sized>(&self) -> Duration {
        self.state.ttls.get::<Q>()
    }

    /// The generation store that names and invalidates entries.
    pub fn store(&self) -> &RedisGenerations<P> {
        &self.generations
    }

    /// The pool entries are read and written through.
    pub fn pool(&self) -> &P {
        self.generations.pool()
    }

    /// How many entries the in-process level holds (moka's estimate), 0
    /// without one.
    #[cfg(feature = "moka")]
    pub fn local_entry_count(&self) -> u64 {
        self.state
            .local
            .as_ref()
            .map_or(0, super::local::Local::entry_count)
    }

    /// How much the maps this cache keeps in process hold now: for tests
    /// that show them bounded.
    #[doc(hidden)]
    pub fn __map_sizes(&self) -> MapSizes {
        let (tracked_counters, tracked_resolutions) = self
            .state
            .source
            .tracked
            .as_ref()
            .map_or((0, 0), |tracked| tracked.len());
        MapSizes {
            flights: self.state.flights.len(),
            refreshing: self.state.refreshing_len(),
            tracked_counters,
            tracked_resolutions,
        }
    }
}

/// What [`RedisCache::__map_sizes`] counts.
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MapSizes {
    /// Single flights in progress.
    pub flights: usize,
    /// Eager refreshes running.
    pub refreshing: usize,
    /// Counters kept by tracking.
    pub tracked_counters: usize,
    /// Queries' counters resolved by tracking.
    pub tracked_resolutions: usize,
}

/// An eager refresh under way, of `key` (at generation 0), holding its
/// cache: in [`CacheState::refreshing`] from
/// [`RedisCache::start_refresh`] until dropped, whether its load ended,
/// panicked, or never ran (a thread that could not start, a task dropped
/// unpolled).
pub(super) struct Refreshing<G> {
    pub(super) cache: Arc<RedisCache<G>>,
    key: Key,
}

impl<G> RedisCache<G> {
    /// A refresh of `query` that may start: none if one of it runs, or as
    /// many as [`EagerRefresh::max_running`] allows.
    pub(super) fn start_refresh<Q: CachedQuery + ?Sized>(
        self: &Arc<Self>,
        query: &Q,
        eager: EagerRefresh,
    ) -> Option<Refreshing<G>> {
        let key = self.state.start_refresh(query, eager)?;
        Some(Refreshing {
            cache: Arc::clone(self),
            key,
        })
    }
}

impl<G> Drop for Refreshing<G> {
    fn drop(&mut self) {
        self.cache.state.end_refresh(&self.key);
    }
}
