//! [`BackendError`]: why the backend (Redis) could not do its part of a
//! call. A leaf: the caches' errors and the generation store's both hold
//! it.
//!
//! Its `Display` says what failed at this layer; its cause is reachable
//! through [`Error::source`] only (a `redis` error that prints its own
//! source is passed over for that source), so a chain printer shows each
//! cause once.

use std::borrow::Cow;
use std::error::Error;
use std::fmt;
use std::time::Duration;

/// Why the backend (Redis) could not do its part of a call.
#[derive(Debug)]
pub struct BackendError {
    kind: BackendErrorKind,
    what: Cow<'static, str>,
    cause: Cause,
}

/// What a [`BackendError`] hands on as its source.
#[derive(Debug)]
pub(crate) enum Cause {
    None,
    Error(Box<dyn Error + Send + Sync + 'static>),
    /// A `redis` error: one that prints its own source (an I/O error, a
    /// server's error reply) is passed over for that source.
    #[cfg(feature = "redis")]
    Redis(::redis::RedisError),
}

impl From<Box<dyn Error + Send + Sync + 'static>> for Cause {
    fn from(error: Box<dyn Error + Send + Sync + 'static>) -> Self {
        Cause::Error(error)
    }
}

#[cfg(feature = "redis")]
impl From<::redis::RedisError> for Cause {
    fn from(error: ::redis::RedisError) -> Self {
        Cause::Redis(error)
    }
}

/// What kind of failure a [`BackendError`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum BackendErrorKind {
    /// No answer within the call's time bound.
    Timeout,
    /// Not reachable: a connection refused or closed, none free in time, or
    /// the backend skipped while its circuit is open.
    Unavailable,
    /// The backend answered a command with an error (`OOM`, `READONLY`...).
    Refused,
    /// An answer this crate cannot read: a counter key holding something
    /// else, a server too old, a reply of the wrong shape.
    Protocol,
}

impl BackendError {
    /// A failure of `kind`, `what` saying what failed at this layer.
    pub(crate) fn new(
        kind: BackendErrorKind,
        what: impl Into<Cow<'static, str>>,
        cause: impl Into<Cause>,
    ) -> Self {
        BackendError {
            kind,
            what: what.into(),
            cause: cause.into(),
        }
    }

    /// No answer within `bound`, the call's time bound.
    #[cfg_attr(not(feature = "redis"), allow(dead_code))]
    pub(crate) fn timeout(bound: Duration, cause: impl Into<Cause>) -> Self {
        let what = format!("Redis did not answer within {bound:?}, the call's time bound");
        Self::new(BackendErrorKind::Timeout, what, cause)
    }

    /// The backend answered a command with an error.
    #[cfg_attr(not(feature = "redis"), allow(dead_code))]
    pub(crate) fn refused(cause: impl Into<Cause>) -> Self {
        Self::new(
            BackendErrorKind::Refused,
            "Redis answered with an error",
            cause,
        )
    }

    /// Not reached, as `what` says, with no cause of its own.
    #[cfg_attr(not(feature = "redis"), allow(dead_code))]
    pub(crate) fn unavailable(what: impl Into<Cow<'static, str>>) -> Self {
        Self::new(BackendErrorKind::Unavailable, what, Cause::None)
    }

    /// An answer this crate cannot read, as `what` says.
    #[cfg_attr(not(feature = "redis"), allow(dead_code))]
    pub(crate) fn protocol(what: impl Into<Cow<'static, str>>) -> Self {
        Self::new(BackendErrorKind::Protocol, what, Cause::None)
    }

    /// What kind of failure this is.
    pub fn kind(&self) -> BackendErrorKind {
        self.kind
    }

    /// Whether the backend could not be reached in time: a timeout or an
    /// unavailable backend, what a circuit breaker counts.
    pub fn is_unreachable(&self) -> bool {
        matches!(
            self.kind,
            BackendErrorKind::Timeout | BackendErrorKind::Unavailable
        )
    }
}

impl fmt::Display for BackendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.what)
    }
}

impl Error for BackendError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match &self.cause {
            Cause::None => None,
            Cause::Error(error) => Some(&**error),
            #[cfg(feature = "redis")]
            Cause::Redis(error) => error.source().or(Some(error)),
        }
    }
}
