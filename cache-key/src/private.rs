//! `cache_key::__private`: what `#[derive(CacheKey)]` expands to. Not a
//! public API: it may change in any release.

pub use std::string::String;

pub use inventory;

pub use crate::criteria::names_overlap;
pub use crate::key_writer::{Head, KeyWriter, Text, push_tenant_part};
pub use crate::normalize::{NormalizeText, Normalized};
use crate::registry::Registered;
use crate::schema::KeySchema;

/// A derived type's entry in the [`registry`](crate::registry).
pub const fn registration(type_path: &'static str, schema: KeySchema) -> Registered {
    Registered { type_path, schema }
}
