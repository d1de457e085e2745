//! Cache keys as a compile-time design object.
//!
//! A cache answers whatever is stored under a key and never errors, so a wrong
//! key is a silent wrong answer: a separator inside a value makes two queries
//! share a key, and a key without the tenant serves one tenant's data to
//! another. This crate makes the key a checked part of the query type:
//!
//! ```
//! use cache_key::CacheKey;
//!
//! #[derive(CacheKey)]
//! #[cache_key(namespace = "library", operation = "search")]
//! struct Search<'a> {
//!     #[tenant]
//!     branch: &'a str,
//!     #[criterion]
//!     title: &'a str,
//!     #[criterion]
//!     author: Option<&'a str>,
//!     #[skip]
//!     request_id: u64,
//! }
//!
//! let query = Search { branch: "branch-2", title: "Sand: Borges", author: None, request_id: 7 };
//! let key = query.cache_key(4)?;
//! assert_eq!(key.as_str(), "library:s1:g4:tbranch-2:search:title=Sand%3A%20Borges");
//! # Ok::<(), cache_key::KeyError>(())
//! ```
//!
//! Every field must say what it is to the key (`#[tenant]`, `#[criterion]` or
//! `#[skip]`), and a struct without a tenant does not compile unless it
//! declares its data global, with a reason. The same keys can be built at run
//! time with [`KeyBuilder`].
//!
//! The key format is specified in [`mod@format`]; it is byte-compatible with the
//! reference JavaScript generator, so services in both languages can share a cache.
//!
//! # What is here
//!
//! - Building keys: [`CacheKey`] (derived), [`KeyBuilder`] (at run time),
//!   [`Key`], [`KeyError`].
//! - What a key can be made of: [`CriterionValue`], [`TenantValue`], and
//!   [`Criteria`] for groups flattened into a query; derive them for your own
//!   enums, newtypes and shared parts.
//! - Reviewing: [`KeySchema`], every derived type's description of its key.
//! - Operating: [`decode`] reads any key back into its parts; [`KeyPattern`]
//!   gives the globs and the exact filter for listing or deleting a tenant's,
//!   an operation's or a namespace's keys in Redis or memcached.
//! - Invalidating: [`GenerationStore`] reads a query's generation from the
//!   query itself and bumps a namespace's, a tenant's or an operation's
//!   ([`GenerationScope`]); [`MemoryGenerations`] keeps the counters in the
//!   process, [`RedisGenerations`] in Redis. See [`mod@generation`].
//!
//! # Features
//!
//! | feature | default | what it adds |
//! | --- | --- | --- |
//! | `derive` | yes | `#[derive(CacheKey, Criteria, CriterionValue, TenantValue)]` |
//! | `redis` | no | `Key` implements the `redis` crate's `ToRedisArgs`; `RedisGenerations` |
//! | `uuid` | no | `Uuid` as a criterion and a tenant (lowercase, hyphenated) |
//! | `chrono`, `time` | no | dates (`YYYY-MM-DD`) and instants (RFC 3339, UTC, 9-digit fraction) |
//! | `url` | no | `Url` as a criterion |

#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod builder;
mod canonical;
mod criteria;
mod decode;
mod error;
mod escape;
mod external;
pub mod generation;
mod key;
mod normalize;
mod number;
mod pattern;
#[cfg(feature = "redis")]
mod redis;
mod schema;
mod value;
mod writer;

pub mod format {
    #![doc = include_str!("../KEY-FORMAT.md")]
}

pub use crate::builder::KeyBuilder;
pub use crate::canonical::CanonicalWriter;
pub use crate::criteria::{Criteria, CriteriaList};
pub use crate::decode::{
    DecodeError, DecodeErrorKind, DecodedCriteria, DecodedKey, DecodedTenant, decode,
};
pub use crate::error::KeyError;
#[cfg(feature = "redis")]
pub use crate::generation::RedisGenerations;
pub use crate::generation::{GenerationError, GenerationScope, GenerationStore, MemoryGenerations};
pub use crate::key::Key;
pub use crate::pattern::KeyPattern;
pub use crate::schema::{CriterionField, FlattenedField, KeySchema, Scope, SkippedField};
pub use crate::value::{CriterionValue, TenantValue};

