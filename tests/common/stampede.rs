//! Many callers missing one cold key at once, for the coalescing tests of
//! the typed cache backends.

use std::sync::Barrier;
use std::thread;
use std::time::{Duration, Instant};

use std::fmt::Debug;
use std::sync::Arc;

use cache_key::cache::{CacheError, Stats};

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

/// The one origin error every answer carries (the same `Arc`, so one origin
/// call), or a panic naming the first answer that is something else.
pub fn one_shared_error<T: Debug, E: Debug>(answers: &[Result<T, CacheError<E>>]) -> Arc<E> {
    let first = match &answers[0] {
        Err(CacheError::Origin(e)) => e.clone(),
        other => panic!("expected the origin's error, got {other:?}"),
    };
    for answer in answers {
        assert!(
            matches!(answer, Err(CacheError::Origin(e)) if Arc::ptr_eq(e, &first)),
            "expected the first caller's error, got {answer:?}"
        );
    }
    first
}
