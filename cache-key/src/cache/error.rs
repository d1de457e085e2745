//! [`CacheError`]: why a typed cache call failed.

use std::error::Error;
use std::fmt;
use std::sync::Arc;

use crate::generation::GenerationError;

/// Why a cache call failed. `E` is the origin's error type
/// ([`Infallible`](std::convert::Infallible) where no origin is asked).
#[derive(Debug)]
#[non_exhaustive]
pub enum CacheError<E> {
    /// The generation store could not name the key (or invalidate).
    Generation(GenerationError),
    /// The backend (Redis) failed.
    Backend(Box<dyn Error + Send + Sync + 'static>),
    /// The origin failed; every caller coalesced on the same load gets the
    /// same error, and nothing is cached.
    Origin(Arc<E>),
    /// The value cannot be stored so that it reads back the same (Redis: a
    /// NaN or infinite float, which JSON writes as `null`; a map whose keys
    /// are not strings): nothing was stored.
    Unstorable(Box<dyn Error + Send + Sync + 'static>),
}

impl<E> From<GenerationError> for CacheError<E> {
    fn from(error: GenerationError) -> Self {
        CacheError::Generation(error)
    }
}

impl<E: fmt::Display> fmt::Display for CacheError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CacheError::Generation(e) => write!(f, "cache key generation: {e}"),
            CacheError::Backend(e) => write!(f, "cache backend: {e}"),
            CacheError::Origin(e) => write!(f, "origin: {e}"),
            CacheError::Unstorable(e) => write!(f, "{e}"),
        }
    }
}

impl<E: Error + 'static> Error for CacheError<E> {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            CacheError::Generation(e) => Some(e),
            CacheError::Backend(e) => Some(&**e),
            CacheError::Origin(e) => Some(&**e),
            CacheError::Unstorable(e) => Some(&**e),
        }
    }
}
