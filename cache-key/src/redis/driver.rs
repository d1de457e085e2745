//! [`Driver`]: the I/O under the protocol's exchanges (a read, a load, an
//! insert, a bump, a sweep), each written once as an async function over it.
//! The async pool's futures wait on tokio; the blocking pool's are ready when
//! made (the call blocks), and [`ready_now`] runs the protocol to its end.

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use ::redis::cluster_routing::RoutingInfo;
use ::redis::{Cmd, Value};

use super::batch::{Batch, Exchange, Sent};
use super::flight::{Waited, Waiter};
use super::lock::Lease;
use crate::cache::BackendError;

/// What the protocol asks of a pool, each wait a future.
pub(crate) trait Driver: Sync {
    /// Sends `batch` by `deadline`; its replies, or why there are none.
    fn send(&self, batch: Batch, deadline: Instant) -> impl Future<Output = Sent> + Send;

    /// `command` alone, within one call's time bound: on a server, or on
    /// a cluster where `routing` says (its keys' slots for `None`).
    fn command(
        &self,
        command: &Cmd,
        routing: Option<RoutingInfo>,
    ) -> impl Future<Output = Result<Value, BackendError>> + Send;

    /// When a call starting now must be over: each stretch of Redis work
    /// between two waits (an origin call, another caller's flight, a
    /// sleep) is one call's worth of time.
    fn deadline(&self) -> Instant;

    /// Waits until another caller's flight lands or is left to this one.
    fn wait<'f>(&self, waiter: Waiter<'f>) -> impl Future<Output = Waited<'f>> + Send;

    /// Waits `pause` (a load polling a lock another process holds).
    fn sleep(&self, pause: Duration) -> impl Future<Output = ()> + Send;

    /// Releases `lease`, which a load left without releasing it (it
    /// panicked, or its future was dropped), without waiting: a drop cannot.
    /// Should that fail, the lease expires.
    fn release(&self, lease: Lease);
}

/// Drives `exchange` to its end on `driver`, a batch at a time, by
/// `deadline`. (A function, not a method of [`Driver`], so that its future
/// is `Send` exactly when the exchange is: the blocking driver's need not be.)
pub(crate) async fn exchange_by<D: Driver, X: Exchange>(
    driver: &D,
    exchange: &mut X,
    deadline: Instant,
) -> X::Output {
    loop {
        let mut batch = Batch::default();
        exchange.send(&mut batch);
        if let Some(output) = exchange.receive(driver.send(batch, deadline).await) {
            return output;
        }
    }
}

/// Drives `exchange` to its end on `driver` within one call's time bound.
pub(crate) async fn exchange<D: Driver, X: Exchange>(driver: &D, exchange: &mut X) -> X::Output {
    exchange_by(driver, exchange, driver.deadline()).await
}

/// The output of `future`, whose every step is ready at once (the blocking
/// driver's): polled until it is, never waiting on a waker.
pub(crate) fn ready_now<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    let mut context = Context::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut context) {
            return output;
        }
        std::thread::yield_now();
    }
}
