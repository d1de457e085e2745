//! The typed cache in process, on moka: [`MokaCache`] (sync) and
//! [`MokaFutureCache`] (async).
//!
//! One moka cache holds every query type: entries are keyed by [`Key`] and
//! hold the value as `Arc<dyn Any + Send + Sync>` beside its time to live.
//! A read downcasts to the query's `Value`; an entry of another type (two
//! query types sharing a key space, which `registry::check` refuses) is a
//! miss counted as [`RejectReason::ValueType`], never a wrong value. One cache
//! keeps one capacity bound for the whole process, which is why the types
//! share it instead of having a moka cache each.

use std::any::Any;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use moka::Expiry;

use super::{CacheError, CachedQuery, RejectReason, Stats, StatsCounters, Ttls};
use crate::canonical::TenantValue;
use crate::generation::{GenerationError, GenerationScope, GenerationStore};
use crate::key::Key;

/// A value of some query type and how long it lives.
#[derive(Clone)]
struct Entry {
    value: Arc<dyn Any + Send + Sync>,
    ttl: Duration,
}

/// Each entry lives its own type's TTL, counted from its (last) insert.
struct PerEntryTtl;

impl Expiry<Key, Entry> for PerEntryTtl {
    fn expire_after_create(&self, _: &Key, entry: &Entry, _: Instant) -> Option<Duration> {
        Some(entry.ttl)
    }

    fn expire_after_update(
        &self,
        _: &Key,
        entry: &Entry,
        _: Instant,
        _: Option<Duration>,
    ) -> Option<Duration> {
        Some(entry.ttl)
    }
}

/// The checked downcast: `None` (counted) for an entry of another type.
fn downcast<Q: CachedQuery + ?Sized>(stats: &StatsCounters, entry: &Entry) -> Option<Q::Value> {
    let value = entry.value.downcast_ref::<Q::Value>().cloned();
    if value.is_none() {
        stats.reject(RejectReason::ValueType);
    }
    value
}

fn entry<Q: CachedQuery + ?Sized>(value: Q::Value, ttl: Duration) -> Entry {
    Entry {
        value: Arc::new(value),
        ttl,
    }
}

macro_rules! shared_methods {
    () => {
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

        /// A snapshot of the counters.
        pub fn stats(&self) -> Stats {
            self.stats.snapshot()
        }

        /// Bumps `scope`'s generation: its entries are never read again (and
        /// leave memory by TTL or capacity).
        pub fn invalidate(&self, scope: &GenerationScope) -> Result<(), GenerationError> {
            self.store.invalidate(scope)
        }

        /// Invalidates every entry of `Q`'s namespace.
        pub fn invalidate_namespace<Q: CachedQuery + ?Sized>(&self) -> Result<(), GenerationError> {
            self.store.invalidate_namespace::<Q>()
        }

        /// Invalidates every entry of `Q`'s namespace for one tenant (or its
        /// leading values).
        pub fn invalidate_tenant<Q: CachedQuery + ?Sized>(
            &self,
            tenant: &[&dyn TenantValue],
        ) -> Result<(), GenerationError> {
            self.store.invalidate_tenant::<Q>(tenant)
        }

        /// Invalidates every entry of `Q`'s operation for one whole tenant.
        pub fn invalidate_operation<Q: CachedQuery + ?Sized>(
            &self,
            tenant: &[&dyn TenantValue],
        ) -> Result<(), GenerationError> {
            self.store.invalidate_operation::<Q>(tenant)
        }

        /// `query`'s key now, counting a failure.
        fn key<Q: CachedQuery + ?Sized>(&self, query: &Q) -> Result<Key, GenerationError> {
            self.store
                .key_for(query)
                .inspect_err(|_| self.stats.error())
        }
    };
}

/// A typed in-process cache on `moka::sync::Cache`, one for every query type.
///
/// Concurrent [`get_or_load`](Self::get_or_load) misses of one key call the
/// origin once (moka's `try_get_with`); the others wait and get its answer,
/// or its error, which is not cached.
pub struct MokaCache<S> {
    store: S,
    cache: moka::sync::Cache<Key, Entry>,
    ttls: Ttls,
    stats: StatsCounters,
}

impl<S: GenerationStore> MokaCache<S> {
    /// A cache of at most `max_capacity` entries, named by `store`.
    pub fn new(store: S, max_capacity: u64) -> Self {
        MokaCache {
            store,
            cache: moka::sync::Cache::builder()
                .max_capacity(max_capacity)
                .expire_after(PerEntryTtl)
                .build(),
            ttls: Ttls::default(),
            stats: StatsCounters::default(),
        }
    }

    shared_methods!();

    /// How many entries the cache holds (moka's estimate; exact after
    /// [`run_pending_tasks`](Self::run_pending_tasks)).
    pub fn entry_count(&self) -> u64 {
        self.cache.entry_count()
    }

    /// Runs moka's pending maintenance now: evictions and expirations.
    pub fn run_pending_tasks(&self) {
        self.cache.run_pending_tasks();
    }

