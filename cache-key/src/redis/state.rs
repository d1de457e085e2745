//! [`CacheState`]: what a typed Redis cache is made of whatever its driver,
//! and the exchanges of its reads and writes.

use std::collections::HashSet;
use std::convert::Infallible;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use serde::Serialize;
use serde::de::DeserializeOwned;

use super::counters::CounterSource;
use super::entry::{Entry, Lifetime, Stored};
use super::flight::Flights;
use super::insert::Insert;
use super::lock::LoadLock;
use super::read::{Guesses, KeyedRead, LocalCache, Missed, Read, tracked_local};
use crate::cache::{CacheError, CacheStats, CachedQuery, Recorder, Stats, Ttls};
use crate::generation::{Counter, GenerationError, KeyDraft, tag_counters};
use crate::key::Key;
use crate::tag::TagStamp;

/// Serving a value past its freshness when the origin cannot answer: for at
/// most `max_stale` after it stopped being fresh, and never once its
/// generation was bumped (an invalidated entry sits under a key no read
/// names). See [`RedisCache::with_fail_safe`](super::RedisCache::with_fail_safe).
///
/// `S` is the soft timeout: none (`()`), or a [`Duration`] after
/// [`with_soft_timeout`](Self::with_soft_timeout), which only the async
/// cache takes (a blocking call in progress cannot be given up, so the
/// blocking cache's `with_fail_safe` does not accept one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FailSafe<S = ()> {
    max_stale: Duration,
    soft_timeout: S,
}

impl FailSafe {
    /// Entries are kept `max_stale` past their TTL, and served in that
    /// window when the origin errors.
    pub fn new(max_stale: Duration) -> Self {
        FailSafe {
            max_stale,
            soft_timeout: (),
        }
    }

    /// For the async cache: an origin slower than `timeout`, when a stale
    /// value is at hand, is given up (its future dropped) and the stale
    /// value served.
    pub fn with_soft_timeout(self, timeout: Duration) -> FailSafe<Duration> {
        FailSafe {
            max_stale: self.max_stale,
            soft_timeout: timeout,
        }
    }
}

impl<S: SoftTimeout> FailSafe<S> {
    /// How long past its TTL a value may be served.
    pub fn max_stale(&self) -> Duration {
        self.max_stale
    }

    /// The soft timeout, if any.
    pub fn soft_timeout(&self) -> Option<Duration> {
        self.soft_timeout.get()
    }
}

/// A fail-safe's soft timeout: none (`()`) or a [`Duration`]. Sealed.
pub trait SoftTimeout: Copy + soft_timeout::Sealed {
    #[doc(hidden)]
    fn get(&self) -> Option<Duration>;
}

mod soft_timeout {
    pub trait Sealed {}
    impl Sealed for () {}
    impl Sealed for std::time::Duration {}
}

impl SoftTimeout for () {
    fn get(&self) -> Option<Duration> {
        None
    }
}

impl SoftTimeout for Duration {
    fn get(&self) -> Option<Duration> {
        Some(*self)
    }
}

/// Reloading an entry in the background before its TTL ends, so that a
/// key read often is reloaded before it expires rather than missed after:
/// a hit of `get_or_refresh` once `fraction` of its TTL has passed is
/// answered with the value it found and starts a load of the key (one at a
/// time per key). Given to each
/// [`get_or_refresh`](super::RedisCache::get_or_refresh) call, the only
/// call that can refresh.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EagerRefresh {
    fraction: f64,
    max_running: usize,
}

impl EagerRefresh {
    /// Refreshes an entry read once `fraction` of its TTL (`0.9` for the
    /// last tenth) has passed; clamped to `0.0..=1.0`, where `1.0` (and
    /// NaN) never refreshes early. At most 16 refreshes run at once per
    /// cache: see [`with_max_running`](Self::with_max_running).
    pub fn after(fraction: f64) -> Self {
        EagerRefresh {
            fraction: if fraction.is_nan() {
                1.0
            } else {
                fraction.clamp(0.0, 1.0)
            },
            max_running: 16,
        }
    }

    /// At most `max_running` refreshes at once in the cache (each on a
    /// thread of its own on the blocking cache, a task on the async one); a
    /// hit that would start one more starts none (a later hit in the window
    /// may).
    pub fn with_max_running(mut self, max_running: usize) -> Self {
        self.max_running = max_running;
        self
    }

    /// The fraction of the TTL after which a hit refreshes its entry.
    pub fn fraction(&self) -> f64 {
        self.fraction
    }

    /// How many refreshes may run at once.
    pub fn max_running(&self) -> usize {
        self.max_running
    }
}

/// What a cache does when Redis fails (a timeout, an unreachable or
/// refusing server, a counter it cannot read); see
/// [`RedisCache::with_failure_policy`](super::RedisCache::with_failure_policy).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum FailurePolicy {
    /// The call is answered without the cache, and the failure reported
    /// ([`Stats::degraded`](crate::cache::Stats::degraded), a `tracing`
    /// event): `get_or_load` asks the origin (once per query in this
    /// process, however many callers) and stores nothing, `get` is a miss,
    /// `insert` stores nothing. An outage costs latency, not availability.
    #[default]
    CallOrigin,
    /// The call returns the error: a [`CacheError`] whose
    /// [`is_backend_failure`](CacheError::is_backend_failure) is true.
    ReturnError,
}

