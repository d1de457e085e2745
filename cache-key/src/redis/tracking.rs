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

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{PoisonError, RwLock};
use std::time::Duration;

/// The channel every counter write is published on, the counter's name as
/// the message.
pub(crate) const CHANNEL: &str = "cache-key:counters";

/// How tracked counters are kept (see [`RedisGenerations::with_tracking`]).
///
/// [`RedisGenerations::with_tracking`]: super::RedisGenerations::with_tracking
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tracking {
    heartbeat: Duration,
}

impl Default for Tracking {
    fn default() -> Self {
        Tracking {
            heartbeat: Duration::from_millis(100),
        }
    }
}

impl Tracking {
    /// How long the subscription may stay silent before the listener
    /// `PING`s it, and the `PING` may take before the subscription is taken
    /// for dead (default 100 ms, at least 1 ms): a silent failure stops
    /// counters kept here from being used within two heartbeats.
    pub fn heartbeat(mut self, heartbeat: Duration) -> Self {
        self.heartbeat = heartbeat.max(Duration::from_millis(1));
        self
    }

    /// The heartbeat.
    pub fn heartbeat_of(&self) -> Duration {
        self.heartbeat
    }
}

/// The counters kept in process, and whether they may be used.
#[derive(Debug, Default)]
pub(crate) struct Tracked {
    values: RwLock<HashMap<Box<str>, u64, foldhash::fast::RandomState>>,
    alive: AtomicBool,
    /// Raised by every message and every change of the subscription.
    changes: AtomicU64,
}

impl Tracked {
    /// The change count now, to pass to [`keep`](Self::keep) after a read.
    pub(crate) fn changes(&self) -> u64 {
        self.changes.load(Ordering::SeqCst)
    }

    /// Appends the values of `names` to `out` and returns `true` if every
    /// one is kept and may be used (`out` is then whole; else partial).
    pub(crate) fn values<'n>(
        &self,
        names: impl Iterator<Item = &'n str>,
        out: &mut impl Extend<u64>,
    ) -> bool {
        if !self.alive.load(Ordering::SeqCst) {
            return false;
        }
        let values = self.values.read().unwrap_or_else(PoisonError::into_inner);
        for name in names {
            match values.get(name) {
                Some(&value) => out.extend([value]),
                None => return false,
            }
        }
        true
    }

    /// Keeps `read` (name, value pairs read from Redis) if nothing changed
    /// since `changes` and the subscription is alive.
    pub(crate) fn keep<'n>(&self, changes: u64, read: impl Iterator<Item = (&'n str, u64)>) {
        let mut values = self.values.write().unwrap_or_else(PoisonError::into_inner);
        // Checked under the lock that messages take too.
        if self.changes.load(Ordering::SeqCst) != changes || !self.alive.load(Ordering::SeqCst) {
            return;
        }
        for (name, value) in read {
            values.insert(name.into(), value);
        }
    }

    /// `name` changed: drop it.
    pub(crate) fn changed(&self, name: &str) {
        let mut values = self.values.write().unwrap_or_else(PoisonError::into_inner);
        self.changes.fetch_add(1, Ordering::SeqCst);
        values.remove(name);
    }

    /// The subscription is up (again): counters read from now on may be kept.
    pub(crate) fn subscribed(&self) {
        let mut values = self.values.write().unwrap_or_else(PoisonError::into_inner);
        self.changes.fetch_add(1, Ordering::SeqCst);
        values.clear();
        self.alive.store(true, Ordering::SeqCst);
    }

    /// The subscription is lost: nothing kept may be used.
    pub(crate) fn lost(&self) {
        let mut values = self.values.write().unwrap_or_else(PoisonError::into_inner);
        self.alive.store(false, Ordering::SeqCst);
        self.changes.fetch_add(1, Ordering::SeqCst);
        values.clear();
    }

    /// Whether counters kept here are used now.
    pub(crate) fn is_alive(&self) -> bool {
        self.alive.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(tracked: &Tracked, names: [&str; 2]) -> Option<Vec<u64>> {
        let mut out = Vec::new();
        tracked.values(names.into_iter(), &mut out).then_some(out)
    }

    #[test]
    fn counters_are_used_only_while_the_subscription_lives() {
        let tracked = Tracked::default();
        let names = ["a", "b"];
        let changes = tracked.changes();
        tracked.keep(changes, [("a", 1), ("b", 2)].into_iter());
        assert_eq!(values(&tracked, names), None, "not subscribed");

        tracked.subscribed();
        let changes = tracked.changes();
        tracked.keep(changes, [("a", 1), ("b", 2)].into_iter());
        assert_eq!(values(&tracked, names), Some(vec![1, 2]));

        tracked.changed("b");
        assert_eq!(values(&tracked, names), None);
        // A read that began before the message is not kept.
        tracked.keep(changes, [("b", 2)].into_iter());
        assert_eq!(values(&tracked, names), None);
        let changes = tracked.changes();
        tracked.keep(changes, [("b", 3)].into_iter());
        assert_eq!(values(&tracked, names), Some(vec![1, 3]));

        tracked.lost();
        assert_eq!(values(&tracked, names), None);
        tracked.subscribed();
        assert_eq!(values(&tracked, names), None, "cleared");
    }
}
