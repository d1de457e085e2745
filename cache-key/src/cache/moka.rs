//! The typed cache in process, on moka: [`MokaCache`] (blocking) and
//! [`AsyncMokaCache`] (futures).
//!
//! Each value type gets a moka cache of its own, `Cache<Key, Q::Value>`, with
//! a cache-wide time to live: values are stored as they are (no per-entry
//! expiry, no `dyn Any` to downcast), and an entry of one type cannot be read
//! as another, whatever the keys. Query types with the same value type and
//! the same TTL share one moka cache (their keys differ by namespace and
//! operation). The caches are made on first use and found again through
//! `Caches`, a lock-free list searched by `TypeId`. A blocking read writes
//! its key into a buffer of its thread and looks it up as `&str`, so a hit
//! allocates no key.

use std::any::{Any, TypeId};
use std::cell::RefCell;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use super::error::CacheError;
use super::once_list::OnceList;
use super::query::{CachedQuery, Ttls};
use super::query_cache::{AsyncQueryCache, AsyncTypedCache, QueryCache, TypedCache};
use super::recorder::{CacheStats, Recorder, invalidated};
use super::stats::Stats;
use crate::cache_key::CacheKey;
use crate::generation::{AsyncGenerationStore, GenerationError, GenerationScope, GenerationStore};
use crate::key::Key;

/// One moka cache of a typed cache, and what it is for.
struct Slot {
    value_type: TypeId,
    ttl: Duration,
    cache: Box<dyn Erased>,
}

/// Which moka cache a [`Moka`] keeps its values in: [`MokaSync`] or
/// [`MokaFuture`]. Sealed.
pub trait Driver: erased::Sealed {
    #[doc(hidden)]
    type Cache<V: Clone + Send + Sync + 'static>: Send + Sync + 'static;
    #[doc(hidden)]
    fn make<V: Clone + Send + Sync + 'static>(max_capacity: u64, ttl: Duration) -> Box<dyn Erased>;
    #[doc(hidden)]
    fn typed<V: Clone + Send + Sync + 'static>(erased: &dyn Erased) -> &Self::Cache<V>;
}

/// Values in `moka::sync::Cache`, names from a [`GenerationStore`]: the
/// blocking [`MokaCache`].
#[derive(Debug)]
pub enum MokaSync {}

/// Values in `moka::future::Cache`, names from an [`AsyncGenerationStore`]:
/// the [`AsyncMokaCache`].
#[derive(Debug)]
pub enum MokaFuture {}

mod erased {
    use std::any::Any;

    pub trait Sealed {}
    impl Sealed for super::MokaSync {}
    impl Sealed for super::MokaFuture {}

    /// A moka cache of any value type, its type erased.
    pub trait Erased: Any + Send + Sync {
        fn as_any(&self) -> &dyn Any;
        fn entry_count(&self) -> u64;
        fn run_pending_tasks(&self);
    }
}

use self::erased::Erased;

impl<V: Clone + Send + Sync + 'static> Erased for moka::sync::Cache<Key, V> {
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn entry_count(&self) -> u64 {
        moka::sync::Cache::entry_count(self)
    }
    fn run_pending_tasks(&self) {
        moka::sync::Cache::run_pending_tasks(self);
    }
}

impl<V: Clone + Send + Sync + 'static> Erased for moka::future::Cache<Key, V> {
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn entry_count(&self) -> u64 {
        moka::future::Cache::entry_count(self)
    }
    fn run_pending_tasks(&self) {
        // The future cache's maintenance is async; its reads run it.
    }
}

/// The slot's cache as the type it was made with: the slot was found by
/// `TypeId::of::<V>()`, so the cast cannot fail.
fn typed<C: Any>(cache: &dyn Erased) -> &C {
    cache
        .as_any()
        .downcast_ref::<C>()
        .expect("a slot holds the cache of its own value type")
}

impl Driver for MokaSync {
    type Cache<V: Clone + Send + Sync + 'static> = moka::sync::Cache<Key, V>;

    fn make<V: Clone + Send + Sync + 'static>(max_capacity: u64, ttl: Duration) -> Box<dyn Erased> {
        Box::new(
            moka::sync::Cache::<Key, V>::builder()
                .max_capacity(max_capacity)
                .time_to_live(ttl)
                .build(),
        )
    }

    fn typed<V: Clone + Send + Sync + 'static>(erased: &dyn Erased) -> &Self::Cache<V> {
        typed(erased)
    }
}

impl Driver for MokaFuture {
    type Cache<V: Clone + Send + Sync + 'static> = moka::future::Cache<Key, V>;

