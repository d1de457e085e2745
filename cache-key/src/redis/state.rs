//! [`CacheState`]: what a typed Redis cache is made of whatever its driver,
//! and the exchanges of its reads and writes.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde::Serialize;
use serde::de::DeserializeOwned;

use super::counters::CounterSource;
use super::entry::{Entry, Found, Lifetime, Stored};
use super::flight::Flights;
use super::insert::Insert;
use super::lock::LoadLock;
use super::read::{Guesses, KeyedRead, LocalCache, Read, tracked_local};
use crate::cache::{CacheError, CacheStats, CachedQuery, Ttls};
use crate::generation::GenerationError;
use crate::key::Key;

/// Serving a value past its freshness when the origin cannot answer: for at
/// most `max_stale` after it stopped being fresh, and never once its
/// generation was bumped (an invalidated entry sits under a key no read
/// names). See [`RedisCache::with_fail_safe`](super::RedisCache::with_fail_safe).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FailSafe {
    max_stale: Duration,
    soft_timeout: Option<Duration>,
}

impl FailSafe {
    /// Entries are kept `max_stale` past their TTL, and served in that
    /// window when the origin errors (or, with a
    /// [`soft_timeout`](Self::soft_timeout), is slower than it).
    pub fn new(max_stale: Duration) -> Self {
        FailSafe {
            max_stale,
            soft_timeout: None,
        }
    }

    /// On the async cache: an origin slower than `timeout`, when a stale
    /// value is at hand, is given up (its future dropped) and the stale
    /// value served. The blocking cache cannot give up a call in progress
    /// and ignores it.
    pub fn soft_timeout(mut self, timeout: Duration) -> Self {
        self.soft_timeout = Some(timeout);
        self
    }

    /// How long past its TTL a value may be served.
    pub fn max_stale(&self) -> Duration {
        self.max_stale
    }

    /// The soft timeout, if any.
    pub fn soft_timeout_of(&self) -> Option<Duration> {
        self.soft_timeout
    }
}

/// The parts of a typed Redis cache that its sync and async drivers share.
pub(crate) struct CacheState {
    pub(crate) source: CounterSource,
    pub(crate) guesses: Arc<Guesses>,
    pub(crate) flights: Flights,
    pub(crate) stats: CacheStats,
    pub(crate) ttls: Ttls,
    pub(crate) lock: Option<LoadLock>,
    pub(crate) fail_safe: Option<FailSafe>,
    #[cfg(feature = "moka")]
    pub(crate) local: Option<super::local::Local>,
}

impl CacheState {
    pub(crate) fn new(source: CounterSource) -> Self {
        CacheState {
            source,
            guesses: Arc::default(),
            flights: Flights::default(),
            stats: CacheStats::default(),
            ttls: Ttls::default(),
            lock: None,
            fail_safe: None,
            #[cfg(feature = "moka")]
            local: None,
        }
    }

    /// How long `Q`'s entries live.
    pub(crate) fn lifetime<Q: CachedQuery + ?Sized>(&self) -> Lifetime {
        Lifetime {
            ttl: self.ttls.get::<Q>(),
            keep: self.fail_safe.map_or(Duration::ZERO, |f| f.max_stale),
        }
    }

    /// The in-process level's cache of `Q`'s values, if there is a level.
    pub(crate) fn local<Q: CachedQuery + ?Sized>(&self) -> LocalCache<'_, Q::Value> {
        #[cfg(feature = "moka")]
        if let Some(local) = &self.local {
            return Some(local.of::<Q::Value>(self.lifetime::<Q>().kept()));
        }
        None
    }

    /// Keeps `value` in process as `entry`'s, if there is a level.
    pub(crate) fn keep_local<Q: CachedQuery + ?Sized>(
        &self,
        entry: &Entry,
        value: &Q::Value,
        fresh_until: SystemTime,
    ) {
        if let (Some(local), Some((zero, generation))) = (self.local::<Q>(), entry.local()) {
            let stored = Stored {
                value: value.clone(),
                fresh_until,
            };
            local.insert(Key::from_canonical(zero.to_owned()), generation, stored);
        }
    }

    /// A stale value that the fail-safe may still serve, if `stored` is one.
    pub(crate) fn fallback<V>(&self, stored: Stored<V>) -> Option<V> {
        let window = self.fail_safe?.max_stale;
        (SystemTime::now() < stored.fresh_until + window).then_some(stored.value)
    }

    /// `query`'s fresh value from the in-process level, found over tracked
    /// counters without an exchange (counted as a hit); `None` when a
    /// [`keyed_read`](Self::keyed_read) must find out.
    pub(crate) fn tracked_hit<Q: CachedQuery + ?Sized>(&self, query: &Q) -> Option<Q::Value> {
        let tracked = self.source.tracked.as_deref()?;
        // Past its freshness, it is left to the read: reloaded, or kept for
        // the fail-safe.
        let stored = tracked_local(query, tracked, self.local::<Q>()?)?;
        self.stats.of::<Q>().hit(true);
        Some(stored.value)
    }

    /// A read of `query`'s entry at its current generation.
    pub(crate) fn keyed_read<'q, Q: CachedQuery + ?Sized>(
        &self,
        query: &'q Q,
    ) -> Result<KeyedRead<'q, '_, Q>, GenerationError> {
        KeyedRead::new(query, &self.source, self.guesses.clone(), self.local::<Q>())
            .inspect_err(|error| self.stats.of::<Q>().error(error))
    }

    /// A write of `value` as `query`'s entry at its current generation.
    pub(crate) fn insert<'q, 'v, Q>(
        &self,
        query: &'q Q,
        value: &'v Q::Value,
    ) -> Result<Insert<'q, 'v, '_, Q>, GenerationError>
    where
        Q: CachedQuery + ?Sized,
        Q::Value: Serialize + DeserializeOwned,
    {
        Insert::new(
            query,
            value,
            self.lifetime::<Q>(),
            &self.source,
            self.local::<Q>(),
        )
        .inspect_err(|error| self.stats.of::<Q>().error(error))
    }

    /// Counts what a read of `Q` found, and hands on its value if it is
    /// fresh.
    pub(crate) fn count_read<Q: CachedQuery + ?Sized>(
        &self,
        read: Result<Read<Q::Value>, CacheError<Infallible>>,
    ) -> Result<Option<Q::Value>, CacheError<Infallible>> {
        let stats = self.stats.of::<Q>();
        let read = read.inspect_err(|error| stats.error(error))?;
        Ok(match read.found {
            Found::Value(stored) if stored.is_fresh() => {
                stats.hit(read.local);
                Some(stored.value)
            }
            Found::Value(_) | Found::Absent => {
                stats.miss();
                None
            }
            Found::Rejected(reason) => {
                stats.reject(reason);
                stats.miss();
                None
            }
        })
    }
}
