//! [`Invalidations`]: what this process knows of invalidations: bumps not
//! confirmed by Redis (pending, each with the sequence of its last
//! failure, so that a replay retires only what it re-sent), and when each
//! scope was last bumped here or heard bumped, against which the level in
//! process judges what it may serve while Redis is out.

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
    /// Some pending bump's outcome is unknown: it is sent again before any
    /// batch, and no counter kept in process is trusted meanwhile.
    has_unknown: AtomicBool,
    /// Some pending bump was refused: reads of its scope go to the origin.
    has_refused: AtomicBool,
    /// Raised by every bump made or heard: a time in events, not seconds.
    seq: AtomicU64,
    /// The `seq` of each slot's last bump.
    last: Box<[AtomicU64]>,
    hasher: FixedState,
}

/// A bump that did not return `Ok`: its counter's name, its namespace's
/// counter's name, the `seq` of its last failure, and what is known of it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Pending {
    name: Box<str>,
    namespace: Box<str>,
    failed_at: u64,
    refused: bool,
}

impl Pending {
    /// Whether this failure is among `sent` (not failed again since).
    fn is_in(&self, sent: &[Replayed]) -> bool {
        (sent.iter()).any(|sent| sent.name == self.name && sent.failed_at == self.failed_at)
    }
}

/// A pending bump as a replay sends it: retired by that replay only if it
/// did not fail again meanwhile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Replayed {
    pub(crate) name: Box<str>,
    failed_at: u64,
}

/// How a bump ended, for [`Invalidations::ended`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Redis confirmed it.
    Done,
    /// Redis answered with an error: it was not made.
    Refused,
    /// Nobody knows: a timeout, a connection lost, a future dropped.
    Unknown,
}

impl Default for Invalidations {
    fn default() -> Self {
        Invalidations {
            pending: Mutex::default(),
            has_unknown: AtomicBool::new(false),
            has_refused: AtomicBool::new(false),
            seq: AtomicU64::new(1),
            last: (0..SLOTS).map(|_| AtomicU64::new(0)).collect(),
            hasher: FixedState::default(),
        }
    }
}

