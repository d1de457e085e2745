//! The typed cache in process, on moka: [`MokaCache`] (sync) and
//! [`MokaFutureCache`] (async).
//!
//! Each value type gets a moka cache of its own, `Cache<Key, Q::Value>`, with
//! a cache-wide time to live: values are stored as they are (no per-entry
//! expiry, no `dyn Any` to downcast), and an entry of one type cannot be read
//! as another, whatever the keys. Query types with the same value type and
//! the same TTL share one moka cache (their keys differ by namespace and
//! operation). The caches are made on first use and found again through
//! `Caches`, a lock-free list searched by `TypeId`. A sync read writes its
//! key into a buffer of its thread and looks it up as `&str`, so a hit
//! allocates no key.

use std::any::{Any, TypeId};
use std::cell::RefCell;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use super::{CacheError, CachedQuery, Stats, StatsCounters, Ttls};
use crate::canonical::TenantValue;
use crate::generation::{GenerationError, GenerationScope, GenerationStore};
use crate::key::Key;

/// How many caches one `Chunk` holds; the list grows a chunk at a time.
const CHUNK: usize = 8;

/// One moka cache of the list, and what it is for.
struct Slot<C: ?Sized> {
    value_type: TypeId,
    ttl: Duration,
    cache: Box<C>,
}

/// A piece of the append-only list: slots are set once and never change, so
/// a reader needs no lock.
struct Chunk<C: ?Sized> {
    slots: [OnceLock<Slot<C>>; CHUNK],
    next: OnceLock<Box<Chunk<C>>>,
}

impl<C: ?Sized> Default for Chunk<C> {
    fn default() -> Self {
        Chunk {
            slots: std::array::from_fn(|_| OnceLock::new()),
            next: OnceLock::new(),
        }
    }
}

/// The moka caches of one typed cache, one per (value type, TTL), made on
/// first use. `C` is the erased cache type: `dyn SyncCache` or `dyn FutureCache`.
///
/// Every caller scans in the same order and claims the first empty slot with
/// `OnceLock::get_or_init`; a slot never changes once set, so two callers
/// after one (value type, TTL) always meet in the same slot.
struct Caches<C: ?Sized> {
    first: Chunk<C>,
}

impl<C: ?Sized> Caches<C> {
    fn new() -> Self {
        Caches {
            first: Chunk::default(),
        }
    }

    /// The slot for `value_type` living `ttl`, made by `make` if there is none.
    fn find(&self, value_type: TypeId, ttl: Duration, make: impl Fn() -> Box<C>) -> &C {
        let mut chunk = &self.first;
        loop {
            for cell in &chunk.slots {
                let slot = match cell.get() {
                    Some(slot) => slot,
                    None => cell.get_or_init(|| Slot {
                        value_type,
                        ttl,
                        cache: make(),
                    }),
                };
                if slot.value_type == value_type && slot.ttl == ttl {
                    return &slot.cache;
                }
            }
            chunk = chunk.next.get_or_init(Box::default);
        }
    }

    /// Every cache made so far.
    fn iter(&self) -> impl Iterator<Item = &C> {
        let mut chunk = Some(&self.first);
        std::iter::from_fn(move || {
            let current = chunk?;
            chunk = current.next.get().map(|next| &**next);
            Some(current)
        })
        .flat_map(|chunk| chunk.slots.iter().filter_map(|cell| cell.get()))
        .map(|slot| &*slot.cache)
    }
}

/// A `moka::sync::Cache<Key, V>` of any `V`.
trait SyncCache: Any + Send + Sync {
    fn as_any(&self) -> &dyn Any;
    fn entry_count(&self) -> u64;
    fn run_pending_tasks(&self);
}

impl<V: Clone + Send + Sync + 'static> SyncCache for moka::sync::Cache<Key, V> {
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

/// A `moka::future::Cache<Key, V>` of any `V`.
trait FutureCache: Any + Send + Sync {
    fn as_any(&self) -> &dyn Any;
}

impl<V: Clone + Send + Sync + 'static> FutureCache for moka::future::Cache<Key, V> {
    fn as_any(&self) -> &dyn Any {
        self
    }
}