/// What [`RedisCache::with_failure_hook`](super::RedisCache::with_failure_hook)
/// is given.
pub(crate) type FailureHook = Arc<dyn Fn(&CacheError) + Send + Sync>;

/// The parts of a typed Redis cache that its sync and async drivers share.
pub(crate) struct CacheState {
    pub(crate) source: CounterSource,
    pub(crate) guesses: Guesses,
    pub(crate) flights: Flights,
    pub(crate) stats: CacheStats,
    pub(crate) ttls: Ttls,
    pub(crate) lock: Option<LoadLock>,
    pub(crate) fail_safe: Option<FailSafe>,
    /// The async cache's: see [`FailSafe::with_soft_timeout`].
    pub(crate) soft_timeout: Option<Duration>,
    pub(crate) failure_policy: FailurePolicy,
    /// Told of each failure a call answered around.
    pub(crate) failure_hook: Option<FailureHook>,
    /// The keys (at generation 0) of the eager refreshes running: one per
    /// key at a time, at most `max_running` in all.
    pub(crate) refreshing: Mutex<HashSet<Key>>,
    #[cfg(feature = "moka")]
    pub(crate) local: Option<super::local::Local>,
    /// The most tags an entry keeps.
    pub(crate) max_tags: usize,
}

impl CacheState {
    /// `stats` with the invalidations waiting to be sent again now.
    pub(crate) fn with_pending(&self, mut stats: Stats) -> Stats {
        let pending = self.source.invalidations.pending_len();
        stats.pending_invalidations = u64::try_from(pending).unwrap_or(u64::MAX);
        stats
    }

    pub(crate) fn new(source: CounterSource) -> Self {
        CacheState {
            source,
            guesses: Guesses::default(),
            flights: Flights::default(),
            stats: CacheStats::default(),
            ttls: Ttls::default(),
            lock: None,
            fail_safe: None,
            soft_timeout: None,
            failure_policy: FailurePolicy::default(),
            failure_hook: None,
            refreshing: Mutex::default(),
            #[cfg(feature = "moka")]
            local: None,
            max_tags: crate::tag::DEFAULT_MAX_TAGS,
        }
    }

    /// Whether a hit of `Q` fresh until `fresh_until` is in `eager`'s
    /// refresh window.
    pub(crate) fn refresh_due<Q: CachedQuery + ?Sized>(
        &self,
        eager: EagerRefresh,
        fresh_until: SystemTime,
    ) -> bool {
        let window = self.ttls.get::<Q>().mul_f64(1.0 - eager.fraction);
        fresh_until
            .duration_since(SystemTime::now())
            .is_ok_and(|left| left < window)
    }

    /// Marks a refresh of `query` as running, unless one of it is or
    /// `max_running` are: the key it ends with
    /// ([`end_refresh`](Self::end_refresh)), if it may start.
    pub(crate) fn start_refresh<Q: CachedQuery + ?Sized>(
        &self,
        query: &Q,
        eager: EagerRefresh,
    ) -> Option<Key> {
        let max = eager.max_running;
        let key = query.cache_key(0).ok()?;
        let mut running = self
            .refreshing
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        (running.len() < max && running.insert(key.clone())).then_some(key)
    }

    /// How many eager refreshes run.
    pub(crate) fn refreshing_len(&self) -> usize {
        let running = self.refreshing.lock();
        running.unwrap_or_else(PoisonError::into_inner).len()
    }