/// Derives [`CacheKey`] for a query struct. See the crate's README for the
/// attribute reference.
#[cfg(feature = "derive")]
pub use cache_key_derive::CacheKey;

/// Derives [`Criteria`] for a criteria-only struct (fields `#[criterion]` or
/// `#[skip]`), to be flattened into queries with `#[criterion(flatten)]`.
#[cfg(feature = "derive")]
pub use cache_key_derive::Criteria;

/// Derives [`CriterionValue`] for a fieldless enum (written as the variant's
/// name, with `#[criterion(rename = "...")]` on a variant and
/// `#[criterion(rename_all = "snake_case")]` on the enum) or a newtype
/// (written as its inner value).
#[cfg(feature = "derive")]
pub use cache_key_derive::CriterionValue;

/// Derives [`TenantValue`] (and [`CriterionValue`]) for a newtype around a
/// tenant value, such as `struct BranchId(u32)`.
#[cfg(feature = "derive")]
pub use cache_key_derive::TenantValue;

/// A query type whose cache key is derived from its fields.
///
/// Implement it with `#[derive(CacheKey)]`: the derive checks at compile time
/// that every field is marked, that the tenant is present, and sorts the
/// criteria. A manual implementation must write the key format; the simplest
/// way is [`KeyBuilder::write_into`].
pub trait CacheKey {
    /// What this type's keys are made of: namespace, operation, schema, tenant
    /// fields, criteria and skipped fields.
    const KEY_SCHEMA: KeySchema;

    /// Appends this query's key at `generation` to `out`, reusing its capacity:
    /// no allocation when `out` has room. On error, `out` is left unchanged.
    fn write_key(&self, generation: u64, out: &mut String) -> Result<(), KeyError>;

    /// Appends this query's tenant segment to `out` as its key writes it,
    /// without a hash tag's braces: each tenant value escaped, the parts of a
    /// compound tenant joined with `,`; nothing for a global key. An empty
    /// tenant value is [`KeyError::EmptyTenant`], as for the key; on error,
    /// `out` is left unchanged.
    ///
    /// Generation stores scope their counters by it, so a query's generation
    /// is always its own tenant's. The derive writes it directly; the default
    /// reads it back from the key at generation 0.
    ///
    /// # Panics
    ///
    /// The default panics when [`write_key`](Self::write_key) writes text
    /// that is not a key, a bug of that implementation.
    fn write_tenant(&self, out: &mut String) -> Result<(), KeyError> {
        let key = self.cache_key(0)?;
        let decoded = decode(key.as_str()).expect("a key this crate laid out decodes");
        for (i, part) in decoded.tenant().parts().iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            crate::escape::push_escaped(out, part);
        }
        Ok(())
    }

    /// This query's key at `generation`.
    ///
    /// The generation is the invalidation counter of the key's scope: bump it
    /// and every entry written under the old one is unreachable.
    fn cache_key(&self, generation: u64) -> Result<Key, KeyError> {
        let mut out = String::new();
        self.write_key(generation, &mut out)?;
        Ok(Key::from_canonical(out))
    }
}

/// The README's Rust examples, compiled and run as doc tests so that the
/// README stays true. (The README sits at the workspace root, beside this crate.)
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeDoctests;

/// What `#[derive(CacheKey)]` expands to. Not a public API: it may change in
/// any release.
#[doc(hidden)]
pub mod __private {
    pub use crate::criteria::names_overlap;
    pub use crate::normalize::{NormalizeText, Normalized, normalized};
    pub use crate::writer::{CriteriaSegment, Head, KeyWriter, Text, push_tenant_part};
    pub use std::string::String;

    /// A tenant field as the key's tenant segment takes it. Called with the
    /// field's type spelled out, so a type that is not a tenant is reported there.
    #[inline]
    pub fn tenant<T: crate::TenantValue>(value: &T) -> &dyn crate::TenantValue {
        value
    }

    /// A criterion field as a flattened key's criteria list takes it, with its
    /// type spelled out for the same reason as [`tenant`].
    #[inline]
    pub fn criterion<T: crate::CriterionValue>(value: &T) -> &dyn crate::CriterionValue {
        value
    }
}
