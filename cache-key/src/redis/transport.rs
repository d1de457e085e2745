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
    if error.is_connection_dropped() || error.is_io_error() {
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

/// No connection within `bound`: none could be opened in time (the
/// connection pool's `detail` says why, when it knows), or none was free.
pub(crate) fn no_connection(bound: Duration, detail: String) -> BackendError {
    let what = format!("no Redis connection within {bound:?}, the call's time bound");
    let cause: Box<dyn std::error::Error + Send + Sync> = detail.into();
    BackendError::new(BackendErrorKind::Unavailable, what, cause)
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