    pub(crate) fn end_refresh(&self, key: &Key) {
        let mut running = self
            .refreshing
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        running.remove(key);
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

    /// Keeps `value` in process as `entry`'s, with its `tags`, if there is a
    /// level.
    pub(crate) fn keep_local<Q: CachedQuery + ?Sized>(
        &self,
        entry: &Entry,
        value: &Q::Value,
        fresh_until: SystemTime,
        tags: Option<Arc<TagStamp>>,
    ) {
        if let (Some(local), Some((zero, validated))) = (self.local::<Q>(), entry.local()) {
            let stored = Stored {
                value: value.clone(),
                fresh_until,
                tags,
            };
            local.insert(Key::from_canonical(zero.to_owned()), validated, stored);
        }
    }

    /// A call answers although the cache failed with `failure` on the way:
    /// counted, an event, and the hook told.
    pub(crate) fn degraded(&self, stats: Recorder<'_>, failure: &CacheError) {
        stats.degraded(failure);
        if let Some(hook) = &self.failure_hook {
            hook(failure);
        }
    }

    /// Whether a call that met `error` is answered without the cache: it is
    /// a failure of Redis (not of the key, the origin or the value), and
    /// the policy says so.
    pub(crate) fn degrades<E>(&self, error: &CacheError<E>) -> bool {
        self.failure_policy == FailurePolicy::CallOrigin && error.is_backend_failure()
    }

    /// `query`'s value in process that the fail-safe may serve while Redis
    /// cannot be read: within its freshness and `max_stale` past it, kept at
    /// the generation this cache last read for its scope, and neither
    /// bumped here nor heard bumped since it was read. Fresh or not: the
    /// caller decides (a fresh one is served, a stale one only if the
    /// origin fails too).
    pub(crate) fn outage_value<Q: CachedQuery + ?Sized>(
        &self,
        query: &Q,
    ) -> Option<Stored<Q::Value>> {
        let max_stale = self.fail_safe?.max_stale;
        let local = self.local::<Q>()?;
        let mut out = String::with_capacity(128);
        let draft = KeyDraft::write(query, &mut out).ok()?;
        let (validated, stored) = local.kept(draft.key(&out))?;
        let counters = draft.counters(&out);
        let last_read = self.guesses.slot(&counters).load(Ordering::Relaxed);
        let mut name = String::with_capacity(64);
        let mut bumped = |counter: Counter<'_>| {
            name.clear();
            counter.write_name(&mut name);
            self.source
                .invalidations
                .bumped_since(&name, validated.since)
        };
        let value_tags = stored.tags.as_deref().map(|stamp| &stamp.tags);
        let bumped = counters.iter().any(&mut bumped)
            || value_tags.is_some_and(|tags| {
                tag_counters(counters, tags).any(|(counter, _)| bumped(counter))
            });
        let in_window = SystemTime::now() < stored.fresh_until + max_stale;
        (validated.generation == last_read && !bumped && in_window).then_some(stored)
    }

    /// A stale value that the fail-safe may still serve, if `stored` is one.
    pub(crate) fn fallback<V>(&self, stored: Stored<V>) -> Option<Stored<V>> {
        let window = self.fail_safe?.max_stale;
        (SystemTime::now() < stored.fresh_until + window).then_some(stored)
    }

    /// `query`'s fresh value (and until when it is fresh) from the
    /// in-process level, found over tracked counters without an exchange
    /// (counted as a hit); `None` when a
    /// [`keyed_read`](Self::keyed_read) must find out.
    pub(crate) fn tracked_hit<Q: CachedQuery + ?Sized>(
        &self,
        query: &Q,
    ) -> Option<Stored<Q::Value>> {
        let tracked = self.source.tracked()?;
        // Past its freshness, it is left to the read: reloaded, or kept for
        // the fail-safe.
        let stored = tracked_local(query, tracked, self.local::<Q>()?)?;
        self.stats.of::<Q>().hit(true);
        Some(stored)
    }

    /// A read of `query`'s entry at its current generation.
    pub(crate) fn keyed_read<'q, Q: CachedQuery + ?Sized>(
        &self,
        query: &'q Q,
    ) -> Result<KeyedRead<'q, '_, Q>, GenerationError> {
        KeyedRead::new(query, &self.source, &self.guesses, self.local::<Q>())
            .inspect_err(|error| self.stats.of::<Q>().error(error))
    }

    /// What an insert of `Q` ended with: a failure of Redis is reported,
    /// and returned only if the policy says so.
    pub(crate) fn count_insert<Q: CachedQuery + ?Sized>(
        &self,
        inserted: Result<(), CacheError<Infallible>>,
    ) -> Result<(), CacheError<Infallible>> {
        let stats = self.stats.of::<Q>();
        match inserted {
            Err(error) if self.degrades(&error) => {
                self.degraded(stats, &error);
                Ok(())
            }
            Err(error) => {
                stats.error(&error);
                Err(error)
            }
            Ok(()) => Ok(()),
        }
    }

    /// A write of `value` as `query`'s entry at its current generation
    /// ([`count_insert`](Self::count_insert) counts how it ends).
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
        .map(|insert| insert.with_max_tags(self.max_tags))
    }

    /// Counts what a read of `Q` found, and hands on its value if it was a
    /// hit; a failure of Redis is a miss unless the policy returns it.
    pub(crate) fn count_read<Q: CachedQuery + ?Sized>(
        &self,
        query: &Q,
        read: Result<Read<Q::Value>, CacheError<Infallible>>,
    ) -> Result<Option<Q::Value>, CacheError<Infallible>> {
        let stats = self.stats.of::<Q>();
        let read = match read {
            Ok(read) => read,
            Err(error) if self.degrades(&error) => {
                self.degraded(stats, &error);
                let kept = self.outage_value(query).filter(Stored::is_fresh);
                if kept.is_some() {
                    stats.stale();
                } else {
                    stats.miss();
                }
                return Ok(kept.map(|stored| stored.value));
            }
            Err(error) => {
                stats.error(&error);
                return Err(error);
            }
        };
        Ok(match read {
            Read::Hit { stored, local, .. } => {
                stats.hit(local);
                Some(stored.value)
            }
            Read::Miss { missed, .. } => {
                if let Missed::Rejected(reason) = missed {
                    stats.reject(reason);
                }
                stats.miss();
                None
            }
        })
    }
}
