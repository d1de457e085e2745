//! Tracked counters (opt-in): counters kept in process and dropped when
//! Redis says they changed, so that a read whose counters are all here makes
//! no round trip for them.
//!
//! Every write of a counter (a bump, a raise) publishes the counter's name
//! on [`CHANNEL`] from the counter script itself, in the same step as the
//! write. A listener subscribed to it drops that counter here. Its promise
//! is weaker than a strict read's: another process's bump is seen here once
//! its message arrives, not at once. It fails closed:
//!
//! - the counters kept are used only while the subscription is known to be
//!   alive: a message, or an answered `PING` within the heartbeat, proves
//!   it; a connection that drops or stops answering drops every counter
//!   here, and reads are strict until the listener has subscribed again;
//! - a counter read from Redis is kept only if nothing changed while it was
//!   read (no message arrived, the subscription stayed up), since its
//!   message could otherwise have been handled before the stale reply;
//! - a bump made here drops its counter here before it returns.
//!
//! So a read can miss another process's bump for as long as the message
//! takes (measured in BENCHMARKS.md), or, when the subscription silently
//! stops, for up to two heartbeats.
//!
//! On a Redis Cluster the listener subscribes through one node: `PUBLISH`
//! (not the sharded `SPUBLISH`) is broadcast to every node over the cluster
//! bus, so one subscription hears every primary's counter writes, a longer
//! trip than on one server. When that node goes, the listener subscribes
//! through the next node it was given.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use foldhash::fast::{FixedState, RandomState};
use smallvec::SmallVec;

use super::invalidations::Invalidations;
use crate::generation::{Counters, GenerationSum};

/// The channel every counter write is published on, the counter's name as
/// the message.
pub(crate) const CHANNEL: &str = "cache-key:counters";

/// How tracked counters are kept (see [`RedisGenerations::tracked`]).
///
/// [`RedisGenerations::tracked`]: super::RedisGenerations::tracked
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tracking {
    heartbeat: Duration,
    max_counters: usize,
}

impl Default for Tracking {
    fn default() -> Self {
        Tracking {
            heartbeat: Duration::from_millis(100),
            max_counters: 1 << 16,
        }
    }
}

impl Tracking {
    /// How long the subscription may stay silent before the listener
    /// `PING`s it, and the `PING` may take before the subscription is taken
    /// for dead (default 100 ms, at least 1 ms): a silent failure stops
    /// counters kept here from being used within two heartbeats.
    pub fn with_heartbeat(mut self, heartbeat: Duration) -> Self {
        self.heartbeat = heartbeat.max(Duration::from_millis(1));
        self
    }

    /// The most counters kept in process (default 65,536, at least 1), and
    /// the most queries' counters resolved: past either bound everything
    /// kept is dropped at once, and read from Redis again by the next read
    /// of each query. Memory stays bounded whatever the number of tenants.
    pub fn with_max_counters(mut self, max_counters: usize) -> Self {
        self.max_counters = max_counters.max(1);
        self
    }

    /// The heartbeat.
    pub fn heartbeat(&self) -> Duration {
        self.heartbeat
    }

    /// The most counters kept.
    pub fn max_counters(&self) -> usize {
        self.max_counters
    }
}

/// The counters kept in process, and whether they may be used.
#[derive(Debug, Default)]
pub(crate) struct Tracked {
    /// The most counters, and the most resolutions, kept at once.
    max: usize,
    /// Where a message is noted as an invalidation heard of.
    invalidations: Arc<Invalidations>,
    table: RwLock<Table>,
    alive: AtomicBool,
    /// Raised by every message and every change of the subscription.
    changes: AtomicU64,
    /// Raised, under the write lock and after the change, whenever a value
    /// kept stops being current or the subscription changes: a generation
    /// confirmed at one epoch stays right while the epoch is the same.
    epoch: Epoch,
    /// Finds a query's resolution by its namespace, tenant and operation.
    hasher: RandomState,
}

/// The epoch's counter: it starts at 1, so that 0 is no epoch (the stamp
/// of an entry never confirmed).
#[derive(Debug)]
struct Epoch(AtomicU64);

impl Default for Epoch {
    fn default() -> Self {
        Epoch(AtomicU64::new(1))
    }
}

