//! [`GenerationError`]: why a generation could not be read or bumped.

use std::error::Error;
use std::fmt;

use crate::backend_error::BackendError;
use crate::error::KeyError;

/// Why a generation could not be read or bumped.
///
/// A store never answers with a guess: when it cannot read a counter (Redis
/// unreachable, a counter key holding something else) the caller gets this
/// error, never generation 0 or a remembered value. [`kind`](Self::kind)
/// says what went wrong; the store's own error (a
/// [`BackendError`](crate::cache::BackendError) for Redis) is the
/// [`source`](Error::source), never printed again in this error's text.
///
/// It is one pointer wide, so the `Result` of a generation read is returned
/// in registers.
#[derive(Debug)]
pub struct GenerationError(Box<Repr>);

#[derive(Debug)]
enum Repr {
    Key(KeyError),
    TenantValues(TenantValues),
    Overflow,
    Store(Box<dyn Error + Send + Sync + 'static>),
    Internal(Box<dyn Error + Send + Sync + 'static>),
    /// What the store does not keep.
    Unsupported(&'static str),
}

/// Tenant values that do not fit a query type.
#[derive(Debug)]
pub(super) struct TenantValues {
    pub(super) namespace: &'static str,
    pub(super) operation: &'static str,
    /// The query type's tenant fields, in order (empty for a global query).
    pub(super) fields: &'static [&'static str],
    /// The fewest and the most values that name a scope of this kind.
    pub(super) min: usize,
    pub(super) max: usize,
    pub(super) given: usize,
}

/// What kind of [`GenerationError`] it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum GenerationErrorKind {
    /// The query's tenant (or a tenant value given to invalidate) is not a
    /// valid tenant: an empty value, most likely
    /// ([`key_error`](GenerationError::key_error) says which).
    Key,
    /// The tenant values given to invalidate do not fit the query type: too
    /// many, too few, or any for a global query.
    TenantValues,
    /// The sum of a query's counters does not fit in a `u64`.
    Overflow,
    /// The store failed: it could not reach its backend, or found something
    /// that is not a counter where a counter should be
    /// ([`store_error`](GenerationError::store_error) is its own error).
    Store,
    /// An invariant broke: a hand-written `CacheKey` impl whose key does
    /// not follow its schema, or a store that added the wrong number of
    /// counters. A bug to report, never a state of the store.
    Internal,
    /// The store does not keep what was asked (a tag clock, for answers
    /// tagged from their value): a store of your own that implements only
    /// `read` and `bump`.
    Unsupported,
}

impl GenerationError {
    fn new(repr: Repr) -> Self {
        GenerationError(Box::new(repr))
    }

    /// Wraps a store's own error.
    pub fn store(error: impl Into<Box<dyn Error + Send + Sync + 'static>>) -> Self {
        Self::new(Repr::Store(error.into()))
    }

    /// The store keeps no `what`.
    pub(crate) fn unsupported(what: &'static str) -> Self {
        Self::new(Repr::Unsupported(what))
    }

    /// A broken invariant (a bug elsewhere), `error` saying which.
    pub(crate) fn internal(error: impl Into<Box<dyn Error + Send + Sync + 'static>>) -> Self {
        Self::new(Repr::Internal(error.into()))
    }

    /// A counter (or the sum of a query's counters) past `u64::MAX`.
    pub(crate) fn overflow() -> Self {
        Self::new(Repr::Overflow)
    }

    pub(super) fn tenant_values(values: TenantValues) -> Self {
        Self::new(Repr::TenantValues(values))
    }

    /// What kind of error it is.
    pub fn kind(&self) -> GenerationErrorKind {
        match *self.0 {
            Repr::Key(_) => GenerationErrorKind::Key,
            Repr::TenantValues(_) => GenerationErrorKind::TenantValues,
            Repr::Overflow => GenerationErrorKind::Overflow,
            Repr::Store(_) => GenerationErrorKind::Store,
            Repr::Internal(_) => GenerationErrorKind::Internal,
            Repr::Unsupported(_) => GenerationErrorKind::Unsupported,
        }
    }

    /// The backend's failure, when the store is one on a backend (Redis)
    /// and that failed: its [`kind`](crate::cache::BackendError::kind)
    /// tells a timeout from an unavailable or refusing server.
    pub fn backend_error(&self) -> Option<&BackendError> {
        self.store_error()?.downcast_ref()
    }

    /// The key error, for [`GenerationErrorKind::Key`].
    pub fn key_error(&self) -> Option<&KeyError> {
        match &*self.0 {
            Repr::Key(error) => Some(error),
            _ => None,
        }
    }

    /// The store's own error, for [`GenerationErrorKind::Store`]; downcast it
    /// to the store's error type (`redis::RedisError`, ...).
    pub fn store_error(&self) -> Option<&(dyn Error + Send + Sync + 'static)> {
        match &*self.0 {
            Repr::Store(error) => Some(&**error),
            _ => None,
        }
    }
}

impl fmt::Display for GenerationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &*self.0 {
            // Transparent: the key error says what is wrong.
            Repr::Key(error) => error.fmt(f),
            Repr::TenantValues(TenantValues {
                namespace,
                operation,
                fields,
                min,
                max,
                given,
            }) => {
                write!(f, "`{namespace}:{operation}` ")?;
                if fields.is_empty() {
                    f.write_str("is global (it has no tenant fields)")?;
                } else {
                    write!(f, "has the tenant fields ({})", fields.join(", "))?;
                }
                if min == max {
                    write!(f, ": this scope takes {min} tenant values, ")?;
                } else {
                    write!(f, ": this scope takes {min} to {max} tenant values, ")?;
                }
                write!(f, "{given} given")
            }
            Repr::Overflow => {
                f.write_str("the sum of the generation counters does not fit in a u64")
            }
            Repr::Store(_) => f.write_str("the generation store failed"),
            Repr::Internal(_) => {
                f.write_str("an invariant of the generation counters broke (a bug)")
            }
            Repr::Unsupported(what) => write!(f, "the generation store keeps no {what}"),
        }
    }
}

impl Error for GenerationError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match &*self.0 {
            Repr::Key(error) => error.source(),
            Repr::Store(error) | Repr::Internal(error) => Some(&**error),
            _ => None,
        }
    }
}

impl From<KeyError> for GenerationError {
    fn from(error: KeyError) -> Self {
        Self::new(Repr::Key(error))
    }
}
