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

mod error;
#[cfg(feature = "moka")]
mod moka;
#[cfg(any(feature = "moka", feature = "redis"))]
mod once_list;
mod query;
mod query_cache;
#[cfg(any(feature = "moka", feature = "redis"))]
mod recorder;
mod stats;

pub use self::error::{CacheError, CacheErrorKind};
#[cfg(all(feature = "moka", feature = "redis"))]
pub(crate) use self::moka::MokaCaches;
#[cfg(feature = "moka")]
pub use self::moka::{AsyncMokaCache, Driver, Moka, MokaCache, MokaFuture, MokaSync};
pub use self::query::CachedQuery;
#[cfg(feature = "redis")]
pub(crate) use self::query::{Ttls, value_tags};
pub use self::query_cache::{AsyncQueryCache, AsyncTypedCache, QueryCache, TypedCache};
#[cfg(feature = "redis")]
pub(crate) use self::recorder::{CacheStats, Recorder, invalidated};
pub use self::stats::{RejectReason, Rejected, Stats};
pub use crate::backend_error::{BackendError, BackendErrorKind};