impl Epoch {
    fn raise(&self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

#[derive(Debug, Default)]
struct Table {
    /// Each counter kept, by name.
    values: HashMap<Box<str>, Arc<Kept>, RandomState>,
    /// Queries' counters resolved to what is kept for them, by
    /// [`Tracked::hash`]; several when hashes collide.
    resolved: HashMap<u64, SmallVec<[Resolved; 1]>, FixedState>,
}

/// One counter's value as read from Redis: `current` until a message drops
/// it, another read replaces it or the subscription changes (only ever
/// changed under the write lock).
#[derive(Debug)]
struct Kept {
    value: u64,
    current: AtomicBool,
}

/// One query's counters (its namespace, tenant, operation and tags) resolved to
/// the values kept for them, and their sum: a read of the same counters
/// needs neither their names nor a lookup of each, only that every one is
/// still current.
#[derive(Debug)]
struct Resolved {
    namespace: Box<str>,
    tenant: Option<Box<str>>,
    operation: Box<str>,
    /// The query's tags, as [`Counters::tags_text`] (empty for most).
    tags: Box<str>,
    kept: SmallVec<[Arc<Kept>; 5]>,
    generation: u64,
}

impl Resolved {
    fn is(&self, counters: &Counters<'_>) -> bool {
        // The tenant first: it tells most resolutions of a bucket apart.
        self.tenant.as_deref() == counters.tenant()
            && *self.operation == *counters.operation()
            && *self.namespace == *counters.namespace()
            && *self.tags == *counters.tags_text()
    }
}

impl Tracked {
    pub(crate) fn new(tracking: Tracking, invalidations: Arc<Invalidations>) -> Self {
        Tracked {
            max: tracking.max_counters,
            invalidations,
            ..Tracked::default()
        }
    }

    /// How many counters, and queries' resolutions, are kept.
    pub(crate) fn len(&self) -> (usize, usize) {
        let table = self.table.read().unwrap_or_else(PoisonError::into_inner);
        (table.values.len(), table.resolved.len())
    }

    /// The change count now, to pass to [`keep`](Self::keep) after a read.
    pub(crate) fn changes(&self) -> u64 {
        self.changes.load(Ordering::SeqCst)
    }

    /// The epoch now, read before confirming a generation with
    /// [`generation`](Self::generation): the generation stays current while
    /// this returns the same value.
    #[inline]
    pub(crate) fn epoch(&self) -> u64 {
        self.epoch.0.load(Ordering::SeqCst)
    }

    fn hash(&self, counters: &Counters<'_>) -> u64 {
        let mut hasher = self.hasher.build_hasher();
        hasher.write(counters.namespace().as_bytes());
        hasher.write_u8(0xff);
        match counters.tenant() {
            Some(tenant) => {
                hasher.write_u8(1);
                hasher.write(tenant.as_bytes());
            }
            None => hasher.write_u8(0),
        }
        hasher.write_u8(0xff);
        hasher.write(counters.operation().as_bytes());
        hasher.write_u8(0xff);
        hasher.write(counters.tags_text().as_bytes());
        hasher.finish()
    }

    /// The generation of `counters` (the sum of their values) if every one
    /// is kept and may be used; `None` when they must be read from Redis
    /// (one is not kept, the subscription is not alive, or the sum does not
    /// fit, which the read then reports).
    pub(crate) fn generation(&self, counters: &Counters<'_>) -> Option<u64> {
        let hash = self.hash(counters);
        {
            let table = self.table.read().unwrap_or_else(PoisonError::into_inner);
            // Checked under the lock that `lost` takes too.
            if !self.alive.load(Ordering::SeqCst) {
                return None;
            }
            let found = table
                .resolved
                .get(&hash)
                .and_then(|bucket| bucket.iter().find(|resolved| resolved.is(counters)));
            if let Some(resolved) = found
                && resolved
                    .kept
                    .iter()
                    .all(|kept| kept.current.load(Ordering::Relaxed))
            {
                return Some(resolved.generation);
            }
        }
        self.resolve(counters, hash)
    }

    /// The value of each counter `names` names, if every one is kept and
    /// may be used (a value's tags: looked up each time, not resolved).
    pub(crate) fn values<'n>(
        &self,
        names: impl Iterator<Item = &'n str>,
    ) -> Option<SmallVec<[u64; 8]>> {
        let table = self.table.read().unwrap_or_else(PoisonError::into_inner);
        if !self.alive.load(Ordering::SeqCst) {
            return None;
        }
        names
            .map(|name| table.values.get(name).map(|kept| kept.value))
            .collect()
    }

    /// Looks `counters` up by name and, if every one is kept, keeps their
    /// resolution for the next read. Under the read lock: a counter not kept
    /// (the read then goes to Redis) takes no write lock.
    fn resolve(&self, counters: &Counters<'_>, hash: u64) -> Option<u64> {
        let mut names = String::with_capacity(128);
        let mut ends: SmallVec<[usize; 5]> = SmallVec::new();
        for counter in counters {
            counter.write_name(&mut names);
            ends.push(names.len());
        }
        let mut kept: SmallVec<[Arc<Kept>; 5]> = SmallVec::new();
        let mut sum = GenerationSum::default();
        {
            let table = self.table.read().unwrap_or_else(PoisonError::into_inner);
            if !self.alive.load(Ordering::SeqCst) {
                return None;
            }
            let mut start = 0;
            for end in ends {
                let counter = table.values.get(&names[start..end])?;
                sum.add(counter.value);
                kept.push(counter.clone());
                start = end;
            }
        }
        let generation = sum.finish(counters).ok()?;
        let mut table = self.table.write().unwrap_or_else(PoisonError::into_inner);
        // Anything dropped or replaced between the two locks is not current.
        let current = kept.iter().all(|kept| kept.current.load(Ordering::Relaxed));
        if !current || !self.alive.load(Ordering::SeqCst) {
            return None;
        }
        if table.resolved.len() >= self.max {
            table.resolved.clear();
        }
        let resolved = Resolved {
            namespace: counters.namespace().into(),
            tenant: counters.tenant().map(Into::into),
            operation: counters.operation().into(),
            tags: counters.tags_text().into(),
            kept,
            generation,
        };
        let bucket = table.resolved.entry(hash).or_default();
        match bucket.iter_mut().find(|old| old.is(counters)) {
            Some(old) => *old = resolved,
            None => bucket.push(resolved),
        }
        Some(generation)
    }

    /// Keeps `read` (name, value pairs read from Redis) if nothing changed
    /// since `changes` and the subscription is alive.
    pub(crate) fn keep<'n>(&self, changes: u64, read: impl Iterator<Item = (&'n str, u64)>) {
        let mut table = self.table.write().unwrap_or_else(PoisonError::into_inner);
        // Checked under the lock that messages take too.
        if self.changes.load(Ordering::SeqCst) != changes || !self.alive.load(Ordering::SeqCst) {
            return;
        }
        for (name, value) in read {
            if table
                .values
                .get(name)
                .is_some_and(|kept| kept.value == value)
            {
                continue;
            }
            if table.values.len() >= self.max && !table.values.contains_key(name) {
                // Full: start again, as after a lost subscription.
                table.clear();
                self.epoch.raise();
            }
            let kept = Arc::new(Kept {
                value,
                current: AtomicBool::new(true),
            });
            if let Some(old) = table.values.insert(name.into(), kept) {
                old.current.store(false, Ordering::Relaxed);
                self.epoch.raise();
            }
        }
    }

    /// `name` changed: drop it, and every resolution that holds it. Only a
    /// counter kept here moves the epoch: an entry is confirmed only over
    /// counters all kept, so no confirmation rests on one that is not.
    pub(crate) fn changed(&self, name: &str) {
        self.invalidations.bumped(name);
        let mut table = self.table.write().unwrap_or_else(PoisonError::into_inner);
        self.changes.fetch_add(1, Ordering::SeqCst);
        if let Some(old) = table.values.remove(name) {
            old.current.store(false, Ordering::Relaxed);
            self.epoch.raise();
        }
    }

    /// The subscription is up (again): counters read from now on may be kept.
    pub(crate) fn subscribed(&self) {
        let mut table = self.table.write().unwrap_or_else(PoisonError::into_inner);
        self.changes.fetch_add(1, Ordering::SeqCst);
        table.clear();
        self.alive.store(true, Ordering::SeqCst);
        self.epoch.raise();
    }

    /// The subscription is lost: nothing kept may be used.
    pub(crate) fn lost(&self) {
        let mut table = self.table.write().unwrap_or_else(PoisonError::into_inner);
        self.alive.store(false, Ordering::SeqCst);
        self.changes.fetch_add(1, Ordering::SeqCst);
        table.clear();
        self.epoch.raise();
    }

    /// Whether counters kept here are used now.
    pub(crate) fn is_alive(&self) -> bool {
        self.alive.load(Ordering::SeqCst)
    }
}

