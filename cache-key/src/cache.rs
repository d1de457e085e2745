//! A typed cache: the query type fixes the value type.
//!
//! A query type implements [`CachedQuery`] to say what its cached answer is
//! and how long it lives: with `#[cache_key(value = Type, ttl = "5m")]`
//! beside its key, or by hand. The caches in this module are
//! generic over the query, so reading a `Search` can only ever yield a
//! `Search::Value`:
//!
//! - `MokaCache` and `AsyncMokaCache` (feature `moka`) keep values in
//!   process, a moka cache per value type with its TTL; concurrent misses
//!   of one key call the origin once (moka's `try_get_with`).
//! - `RedisCache` and `AsyncRedisCache` (features `redis`, `redis-async`,
//!   in `cache_key::redis`) keep values in Redis or a Redis Cluster inside
//!   an envelope checked on every read, one round trip per hit; either can
//!   take a `LoadLock` so that several processes load a cold key once.
//!
//! Every cache names entries with [`GenerationStore::key_for`], read
//! **before** the origin is asked (see [the race
//! rule](crate::generation#the-race-rule)), and invalidates through the
//! same store. Each counts what it does in [`Stats`].
//!
//! Every entry expires: moka drops it after its type's TTL (or earlier, at
//! the capacity bound), and every Redis entry is written with `PX` of its
//! TTL. An invalidation touches no entry: it bumps a counter, the scope's
//! entries become unreachable under their old generation and each simply
//! ages out at the end of the TTL it was written with, while the new
//! generation's entries get a full TTL of their own. So an old generation
//! costs memory for one TTL at most; in Redis,
//! `RedisGenerations::sweep` deletes it sooner.
//!
//! [`GenerationStore::key_for`]: crate::GenerationStore::key_for

use std::collections::HashMap;
use std::error::Error;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::cache_key::CacheKey;
use crate::generation::GenerationError;

#[cfg(feature = "moka")]
mod moka;
#[cfg(any(feature = "moka", feature = "redis"))]
mod once_list;
#[cfg(any(feature = "moka", feature = "redis"))]
mod recorder;
mod stats;

#[cfg(all(feature = "moka", feature = "redis"))]
pub(crate) use self::moka::MokaCaches;
#[cfg(feature = "moka")]
pub use self::moka::{AsyncMokaCache, Driver, Moka, MokaCache, MokaFuture, MokaSync};
#[cfg(any(feature = "moka", feature = "redis"))]
pub(crate) use self::once_list::OnceList;
#[cfg(any(feature = "moka", feature = "redis"))]
pub(crate) use self::recorder::{CacheStats, Recorder, invalidated};
pub use self::stats::{RejectReason, Rejected, Stats};

/// A query whose cached answer has one type and one time to live.
///
/// The derive writes it from two arguments beside the key: `value`, the
/// answer's type, and `ttl`, a string of numbers with units (`ms`, `s`, `m`,
/// `h`, `d`: `"30s"`, `"5m"`, `"1h30m"`), parsed at compile time. Each needs
/// the other, and a zero or unreadable `ttl` is a compile error.
///
/// ```
/// use std::time::Duration;
/// use cache_key::{CacheKey, cache::CachedQuery};
///
/// #[derive(Clone)]
/// struct Book { title: String }
///
/// #[derive(CacheKey)]
/// #[cache_key(namespace = "library", operation = "search", value = Vec<Book>, ttl = "5m")]
/// struct Search { #[tenant] branch: u32, #[criterion] title: String }
///
/// assert_eq!(<Search as CachedQuery>::TTL, Duration::from_secs(300));
/// ```
///
/// By hand, for a value type or TTL the attribute cannot spell (a constant
/// computed elsewhere, say):
///
/// ```
/// use std::time::Duration;
/// use cache_key::{CacheKey, cache::CachedQuery};
///
/// const PROFILE_TTL: Duration = Duration::from_secs(2 * 60 * 60);
///
/// #[derive(CacheKey)]
/// #[cache_key(namespace = "library", operation = "profile")]
/// struct Profile { #[tenant] branch: u32, #[criterion] member: u64 }
///
/// impl CachedQuery for Profile {
///     type Value = String;
///     const TTL: Duration = PROFILE_TTL;
/// }
/// ```
///
/// A generic query gets the impl with its `CacheKey` impl's bounds; a value
/// type built from the query's type parameters (`value = Vec<T>`) also needs
/// `Clone + Send + Sync + 'static`, checked where the query is used.
pub trait CachedQuery: CacheKey {
    /// The answer cached for this query: the only type a cache returns for it.
    type Value: Clone + Send + Sync + 'static;
    /// How long an answer lives (a cache may override it per type).
    const TTL: Duration;
}

/// TTL overrides by query type, named by namespace and operation (unique per
/// type, see `registry::check`; `TypeId` would need `'static` queries).
#[derive(Debug, Default, Clone)]
#[cfg_attr(not(any(feature = "moka", feature = "redis")), allow(dead_code))]
pub(crate) struct Ttls(HashMap<(&'static str, &'static str), Duration>);

#[cfg_attr(not(any(feature = "moka", feature = "redis")), allow(dead_code))]
impl Ttls {
    pub(crate) fn set<Q: CachedQuery + ?Sized>(&mut self, ttl: Duration) {
        let schema = &Q::KEY_SCHEMA;
        self.0.insert((schema.namespace(), schema.operation()), ttl);
    }

    pub(crate) fn get<Q: CachedQuery + ?Sized>(&self) -> Duration {
        // Read on every moka access: no hashing when nothing is overridden.
        if self.0.is_empty() {
            return Q::TTL;
        }
        let schema = &Q::KEY_SCHEMA;
        self.0
            .get(&(schema.namespace(), schema.operation()))
            .copied()
            .unwrap_or(Q::TTL)
    }
}

/// Why a cache call failed. `E` is the origin's error type
/// ([`Infallible`](std::convert::Infallible) where no origin is asked).
#[derive(Debug)]
#[non_exhaustive]
pub enum CacheError<E> {
    /// The generation store could not name the key (or invalidate).
    Generation(GenerationError),
    /// The backend (Redis) failed.
    Backend(Box<dyn Error + Send + Sync + 'static>),
    /// The origin failed; every caller coalesced on the same load gets the
    /// same error, and nothing is cached.
    Origin(Arc<E>),
    /// The value cannot be stored so that it reads back the same (Redis: a
    /// NaN or infinite float, which JSON writes as `null`; a map whose keys
    /// are not strings): nothing was stored.
    Unstorable(Box<dyn Error + Send + Sync + 'static>),
}

impl<E> From<GenerationError> for CacheError<E> {
    fn from(error: GenerationError) -> Self {
        CacheError::Generation(error)
    }
}

impl<E: fmt::Display> fmt::Display for CacheError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CacheError::Generation(e) => write!(f, "cache key generation: {e}"),
            CacheError::Backend(e) => write!(f, "cache backend: {e}"),
            CacheError::Origin(e) => write!(f, "origin: {e}"),
            CacheError::Unstorable(e) => write!(f, "{e}"),
        }
    }
}

impl<E: Error + 'static> Error for CacheError<E> {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            CacheError::Generation(e) => Some(e),
            CacheError::Backend(e) => Some(&**e),
            CacheError::Origin(e) => Some(&**e),
            CacheError::Unstorable(e) => Some(&**e),
        }
    }
}
