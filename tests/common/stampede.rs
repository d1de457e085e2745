//! Many callers missing one cold key at once, for the coalescing tests of
//! the typed cache backends.

use std::sync::Barrier;
use std::thread;
use std::time::{Duration, Instant};

use cache_key::cache::Stats;

/// How many callers a stampede has.
pub const CALLERS: usize = 200;

/// Runs `call` on `CALLERS` threads released at once, and returns each answer.
pub fn stampede<T: Send>(call: impl Fn() -> T + Sync) -> Vec<T> {
    let start = Barrier::new(CALLERS);
    thread::scope(|scope| {
        let handles: Vec<_> = (0..CALLERS)
            .map(|_| {
                scope.spawn(|| {
                    start.wait();
                    call()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

/// Blocks until `stats()` has counted `misses` misses (every caller has
/// missed), then a little longer so the last ones reach the loader. This makes
/// the counts a property of the cache, not of the scheduler.
pub fn until_misses(stats: impl Fn() -> Stats, misses: u64) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while stats().misses < misses {
        assert!(Instant::now() < deadline, "only {:?}", stats());
        thread::sleep(Duration::from_millis(1));
    }
    thread::sleep(Duration::from_millis(20));
}
