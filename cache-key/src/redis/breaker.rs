//! [`Breaker`]: a circuit breaker per pool, so that an outage costs callers
//! no timeout each: after calls in a row could not reach Redis, calls skip
//! it, and the pool itself probes Redis in the background (a heartbeat)
//! until it answers.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use crate::cache::BackendError;

/// When a pool stops sending to a Redis that cannot be reached, and how
/// often it probes it meanwhile (set on the pool's builder; on by default).
///
/// *Closed*, every call goes to Redis. After [`failures`](Self::with_failures)
/// calls in a row could not reach it (a timeout, a connection refused or
/// closed), the circuit *opens*: calls fail at once, without a round trip,
/// with a [`BackendError`] of kind `Unavailable` (a cache then answers from
/// the origin). While it is open the pool probes Redis itself, on a thread
/// (blocking pool) or a task (async pool) of its own, every
/// [`probe_every`](Self::with_probe_every): a fresh connection and a
/// `PING`, each bounded by the pool's timeouts. The first probe Redis
/// answers closes the circuit, so calls use Redis again within about
/// `probe_every` of its return, however long the outage was; no caller
/// ever waits on a probe.
///
/// An answer that is an error (`OOM`, `READONLY`) is an answer: Redis is
/// reachable. A pool whose connections are all busy is not an outage
/// either: such a call fails on its own, and the circuit stays closed.
///
/// ```
/// use std::time::Duration;
/// use cache_key::redis::{Breaker, RedisPool};
///
/// let pool = RedisPool::builder()
///     .breaker(Breaker::default().with_failures(5).with_probe_every(Duration::from_millis(100)))
///     .open("redis://127.0.0.1/")?;
/// # Ok::<(), redis::RedisError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Breaker {
    failures: u32,
    probe_every: Duration,
}

impl Default for Breaker {
    /// Open after 3 failures in a row; probe every 250 ms while open.
    fn default() -> Self {
        Breaker {
            failures: 3,
            probe_every: Duration::from_millis(250),
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

    /// How long the pool waits between two probes while the circuit is
    /// open (at least 10 ms).
    pub fn with_probe_every(mut self, every: Duration) -> Self {
        self.probe_every = every.max(Duration::from_millis(10));
        self
    }

    /// Failures in a row that open the circuit.
    pub fn failures(&self) -> u32 {
        self.failures
    }

    /// How long the pool waits between two probes while the circuit is
    /// open.
    pub fn probe_every(&self) -> Duration {
        self.probe_every
    }
}

/// One probe of Redis, as a future: whether it answered.
pub(crate) type ProbeFuture = Pin<Box<dyn Future<Output = bool> + Send>>;

/// How a pool's heartbeat probes Redis: on a thread of its own (the
/// blocking pool), or as a task on the pool's runtime (the async pool).
pub(crate) enum Probe {
    Blocking(Box<dyn Fn() -> bool + Send + Sync>),
    #[cfg_attr(not(feature = "redis-async"), allow(dead_code))]
    Async(
        tokio_handle::Handle,
        Box<dyn Fn() -> ProbeFuture + Send + Sync>,
    ),
}

/// The runtime handle type, named once so that the blocking-only build
/// names none.
#[cfg(feature = "redis-async")]
mod tokio_handle {
    pub(crate) type Handle = tokio::runtime::Handle;
}
#[cfg(not(feature = "redis-async"))]
mod tokio_handle {
    pub(crate) enum Handle {}
}

/// A pool's circuit: one atomic load per call while it is closed.
pub(crate) struct Circuit {
    breaker: Breaker,
    /// Calls in a row that could not reach Redis.
    failed: AtomicU32,
    /// Set when the circuit opens, cleared by the heartbeat's first
    /// answered probe; exactly one heartbeat runs while it is set.
    open: AtomicBool,
    probe: Probe,
}

impl std::fmt::Debug for Circuit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Circuit")
            .field("breaker", &self.breaker)
            .field("open", &self.open.load(Ordering::Relaxed))
            .finish()
    }
}

impl Circuit {
    pub(crate) fn new(breaker: Breaker, probe: Probe) -> Arc<Self> {
        Arc::new(Circuit {
            breaker,
            failed: AtomicU32::new(0),
            open: AtomicBool::new(false),
            probe,
        })
    }

    /// Whether a call may go to Redis now; the error it fails with if not.
    #[inline]
    pub(crate) fn admit(&self) -> Result<(), BackendError> {
        if !self.open.load(Ordering::Acquire) {
            return Ok(());
        }
        let what = format!(
            "Redis is skipped: {} calls in a row could not reach it, and the pool probes it every {:?}",
            self.breaker.failures, self.breaker.probe_every
        );
        Err(BackendError::unavailable(what))
    }

