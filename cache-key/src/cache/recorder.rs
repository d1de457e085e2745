//! What a cache counts, in total and per query type ([`CacheStats`], read as
//! [`Stats`]), and the `tracing` events it emits (feature `tracing`): origin
//! calls, rejections with their reason, stale values served, errors and
//! invalidations, each with the query type, namespace and operation as
//! fields, never a key or a criterion value.

use std::fmt::Display;
use std::sync::atomic::{AtomicU64, Ordering};

use super::once_list::OnceList;
#[cfg(feature = "redis")]
use super::stats::RejectReason;
use super::stats::Stats;
use crate::cache_key::CacheKey;

/// The atomics behind [`Stats`]; relaxed, since each counter is read alone.
/// An event adds to one of them: a hit is counted where it was answered.
#[derive(Debug, Default)]
pub(crate) struct StatsCounters {
    /// Hits not answered in process (`Stats::hits` less `local_hits`).
    shared_hits: AtomicU64,
    local_hits: AtomicU64,
    stale: AtomicU64,
    misses: AtomicU64,
    loads: AtomicU64,
    coalesced: AtomicU64,
    errors: AtomicU64,
    degraded: AtomicU64,
    rejected: [AtomicU64; 7],
}

impl StatsCounters {
    /// A hit; `local` when answered in process.
    pub(crate) fn hit(&self, local: bool) {
        let counter = if local {
            &self.local_hits
        } else {
            &self.shared_hits
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }
    #[cfg(feature = "redis")]
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
    pub(crate) fn degraded(&self) {
        self.degraded.fetch_add(1, Ordering::Relaxed);
    }
    /// Only Redis entries can be rejected: moka holds each value type apart.
    #[cfg(feature = "redis")]
    pub(crate) fn reject(&self, reason: RejectReason) {
        let i = match reason {
            RejectReason::ValueType => 0,
            RejectReason::Query => 1,
            RejectReason::Schema => 2,
            RejectReason::Version => 3,
            RejectReason::Undecodable => 4,
            RejectReason::WrongType => 5,
            RejectReason::NewTagCounter => 6,
        };
        self.rejected[i].fetch_add(1, Ordering::Relaxed);
    }
    /// Adds these counts to `stats`.
    fn add_to(&self, stats: &mut Stats) {
        let read = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        let (shared_hits, local_hits) = (read(&self.shared_hits), read(&self.local_hits));
        stats.hits += shared_hits + local_hits;
        stats.local_hits += local_hits;
        stats.stale += read(&self.stale);
        stats.misses += read(&self.misses);
        stats.loads += read(&self.loads);
        stats.coalesced += read(&self.coalesced);
        stats.errors += read(&self.errors);
        stats.degraded += read(&self.degraded);
        let rejected = &mut stats.rejected;
        rejected.value_type += read(&self.rejected[0]);
        rejected.query += read(&self.rejected[1]);
        rejected.schema += read(&self.rejected[2]);
        rejected.version += read(&self.rejected[3]);
        rejected.undecodable += read(&self.rejected[4]);
        rejected.wrong_type += read(&self.rejected[5]);
        rejected.new_tag_counter += read(&self.rejected[6]);
    }
}

/// A cache's counters, per query type; the totals are their sums, so that a
/// call adds to one counter, not to a second shared by every thread.
#[derive(Default)]
pub(crate) struct CacheStats {
    by_type: OnceList<TypeCounters>,
}

/// One query type's counters, found by its namespace and operation (unique
/// per type, see `registry::check`).
struct TypeCounters {
    namespace: &'static str,
    operation: &'static str,
    counters: StatsCounters,
}

impl CacheStats {
    /// What `Q`'s calls count with.
    pub(crate) fn of<Q: CacheKey + ?Sized>(&self) -> Recorder<'_> {
        Recorder {
            query: self.counters_of::<Q>(),
            #[cfg(feature = "tracing")]
            type_name: std::any::type_name::<Q>(),
            #[cfg(feature = "tracing")]
            namespace: Q::KEY_SCHEMA.namespace(),
            #[cfg(feature = "tracing")]
            operation: Q::KEY_SCHEMA.operation(),
        }
    }

    fn counters_of<Q: CacheKey + ?Sized>(&self) -> &StatsCounters {
        let (namespace, operation) = (Q::KEY_SCHEMA.namespace(), Q::KEY_SCHEMA.operation());
        let found = self.by_type.find(
            |entry| same(entry.namespace, namespace) && same(entry.operation, operation),
            || TypeCounters {
                namespace,
                operation,
                counters: StatsCounters::default(),
            },
        );
        &found.counters
    }