    /// `query`'s cached answer, if there is one at its current generation.
    pub fn get<Q: CachedQuery + ?Sized>(
        &self,
        query: &Q,
    ) -> Result<Option<Q::Value>, GenerationError> {
        let key = self.key(query)?;
        let value = self
            .cache
            .get(&key)
            .and_then(|entry| downcast::<Q>(&self.stats, &entry));
        match value {
            Some(_) => self.stats.hit(),
            None => self.stats.miss(),
        }
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
        self.cache
            .insert(key, entry::<Q>(value, self.ttl_for::<Q>()));
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
        let key = self.key(query)?;
        if let Some(entry) = self.cache.get(&key) {
            if let Some(value) = downcast::<Q>(&self.stats, &entry) {
                self.stats.hit();
                return Ok(value);
            }
            // Another type's entry: drop it so this type's load can take its place.
            self.cache.invalidate(&key);
        }
        self.stats.miss();
        let ttl = self.ttl_for::<Q>();
        let mut origin = Some(origin);
        let ran = AtomicBool::new(false);
        let loaded = self.cache.try_get_with(key, || {
            ran.store(true, Ordering::Relaxed);
            self.stats.load();
            // moka runs a loader at most once, and only this call's.
            let origin = origin.take().expect("the loader runs once");
            origin().map(|value| entry::<Q>(value, ttl))
        });
        let loaded = loaded
            .inspect_err(|_| self.stats.error())
            .map_err(CacheError::Origin)?;
        if !ran.load(Ordering::Relaxed) {
            self.stats.coalesced();
        }
        match downcast::<Q>(&self.stats, &loaded) {
            Some(value) => Ok(value),
            // Another type's load won the key meanwhile: answer uncached.
            None => match origin.take() {
                Some(origin) => {
                    self.stats.load();
                    origin().map_err(|e| {
                        self.stats.error();
                        CacheError::Origin(Arc::new(e))
                    })
                }
                None => unreachable!("this call's loader stored its own type"),
            },
        }
    }
}

/// The async twin of [`MokaCache`], on `moka::future::Cache`.
///
/// The generation store is called synchronously (as in [`MokaCache`]); with
/// a network store, call it from a context where blocking is allowed.
pub struct MokaFutureCache<S> {
    store: S,
    cache: moka::future::Cache<Key, Entry>,
    ttls: Ttls,
    stats: StatsCounters,
}

impl<S: GenerationStore> MokaFutureCache<S> {
    /// A cache of at most `max_capacity` entries, named by `store`.
    pub fn new(store: S, max_capacity: u64) -> Self {
        MokaFutureCache {
            store,
            cache: moka::future::Cache::builder()
                .max_capacity(max_capacity)
                .expire_after(PerEntryTtl)
                .build(),
            ttls: Ttls::default(),
            stats: StatsCounters::default(),
        }
    }

    shared_methods!();

    /// `query`'s cached answer, if there is one at its current generation.
    pub async fn get<Q: CachedQuery + ?Sized>(
        &self,
        query: &Q,
    ) -> Result<Option<Q::Value>, GenerationError> {
        let key = self.key(query)?;
        let value = self
            .cache
            .get(&key)
            .await
            .and_then(|entry| downcast::<Q>(&self.stats, &entry));
        match value {
            Some(_) => self.stats.hit(),
            None => self.stats.miss(),
        }
        Ok(value)
    }

    /// Stores `value` as `query`'s answer at its current generation.
    pub async fn insert<Q: CachedQuery + ?Sized>(
        &self,
        query: &Q,
        value: Q::Value,
    ) -> Result<(), GenerationError> {
        let key = self.key(query)?;
        self.cache
            .insert(key, entry::<Q>(value, self.ttl_for::<Q>()))
            .await;
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
        if let Some(entry) = self.cache.get(&key).await {
            if let Some(value) = downcast::<Q>(&self.stats, &entry) {
                self.stats.hit();
                return Ok(value);
            }
            self.cache.invalidate(&key).await;
        }
        self.stats.miss();
        let ttl = self.ttl_for::<Q>();
        let mut origin = Some(origin);
        let ran = AtomicBool::new(false);
        let loaded = self
            .cache
            .try_get_with(key, async {
                ran.store(true, Ordering::Relaxed);
                self.stats.load();
                // moka polls a loader only when it is the one that runs.
                let origin = origin.take().expect("the loader runs once");
                origin().await.map(|value| entry::<Q>(value, ttl))
            })
            .await;
        let loaded = loaded
            .inspect_err(|_| self.stats.error())
            .map_err(CacheError::Origin)?;
        if !ran.load(Ordering::Relaxed) {
            self.stats.coalesced();
        }
        match downcast::<Q>(&self.stats, &loaded) {
            Some(value) => Ok(value),
            None => match origin.take() {
                Some(origin) => {
                    self.stats.load();
                    origin().await.map_err(|e| {
                        self.stats.error();
                        CacheError::Origin(Arc::new(e))
                    })
                }
                None => unreachable!("this call's loader stored its own type"),
            },
        }
    }
}
