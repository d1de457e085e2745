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
//! The key format (version 2) is specified in [`mod@format`], with 400 shared
//! conformance vectors: an implementation in any language that passes them
//! writes the same keys, so services can share one cache.
//!
//! # What is here
//!
//! - Building keys: [`CacheKey`] (derived), [`KeyBuilder`] (at run time),
//!   [`Key`], [`KeyError`].
//! - What a key can be made of: [`CriterionValue`], [`TenantValue`], and
//!   [`Criteria`] for groups flattened into a query; derive them for your own
//!   enums, newtypes and shared parts.
//! - Reviewing: [`KeySchema`], every derived type's description of its key.
//! - Keeping key spaces apart: [`registry::check`] finds two query types that
//!   share a namespace and an operation (call it in one test).
//! - Operating: [`decode`] reads any key back into its parts; [`KeyPattern`]
//!   gives the globs and the exact filter for listing or deleting a tenant's,
//!   an operation's or a namespace's keys in Redis or memcached.
//! - Invalidating: [`GenerationStore`] reads a query's generation from the
//!   query itself and bumps a namespace's, a tenant's or an operation's
//!   ([`GenerationScope`]); [`MemoryGenerations`] keeps the counters in the
//!   process, `RedisGenerations` in Redis (feature `redis`). See [`mod@generation`].
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

//!
#![doc = include_str!("../ATTRIBUTES.md")]
#![deny(missing_docs)]
#![forbid(unsafe_code)]