    fn make<V: Clone + Send + Sync + 'static>(max_capacity: u64, ttl: Duration) -> Box<dyn Erased> {
        Box::new(
            moka::future::Cache::<Key, V>::builder()
                .max_capacity(max_capacity)
                .time_to_live(ttl)
                .build(),
        )
    }

    fn typed<V: Clone + Send + Sync + 'static>(erased: &dyn Erased) -> &Self::Cache<V> {
        typed(erased)
    }
}

thread_local! {
    /// Where a blocking read writes its key: a hit then allocates no key
    /// (moka looks up a `Key` by its `&str`).
    static KEY: RefCell<String> = const { RefCell::new(String::new()) };
}

/// A typed cache in process on moka, named by a generation store `S`: the
/// blocking [`MokaCache`] or the async [`AsyncMokaCache`] (`D` says which).
///
/// Each value type (with its TTL) has a moka cache of its own, holding at
/// most `max_capacity` entries: the bound is per value type, so a cache used
/// by `n` value types holds at most `n * max_capacity` entries. Concurrent
/// `get_or_load` misses of one key call the origin once (moka's
/// `try_get_with`); the others wait and get its answer, or its error, which
/// is not cached.
pub struct Moka<S, D> {
    store: S,
    caches: MokaCaches<D>,
    ttls: Ttls,
    stats: CacheStats,
}

/// The moka caches of a typed cache: one per (value type, TTL), each of at
/// most `max_capacity` entries, made on first use.
pub(crate) struct MokaCaches<D> {
    caches: OnceList<Slot>,
    max_capacity: u64,
    driver: std::marker::PhantomData<fn() -> D>,
}

impl<D: Driver> MokaCaches<D> {
    pub(crate) fn new(max_capacity: u64) -> Self {
        MokaCaches {
            caches: OnceList::default(),
            max_capacity,
            driver: std::marker::PhantomData,
        }
    }

    /// The moka cache of `V` whose entries live `ttl`.
    pub(crate) fn of<V: Clone + Send + Sync + 'static>(&self, ttl: Duration) -> &D::Cache<V> {
        let value_type = TypeId::of::<V>();
        let slot = self.caches.find(
            |slot| slot.value_type == value_type && slot.ttl == ttl,
            || Slot {
                value_type,
                ttl,
                cache: D::make::<V>(self.max_capacity, ttl),
            },
        );
        D::typed::<V>(&*slot.cache)
    }

    pub(crate) fn entry_count(&self) -> u64 {
        self.caches
            .iter()
            .map(|slot| slot.cache.entry_count())
            .sum()
    }

    pub(crate) fn run_pending_tasks(&self) {
        self.caches
            .iter()
            .for_each(|slot| slot.cache.run_pending_tasks());
    }
}

/// A typed in-process cache on `moka::sync::Cache`, named by a
/// [`GenerationStore`] `S` (see [`Moka`]).
///
/// ```
/// use cache_key::{CacheKey, MemoryGenerations, Scopes};
/// use cache_key::cache::{MokaCache, QueryCache, TypedCache};
///
/// #[derive(Clone, Debug, PartialEq)]
/// struct Book { title: String }
///
/// #[derive(CacheKey)]
/// #[cache_key(namespace = "library", operation = "search", value = Vec<Book>, ttl = "5m")]
/// struct Search { #[tenant] branch: u32, #[criterion] title: String }
///
/// let cache = MokaCache::new(MemoryGenerations::new(), 10_000);
/// let query = Search { branch: 2, title: "Dune".into() };
/// let books = cache.get_or_load(&query, || {
///     Ok::<_, std::io::Error>(vec![Book { title: "Dune".into() }]) // your database here
/// })?;
/// assert_eq!(cache.get(&query)?, Some(books));
/// cache.invalidate(&Search::tenant_scope(&2)?)?;
/// assert_eq!(cache.get(&query)?, None);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub type MokaCache<S> = Moka<S, MokaSync>;

/// The async twin of [`MokaCache`], on `moka::future::Cache`, named by an
/// [`AsyncGenerationStore`] `S`: its futures never block on the store. The
/// same capacity bound per value type, and one origin call per key.
///
/// ```
/// use cache_key::{CacheKey, MemoryGenerations, Scopes};
/// use cache_key::cache::{AsyncMokaCache, AsyncQueryCache, AsyncTypedCache};
///
/// #[derive(CacheKey)]
/// #[cache_key(namespace = "library", operation = "count", value = u64, ttl = "1m")]
/// struct Count { #[tenant] branch: u32 }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let cache = AsyncMokaCache::new(MemoryGenerations::new(), 10_000);
/// let query = Count { branch: 2 };
/// let count = cache
///     .get_or_load(&query, || async { Ok::<_, std::io::Error>(7) }) // your database here
///     .await?;
/// assert_eq!(cache.get(&query).await?, Some(count));
/// cache.invalidate(&Count::tenant_scope(&2)?).await?;
/// assert_eq!(cache.get(&query).await?, None);
/// # Ok(())
/// # }
/// ```
pub type AsyncMokaCache<S> = Moka<S, MokaFuture>;