impl Table {
    /// Drops everything kept, each value marked not current so that no
    /// resolution holding one (even one being made) is used again.
    fn clear(&mut self) {
        for (_, kept) in self.values.drain() {
            kept.current.store(false, Ordering::Relaxed);
        }
        self.resolved.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Counters `a:g`, `a:g:t{t}` and `a:g:t{t}:o`.
    fn counters() -> Counters<'static> {
        Counters::new("a", Some("t"), "o")
    }

    fn keep(tracked: &Tracked, changes: u64, values: [u64; 3]) {
        let names = ["a:g", "a:g:t{t}", "a:g:t{t}:o"];
        tracked.keep(changes, names.into_iter().zip(values));
    }

    #[test]
    fn counters_are_used_only_while_the_subscription_lives() {
        let tracked = Tracked::new(Tracking::default(), Arc::default());
        let changes = tracked.changes();
        keep(&tracked, changes, [1, 2, 3]);
        assert_eq!(tracked.generation(&counters()), None, "not subscribed");

        tracked.subscribed();
        let changes = tracked.changes();
        keep(&tracked, changes, [1, 2, 3]);
        assert_eq!(tracked.generation(&counters()), Some(6));
        // Resolved now: the same answer until a counter changes.
        assert_eq!(tracked.generation(&counters()), Some(6));

        tracked.changed("a:g:t{t}");
        assert_eq!(tracked.generation(&counters()), None);
        // A read that began before the message is not kept.
        keep(&tracked, changes, [1, 2, 3]);
        assert_eq!(tracked.generation(&counters()), None);
        let changes = tracked.changes();
        keep(&tracked, changes, [1, 5, 3]);
        assert_eq!(tracked.generation(&counters()), Some(9));

        tracked.lost();
        assert_eq!(tracked.generation(&counters()), None);
        tracked.subscribed();
        assert_eq!(tracked.generation(&counters()), None, "cleared");
    }