impl Invalidations {
    fn pending(&self) -> MutexGuard<'_, Vec<Pending>> {
        // Every change is one push, retain or field write: a panic never
        // leaves it half-made.
        self.pending.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Sets the flags from `pending`, under its lock.
    fn flag(&self, pending: &[Pending]) {
        let refused = pending.iter().any(|known| known.refused);
        let unknown = pending.iter().any(|known| !known.refused);
        self.has_refused.store(refused, Ordering::SeqCst);
        self.has_unknown.store(unknown, Ordering::SeqCst);
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

    /// A bump of `name` was heard of (tracking).
    pub(crate) fn bumped(&self, name: &str) -> u64 {
        let at = self.seq.fetch_add(1, Ordering::SeqCst) + 1;
        self.slot(name).fetch_max(at, Ordering::SeqCst);
        at
    }

    /// Whether `name` was bumped, here or heard of, after `since`.
    pub(crate) fn bumped_since(&self, name: &str, since: u64) -> bool {
        self.slot(name).load(Ordering::SeqCst) > since
    }

    /// A bump of `name` (in the namespace whose counter is `namespace`)
    /// ended as `outcome`. Confirmed, it also retires what was pending for
    /// `name` (this bump covers it); otherwise it is pending, with the
    /// sequence of this failure: sent again before any batch while its
    /// outcome is unknown, before the reads of its scope once refused.
    pub(crate) fn ended(&self, name: &str, namespace: &str, outcome: Outcome) {
        let at = self.bumped(name);
        let mut pending = self.pending();
        if outcome == Outcome::Done {
            pending.retain(|known| &*known.name != name);
            self.flag(&pending);
            return;
        }
        let name = match pending.len() < MAX_PENDING {
            true => name,
            false => namespace,
        };
        let refused = outcome == Outcome::Refused;
        match pending.iter_mut().find(|known| &*known.name == name) {
            Some(known) => {
                known.failed_at = at;
                known.refused = refused;
            }
            None => pending.push(Pending {
                name: name.into(),
                namespace: namespace.into(),
                failed_at: at,
                refused,
            }),
        }
        self.flag(&pending);
    }

    /// Whether a bump's outcome is unknown: until it is sent again, no
    /// counter kept in process is trusted.
    #[inline]
    pub(crate) fn has_unknown(&self) -> bool {
        self.has_unknown.load(Ordering::SeqCst)
    }

    /// Whether a refused bump waits to be sent again.
    #[inline]
    pub(crate) fn has_refused(&self) -> bool {
        self.has_refused.load(Ordering::SeqCst)
    }

    /// Whether any bump waits to be sent again.
    #[inline]
    pub(crate) fn has_pending(&self) -> bool {
        self.has_unknown() || self.has_refused()
    }

    /// Whether a refused bump is among the counters `involves` names: a
    /// read of them is not answered from counters kept in process.
    pub(crate) fn blocks(&self, involves: impl Fn(&str) -> bool) -> bool {
        self.has_refused()
            && self
                .pending()
                .iter()
                .any(|known| known.refused && involves(&known.name))
    }

    /// The bumps to send again before an exchange whose counters
    /// `involves` names: every one of unknown outcome, and the refused ones
    /// among its counters.
    pub(crate) fn to_replay(&self, involves: impl Fn(&str) -> bool) -> Vec<Replayed> {
        self.pending()
            .iter()
            .filter(|known| !known.refused || involves(&known.name))
            .map(|known| Replayed {
                name: known.name.clone(),
                failed_at: known.failed_at,
            })
            .collect()
    }

    /// `sent` were bumped again, and returned `Ok`: each is retired unless
    /// it failed again since it was taken.
    pub(crate) fn replayed(&self, sent: &[Replayed]) {
        let mut pending = self.pending();
        pending.retain(|known| !known.is_in(sent));
        self.flag(&pending);
    }

    /// `sent` were bumped again, and Redis refused them.
    pub(crate) fn refused(&self, sent: &[Replayed]) {
        let mut pending = self.pending();
        for known in pending.iter_mut().filter(|known| known.is_in(sent)) {
            known.refused = true;
        }
        self.flag(&pending);
    }

    /// How many bumps wait to be sent again.
    pub(crate) fn pending_len(&self) -> usize {
        self.pending().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn everything(_: &str) -> bool {
        true
    }

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
        known.ended("a:g:t{1}", "a:g", Outcome::Unknown);
        known.ended("a:g:t{1}", "a:g", Outcome::Unknown);
        let names = |sent: &[Replayed]| sent.iter().map(|s| s.name.clone()).collect::<Vec<_>>();
        assert_eq!(
            names(&known.to_replay(everything)),
            [Box::<str>::from("a:g:t{1}")]
        );
        for i in 0..2 * MAX_PENDING {
            known.ended(&format!("b:g:t{{{i}}}"), "b:g", Outcome::Unknown);
        }
        // Past the bound, the namespace's counter stands for the rest.
        assert_eq!(known.pending_len(), MAX_PENDING + 1);
        assert!(names(&known.to_replay(everything)).contains(&Box::<str>::from("b:g")));
        let sent = known.to_replay(everything);
        known.replayed(&sent);
        assert!(!known.has_pending());
    }

    #[test]
    fn a_replay_retires_only_the_failures_it_sent() {
        let known = Invalidations::default();
        known.ended("a:g:t{1}", "a:g", Outcome::Unknown);
        let sent = known.to_replay(everything);
        // The same scope fails again while the replay is on its way: that
        // later change is not covered by the replay.
        known.ended("a:g:t{1}", "a:g", Outcome::Unknown);
        known.replayed(&sent);
        assert!(known.has_unknown(), "the later failure is still pending");
        let again = known.to_replay(everything);
        known.replayed(&again);
        assert!(!known.has_pending());
    }

    #[test]
    fn a_confirmed_bump_covers_what_was_pending_for_its_scope() {
        let known = Invalidations::default();
        known.ended("a:g:t{1}", "a:g", Outcome::Unknown);
        known.ended("a:g:t{1}", "a:g", Outcome::Done);
        assert!(!known.has_pending());
    }

    #[test]
    fn a_refused_bump_blocks_only_its_own_scope() {
        let known = Invalidations::default();
        known.ended("a:g:t{1}", "a:g", Outcome::Refused);
        assert!(known.has_pending() && !known.has_unknown());
        let tenant_1 = |name: &str| name == "a:g:t{1}";
        let tenant_2 = |name: &str| name == "a:g:t{2}";
        assert!(known.blocks(tenant_1));
        assert!(!known.blocks(tenant_2));
        assert!(
            known.to_replay(tenant_2).is_empty(),
            "not sent before others' reads"
        );
        assert_eq!(known.to_replay(tenant_1).len(), 1);
    }
}