impl<S, D: Driver> Moka<S, D> {
    fn with_store(store: S, max_capacity: u64) -> Self {
        Moka {
            store,
            caches: MokaCaches::new(max_capacity),
            ttls: Ttls::default(),
            stats: CacheStats::default(),
        }
    }

    /// The generation store that names and invalidates entries.
    pub fn store(&self) -> &S {
        &self.store
    }

    /// Overrides `Q`'s time to live ([`CachedQuery::TTL`]) in this cache.
    pub fn with_ttl<Q: CachedQuery + ?Sized>(mut self, ttl: Duration) -> Self {
        self.ttls.set::<Q>(ttl);
        self
    }

    /// The time to live this cache gives `Q`'s entries.
    pub fn ttl_for<Q: CachedQuery + ?Sized>(&self) -> Duration {
        self.ttls.get::<Q>()
    }

    /// How many entries the cache holds, every value type together (moka's
    /// estimate; exact after `run_pending_tasks` on a [`MokaCache`]).
    pub fn entry_count(&self) -> u64 {
        self.caches.entry_count()
    }

    /// `Q`'s moka cache, made on first use.
    fn cache<Q: CachedQuery + ?Sized>(&self) -> &D::Cache<Q::Value> {
        self.caches.of::<Q::Value>(self.ttls.get::<Q>())
    }
}

/// The blocking driver.
impl<S: GenerationStore> MokaCache<S> {
    /// A cache of at most `max_capacity` entries per value type, named by
    /// `store`.
    pub fn new(store: S, max_capacity: u64) -> Self {
        Self::with_store(store, max_capacity)
    }

    /// Runs moka's pending maintenance now: evictions and expirations.
    pub fn run_pending_tasks(&self) {
        self.caches.run_pending_tasks();
    }

    /// `query`'s value under its key at the current generation, or the key
    /// on a miss (the generation read once, before any origin).
    fn lookup<Q: CachedQuery + ?Sized>(
        &self,
        query: &Q,
    ) -> Result<Result<Q::Value, Key>, GenerationError> {
        let lookup = |out: &mut String| {
            out.clear();
            self.store
                .write_key_for(query, out)
                .inspect_err(|error| self.stats.of::<Q>().error(error))?;
            Ok(match self.cache::<Q>().get(out.as_str()) {
                Some(value) => Ok(value),
                None => Err(Key::from_canonical(out.clone())),
            })
        };
        KEY.with(|buffer| match buffer.try_borrow_mut() {
            Ok(mut buffer) => lookup(&mut buffer),
            // A store that reads a cache while it names a key: a buffer of its own.
            Err(_) => lookup(&mut String::new()),
        })
    }
}

/// Invalidation and counters, blocking.
impl<S: GenerationStore> TypedCache for MokaCache<S> {
    /// Bumps `scope`'s generation: its entries are never read again (and
    /// leave memory by TTL or capacity).
    fn invalidate(&self, scope: &GenerationScope) -> Result<(), CacheError> {
        let result = self.store.invalidate(scope);
        invalidated(scope, &result);
        Ok(result?)
    }

    fn stats(&self) -> Stats {
        self.stats.snapshot()
    }

    fn stats_of<Q: CacheKey + ?Sized>(&self) -> Stats {
        self.stats.snapshot_of::<Q>()
    }
}

/// The typed calls, blocking: concurrent misses of one key call the origin
/// once (moka's `try_get_with`).
impl<S: GenerationStore, Q: CachedQuery + ?Sized> QueryCache<Q> for MokaCache<S> {
    fn get(&self, query: &Q) -> Result<Option<Q::Value>, CacheError> {
        let value = self.lookup(query)?.ok();
        self.stats.of::<Q>().count_read(value.is_some());
        Ok(value)
    }

    fn insert(&self, query: &Q, value: Q::Value) -> Result<(), CacheError> {
        let key = self
            .store
            .key_for(query)
            .inspect_err(|error| self.stats.of::<Q>().error(error))?;
        self.cache::<Q>().insert(key, value);
        Ok(())
    }

