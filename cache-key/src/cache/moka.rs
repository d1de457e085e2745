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
use super::query::{CachedQuery, Ttls, value_tags};
use super::query_cache::{AsyncQueryCache, AsyncTypedCache, QueryCache, TypedCache};
use super::recorder::{CacheStats, Recorder, invalidated};
use super::stats::Stats;
use crate::cache_key::CacheKey;
use crate::generation::{
    AsyncGenerationStore, GenerationError, GenerationScope, GenerationStore, QueryCounters,
};
use crate::key::Key;
use crate::tag::{DEFAULT_MAX_TAGS, TagClock, TagStamp};

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
    max_tags: usize,
}

/// A value as a [`Moka`] cache keeps it: with its tags and when its fill
/// started, for an answer tagged from its value
/// ([`CachedQuery::VALUE_TAGS`]).
#[derive(Clone)]
pub(crate) struct Held<V> {
    value: V,
    tags: Tagging,
}

#[derive(Clone)]
enum Tagging {
    /// Served while its key is current.
    Untagged,
    /// Served while, besides, no tag of it was bumped since its fill began.
    Stamped(Arc<TagStamp>),
    /// Its tags could not be taken (an empty tag value, too many): the
    /// loader returns it and takes it out again; nobody else serves it.
    Unusable,
}

/// What a lookup found under a query's key.
enum Found<V> {
    Hit(Held<V>),
    /// A value with tags, to check before serving, and its key.
    Tagged(Held<V>, Key),
    Miss(Key),
}

/// How many fills a `get_or_load` joins whose answers turn out older than
/// a bump of their tags before it calls the origin without the cache.
const MAX_JOINS: usize = 4;

impl<V> Held<V> {
    fn untagged(value: V) -> Self {
        Held {
            value,
            tags: Tagging::Untagged,
        }
    }

