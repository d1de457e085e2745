//! [`Breaker`]: a circuit breaker per pool, so that an outage costs callers
//! no timeout each: after calls in a row could not reach Redis, calls skip
//! it for a while, then one call probes it.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::cache::BackendError;
#[cfg(test)]
use crate::cache::BackendErrorKind;

/// When a pool stops sending to a Redis that cannot be reached, and when it
/// tries again (set on the pool's builder; on by default).
///
/// *Closed*, every call goes to Redis. After [`failures`](Self::with_failures)
/// calls in a row could not reach it (a timeout, a connection refused or
/// closed), the circuit *opens*: calls fail at once, without a round trip,
/// with a [`BackendError`] of kind `Unavailable` (a cache then answers from
/// the origin), for [`open_for`](Self::with_open_for). Then it is
/// *half-open*: one call probes Redis while the others still skip it. A
/// probe that gets an answer closes the circuit; one that does not opens it
/// again for twice as long, up to [`max_open_for`](Self::with_max_open_for).
/// An answer that is an error (`OOM`, `WRONGTYPE`) is an answer: Redis is
/// reachable.
///
/// ```
/// use std::time::Duration;
/// use cache_key::redis::{Breaker, RedisPool};
///
/// let pool = RedisPool::builder()
///     .breaker(Breaker::default().with_failures(5).with_open_for(Duration::from_secs(1)))
///     .open("redis://127.0.0.1/")?;
/// # Ok::<(), redis::RedisError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Breaker {
    failures: u32,
    open_for: Duration,
    max_open_for: Duration,
}

impl Default for Breaker {
    /// Open after 3 failures in a row, for 500 ms, doubling up to 30 s.
    fn default() -> Self {
        Breaker {
            failures: 3,
            open_for: Duration::from_millis(500),
            max_open_for: Duration::from_secs(30),
        }
    }
}

impl Breaker {
    /// Opens after `failures` calls in a row could not reach Redis (at
    /// least 1).
    pub fn with_failures(mut self, failures: u32) -> Self {
        self.failures = failures.max(1);
        self
    }

    /// How long the circuit first stays open (at least 1 ms).
    pub fn with_open_for(mut self, open_for: Duration) -> Self {
        self.open_for = open_for.max(Duration::from_millis(1));
        self.max_open_for = self.max_open_for.max(self.open_for);
        self
    }

    /// How long the circuit stays open at most, however many probes fail
    /// (at least `open_for`).
    pub fn with_max_open_for(mut self, max_open_for: Duration) -> Self {
        self.max_open_for = max_open_for.max(self.open_for);
        self
    }

    /// Failures in a row that open the circuit.
    pub fn failures(&self) -> u32 {
        self.failures
    }

    /// How long the circuit first stays open.
    pub fn open_for(&self) -> Duration {
        self.open_for
    }

    /// How long the circuit stays open at most.
    pub fn max_open_for(&self) -> Duration {
        self.max_open_for
    }
}

/// Whether a call may go to Redis.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Admit {
    /// The circuit is closed.
    Go,
    /// The circuit is half-open and this call is its probe.
    Probe,
}

/// A pool's circuit: one atomic load per call while it is closed.
#[derive(Debug)]
pub(crate) struct Circuit {
    breaker: Breaker,
    /// Calls in a row that could not reach Redis.
    failed: AtomicU32,
    /// Until when the circuit is open, in nanoseconds since [`origin`]; 0
    /// while it is closed.
    open_until: AtomicU64,
    /// How long it opens next, in nanoseconds.
    next_open_for: AtomicU64,
    probing: AtomicBool,
}

/// The instant circuit times are counted from.
fn origin() -> Instant {
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    *ORIGIN.get_or_init(Instant::now)
}

fn nanos(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX)
}

/// Now, in nanoseconds since [`origin`]; never 0 (the closed circuit's).
fn now() -> u64 {
    nanos(origin().elapsed()).max(1)
}

impl Circuit {
    pub(crate) fn new(breaker: Breaker) -> Self {
        Circuit {
            breaker,
            failed: AtomicU32::new(0),
            open_until: AtomicU64::new(0),
            next_open_for: AtomicU64::new(nanos(breaker.open_for)),
            probing: AtomicBool::new(false),
        }
    }

