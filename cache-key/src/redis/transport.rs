//! What a driver's own failures mean: a `redis` crate error classified as a
//! [`BackendError`] (timeout, unavailable, refused), and which failures are
//! worth one more try on a fresh connection.

use std::time::Duration;

use ::redis::{ErrorKind, RedisError};

use crate::cache::{BackendError, BackendErrorKind};

/// `error`, met by a call whose time bound is `bound`, as a [`BackendError`].
pub(crate) fn classify(error: RedisError, bound: Duration) -> BackendError {
    if error.is_timeout() {
        return BackendError::timeout(bound, error);
    }
    let unavailable = |what, error| BackendError::new(BackendErrorKind::Unavailable, what, error);
    if error.is_connection_refusal() {
        return unavailable("Redis refused the connection", error);
    }
    if unreachable(&error) {
        return unavailable("the connection to Redis failed", error);
    }
    if matches!(error.kind(), ErrorKind::Server(_)) {
        return BackendError::refused(error);
    }
    BackendError::new(
        BackendErrorKind::Protocol,
        "Redis's answer could not be read",
        error,
    )
}

/// Whether `error` says Redis was not reached: a timeout, a connection
/// refused, closed or failed (what counts toward opening the circuit).
pub(crate) fn unreachable(error: &RedisError) -> bool {
    error.is_timeout()
        || error.is_connection_refusal()
        || error.is_connection_dropped()
        || error.is_io_error()
}

/// No connection could be opened: `detail` says why.
pub(crate) fn no_connection(bound: Duration, detail: String) -> BackendError {
    let what = format!("no Redis connection could be opened (the call's time bound is {bound:?})");
    let cause: Box<dyn std::error::Error + Send + Sync> = detail.into();
    BackendError::new(BackendErrorKind::Unavailable, what, cause)
}

/// Each of the pool's `max_size` connections stayed busy for the call's
/// time bound: Redis answers, this process asks more than the pool holds.
#[cfg_attr(not(feature = "redis"), allow(dead_code))]
pub(crate) fn no_free_connection(bound: Duration, max_size: u32) -> BackendError {
    let what = format!(
        "no free Redis connection within {bound:?}, the call's time bound: all {max_size} were busy"
    );
    BackendError::unavailable(what)
}

/// The call's time bound passed before anything was sent.
pub(crate) fn out_of_time(bound: Duration) -> BackendError {
    let cause: Box<dyn std::error::Error + Send + Sync> = "nothing was sent".into();
    BackendError::timeout(bound, cause)
}

/// Whether `error`, met on a connection that was open, says the server
/// closed it (a restart, an idle timeout, a `CLIENT KILL`): the call is
/// worth one more try on a fresh connection. A command a closed connection
/// carried never ran, or ran on a server whose state is lost; running a
/// read, a bump or an entry's `SET` twice is harmless.
pub(crate) fn closed(error: &RedisError) -> bool {
    !error.is_timeout() && error.is_connection_dropped()
}