thread_local! {
    /// Where a sync read writes its key: a hit then allocates no key (moka
    /// looks up a `Key` by its `&str`).
    static KEY: RefCell<String> = const { RefCell::new(String::new()) };
}

/// The slot's cache as the type it was made with: the slot was found by
/// `TypeId::of::<V>()`, so the cast cannot fail.
fn typed<C: Any>(cache: &dyn Any) -> &C {
    cache
        .downcast_ref::<C>()
        .expect("a slot holds the cache of its own value type")
}

/// What `MokaCache` and `MokaFutureCache` have alike but for moka's cache
/// type (`$cache`) and its type-erased trait (`$erased`).
macro_rules! moka_methods {
    ($cache:ident :: $kind:ident :: Cache, $erased:ident) => {
        /// A cache of at most `max_capacity` entries per value type, named by
        /// `store`.
        pub fn new(store: S, max_capacity: u64) -> Self {
            Self {
                store,
                caches: Caches::new(),
                max_capacity,
                ttls: Ttls::default(),
                stats: StatsCounters::default(),
            }
        }

        /// `Q`'s moka cache, made on first use.
        fn cache<Q: CachedQuery + ?Sized>(&self) -> &$cache::$kind::Cache<Key, Q::Value> {
            let ttl = self.ttl_for::<Q>();
            let cache = self
                .caches
                .find(TypeId::of::<Q::Value>(), ttl, || -> Box<dyn $erased> {
                    Box::new(
                        $cache::$kind::Cache::<Key, Q::Value>::builder()
                            .max_capacity(self.max_capacity)
                            .time_to_live(ttl)
                            .build(),
                    )
                });
            typed(cache.as_any())
        }

        /// `query`'s key now, counting a failure.
        fn key<Q: CachedQuery + ?Sized>(&self, query: &Q) -> Result<Key, GenerationError> {
            self.store
                .key_for(query)
                .inspect_err(|_| self.stats.error())
        }
    };
}

/// A typed in-process cache on `moka::sync::Cache`.
///
/// Each value type (with its TTL) has a moka cache of its own, holding at
/// most `max_capacity` entries: the bound is per value type, so a cache used
/// by `n` value types holds at most `n * max_capacity` entries. Concurrent
/// [`get_or_load`](Self::get_or_load) misses of one key call the origin once
/// (moka's `try_get_with`); the others wait and get its answer, or its error,
/// which is not cached.
pub struct MokaCache<S> {
    store: S,
    caches: Caches<dyn SyncCache>,
    max_capacity: u64,
    ttls: Ttls,
    stats: StatsCounters,
}

impl<S: GenerationStore> MokaCache<S> {
    shared_methods!("leave memory by TTL or capacity");
    moka_methods!(moka::sync::Cache, SyncCache);

    /// How many entries the cache holds, every value type together (moka's
    /// estimate; exact after [`run_pending_tasks`](Self::run_pending_tasks)).
    pub fn entry_count(&self) -> u64 {
        self.caches.iter().map(|cache| cache.entry_count()).sum()
    }