    #[test]
    fn the_epoch_moves_whenever_something_kept_may_stop_being_current() {
        let tracked = Tracked::new(Tracking::default(), Arc::default());
        let mut epoch = tracked.epoch();
        assert_ne!(epoch, 0, "0 is the stamp of an entry never confirmed");
        let mut moved = |tracked: &Tracked| {
            let now = tracked.epoch();
            let moved = now != epoch;
            epoch = now;
            moved
        };
        tracked.subscribed();
        assert!(moved(&tracked), "subscribed");
        keep(&tracked, tracked.changes(), [1, 2, 3]);
        assert!(!moved(&tracked), "new values replace nothing");
        keep(&tracked, tracked.changes(), [1, 2, 3]);
        assert!(!moved(&tracked), "the same values");
        keep(&tracked, tracked.changes(), [1, 2, 4]);
        assert!(moved(&tracked), "a value replaced");
        tracked.changed("a:g");
        assert!(moved(&tracked), "a message");
        tracked.changed("not:kept");
        assert!(!moved(&tracked), "a message of a counter not kept");
        tracked.lost();
        assert!(moved(&tracked), "lost");
    }

    #[test]
    fn a_counter_read_anew_replaces_the_one_resolved() {
        let tracked = Tracked::new(Tracking::default(), Arc::default());
        tracked.subscribed();
        keep(&tracked, tracked.changes(), [1, 2, 3]);
        assert_eq!(tracked.generation(&counters()), Some(6));
        // Read again with another value (its message still on the way):
        // the resolution holding the old value is not used.
        keep(&tracked, tracked.changes(), [1, 2, 4]);
        assert_eq!(tracked.generation(&counters()), Some(7));
        // Another query of the namespace shares its counter.
        let other = Counters::new("a", None, "o");
        tracked.keep(tracked.changes(), [("a:g:t{}:o", 10)].into_iter());
        assert_eq!(tracked.generation(&other), Some(11));
        tracked.changed("a:g");
        assert_eq!(tracked.generation(&other), None);
        assert_eq!(tracked.generation(&counters()), None);
    }
}
