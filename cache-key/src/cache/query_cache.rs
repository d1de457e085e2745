//! One API for every typed cache: [`QueryCache`] and [`TypedCache`]
//! (blocking), [`AsyncQueryCache`] and [`AsyncTypedCache`] (futures).
//!
//! Every cache of this crate implements them, with the same method names,
//! arguments and error type, so that switching backend is changing the
//! constructor, and a library can take any cache:
//!
//! ```
//! use cache_key::{CacheKey, MemoryGenerations};
//! use cache_key::cache::{CacheError, MokaCache, QueryCache, TypedCache};
//!
//! #[derive(CacheKey)]
//! #[cache_key(namespace = "shop", operation = "price", value = u64, ttl = "1m")]
//! struct Price { #[tenant] shop: u32, #[criterion] product: u64 }
//!
//! /// Written once, for a moka cache, a Redis cache, or both levels.
//! fn price(cache: &impl QueryCache<Price>, query: &Price) -> Result<u64, CacheError<String>> {
//!     cache.get_or_load(query, || Ok(1999)) // your database here
//! }
//!
//! let cache = MokaCache::new(MemoryGenerations::new(), 10_000);
//! assert_eq!(price(&cache, &Price { shop: 1, product: 42 })?, 1999);
//! assert_eq!(cache.stats().loads, 1);
//! # Ok::<(), CacheError<String>>(())
//! ```
//!
//! What only one backend has (a Redis pool, tracking, the sweep, eager
//! refresh) stays on its type.

use std::future::Future;

use super::error::CacheError;
use super::query::CachedQuery;
use super::stats::Stats;
use crate::cache_key::CacheKey;
use crate::generation::GenerationScope;

/// What a typed cache has whatever the query type: invalidation and its
/// counters (blocking).
pub trait TypedCache {
    /// Bumps `scope`'s generation: its entries are never read again, in any
    /// process that shares the cache's counters. A bump that could not be
    /// made is an error (a Redis cache also sends it again before it reads
    /// anything else).
    fn invalidate(&self, scope: &GenerationScope) -> Result<(), CacheError>;

    /// Invalidates every entry of `Q`'s namespace.
    fn invalidate_namespace<Q: CacheKey + ?Sized>(&self) -> Result<(), CacheError>
    where
        Self: Sized,
    {
        self.invalidate(&GenerationScope::namespace::<Q>())
    }

    /// A snapshot of the counters of every call.
    fn stats(&self) -> Stats;

    /// A snapshot of the counters of `Q`'s calls.
    fn stats_of<Q: CacheKey + ?Sized>(&self) -> Stats
    where
        Self: Sized;
}

/// A typed cache of `Q`'s answers (blocking): reading a `Q` can only yield
/// a `Q::Value`.
///
/// Every entry is named by the query's key at its current generation, read
/// **before** the origin is asked (see [the race
/// rule](crate::generation#the-race-rule)).
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot cache `{Q}`'s answers",
    label = "not a cache of `{Q}`",
    note = "a Redis cache stores answers as JSON: the value type needs `serde::Serialize` and `serde::Deserialize`",
    note = "an async cache implements `AsyncQueryCache`: call it with `.await`"
)]
pub trait QueryCache<Q: CachedQuery + ?Sized>: TypedCache {
    /// `query`'s cached answer, if there is one at its current generation.
    fn get(&self, query: &Q) -> Result<Option<Q::Value>, CacheError>;

    /// Stores `value` as `query`'s answer at its current generation. To
    /// keep the race rule, prefer [`get_or_load`](Self::get_or_load),
    /// which reads the generation before the origin.
    fn insert(&self, query: &Q, value: Q::Value) -> Result<(), CacheError>;

    /// `query`'s answer: from the cache, or from `origin`, called once per
    /// key in this process however many callers miss it at once, and stored
    /// under the key named before the call. An origin error reaches every
    /// caller waiting on that call and is not stored.
    fn get_or_load<E, F>(&self, query: &Q, origin: F) -> Result<Q::Value, CacheError<E>>
    where
        E: Send + Sync + 'static,
        F: FnOnce() -> Result<Q::Value, E>;
}

/// [`TypedCache`] for async caches: its futures never block a thread.
pub trait AsyncTypedCache: Sync {
    /// Bumps `scope`'s generation (see [`TypedCache::invalidate`]).
    fn invalidate<'a>(
        &'a self,
        scope: &'a GenerationScope,
    ) -> impl Future<Output = Result<(), CacheError>> + Send + 'a;

    /// Invalidates every entry of `Q`'s namespace.
    fn invalidate_namespace<Q: CacheKey + ?Sized>(
        &self,
    ) -> impl Future<Output = Result<(), CacheError>> + Send + '_
    where
        Self: Sized,
    {
        let scope = GenerationScope::namespace::<Q>();
        async move { self.invalidate(&scope).await }
    }

    /// A snapshot of the counters of every call.
    fn stats(&self) -> Stats;

    /// A snapshot of the counters of `Q`'s calls.
    fn stats_of<Q: CacheKey + ?Sized>(&self) -> Stats
    where
        Self: Sized;
}

/// [`QueryCache`] for async caches: the same calls as futures (`Send`, for
/// a multi-threaded runtime's tasks), the origin a future too.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot cache `{Q}`'s answers",
    label = "not an async cache of `{Q}`",
    note = "a Redis cache stores answers as JSON: the value type needs `serde::Serialize` and `serde::Deserialize`",
    note = "a blocking cache implements `QueryCache`: call it without `.await`"
)]
pub trait AsyncQueryCache<Q: CachedQuery + Sync + ?Sized>: AsyncTypedCache {
    /// `query`'s cached answer, if there is one at its current generation.
    fn get<'a>(
        &'a self,
        query: &'a Q,
    ) -> impl Future<Output = Result<Option<Q::Value>, CacheError>> + Send + 'a;

    /// Stores `value` as `query`'s answer at its current generation.
    fn insert<'a>(
        &'a self,
        query: &'a Q,
        value: Q::Value,
    ) -> impl Future<Output = Result<(), CacheError>> + Send + 'a;

    /// `query`'s answer: from the cache, or from the future `origin` makes,
    /// awaited once per key in this process however many tasks miss it at
    /// once (see [`QueryCache::get_or_load`]).
    fn get_or_load<'a, E, F, Fut>(
        &'a self,
        query: &'a Q,
        origin: F,
    ) -> impl Future<Output = Result<Q::Value, CacheError<E>>> + Send + 'a
    where
        E: Send + Sync + 'static,
        F: FnOnce() -> Fut + Send + 'a,
        Fut: Future<Output = Result<Q::Value, E>> + Send + 'a;
}