    /// Runs moka's pending maintenance now: evictions and expirations.
    pub fn run_pending_tasks(&self) {
        self.caches
            .iter()
            .for_each(|cache| cache.run_pending_tasks());
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
                .inspect_err(|_| self.stats.error())?;
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

    /// `query`'s cached answer, if there is one at its current generation.
    pub fn get<Q: CachedQuery + ?Sized>(
        &self,
        query: &Q,
    ) -> Result<Option<Q::Value>, GenerationError> {
        let value = self.lookup(query)?.ok();
        self.stats.count_read(value.is_some());
        Ok(value)
    }

    /// Stores `value` as `query`'s answer at its current generation. To keep
    /// the race rule, prefer [`get_or_load`](Self::get_or_load), which reads
    /// the generation before the origin.
    pub fn insert<Q: CachedQuery + ?Sized>(
        &self,
        query: &Q,
        value: Q::Value,
    ) -> Result<(), GenerationError> {
        let key = self.key(query)?;
        self.cache::<Q>().insert(key, value);
        Ok(())
    }

    /// `query`'s answer: from the cache, or from `origin`, called once per key
    /// however many callers miss it at once. An origin error reaches every
    /// waiting caller and is not cached.
    pub fn get_or_load<Q, E, F>(&self, query: &Q, origin: F) -> Result<Q::Value, CacheError<E>>
    where
        Q: CachedQuery + ?Sized,
        E: Send + Sync + 'static,
        F: FnOnce() -> Result<Q::Value, E>,
    {
        // The key (and so the generation) is read before the origin is asked.
        let key = match self.lookup(query)? {
            Ok(value) => {
                self.stats.hit();
                return Ok(value);
            }
            Err(key) => key,
        };
        self.stats.miss();
        let ran = AtomicBool::new(false);
        let loaded = self.cache::<Q>().try_get_with(key, || {
            ran.store(true, Ordering::Relaxed);
            self.stats.load();
            origin()
        });
        self.stats.count_load(loaded, ran.load(Ordering::Relaxed))
    }
}

/// The async twin of [`MokaCache`], on `moka::future::Cache`, with the same
/// capacity bound per value type.
///
/// The generation store is called synchronously (as in [`MokaCache`]); with
/// a network store, call it from a context where blocking is allowed.
pub struct MokaFutureCache<S> {
    store: S,
    caches: Caches<dyn FutureCache>,
    max_capacity: u64,
    ttls: Ttls,
    stats: StatsCounters,
}

impl<S: GenerationStore> MokaFutureCache<S> {
    shared_methods!("leave memory by TTL or capacity");
    moka_methods!(moka::future::Cache, FutureCache);

    /// `query`'s cached answer, if there is one at its current generation.
    pub async fn get<Q: CachedQuery + ?Sized>(
        &self,
        query: &Q,
    ) -> Result<Option<Q::Value>, GenerationError> {
        let key = self.key(query)?;
        let value = self.cache::<Q>().get(&key).await;
        self.stats.count_read(value.is_some());
        Ok(value)
    }

    /// Stores `value` as `query`'s answer at its current generation.
    pub async fn insert<Q: CachedQuery + ?Sized>(
        &self,
        query: &Q,
        value: Q::Value,
    ) -> Result<(), GenerationError> {
        let key = self.key(query)?;
        self.cache::<Q>().insert(key, value).await;
        Ok(())
    }

    /// `query`'s answer: from the cache, or from the future `origin` makes,
    /// run once per key however many tasks miss it at once. An origin error
    /// reaches every waiting task and is not cached.
    pub async fn get_or_load<Q, E, F, Fut>(
        &self,
        query: &Q,
        origin: F,
    ) -> Result<Q::Value, CacheError<E>>
    where
        Q: CachedQuery + ?Sized,
        E: Send + Sync + 'static,
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<Q::Value, E>>,
    {
        let key = self.key(query)?;
        let cache = self.cache::<Q>();
        if let Some(value) = cache.get(&key).await {
            self.stats.hit();
            return Ok(value);
        }
        self.stats.miss();
        let ran = AtomicBool::new(false);
        let loaded = cache
            .try_get_with(key, async {
                ran.store(true, Ordering::Relaxed);
                self.stats.load();
                origin().await
            })
            .await;
        self.stats.count_load(loaded, ran.load(Ordering::Relaxed))
    }
}

impl StatsCounters {
    /// Counts a read as a hit or a miss.
    fn count_read(&self, hit: bool) {
        if hit {
            self.hit();
        } else {
            self.miss();
        }
    }

    /// Counts what a coalesced load did (an error once per caller, a wait for
    /// each caller whose loader did not run) and hands its answer on.
    fn count_load<V, E>(&self, loaded: Result<V, Arc<E>>, ran: bool) -> Result<V, CacheError<E>> {
        let value = loaded
            .inspect_err(|_| self.error())
            .map_err(CacheError::Origin)?;
        if !ran {
            self.coalesced();
        }
        Ok(value)
    }
}
