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
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::CacheKey;
use crate::generation::GenerationError;

#[cfg(feature = "moka")]
mod moka;

#[cfg(all(feature = "moka", feature = "redis"))]
pub(crate) use self::moka::MokaCaches;
#[cfg(feature = "moka")]
pub use self::moka::{AsyncMokaCache, Driver, Moka, MokaCache, MokaFuture, MokaSync};

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

/// Why an entry found under a query's key was not served (it counts as a miss).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RejectReason {
    /// The entry holds another value type than the query's `Value`.
    ValueType,
    /// The entry was written for another query (its full criteria differ).
    Query,
    /// The entry was written under another key schema.
    Schema,
    /// The entry's envelope has a format version this crate does not read.
    Version,
    /// The entry's bytes do not decode (not an envelope, or a value that does
    /// not deserialize).
    Undecodable,
    /// The key holds another Redis type than a string (a list, a hash...).
    WrongType,
}

/// How many entries were rejected, by reason.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Rejected {
    /// Another value type.
    pub value_type: u64,
    /// Another query.
    pub query: u64,
    /// Another schema.
    pub schema: u64,
    /// Another envelope version.
    pub version: u64,
    /// Bytes that do not decode.
    pub undecodable: u64,
    /// Another Redis type under the key.
    pub wrong_type: u64,
}

impl Rejected {
    /// Every rejection, whatever the reason.
    pub fn total(&self) -> u64 {
        self.value_type
            + self.query
            + self.schema
            + self.version
            + self.undecodable
            + self.wrong_type
    }
}

/// A snapshot of a cache's counters, each counted since the cache was made.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// Reads answered from the cache.
    pub hits: u64,
    /// Of `hits`, those answered in process without a value from Redis:
    /// every hit of a moka cache, and a Redis cache's hits on its
    /// in-process level.
    pub local_hits: u64,
    /// Stale values served because the origin failed (or was slower than
    /// a soft timeout), with a fail-safe; counted in `loads`, not in `hits`.
    pub stale: u64,
    /// Reads that found no usable entry (rejected entries included).
    pub misses: u64,
    /// Origin calls made by the cache.
    pub loads: u64,
    /// Misses answered by another caller's origin call for the same key.
    pub coalesced: u64,
    /// Entries found but not served, by reason (Redis only: the moka caches
    /// keep each value type in a cache of its own, so nothing is rejected).
    pub rejected: Rejected,
    /// Calls that returned an error (generation store, backend or origin).
    pub errors: u64,
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

/// The atomics behind [`Stats`]; relaxed, since each counter is read alone.
#[derive(Debug, Default)]
#[cfg_attr(not(any(feature = "moka", feature = "redis")), allow(dead_code))]
pub(crate) struct StatsCounters {
    hits: AtomicU64,
    local_hits: AtomicU64,
    stale: AtomicU64,
    misses: AtomicU64,
    loads: AtomicU64,
    coalesced: AtomicU64,
    errors: AtomicU64,
    rejected: [AtomicU64; 6],
}

#[cfg_attr(not(any(feature = "moka", feature = "redis")), allow(dead_code))]
impl StatsCounters {
    /// A hit; `local` when answered in process.
    pub(crate) fn hit(&self, local: bool) {
        self.hits.fetch_add(1, Ordering::Relaxed);
        if local {
            self.local_hits.fetch_add(1, Ordering::Relaxed);
        }
    }
    pub(crate) fn stale(&self) {
        self.stale.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn miss(&self) {
        self.misses.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn load(&self) {
        self.loads.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn coalesced(&self) {
        self.coalesced.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn error(&self) {
        self.errors.fetch_add(1, Ordering::Relaxed);
    }
    /// Only Redis entries can be rejected: moka holds each value type apart.
    #[cfg_attr(not(feature = "redis"), allow(dead_code))]
    pub(crate) fn reject(&self, reason: RejectReason) {
        let i = match reason {
            RejectReason::ValueType => 0,
            RejectReason::Query => 1,
            RejectReason::Schema => 2,
            RejectReason::Version => 3,
            RejectReason::Undecodable => 4,
            RejectReason::WrongType => 5,
        };
        self.rejected[i].fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn snapshot(&self) -> Stats {
        let r = |i: usize| self.rejected[i].load(Ordering::Relaxed);
        Stats {
            hits: self.hits.load(Ordering::Relaxed),
            local_hits: self.local_hits.load(Ordering::Relaxed),
            stale: self.stale.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            loads: self.loads.load(Ordering::Relaxed),
            coalesced: self.coalesced.load(Ordering::Relaxed),
            errors: self.errors.load(Ordering::Relaxed),
            rejected: Rejected {
                value_type: r(0),
                query: r(1),
                schema: r(2),
                version: r(3),
                undecodable: r(4),
                wrong_type: r(5),
            },
        }
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