/// Defines a function on the hot path of writing a key: `inline(always)` in
/// optimized builds, so that derived code copies its constant pieces with
/// known lengths as hand-written code does; a plain `inline` hint in debug
/// builds, which keeps derived code cheap to compile.
macro_rules! hot {
    ($(#[$attr:meta])* $vis:vis fn $($rest:tt)*) => {
        $(#[$attr])*
        #[cfg_attr(debug_assertions, inline)]
        #[cfg_attr(not(debug_assertions), inline(always))]
        $vis fn $($rest)*
    };
}

mod builder;
pub mod cache;
mod canonical;
mod criteria;
mod criteria_segment;
mod decode;
mod error;
mod external;
pub mod generation;
mod key;
mod layout;
mod normalize;
mod number;
mod pattern;
#[cfg(feature = "redis")]
pub mod redis;
pub mod registry;
mod schema;
mod value;

/// The format's syntax and its escaping, shared with the derive.
use cache_key_format::{self as syntax, escape};

pub mod format {
    #![doc = include_str!("../KEY-FORMAT.md")]
}

pub use crate::builder::KeyBuilder;
pub use crate::canonical::{CanonicalWriter, CriterionValue, TenantValue};
pub use crate::criteria::{Criteria, CriteriaList};
pub use crate::decode::{
    DecodeError, DecodeErrorKind, DecodedCriteria, DecodedKey, DecodedTenant, decode,
};
pub use crate::error::KeyError;
pub use crate::generation::{GenerationError, GenerationScope, GenerationStore, MemoryGenerations};
pub use crate::key::{Key, ReadableKey};
pub use crate::pattern::KeyPattern;
pub use crate::schema::{CriterionField, FlattenedField, KeySchema, Scope, SkippedField};

/// Derives [`CacheKey`] for a query struct: every field marked `#[tenant]`,
/// `#[criterion]` or `#[skip]`, the tenant required (or the data declared
/// global), secrets, volatile inputs, request metadata and personal data
/// refused by name.
///
#[doc = include_str!("../ATTRIBUTES.md")]
#[cfg(feature = "derive")]
pub use cache_key_derive::CacheKey;

/// Derives [`Criteria`] for a criteria-only struct (fields `#[criterion]` or
/// `#[skip]`), to be flattened into queries with `#[criterion(flatten)]`.
///
/// It takes `#[cache_key(rename_all = "...")]` and `#[cache_key(crate =
/// "...")]` on the struct, the field attributes of [`CacheKey`]'s reference
/// except `#[tenant]`, and serde's `rename`/`rename_all`.
///
/// ```
/// use cache_key::{CacheKey, Criteria};
///
/// #[derive(Criteria)]
/// struct Page {
///     #[criterion]
///     page: u32,
///     #[criterion(rename = "perPage")]
///     per_page: u32,
/// }
///
/// #[derive(CacheKey)]
/// #[cache_key(namespace = "library", operation = "list")]
/// struct List {
///     #[tenant]
///     branch: u32,
///     #[criterion(flatten)]
///     page: Page,
/// }
///
/// let key = List { branch: 2, page: Page { page: 1, per_page: 20 } }.cache_key(1)?;
/// assert_eq!(key.as_str(), "library:s1:g1:t2:list:page=1&perPage=20");
/// # Ok::<(), cache_key::KeyError>(())
/// ```
#[cfg(feature = "derive")]
pub use cache_key_derive::Criteria;

/// Derives [`CriterionValue`] for a fieldless enum (written as the variant's
/// name, with `#[criterion(rename = "...")]` on a variant and
/// `#[criterion(rename_all = "snake_case")]` on the enum, or serde's
/// `rename`/`rename_all` when those are absent) or a newtype (written as its
/// inner value). `#[cache_key(crate = "...")]` names a renamed crate.
///
/// ```
/// use cache_key::{CriterionValue, KeyBuilder};
///
/// #[derive(CriterionValue)]
/// #[criterion(rename_all = "snake_case")]
/// enum Sort {
///     TitleAsc,
///     #[criterion(rename = "newest")]
///     YearDesc,
/// }
///
/// let key = KeyBuilder::new("library", "list").tenant(2).criterion("sort", Sort::YearDesc).build()?;
/// assert_eq!(key.as_str(), "library:s1:g1:t2:list:sort=newest");
/// # let _ = Sort::TitleAsc;
/// # Ok::<(), cache_key::KeyError>(())
/// ```
#[cfg(feature = "derive")]
pub use cache_key_derive::CriterionValue;

/// Derives [`TenantValue`] for a newtype around a tenant value, such as
/// `struct BranchId(u32)` (derive [`CriterionValue`] too). Its empty value is
/// its inner value's (`BranchId(0)` is refused like `0`).
/// `#[cache_key(crate = "...")]` names a renamed crate.
///
/// ```
/// use cache_key::{CacheKey, CriterionValue, KeyError, TenantValue};
///
/// #[derive(CriterionValue, TenantValue, Default)]
/// struct BranchId(u32);
///
/// #[derive(CacheKey, Default)]
/// #[cache_key(namespace = "library", operation = "list")]
/// struct List {
///     #[tenant]
///     branch: BranchId,
///     #[criterion]
///     page: u32,
/// }
///
/// assert_eq!(List { branch: BranchId(2), page: 1 }.cache_key(1)?.as_str(), "library:s1:g1:t2:list:page=1");
/// assert!(matches!(List::default().cache_key(1), Err(KeyError::EmptyTenant { .. })));
/// # Ok::<(), cache_key::KeyError>(())
/// ```
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

    /// Appends this query's key at `generation` with its criteria never
    /// summarized, for logs and debugging (see [`ReadableKey`]); `max_len`
    /// is not checked. The derive writes it; the default writes the key
    /// itself, summarized or not.
    fn write_readable_key(&self, generation: u64, out: &mut String) -> Result<(), KeyError> {
        self.write_key(generation, out)
    }

    /// This query's key at `generation` with its criteria never summarized:
    /// not a cache key, but what a log line needs to explain a miss.
    fn readable_key(&self, generation: u64) -> Result<ReadableKey, KeyError> {
        let mut out = String::new();
        self.write_readable_key(generation, &mut out)?;
        Ok(ReadableKey::new(out))
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
/// README stays true. (The README sits at the workspace root, beside this
/// crate; its examples use the `moka` and `redis` features, which
/// `cargo test --workspace` turns on.)
#[cfg(all(doctest, feature = "moka", feature = "redis"))]
#[doc = include_str!("../../README.md")]
pub struct ReadmeDoctests;

/// What `#[derive(CacheKey)]` expands to. Not a public API: it may change in
/// any release.
#[doc(hidden)]
pub mod __private {
    pub use crate::criteria::names_overlap;
    pub use crate::layout::{Head, KeyWriter, Text, push_tenant_part};
    pub use crate::normalize::{NormalizeText, Normalized};
    pub use inventory;
    pub use std::string::String;

    /// A derived type's entry in the [`registry`](crate::registry).
    pub const fn registration(
        type_path: &'static str,
        schema: crate::KeySchema,
    ) -> crate::registry::Registered {
        crate::registry::Registered { type_path, schema }
    }
}