    /// Whether a call may go to Redis now; the error it fails with if not.
    pub(crate) fn admit(&self) -> Result<Admit, BackendError> {
        let until = self.open_until.load(Ordering::Acquire);
        if until == 0 {
            return Ok(Admit::Go);
        }
        let now = now();
        if now >= until
            && self
                .probing
                .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
        {
            return Ok(Admit::Probe);
        }
        let left = Duration::from_nanos(until.saturating_sub(now));
        let what = format!(
            "Redis is skipped: {} calls in a row could not reach it, and the next try is in {left:?}",
            self.breaker.failures
        );
        Err(BackendError::unavailable(what))
    }

    /// What a call admitted as `admit` found: whether Redis answered.
    pub(crate) fn record(&self, admit: Admit, reached: bool) {
        match (admit, reached) {
            (Admit::Go, true) => {
                // Written only after failures, so that calls share the line unwritten.
                if self.failed.load(Ordering::Relaxed) != 0 {
                    self.failed.store(0, Ordering::Relaxed);
                }
            }
            (Admit::Probe, true) => {
                self.failed.store(0, Ordering::Relaxed);
                self.next_open_for
                    .store(nanos(self.breaker.open_for), Ordering::Relaxed);
                self.open_until.store(0, Ordering::Release);
                self.probing.store(false, Ordering::Release);
            }
            (Admit::Go, false) => {
                let failed = self.failed.fetch_add(1, Ordering::Relaxed) + 1;
                if failed >= self.breaker.failures {
                    self.open();
                }
            }
            (Admit::Probe, false) => {
                let open_for = self.next_open_for.load(Ordering::Relaxed);
                let max = nanos(self.breaker.max_open_for);
                self.next_open_for
                    .store(open_for.saturating_mul(2).min(max), Ordering::Relaxed);
                self.open();
                self.probing.store(false, Ordering::Release);
            }
        }
    }

    /// Opens the circuit, unless it is open already.
    fn open(&self) {
        let open_for = self.next_open_for.load(Ordering::Relaxed);
        let until = now().saturating_add(open_for);
        let _ = self
            .open_until
            .compare_exchange(0, until, Ordering::AcqRel, Ordering::Acquire);
        // A failed probe reopens an open circuit.
        if self.probing.load(Ordering::Acquire) {
            self.open_until.store(until, Ordering::Release);
        }
    }

    /// Whether the circuit is open (or half-open) now.
    pub(crate) fn is_open(&self) -> bool {
        self.open_until.load(Ordering::Acquire) != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn breaker() -> Breaker {
        Breaker::default()
            .with_failures(2)
            .with_open_for(Duration::from_millis(20))
            .with_max_open_for(Duration::from_millis(50))
    }

    #[test]
    fn failures_in_a_row_open_it_and_an_answer_in_between_does_not() {
        let circuit = Circuit::new(breaker());
        circuit.record(Admit::Go, false);
        circuit.record(Admit::Go, true);
        circuit.record(Admit::Go, false);
        assert!(!circuit.is_open(), "not in a row");
        circuit.record(Admit::Go, false);
        assert!(circuit.is_open());
        let skipped = circuit.admit().unwrap_err();
        assert_eq!(skipped.kind(), BackendErrorKind::Unavailable);
    }

    #[test]
    fn one_probe_after_the_wait_closes_it_or_opens_it_longer() {
        let circuit = Circuit::new(breaker());
        circuit.record(Admit::Go, false);
        circuit.record(Admit::Go, false);
        std::thread::sleep(Duration::from_millis(25));
        assert_eq!(circuit.admit().unwrap(), Admit::Probe);
        assert!(circuit.admit().is_err(), "one probe at a time");
        circuit.record(Admit::Probe, false);
        // Open again, for 40 ms now.
        std::thread::sleep(Duration::from_millis(25));
        assert!(circuit.admit().is_err(), "opened for twice as long");
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(circuit.admit().unwrap(), Admit::Probe);
        circuit.record(Admit::Probe, true);
        assert!(!circuit.is_open());
        assert_eq!(circuit.admit().unwrap(), Admit::Go);
    }
}
