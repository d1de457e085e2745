//! [`CacheError`]: why a typed cache call failed, and [`CacheErrorKind`]:
//! what a caller decides by.
//!
//! Each error's `Display` says what failed at its own layer; its cause is
//! reachable through [`Error::source`] only, so a chain printer (`anyhow`'s
//! `{:#}`, `tracing`'s error fields) shows each cause once. An error that
//! adds nothing to its cause is transparent: it prints as its cause and
//! hands on the cause's source.

use std::convert::Infallible;
use std::error::Error;
use std::fmt;
use std::sync::Arc;

use crate::backend_error::{BackendError, BackendErrorKind};
use crate::generation::{GenerationError, GenerationErrorKind};

/// Why a cache call failed. `E` is the origin's error type
/// ([`Infallible`] where no origin is asked).
#[derive(Debug)]
#[non_exhaustive]
pub enum CacheError<E = Infallible> {
    /// The generation store could not name the key (an invalid tenant: a
    /// bug of the caller; or the store failed) or invalidate.
    Generation(GenerationError),
    /// The backend failed to read or write the entry.
    Backend(BackendError),
    /// The origin failed; every caller coalesced on the same load gets the
    /// same error, and nothing is cached.
    Origin(Arc<E>),
    /// The value cannot be stored so that it reads back the same (Redis: a
    /// NaN or infinite float, which JSON writes as `null`; a map whose keys
    /// are not strings): nothing was stored.
    Unstorable(Box<dyn Error + Send + Sync + 'static>),
}

/// What kind of failure a [`CacheError`] is: what a caller decides by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CacheErrorKind {
    /// The query cannot name a key (an empty tenant, tenant values that do
    /// not fit the query type): a bug to fix, never worth a retry.
    InvalidKey,
    /// The backend did not answer within the call's time bound.
    Timeout,
    /// The backend cannot be reached: refused, closed, or skipped while its
    /// circuit is open.
    Unavailable,
    /// The backend answered with an error, or with something this crate
    /// cannot read (a counter key holding other data, a server too old).
    Backend,
    /// The value cannot be stored so that it reads back the same.
    Unstorable,
    /// The origin failed.
    Origin,
    /// An invariant broke: a bug of this crate, of a hand-written
    /// `CacheKey` impl or of a generation store.
    Internal,
}

impl<E> CacheError<E> {
    /// What kind of failure this is.
    pub fn kind(&self) -> CacheErrorKind {
        match self {
            CacheError::Generation(error) => match error.kind() {
                GenerationErrorKind::Key | GenerationErrorKind::TenantValues => {
                    CacheErrorKind::InvalidKey
                }
                GenerationErrorKind::Internal => CacheErrorKind::Internal,
                _ => error
                    .backend_error()
                    .map_or(CacheErrorKind::Backend, cache_kind),
            },
            CacheError::Backend(error) => cache_kind(error),
            CacheError::Origin(_) => CacheErrorKind::Origin,
            CacheError::Unstorable(_) => CacheErrorKind::Unstorable,
        }
    }

    /// The backend's failure, if the backend (or the generation store on it)
    /// failed.
    pub fn backend_error(&self) -> Option<&BackendError> {
        match self {
            CacheError::Generation(error) => error.backend_error(),
            CacheError::Backend(error) => Some(error),
            _ => None,
        }
    }

    /// Whether the cache itself failed to reach or read its backend (a
    /// timeout, an unavailable or refusing backend): the failures a cache
    /// may answer around by asking the origin. An invalid key, an origin's
    /// error or an unstorable value is not one.
    pub fn is_backend_failure(&self) -> bool {
        self.backend_error().is_some()
    }
}

impl CacheError<Infallible> {
    /// This error, as one of a call whose origin fails with `E`.
    pub fn with_origin<E>(self) -> CacheError<E> {
        match self {
            CacheError::Generation(e) => CacheError::Generation(e),
            CacheError::Backend(e) => CacheError::Backend(e),
            CacheError::Unstorable(e) => CacheError::Unstorable(e),
            CacheError::Origin(never) => match *never {},
        }
    }
}

impl<E> From<GenerationError> for CacheError<E> {
    fn from(error: GenerationError) -> Self {
        CacheError::Generation(error)
    }
}

impl<E> From<BackendError> for CacheError<E> {
    fn from(error: BackendError) -> Self {
        CacheError::Backend(error)
    }
}

impl<E: fmt::Display> fmt::Display for CacheError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            // Transparent: the inner error says what failed.
            CacheError::Generation(e) => e.fmt(f),
            CacheError::Backend(e) => e.fmt(f),
            CacheError::Unstorable(e) => e.fmt(f),
            CacheError::Origin(_) => f.write_str("the origin failed"),
        }
    }
}

impl<E: Error + 'static> Error for CacheError<E> {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            CacheError::Generation(e) => e.source(),
            CacheError::Backend(e) => e.source(),
            CacheError::Unstorable(e) => e.source(),
            CacheError::Origin(e) => Some(&**e),
        }
    }
}

/// The kind of a call that failed with the backend's `error`.
fn cache_kind(error: &BackendError) -> CacheErrorKind {
    match error.kind() {
        BackendErrorKind::Timeout => CacheErrorKind::Timeout,
        BackendErrorKind::Unavailable => CacheErrorKind::Unavailable,
        _ => CacheErrorKind::Backend,
    }
}
