//! [`Invalidations`]: what this process knows of invalidations: bumps that
//! could not reach Redis, sent again before any counter read is trusted,
//! and when each scope was last bumped here or heard bumped, against which
//! the level in process judges what it may serve while Redis is out.

use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use foldhash::fast::FixedState;

/// Counters to bump again at most; past it, a counter's namespace is bumped
/// again instead (which covers it), so the list stays bounded.
const MAX_PENDING: usize = 1024;

/// Slots of the last-bump table: scopes sharing a slot share a time, which
/// only makes the level in process serve less in an outage.
const SLOTS: usize = 4096;

/// What a store (and every cache made from it) knows of invalidations.
#[derive(Debug)]
pub(crate) struct Invalidations {
    pending: Mutex<Vec<Pending>>,
    has_pending: AtomicBool,
    /// Raised by every bump made or heard: a time in events, not seconds.
    seq: AtomicU64,
    /// The `seq` of each slot's last bump.
    last: Box<[AtomicU64]>,
    hasher: FixedState,
}

/// A bump that did not return `Ok`: its counter's name, and its
/// namespace's counter's name.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Pending {
    name: Box<str>,
    namespace: Box<str>,
}

impl Default for Invalidations {
    fn default() -> Self {
        Invalidations {
            pending: Mutex::default(),
            has_pending: AtomicBool::new(false),
            seq: AtomicU64::new(1),
            last: (0..SLOTS).map(|_| AtomicU64::new(0)).collect(),
            hasher: FixedState::default(),
        }
    }
}

impl Invalidations {
    fn pending(&self) -> MutexGuard<'_, Vec<Pending>> {
        // Every change is one push or retain: a panic never leaves it half-made.
        self.pending.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn slot(&self, name: &str) -> &AtomicU64 {
        let mut hasher = self.hasher.build_hasher();
        hasher.write(name.as_bytes());
        &self.last[(hasher.finish() as usize) % SLOTS]
    }

    /// The time now: read when a read starts, before its counters are
    /// sent, so that a bump that ends after it is later.
    pub(crate) fn now(&self) -> u64 {
        self.seq.load(Ordering::SeqCst)
    }

    /// A bump of `name` ended (whether it reached Redis or not), or was
    /// heard of (tracking).
    pub(crate) fn bumped(&self, name: &str) {
        let at = self.seq.fetch_add(1, Ordering::SeqCst) + 1;
        self.slot(name).fetch_max(at, Ordering::SeqCst);
    }

    /// Whether `name` was bumped, here or heard of, after `since`.
    pub(crate) fn bumped_since(&self, name: &str, since: u64) -> bool {
        self.slot(name).load(Ordering::SeqCst) > since
    }

    /// A bump of `name` (in the namespace whose counter is `namespace`)
    /// that did not return `Ok`: it may not have reached Redis, so it is
    /// sent again before any read is trusted.
    pub(crate) fn failed(&self, name: &str, namespace: &str) {
        let mut pending = self.pending();
        let name = match pending.len() < MAX_PENDING {
            true => name,
            false => namespace,
        };
        if pending.iter().all(|known| &*known.name != name) {
            pending.push(Pending {
                name: name.into(),
                namespace: namespace.into(),
            });
        }
        self.has_pending.store(true, Ordering::SeqCst);
    }

    /// Whether bumps wait to be sent again: until they are, no counter read
    /// is trusted, and no tracked counter either.
    #[inline]
    pub(crate) fn has_pending(&self) -> bool {
        self.has_pending.load(Ordering::SeqCst)
    }

    /// The names of the bumps to send again.
    pub(crate) fn to_replay(&self) -> Vec<Box<str>> {
        self.pending()
            .iter()
            .map(|known| known.name.clone())
            .collect()
    }

    /// `names` were bumped again, and returned `Ok`.
    pub(crate) fn replayed(&self, names: &[Box<str>]) {
        let mut pending = self.pending();
        pending.retain(|known| !names.contains(&known.name));
        self.has_pending
            .store(!pending.is_empty(), Ordering::SeqCst);
    }

    /// How many bumps wait to be sent again.
    pub(crate) fn pending_len(&self) -> usize {
        self.pending().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bump_after_a_read_began_is_later_than_it() {
        let known = Invalidations::default();
        known.bumped("a:g:t{1}");
        let read = known.now();
        assert!(!known.bumped_since("a:g:t{1}", read), "before the read");
        known.bumped("a:g:t{1}");
        assert!(known.bumped_since("a:g:t{1}", read));
        assert!(!known.bumped_since("a:g:t{2}", read), "another scope");
    }

    #[test]
    fn failed_bumps_wait_until_replayed_and_stay_bounded() {
        let known = Invalidations::default();
        assert!(!known.has_pending());
        known.failed("a:g:t{1}", "a:g");
        known.failed("a:g:t{1}", "a:g");
        assert_eq!(known.to_replay(), [Box::<str>::from("a:g:t{1}")]);
        for i in 0..2 * MAX_PENDING {
            known.failed(&format!("b:g:t{{{i}}}"), "b:g");
        }
        // Past the bound, the namespace's counter stands for the rest.
        assert_eq!(known.pending_len(), MAX_PENDING + 1);
        assert!(known.to_replay().contains(&Box::<str>::from("b:g")));
        let names = known.to_replay();
        known.replayed(&names);
        assert!(!known.has_pending());
    }
}
