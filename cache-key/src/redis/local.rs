//! The level in process in front of Redis (feature `moka` with `redis`):
//! values of recent reads and loads, by key, on moka.
//!
//! An entry is found by the query's key at generation 0 and holds the
//! generation it was read or stored at: it answers only a read at that
//! generation, so an invalidation needs nothing here (the next read or load
//! at the new generation replaces it, and old generations take no room). A
//! read that finds a fresh entry in process sends the counters alone: the value
//! is neither transferred nor decoded; with tracked counters, nothing: an
//! entry then holds the tracked epoch its generation was last confirmed at,
//! and a hit in that epoch checks it against one atomic, not each counter.
//! Such a hit judges freshness on the coarse monotonic clock (a read of a few
//! ns, against some 35 for the wall clock): it may take an entry for fresh up
//! to one tick of that clock (1 to 10 ms on Linux, by the kernel's tick rate;
//! about 16 on Windows) past its TTL, or leave one to the exchange up to a
//! tick early, where the wall clock decides.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use super::entry::{Stored, Validated};
use super::read::LocalLevel;
use crate::cache::{MokaCaches, MokaSync};
use crate::key::Key;
use crate::tag::TagStamp;

/// The in-process level of a [`RedisCache`](super::RedisCache): at most
/// `capacity` entries per value type.
pub(crate) struct Local {
    caches: MokaCaches<MokaSync>,
}

impl Local {
    pub(crate) fn new(capacity: u64) -> Self {
        Local {
            caches: MokaCaches::new(capacity),
        }
    }

    /// The moka cache of `V` whose entries are kept `kept`.
    pub(crate) fn of<V: Clone + Send + Sync + 'static>(
        &self,
        kept: Duration,
    ) -> &moka::sync::Cache<Key, AtGeneration<V>> {
        self.caches.of::<AtGeneration<V>>(kept)
    }

    pub(crate) fn entry_count(&self) -> u64 {
        self.caches.entry_count()
    }
}

/// A value kept in process, with the generation it was read or stored at.
#[derive(Clone)]
pub(crate) struct AtGeneration<V> {
    validated: Validated,
    stored: Stored<V>,
    /// The tracked counters' epoch at which `generation` was last confirmed
    /// to be their sum (0: never), shared by every copy moka hands out.
    confirmed: Arc<AtomicU64>,
    /// `stored.fresh_until` on the coarse clock.
    fresh_by: coarsetime::Instant,
}

fn coarse_now() -> coarsetime::Instant {
    // Without the cache update, which would make every hit write one global.
    coarsetime::Instant::now_without_cache_update()
}

impl<V: Clone + Send + Sync + 'static> LocalLevel<V> for moka::sync::Cache<Key, AtGeneration<V>> {
    fn get(&self, key: &str, generation: u64) -> Option<Stored<V>> {
        moka::sync::Cache::get(self, key)
            .filter(|kept| kept.validated.generation == generation)
            .map(|kept| kept.stored)
    }

    fn kept(&self, key: &str) -> Option<(Validated, Stored<V>)> {
        moka::sync::Cache::get(self, key).map(|kept| (kept.validated, kept.stored))
    }

    fn tracked(
        &self,
        key: &str,
        epoch: u64,
        current: &mut dyn FnMut(Option<&TagStamp>) -> Option<u64>,
    ) -> Option<Stored<V>> {
        let kept = moka::sync::Cache::get(self, key)?;
        if coarse_now() >= kept.fresh_by {
            return None;
        }
        if kept.confirmed.load(Ordering::SeqCst) == epoch {
            return Some(kept.stored);
        }
        if current(kept.stored.tags.as_deref()) != Some(kept.validated.generation) {
            return None;
        }
        // Written only when confirming, so that hits share the line unwritten.
        kept.confirmed.fetch_max(epoch, Ordering::SeqCst);
        Some(kept.stored)
    }

    fn insert(&self, key: Key, validated: Validated, stored: Stored<V>) {
        let confirmed = Arc::new(AtomicU64::new(0));
        let fresh_for = (stored.fresh_until)
            .duration_since(SystemTime::now())
            .unwrap_or_default();
        let fresh_by = coarse_now().saturating_add(fresh_for.into());
        moka::sync::Cache::insert(
            self,
            key,
            AtGeneration {
                validated,
                stored,
                confirmed,
                fresh_by,
            },
        );
    }
}
