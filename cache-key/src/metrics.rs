//! Metrics (feature `metrics`): [`Metered`], a layer around any async typed
//! cache that exports its counters and its origin's time through the
//! [`metrics`](https://docs.rs/metrics) facade, to whatever exporter the
//! application installed (Prometheus, StatsD, OpenTelemetry...).
//!
//! Every series is labelled with the query type's `namespace` and
//! `operation` (unique per type, see `registry::check`), never with a key,
//! a tenant or a criterion value, so a series count is bounded by the query
//! types:
//!
//! | series | kind | what |
//! | --- | --- | --- |
//! | `cache_key_hits_total` | counter | reads answered from the cache ([`Stats::hits`]) |
//! | `cache_key_misses_total` | counter | reads that found no usable entry ([`Stats::misses`]) |
//! | `cache_key_stale_total` | counter | answers served past their freshness ([`Stats::stale`]) |
//! | `cache_key_coalesced_total` | counter | misses answered by another caller's origin call |
//! | `cache_key_degraded_total` | counter | calls answered although the cache failed on the way ([`Stats::degraded`]) |
//! | `cache_key_errors_total` | counter | calls that returned an error ([`Stats::errors`]) |
//! | `cache_key_origin_calls_total` | counter | origin calls made through this layer |
//! | `cache_key_origin_duration_seconds` | histogram | each origin call's time, failed ones included |
//! | `cache_key_invalidations_total` | counter | bumps made through this layer (by namespace) |
//! | `cache_key_http_not_modified_total` | counter | `304`s answered from the counters (feature `axum`) |
//!
//! The counters from [`Stats`] are set to the cache's own totals after each
//! call (`Counter::absolute`), so they agree with [`AsyncTypedCache::stats_of`]
//! whatever else reads the cache. The series are per query type, not per
//! cache: two `Metered` caches serving one query type in a process would
//! each set them (an exporter keeping the largest, as Prometheus's does,
//! shows the busier cache's); give each query type one cache.

use std::future::Future;
use std::marker::PhantomData;
use std::time::Instant;

use crate::cache::{AsyncQueryCache, AsyncTypedCache, CacheError, CachedQuery, Stats};
use crate::cache_key::CacheKey;
use crate::generation::GenerationScope;

/// An async typed cache `C` whose calls export metrics (see the
/// [module](self)): the same cache, the same answers.
///
/// Cancel-safe as `C` is: a call dropped at any wait still publishes the
/// counters `C` moved, and an origin call it started is counted and timed
/// up to the drop; a dropped `invalidate` is not counted (its bump's
/// outcome is `C`'s to keep, pending on Redis).
///
/// ```
/// use cache_key::{CacheKey, MemoryGenerations};
/// use cache_key::cache::{AsyncMokaCache, AsyncQueryCache};
/// use cache_key::metrics::Metered;
///
/// #[derive(CacheKey)]
/// #[cache_key(namespace = "shop", operation = "price", value = u64, ttl = "1m")]
/// struct Price { #[tenant] shop: u32, #[criterion] product: u64 }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// // With an exporter installed (`metrics_exporter_prometheus`, say), each
/// // call below moves `cache_key_*{namespace="shop",operation="price"}`.
/// let cache = Metered::new(AsyncMokaCache::new(MemoryGenerations::new(), 10_000));
/// let price = cache
///     .get_or_load(&Price { shop: 7, product: 42 }, || async { Ok::<_, std::io::Error>(1999) })
///     .await?;
/// assert_eq!(price, 1999);
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct Metered<C> {
    cache: C,
}

impl<C> Metered<C> {
    /// `cache`, its calls measured.
    pub fn new(cache: C) -> Self {
        Metered { cache }
    }

    /// The cache measured.
    pub fn inner(&self) -> &C {
        &self.cache
    }
}

/// Sets `Q`'s counters to the cache's totals when dropped: after its call
/// returned, or where a dropped call stopped (what it counted is shown).
struct Publish<'a, C: AsyncTypedCache, Q: ?Sized + CacheKey> {
    cache: &'a C,
    query: PhantomData<fn(&Q)>,
}

impl<'a, C: AsyncTypedCache, Q: ?Sized + CacheKey> Publish<'a, C, Q> {
    fn on_drop(cache: &'a C) -> Self {
        Publish {
            cache,
            query: PhantomData,
        }
    }
}

impl<C: AsyncTypedCache, Q: ?Sized + CacheKey> Drop for Publish<'_, C, Q> {
    fn drop(&mut self) {
        publish::<Q>(&self.cache.stats_of::<Q>());
    }
}

