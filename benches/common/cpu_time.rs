//! Criterion's measurement of the benchmark thread's CPU time
//! (`clock_gettime(CLOCK_THREAD_CPUTIME_ID)`), for benches on a shared
//! machine, where a wall-clock sample also counts the time other processes
//! held the core. Included by the benches with `#[path]`.

use criterion::measurement::{Measurement, ValueFormatter};

/// The CPU time the current thread has run, in nanoseconds.
fn thread_cpu_ns() -> u64 {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `now` is a valid `timespec` for the call to write.
    let status = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) };
    assert_eq!(status, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID)");
    now.tv_sec as u64 * 1_000_000_000 + now.tv_nsec as u64
}

/// Criterion's measurement of the thread's CPU time, in nanoseconds.
pub struct ThreadCpuTime;

impl Measurement for ThreadCpuTime {
    type Intermediate = u64;
    type Value = u64;

    fn start(&self) -> u64 {
        thread_cpu_ns()
    }

    fn end(&self, start: u64) -> u64 {
        thread_cpu_ns() - start
    }

    fn add(&self, a: &u64, b: &u64) -> u64 {
        a + b
    }

    fn zero(&self) -> u64 {
        0
    }

    fn to_f64(&self, value: &u64) -> f64 {
        *value as f64
    }

    fn formatter(&self) -> &dyn ValueFormatter {
        &Nanoseconds
    }
}

/// Values in nanoseconds, shown as such.
struct Nanoseconds;

impl ValueFormatter for Nanoseconds {
    fn scale_values(&self, _typical: f64, _values: &mut [f64]) -> &'static str {
        "ns (CPU)"
    }

    fn scale_throughputs(
        &self,
        _typical: f64,
        _throughput: &criterion::Throughput,
        _values: &mut [f64],
    ) -> &'static str {
        "ns (CPU)"
    }

    fn scale_for_machines(&self, _values: &mut [f64]) -> &'static str {
        "ns"
    }
}
