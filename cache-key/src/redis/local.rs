//! The level in process in front of Redis (feature `moka` with `redis`):
//! values of recent reads and loads, by key, on moka.
//!
//! An entry is found by the key at the generation the counters give, so an
//! invalidation needs nothing here: the new generation names other keys,
//! and the old entries age out. A read that finds the entry in process
//! sends the counters alone: the value is neither transferred nor decoded.

use std::time::Duration;

use super::entry::Stored;
use super::read::LocalLevel;
use crate::cache::{MokaCaches, MokaSync};
use crate::key::Key;

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
    ) -> &moka::sync::Cache<Key, Stored<V>> {
        self.caches.of::<Stored<V>>(kept)
    }

    pub(crate) fn entry_count(&self) -> u64 {
        self.caches.entry_count()
    }
}

impl<V: Clone + Send + Sync + 'static> LocalLevel<V> for moka::sync::Cache<Key, Stored<V>> {
    fn get(&self, key: &str) -> Option<Stored<V>> {
        moka::sync::Cache::get(self, key)
    }

    fn insert(&self, key: Key, stored: Stored<V>) {
        moka::sync::Cache::insert(self, key, stored);
    }
}