/// Sets `Q`'s counters to `stats`; a counter only ever moves up (an older
/// snapshot published after a newer one changes nothing).
pub fn publish<Q: CacheKey + ?Sized>(stats: &Stats) {
    let schema = &Q::KEY_SCHEMA;
    let (namespace, operation) = (schema.namespace(), schema.operation());
    for (name, value) in [
        ("cache_key_hits_total", stats.hits),
        ("cache_key_misses_total", stats.misses),
        ("cache_key_stale_total", stats.stale),
        ("cache_key_coalesced_total", stats.coalesced),
        ("cache_key_degraded_total", stats.degraded),
        ("cache_key_errors_total", stats.errors),
    ] {
        metrics::counter!(name, "namespace" => namespace, "operation" => operation).absolute(value);
    }
}

/// An origin call of `Q`: counted and its time recorded when dropped,
/// answered or cancelled (the database did the work either way).
struct OriginCall<Q: CacheKey + ?Sized> {
    started: Instant,
    query: PhantomData<fn(&Q)>,
}

impl<Q: CacheKey + ?Sized> OriginCall<Q> {
    fn start() -> Self {
        OriginCall {
            started: Instant::now(),
            query: PhantomData,
        }
    }
}

impl<Q: CacheKey + ?Sized> Drop for OriginCall<Q> {
    fn drop(&mut self) {
        let schema = &Q::KEY_SCHEMA;
        let (namespace, operation) = (schema.namespace(), schema.operation());
        let labels = [("namespace", namespace), ("operation", operation)];
        metrics::counter!("cache_key_origin_calls_total", &labels).increment(1);
        metrics::histogram!("cache_key_origin_duration_seconds", &labels)
            .record(self.started.elapsed().as_secs_f64());
    }
}

// Each future is declared `Send` in its signature, not left to an `async
// fn`'s inferred type: with `async fn`, an axum handler awaiting
// `Metered::get_or_load` was not `Send` (rustc #100013).
#[allow(clippy::manual_async_fn, reason = "the future's Send is declared")]
impl<C: AsyncTypedCache + Send> AsyncTypedCache for Metered<C> {
    fn invalidate<'a>(
        &'a self,
        scope: &'a GenerationScope,
    ) -> impl Future<Output = Result<(), CacheError>> + Send + 'a {
        async move {
            let result = self.cache.invalidate(scope).await;
            if result.is_ok() {
                let namespace = scope.counter().namespace().to_owned();
                metrics::counter!("cache_key_invalidations_total", "namespace" => namespace)
                    .increment(1);
            }
            result
        }
    }

    fn stats(&self) -> Stats {
        self.cache.stats()
    }

    fn stats_of<Q: CacheKey + ?Sized>(&self) -> Stats {
        self.cache.stats_of::<Q>()
    }
}

#[allow(clippy::manual_async_fn, reason = "the future's Send is declared")]
impl<C, Q> AsyncQueryCache<Q> for Metered<C>
where
    C: AsyncQueryCache<Q> + Send,
    Q: CachedQuery + Sync + ?Sized,
{
    fn get<'a>(
        &'a self,
        query: &'a Q,
    ) -> impl Future<Output = Result<Option<Q::Value>, CacheError>> + Send + 'a {
        async move {
            let _publish = Publish::<C, Q>::on_drop(&self.cache);
            self.cache.get(query).await
        }
    }

    fn insert<'a>(
        &'a self,
        query: &'a Q,
        value: Q::Value,
    ) -> impl Future<Output = Result<(), CacheError>> + Send + 'a {
        async move {
            let _publish = Publish::<C, Q>::on_drop(&self.cache);
            self.cache.insert(query, value).await
        }
    }

    fn get_or_load<'a, E, F, Fut>(
        &'a self,
        query: &'a Q,
        origin: F,
    ) -> impl Future<Output = Result<Q::Value, CacheError<E>>> + Send + 'a
    where
        E: Send + Sync + 'static,
        F: FnOnce() -> Fut + Send + 'a,
        Fut: Future<Output = Result<Q::Value, E>> + Send + 'a,
    {
        let timed = || async move {
            let _call = OriginCall::<Q>::start();
            origin().await
        };
        async move {
            let _publish = Publish::<C, Q>::on_drop(&self.cache);
            self.cache.get_or_load(query, timed).await
        }
    }
}

#[cfg(feature = "axum")]
impl<C: crate::http::CacheGenerations + Send> crate::http::CacheGenerations for Metered<C> {
    type Store = C::Store;

    fn generations(&self) -> &C::Store {
        self.cache.generations()
    }
}