    fn get_or_load<E, F>(&self, query: &Q, origin: F) -> Result<Q::Value, CacheError<E>>
    where
        E: Send + Sync + 'static,
        F: FnOnce() -> Result<Q::Value, E>,
    {
        // The key (and so the generation) is read before the origin is asked.
        let key = match self.lookup(query)? {
            Ok(value) => {
                self.stats.of::<Q>().hit(true);
                return Ok(value);
            }
            Err(key) => key,
        };
        self.stats.of::<Q>().miss();
        let ran = AtomicBool::new(false);
        let loaded = self.cache::<Q>().try_get_with(key, || {
            ran.store(true, Ordering::Relaxed);
            self.stats.of::<Q>().load();
            origin()
        });
        self.stats
            .of::<Q>()
            .count_load(loaded, ran.load(Ordering::Relaxed))
    }
}

/// The async driver.
impl<S: AsyncGenerationStore> AsyncMokaCache<S> {
    /// A cache of at most `max_capacity` entries per value type, named by
    /// `store`.
    pub fn new(store: S, max_capacity: u64) -> Self {
        Self::with_store(store, max_capacity)
    }

    /// `query`'s key now, counting a failure.
    async fn key<Q: CachedQuery + Sync + ?Sized>(&self, query: &Q) -> Result<Key, GenerationError> {
        let key = self.store.key_for(query).await;
        key.inspect_err(|error| self.stats.of::<Q>().error(error))
    }
}

/// Invalidation and counters, as futures.
impl<S: AsyncGenerationStore> AsyncTypedCache for AsyncMokaCache<S> {
    /// Bumps `scope`'s generation: its entries are never read again (and
    /// leave memory by TTL or capacity).
    async fn invalidate(&self, scope: &GenerationScope) -> Result<(), CacheError> {
        let result = self.store.invalidate(scope).await;
        invalidated(scope, &result);
        Ok(result?)
    }

    fn stats(&self) -> Stats {
        self.stats.snapshot()
    }

    fn stats_of<Q: CacheKey + ?Sized>(&self) -> Stats {
        self.stats.snapshot_of::<Q>()
    }
}

/// The typed calls as futures, which never block on the store: concurrent
/// misses of one key run the origin's future once.
impl<S, Q> AsyncQueryCache<Q> for AsyncMokaCache<S>
where
    S: AsyncGenerationStore,
    Q: CachedQuery + Sync + ?Sized,
{
    async fn get(&self, query: &Q) -> Result<Option<Q::Value>, CacheError> {
        let key = self.key(query).await?;
        let value = self.cache::<Q>().get(&key).await;
        self.stats.of::<Q>().count_read(value.is_some());
        Ok(value)
    }

    async fn insert(&self, query: &Q, value: Q::Value) -> Result<(), CacheError> {
        let key = self.key(query).await?;
        self.cache::<Q>().insert(key, value).await;
        Ok(())
    }

    async fn get_or_load<'a, E, F, Fut>(
        &'a self,
        query: &'a Q,
        origin: F,
    ) -> Result<Q::Value, CacheError<E>>
    where
        E: Send + Sync + 'static,
        F: FnOnce() -> Fut + Send + 'a,
        Fut: Future<Output = Result<Q::Value, E>> + Send + 'a,
    {
        let key = self.key(query).await?;
        let cache = self.cache::<Q>();
        if let Some(value) = cache.get(&key).await {
            self.stats.of::<Q>().hit(true);
            return Ok(value);
        }
        self.stats.of::<Q>().miss();
        let ran = AtomicBool::new(false);
        let loaded = cache
            .try_get_with(key, async {
                ran.store(true, Ordering::Relaxed);
                self.stats.of::<Q>().load();
                origin().await
            })
            .await;
        self.stats
            .of::<Q>()
            .count_load(loaded, ran.load(Ordering::Relaxed))
    }
}

impl Recorder<'_> {
    /// Counts a read as a hit or a miss.
    fn count_read(&self, hit: bool) {
        if hit {
            self.hit(true);
        } else {
            self.miss();
        }
    }

    /// Counts what a coalesced load did (an error once per caller, a wait for
    /// each caller whose loader did not run) and hands its answer on.
    fn count_load<V, E>(&self, loaded: Result<V, Arc<E>>, ran: bool) -> Result<V, CacheError<E>> {
        let value = loaded
            .inspect_err(|_| self.error(&"the origin failed"))
            .map_err(CacheError::Origin)?;
        if !ran {
            self.coalesced();
        }
        Ok(value)
    }
}
