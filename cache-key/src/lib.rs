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
//!   [`Key`], [`ReadableKey`] (for logs), [`KeyError`].
//! - What a key can be made of: [`CriterionValue`], [`TenantValue`] and
//!   [`Criteria`] (groups flattened into a query), written through
//!   [`CanonicalWriter`]; derive them for your own enums, newtypes and parts.
//! - Reviewing: [`KeySchema`], every derived type's description of its key.
//! - Keeping key spaces apart (feature `registry`, for tests):
//!   `registry::check` finds two derived types that share a namespace and an
//!   operation, `registry::check_lock` every key layout changed since review.
//! - Operating: [`decode`] reads any key back into its parts; [`KeyPattern`]
//!   gives the globs and the exact filter for listing or deleting a tenant's,
//!   an operation's or a namespace's keys in Redis or memcached.
//! - Invalidating ([`mod@generation`]): [`GenerationStore`] reads a query's
//!   generation from the query itself and bumps a namespace's, a tenant's or
//!   an operation's ([`GenerationScope`], typed by each query type's tenant
//!   fields through [`Scopes`]); [`MemoryGenerations`] keeps the counters in
//!   the process.
//! - Caching ([`mod@cache`]): typed caches whose query type fixes the value
//!   type ([`cache::CachedQuery`]), in process on moka.
//! - Redis (`cache_key::redis`, feature `redis`): counters, the typed cache
//!   and the sweep of old generations in Redis or a Redis Cluster.
//! - The web (`cache_key::http`, feature `axum`): a handler's answer in one
//!   call, `ETag` and `304` from the generation, `private` for tenants;
//!   metrics (`cache_key::metrics`, feature `metrics`).
//!
//! # Features
//!
//! | feature | default | what it adds |
//! | --- | --- | --- |
//! | `derive` | yes | `#[derive(CacheKey, Criteria, CriterionValue, TenantValue, CacheTags)]` |
//! | `redis` | no | the `redis` module, blocking: `RedisPool`, `RedisGenerations`, `RedisCache` (values as JSON, with serde); `Key` as a Redis argument |
//! | `redis-async` | no | the same on async connections (tokio): `AsyncRedisPool`, `AsyncRedisGenerations`, `AsyncRedisCache`; implies `redis` |
//! | `moka` | no | `cache::MokaCache` and `cache::AsyncMokaCache` in process; with `redis`, `RedisCache::with_local` |
//! | `registry` | no | the `registry` module: every derived type registered at link time, for the tests `registry::check` and `registry::check_lock`; enable it in `[dev-dependencies]` |
//! | `axum` | no | the `http` module: `HttpCache`, a handler's answer from an async typed cache with an `ETag` from the key's generation, `304` from the counters alone, `Cache-Control` decided by the query type, surrogate keys and a purge hook; `CacheError` as an axum response |
//! | `metrics` | no | the `metrics` module: `Metered`, a cache's counters and its origin's time through the `metrics` facade |
//! | `tracing` | no | `tracing` events of the typed caches (origin calls, rejections, stale values, errors, invalidations), never a key or a value |
//! | `uuid` | no | `Uuid` as a criterion and a tenant (lowercase, hyphenated) |
//! | `chrono`, `time` | no | dates (`YYYY-MM-DD`) and instants (RFC 3339, UTC, 9-digit fraction) |
//! | `url` | no | `Url` as a criterion |
//!
#![doc = include_str!("../ATTRIBUTES.md")]
#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod backend_error;
mod builder;
pub mod cache;
mod cache_key;
mod canonical;
mod criteria;
mod criteria_segment;
mod decode;
#[cfg(feature = "derive")]
mod derive;
mod error;
mod external;
pub mod generation;
#[cfg(feature = "axum")]
pub mod http;
mod key;
mod key_writer;
#[cfg(feature = "metrics")]
pub mod metrics;
mod normalize;
mod number;
mod pattern;
#[cfg(feature = "redis")]
pub mod redis;
#[cfg(feature = "registry")]
pub mod registry;
mod schema;
mod std_types;
pub mod tag;

#[doc = include_str!("../KEY-FORMAT.md")]
pub mod format {}

pub use crate::builder::KeyBuilder;
pub use crate::cache_key::{CacheKey, KeyPart};
pub use crate::canonical::{CanonicalWriter, CriterionValue, TenantValue};
pub use crate::criteria::{Criteria, CriteriaList};
pub use crate::decode::{
    DecodeError, DecodeErrorKind, DecodedCriteria, DecodedKey, DecodedTenant, decode,
};
#[cfg(feature = "derive")]
pub use crate::derive::{CacheKey, CacheTags, Criteria, CriterionValue, TenantValue};
pub use crate::error::KeyError;
pub use crate::generation::{
    GenerationError, GenerationScope, GenerationStore, HasTenant, MemoryGenerations, Scopes,
    TenantRefs,
};
pub use crate::key::{Key, ReadableKey};
pub use crate::pattern::KeyPattern;
pub use crate::schema::{
    CriterionField, FlattenedField, KeySchema, SchemaFields, Scope, SkippedField,
};
#[doc(hidden)]
pub use crate::tag::TagName;
pub use crate::tag::{CacheTags, TagField, TagScope, TagValues, Tags};

// What derived code names, at the path it names.
#[doc(hidden)]
#[path = "private.rs"]
pub mod __private;

/// The README's Rust examples (at the workspace root), run as doc tests;
/// they use the `moka`, `redis` and `registry` features.
#[cfg(all(doctest, feature = "moka", feature = "redis", feature = "registry"))]
#[doc = include_str!("../../README.md")]
pub struct ReadmeDoctests;

/// The keys guide's Rust examples (`docs/keys.md`), run as doc tests.
#[cfg(all(doctest, feature = "moka", feature = "redis", feature = "registry"))]
#[doc = include_str!("../../docs/keys.md")]
pub struct KeysGuideDoctests;

/// The caching guide's Rust examples (`docs/caching.md`), run as doc tests.
#[cfg(all(doctest, feature = "moka", feature = "redis", feature = "registry"))]
#[doc = include_str!("../../docs/caching.md")]
pub struct CachingGuideDoctests;