    /// `Q`'s answer `value`, its fill begun at `since` (`None` for a query
    /// type without value tags); unusable when its tags cannot be taken.
    fn stamped<Q>(value: V, since: Option<TagClock>, max_tags: usize) -> Self
    where
        Q: CachedQuery<Value = V> + ?Sized,
    {
        let Some(since) = since else {
            return Self::untagged(value);
        };
        let tags = match value_tags::<Q>(&value, max_tags) {
            Ok(tags) if tags.is_empty() => Tagging::Untagged,
            Ok(tags) => Tagging::Stamped(Arc::new(TagStamp { tags, since })),
            Err(_) => Tagging::Unusable,
        };
        Held { value, tags }
    }
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
            max_tags: DEFAULT_MAX_TAGS,
        }
    }

    /// The most tags one entry keeps (default
    /// [`DEFAULT_MAX_TAGS`](crate::tag::DEFAULT_MAX_TAGS)): an answer holding
    /// more is returned but not cached ([`TooManyTags`](crate::tag::TooManyTags)).
    pub fn with_max_tags(mut self, max_tags: usize) -> Self {
        self.max_tags = max_tags;
        self
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
    fn cache<Q: CachedQuery + ?Sized>(&self) -> &D::Cache<Held<Q::Value>> {
        self.caches.of::<Held<Q::Value>>(self.ttls.get::<Q>())
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

    /// What `query`'s key at its current generation holds (the generation
    /// read once, before any origin).
    fn lookup<Q: CachedQuery + ?Sized>(
        &self,
        query: &Q,
    ) -> Result<Found<Q::Value>, GenerationError> {
        let lookup = |out: &mut String| {
            out.clear();
            self.store
                .write_key_for(query, out)
                .inspect_err(|error| self.stats.of::<Q>().error(error))?;
            Ok(match self.cache::<Q>().get(out.as_str()) {
                Some(held) if matches!(held.tags, Tagging::Untagged) => Found::Hit(held),
                Some(held) => Found::Tagged(held, Key::from_canonical(out.clone())),
                None => Found::Miss(Key::from_canonical(out.clone())),
            })
        };
        KEY.with(|buffer| match buffer.try_borrow_mut() {
            Ok(mut buffer) => lookup(&mut buffer),
            // A store that reads a cache while it names a key: a buffer of its own.
            Err(_) => lookup(&mut String::new()),
        })
    }

    /// Whether `held`, `query`'s answer, may be served: no tag of it bumped
    /// since its fill began.
    fn serves<Q: CachedQuery + ?Sized>(
        &self,
        query: &Q,
        held: &Held<Q::Value>,
    ) -> Result<bool, GenerationError> {
        let stamp = match &held.tags {
            Tagging::Untagged => return Ok(true),
            Tagging::Unusable => return Ok(false),
            Tagging::Stamped(stamp) => stamp,
        };
        let counters = QueryCounters::of(query)?;
        self.store
            .tags_unchanged(counters.counters(), &stamp.tags, stamp.since)
            .inspect_err(|error| self.stats.of::<Q>().error(error))
    }

    /// The tag clock now, for a fill of `query` (`None` when `Q`'s answers
    /// carry no tags).
    fn tag_clock<Q: CachedQuery + ?Sized>(
        &self,
        query: &Q,
    ) -> Result<Option<TagClock>, GenerationError> {
        if !Q::VALUE_TAGS {
            return Ok(None);
        }
        let counters = QueryCounters::of(query)?;
        self.store
            .tag_clock(counters.counters())
            .map(Some)
            .inspect_err(|error| self.stats.of::<Q>().error(error))
    }

    /// `query`'s fresh value, if any, else its key: a tagged value whose tag
    /// was bumped is taken out.
    fn find<Q: CachedQuery + ?Sized>(
        &self,
        query: &Q,
    ) -> Result<Result<Q::Value, Key>, GenerationError> {
        Ok(match self.lookup(query)? {
            Found::Hit(held) => Ok(held.value),
            Found::Tagged(held, _) if self.serves(query, &held)? => Ok(held.value),
            Found::Tagged(_, key) => {
                self.cache::<Q>().invalidate(&key);
                Err(key)
            }
            Found::Miss(key) => Err(key),
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
        let value = self.find(query)?.ok();
        self.stats.of::<Q>().count_read(value.is_some());
        Ok(value)
    }

    fn insert(&self, query: &Q, value: Q::Value) -> Result<(), CacheError> {
        let stats = self.stats.of::<Q>();
        let key = self
            .store
            .key_for(query)
            .inspect_err(|error| stats.error(error))?;
        let held = stamp_inserted::<Q>(value, self.tag_clock(query)?, self.max_tags, stats)?;
        self.cache::<Q>().insert(key, held);
        Ok(())
    }

    fn get_or_load<E, F>(&self, query: &Q, origin: F) -> Result<Q::Value, CacheError<E>>
    where
        E: Send + Sync + 'static,
        F: FnOnce() -> Result<Q::Value, E>,
    {
        let stats = self.stats.of::<Q>();
        // The key (and so the generation) is read before the origin is asked.
        let key = match self.find(query)? {
            Ok(value) => {
                stats.hit(true);
                return Ok(value);
            }
            Err(key) => key,
        };
        stats.miss();
        let cache = self.cache::<Q>();
        let mut origin = Some(origin);
        for _ in 0..MAX_JOINS {
            // Read before the origin, as the key was.
            let since = self.tag_clock(query)?;
            let ran = AtomicBool::new(false);
            let loaded = cache.try_get_with(key.clone(), || {
                ran.store(true, Ordering::Relaxed);
                stats.load();
                let origin = origin.take().expect("the origin runs at most once");
                origin().map(|value| Held::stamped::<Q>(value, since, self.max_tags))
            });
            let ran = ran.load(Ordering::Relaxed);
            let held = match loaded {
                Ok(held) => held,
                Err(error) => return stats.count_load(Err(error), ran),
            };
            if ran {
                if matches!(held.tags, Tagging::Unusable) {
                    cache.invalidate(&key);
                    stats.degraded(&"the answer's tags could not be taken: not cached");
                }
                return Ok(held.value);
            }
            if self.serves(query, &held)? {
                return stats.count_load(Ok(held.value), false);
            }
            // Another caller's fill, begun before a bump of its tags.
            cache.invalidate(&key);
        }
        let origin = origin.take().expect("the origin has not run");
        stats.load();
        origin().map_err(|error| CacheError::Origin(Arc::new(error)))
    }
}

/// `Q`'s answer `value` as `insert` keeps it, stamped at `since`: an error
/// when its tags cannot be taken.
fn stamp_inserted<Q: CachedQuery + ?Sized>(
    value: Q::Value,
    since: Option<TagClock>,
    max_tags: usize,
    stats: Recorder<'_>,
) -> Result<Held<Q::Value>, CacheError> {
    let Some(since) = since else {
        return Ok(Held::untagged(value));
    };
    let tags = value_tags::<Q>(&value, max_tags).map_err(|error| {
        let error = CacheError::Unstorable(error);
        stats.error(&error);
        error
    })?;
    Ok(Held::stamped::<Q>(
        value,
        (!tags.is_empty()).then_some(since),
        max_tags,
    ))
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

    /// Whether `held`, `query`'s answer, may be served: no tag of it bumped
    /// since its fill began.
    async fn serves<Q: CachedQuery + Sync + ?Sized>(
        &self,
        query: &Q,
        held: &Held<Q::Value>,
    ) -> Result<bool, GenerationError> {
        let stamp = match &held.tags {
            Tagging::Untagged => return Ok(true),
            Tagging::Unusable => return Ok(false),
            Tagging::Stamped(stamp) => stamp,
        };
        let counters = QueryCounters::of(query)?;
        let unchanged = self
            .store
            .tags_unchanged(counters.counters(), &stamp.tags, stamp.since);
        unchanged
            .await
            .inspect_err(|error| self.stats.of::<Q>().error(error))
    }

    /// The tag clock now, for a fill of `query` (`None` when `Q`'s answers
    /// carry no tags).
    async fn tag_clock<Q: CachedQuery + Sync + ?Sized>(
        &self,
        query: &Q,
    ) -> Result<Option<TagClock>, GenerationError> {
        if !Q::VALUE_TAGS {
            return Ok(None);
        }
        let counters = QueryCounters::of(query)?;
        let clock = self.store.tag_clock(counters.counters()).await;
        clock
            .map(Some)
            .inspect_err(|error| self.stats.of::<Q>().error(error))
    }

    /// `query`'s fresh value under `key`, if any: a tagged value whose tag
    /// was bumped is taken out.
    async fn find<Q: CachedQuery + Sync + ?Sized>(
        &self,
        query: &Q,
        key: &Key,
    ) -> Result<Option<Q::Value>, GenerationError> {
        let Some(held) = self.cache::<Q>().get(key).await else {
            return Ok(None);
        };
        if self.serves(query, &held).await? {
            return Ok(Some(held.value));
        }
        self.cache::<Q>().invalidate(key).await;
        Ok(None)
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
        let value = self.find(query, &key).await?;
        self.stats.of::<Q>().count_read(value.is_some());
        Ok(value)
    }

    async fn insert(&self, query: &Q, value: Q::Value) -> Result<(), CacheError> {
        let key = self.key(query).await?;
        let since = self.tag_clock(query).await?;
        let held = stamp_inserted::<Q>(value, since, self.max_tags, self.stats.of::<Q>())?;
        self.cache::<Q>().insert(key, held).await;
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
        let stats = self.stats.of::<Q>();
        let key = self.key(query).await?;
        if let Some(value) = self.find(query, &key).await? {
            stats.hit(true);
            return Ok(value);
        }
        stats.miss();
        let cache = self.cache::<Q>();
        let mut origin = Some(origin);
        for _ in 0..MAX_JOINS {
            // Read before the origin, as the key was.
            let since = self.tag_clock(query).await?;
            let ran = AtomicBool::new(false);
            let loaded = cache
                .try_get_with(key.clone(), async {
                    ran.store(true, Ordering::Relaxed);
                    stats.load();
                    let origin = origin.take().expect("the origin runs at most once");
                    let value = origin().await?;
                    Ok(Held::stamped::<Q>(value, since, self.max_tags))
                })
                .await;
            let ran = ran.load(Ordering::Relaxed);
            let held = match loaded {
                Ok(held) => held,
                Err(error) => return stats.count_load(Err(error), ran),
            };
            if ran {
                if matches!(held.tags, Tagging::Unusable) {
                    cache.invalidate(&key).await;
                    stats.degraded(&"the answer's tags could not be taken: not cached");
                }
                return Ok(held.value);
            }
            if self.serves(query, &held).await? {
                return stats.count_load(Ok(held.value), false);
            }
            // Another caller's fill, begun before a bump of its tags.
            cache.invalidate(&key).await;
        }
        let origin = origin.take().expect("the origin has not run");
        stats.load();
        origin()
            .await
            .map_err(|error| CacheError::Origin(Arc::new(error)))
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