    /// What an admitted call found: whether Redis answered it.
    #[inline]
    pub(crate) fn record(self: &Arc<Self>, reached: bool) {
        if reached {
            // Written only after failures, so that calls share the line unwritten.
            if self.failed.load(Ordering::Relaxed) != 0 {
                self.failed.store(0, Ordering::Relaxed);
            }
            return;
        }
        let failed = self.failed.fetch_add(1, Ordering::Relaxed) + 1;
        if failed >= self.breaker.failures
            && self
                .open
                .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
        {
            self.start_heartbeat();
        }
    }

    /// Closes the circuit: Redis answered a probe.
    fn close(&self) {
        self.failed.store(0, Ordering::Relaxed);
        self.open.store(false, Ordering::Release);
    }

    /// Probes Redis every `probe_every` until it answers, then closes the
    /// circuit. It holds the circuit weakly: a pool dropped during an
    /// outage ends its heartbeat at the next beat.
    fn start_heartbeat(self: &Arc<Self>) {
        let circuit = Arc::downgrade(self);
        let every = self.breaker.probe_every;
        match &self.probe {
            Probe::Blocking(_) => {
                let spawned = std::thread::Builder::new()
                    .name("cache-key-heartbeat".into())
                    .spawn(move || beat_blocking(circuit, every));
                if spawned.is_err() {
                    // No thread to probe with: calls go to Redis again.
                    self.close();
                }
            }
            #[cfg(feature = "redis-async")]
            Probe::Async(runtime, _) => {
                runtime.spawn(beat_async(circuit, every));
            }
            #[cfg(not(feature = "redis-async"))]
            Probe::Async(never, _) => match *never {},
        }
    }

    /// Whether the circuit is open now.
    pub(crate) fn is_open(&self) -> bool {
        self.open.load(Ordering::Acquire)
    }
}

/// The blocking heartbeat: a beat, then a probe, until one is answered.
fn beat_blocking(circuit: Weak<Circuit>, every: Duration) {
    loop {
        std::thread::sleep(every);
        let Some(circuit) = circuit.upgrade() else {
            return;
        };
        let Probe::Blocking(probe) = &circuit.probe else {
            unreachable!("a blocking heartbeat runs for a blocking probe")
        };
        if probe() {
            circuit.close();
            return;
        }
    }
}

/// The async heartbeat, as [`beat_blocking`], on the pool's runtime.
#[cfg(feature = "redis-async")]
async fn beat_async(circuit: Weak<Circuit>, every: Duration) {
    loop {
        tokio::time::sleep(every).await;
        // Upgraded for the probe alone: the pool may go while it waits.
        let probe = match circuit.upgrade() {
            Some(circuit) => match &circuit.probe {
                Probe::Async(_, probe) => probe(),
                Probe::Blocking(_) => unreachable!("an async heartbeat runs for an async probe"),
            },
            None => return,
        };
        if probe.await {
            if let Some(circuit) = circuit.upgrade() {
                circuit.close();
            }
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::BackendErrorKind;
    use std::sync::mpsc;

    /// A circuit whose probes report to `asked` and answer what `answer`
    /// sends them.
    fn circuit(answer: mpsc::Receiver<bool>, asked: mpsc::Sender<()>) -> Arc<Circuit> {
        let answer = std::sync::Mutex::new(answer);
        let probe = Probe::Blocking(Box::new(move || {
            let _ = asked.send(());
            answer.lock().unwrap().recv().unwrap_or(false)
        }));
        let breaker = Breaker::default()
            .with_failures(2)
            .with_probe_every(Duration::from_millis(10));
        Circuit::new(breaker, probe)
    }

    #[test]
    fn failures_in_a_row_open_it_and_an_answer_in_between_does_not() {
        let (_answer, answers) = mpsc::channel();
        let (asked, _probes) = mpsc::channel();
        let circuit = circuit(answers, asked);
        circuit.record(false);
        circuit.record(true);
        circuit.record(false);
        assert!(!circuit.is_open(), "not in a row");
        circuit.record(false);
        assert!(circuit.is_open());
        let skipped = circuit.admit().unwrap_err();
        assert_eq!(skipped.kind(), BackendErrorKind::Unavailable);
    }

    #[test]
    fn the_heartbeat_probes_until_answered_and_then_closes_it() {
        let (answer, answers) = mpsc::channel();
        let (asked, probes) = mpsc::channel();
        let circuit = circuit(answers, asked);
        circuit.record(false);
        circuit.record(false);
        // Unanswered probes keep it open, and calls skip Redis meanwhile.
        for _ in 0..3 {
            probes.recv().unwrap();
            assert!(circuit.admit().is_err());
            answer.send(false).unwrap();
        }
        probes.recv().unwrap();
        answer.send(true).unwrap();
        // The heartbeat closes it, then ends: no probe is asked for again.
        while circuit.is_open() {
            std::thread::yield_now();
        }
        assert!(circuit.admit().is_ok());
        // The probe (and its sender) goes with the circuit: had the
        // heartbeat gone on, it would have asked once more first.
        drop((answer, circuit));
        assert!(probes.recv().is_err(), "the heartbeat ended with its probe");
    }
}