    /// Every call's counts.
    pub(crate) fn snapshot(&self) -> Stats {
        let mut stats = Stats::default();
        for entry in self.by_type.iter() {
            entry.counters.add_to(&mut stats);
        }
        stats
    }

    /// The counts of `Q`'s calls.
    pub(crate) fn snapshot_of<Q: CacheKey + ?Sized>(&self) -> Stats {
        let mut stats = Stats::default();
        self.counters_of::<Q>().add_to(&mut stats);
        stats
    }
}

/// Whether two names are the same text: found without comparing bytes when
/// they are the same `&'static str`, as one type's calls give.
#[inline]
fn same(a: &str, b: &str) -> bool {
    std::ptr::eq(a, b) || a == b
}

/// Counts one query type's calls and emits their events.
#[derive(Clone, Copy)]
pub(crate) struct Recorder<'s> {
    query: &'s StatsCounters,
    #[cfg(feature = "tracing")]
    type_name: &'static str,
    #[cfg(feature = "tracing")]
    namespace: &'static str,
    #[cfg(feature = "tracing")]
    operation: &'static str,
}

/// A `tracing` event with the query's fields (feature `tracing`).
macro_rules! event {
    ($level:ident, $recorder:expr, $message:literal $(, $($field:tt)+)?) => {
        #[cfg(feature = "tracing")]
        tracing::$level!(
            target: "cache_key",
            query = $recorder.type_name,
            namespace = $recorder.namespace,
            operation = $recorder.operation,
            $($($field)+,)?
            $message
        );
    };
}

impl Recorder<'_> {
    /// A hit; `local` when answered in process.
    pub(crate) fn hit(&self, local: bool) {
        self.query.hit(local);
    }

    pub(crate) fn miss(&self) {
        self.query.miss();
    }

    /// An origin call.
    pub(crate) fn load(&self) {
        self.query.load();
        event!(debug, self, "origin called");
    }

    pub(crate) fn coalesced(&self) {
        self.query.coalesced();
    }

    /// A value served by the fail-safe: past its freshness, the origin
    /// having failed, or unchecked, Redis having failed (Redis only: the
    /// fail-safe is the Redis cache's).
    #[cfg(feature = "redis")]
    pub(crate) fn stale(&self) {
        self.query.stale();
        event!(warn, self, "stale value served: the origin or Redis failed");
    }

    /// An entry found but not served.
    #[cfg(feature = "redis")]
    pub(crate) fn reject(&self, reason: RejectReason) {
        self.query.reject(reason);
        // A new entity's first fill is the ordinary course, not a warning.
        if reason == RejectReason::NewTagCounter {
            event!(debug, self, "entry rejected", reason = ?reason);
        } else {
            event!(warn, self, "entry rejected", reason = ?reason);
        }
    }

    /// A call that returns `error`, a [`CacheError`](super::CacheError)
    /// whose own text holds no key and no criterion: an origin's error is
    /// its source, left to the caller, who knows whether it may be logged.
    pub(crate) fn error(&self, error: &dyn Display) {
        self.query.error();
        event!(warn, self, "cache error", error = %error);
        #[cfg(not(feature = "tracing"))]
        let _ = error;
    }

    /// A call that answers although the cache failed with `failure` on the
    /// way (its text holds no key and no criterion either).
    #[cfg_attr(not(feature = "redis"), allow(dead_code))]
    pub(crate) fn degraded(&self, failure: &dyn Display) {
        self.query.degraded();
        event!(warn, self, "cache failed, call answered", error = %failure);
        #[cfg(not(feature = "tracing"))]
        let _ = failure;
    }
}

/// An invalidation of `scope` and how it went, as an event: the namespace,
/// what the scope covers and its operation; never the tenant's values.
pub(crate) fn invalidated(
    scope: &crate::generation::GenerationScope,
    result: &Result<(), crate::generation::GenerationError>,
) {
    #[cfg(feature = "tracing")]
    {
        let counter = scope.counter();
        let (namespace, kind, operation) = (counter.namespace(), scope.kind(), counter.operation());
        match result {
            Ok(()) => {
                tracing::info!(target: "cache_key", namespace, scope = ?kind, operation, "invalidated")
            }
            Err(error) => {
                tracing::warn!(target: "cache_key", namespace, scope = ?kind, operation, error = %error, "invalidation failed")
            }
        }
    }
    #[cfg(not(feature = "tracing"))]
    let _ = (scope, result);
}
