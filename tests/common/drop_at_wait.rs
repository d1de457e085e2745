//! Cancelling a call at each point where it waits, for the cancellation
//! tests of every crate (included by `#[path]`): its future is polled until
//! its `k`-th `Pending` and dropped there, for `k = 1, 2, ...` until it
//! finishes. Run on a current-thread runtime, so that the tasks it talks to
//! (a connection's) move only while it waits, and each wait is its own.

use std::future::{Future, poll_fn};
use std::pin::pin;
use std::task::Poll;

/// Polls `call` until it has returned `Pending` `waits + 1` times, then
/// drops it: `Some(output)` if it finished before.
pub async fn dropped_at<F: Future>(call: F, waits: usize) -> Option<F::Output> {
    let mut call = pin!(call);
    let mut left = waits;
    poll_fn(|cx| match call.as_mut().poll(cx) {
        Poll::Ready(output) => Poll::Ready(Some(output)),
        Poll::Pending if left == 0 => Poll::Ready(None),
        Poll::Pending => {
            left -= 1;
            Poll::Pending
        }
    })
    .await
}

/// Drops the call `make` gives at its first wait, then (a new call) at its
/// second, and so on, running `after(k)` after the drop at wait `k`, until
/// a call finishes; how many waits it had (0: it never waited, nothing to
/// drop). Panics past `most` waits.
pub async fn drop_at_each_wait<F: Future>(
    what: &str,
    most: usize,
    make: impl Fn() -> F,
    after: impl AsyncFn(usize),
) -> usize {
    for waits in 0..=most {
        match dropped_at(make(), waits).await {
            Some(_) => return waits,
            None => after(waits).await,
        }
    }
    panic!("{what} did not finish in {most} waits");
}
