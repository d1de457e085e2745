//! [`KeyError`]: the inputs that must never become a key.

use std::borrow::Cow;
use std::fmt;

/// Why a key could not be built.
///
/// A cache answers whatever is stored under a key and never errors, so every
/// input that would make a wrong key (one shared by two tenants, or by two
/// different queries) is refused here instead.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum KeyError {
    /// A tenant value is empty, or its type's empty value (`0`, the nil
    /// UUID), which a tenant left at its default has. Either would merge every
    /// tenant's entries into one cache scope.
    EmptyTenant {
        /// The tenant field (for a derived key) or `tenant` (for the builder).
        field: Cow<'static, str>,
    },
    /// A [`KeyBuilder`](crate::KeyBuilder) was given neither a tenant nor
    /// [`global`](crate::KeyBuilder::global).
    MissingTenant,
    /// A [`KeyBuilder`](crate::KeyBuilder) was given a tenant and was also
    /// declared [`global`](crate::KeyBuilder::global).
    TenantAndGlobal,
    /// Two criteria have the same name; the format never lets the last one win.
    DuplicateCriterion {
        /// The repeated name.
        name: String,
    },
    /// The namespace is empty: a key's first segment names its application.
    EmptyNamespace,
    /// The operation is empty: a key names the query it caches.
    EmptyOperation,
    /// A criterion has an empty name.
    EmptyCriterionName {
        /// The criterion's position among those given, from 0.
        position: usize,
    },
    /// A tag value is empty, or its type's empty value (`0`, the nil UUID):
    /// it would stand for no entity, and every answer holding it would
    /// share one tag.
    EmptyTag {
        /// The field the tag is read from.
        field: Cow<'static, str>,
    },
    /// The key would be longer than the declared maximum; it is never truncated.
    TooLong {
        /// The length the key would have, in bytes.
        len: usize,
        /// The declared maximum, in bytes.
        max: usize,
    },
}

impl fmt::Display for KeyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyError::EmptyTenant { field } => write!(
                f,
                "tenant `{field}` is empty or its type's empty value (0, the nil UUID), as a tenant left at its default is: it would share one cache scope among all tenants; if that value is a real tenant, declare it with `#[tenant(allow_zero = \"why\")]` or `KeyBuilder::tenant_allowing_zero`"
            ),
            KeyError::MissingTenant => f.write_str(
                "no tenant given: call `.tenant(..)` with the authorization scope, or `.global()` for data that is the same for every tenant",
            ),
            KeyError::TenantAndGlobal => {
                f.write_str("a key cannot both have a tenant and be global")
            }
            KeyError::DuplicateCriterion { name } => write!(
                f,
                "criterion `{name}` is given more than once: each name may appear once in a key"
            ),
            KeyError::EmptyTag { field } => write!(
                f,
                "tag `{field}` is empty or its type's empty value (0, the nil UUID): a tag names one entity by its id"
            ),
            KeyError::EmptyNamespace => {
                f.write_str("the namespace is empty: name the application the key belongs to")
            }
            KeyError::EmptyOperation => {
                f.write_str("the operation is empty: name the query the key caches")
            }
            KeyError::EmptyCriterionName { position } => {
                write!(f, "criterion #{position} has an empty name")
            }
            KeyError::TooLong { len, max } => write!(
                f,
                "the key would be {len} bytes long, over its maximum of {max}: keys are never truncated"
            ),
        }
    }
}

impl KeyError {
    /// [`KeyError::EmptyTenant`] for the run-time tenant value at `index`
    /// (from 0): `tenant`, or `tenant part 2` and on in a compound tenant.
    #[cold]
    pub(crate) fn empty_tenant_value(index: usize) -> KeyError {
        let field = if index == 0 {
            Cow::Borrowed("tenant")
        } else {
            Cow::Owned(format!("tenant part {}", index + 1))
        };
        KeyError::EmptyTenant { field }
    }
}

impl std::error::Error for KeyError {}
