//! `#[derive(CacheKey)]`, the derive macro of the [`cache-key`] crate. Use it
//! through `cache_key::CacheKey`; this crate is an implementation detail and its
//! version moves with `cache-key`'s.
//!
//! The pipeline follows serde's and thiserror's; its modules import one way,
//! from the front end to the expansion:
//!
//! - `ast` builds the model of the struct, `attr` parses its attributes
//!   (`serde_attr` reads serde's, `case` holds the `rename_all` rules), and
//!   `check` applies the rules that need more than one of them (`sensitive`
//!   holds the secret and volatile names). Every mistake is collected in a
//!   `ctxt::Ctxt`, so one build reports them all.
//! - `generics` bounds the impls' type parameters.
//! - `expand` writes the impls, a module a piece: the key writer, the schema
//!   constant, the registry entry, the criteria, the `CachedQuery` impl, and
//!   the fallbacks emitted beside errors.
//! - `value` derives `CriterionValue` and `TenantValue` for enums and
//!   newtypes, `cache_tags` derives `CacheTags` for a cached value's structs.
//!
//! [`cache-key`]: https://docs.rs/cache-key

mod ast;
mod attr;
mod cache_tags;
mod case;
mod check;
mod ctxt;
mod expand;
mod generics;
mod sensitive;
mod serde_attr;
mod value;

use proc_macro::TokenStream;
use syn::{DeriveInput, parse_macro_input};

/// Derives `cache_key::CacheKey`. See the `cache-key` crate for the attributes.
#[proc_macro_derive(CacheKey, attributes(cache_key, tenant, criterion, skip, tag))]
pub fn derive_cache_key(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    expand::derive(&input, ast::Derive::CacheKey).into()
}

/// Derives `cache_key::Criteria` for a criteria-only struct.
#[proc_macro_derive(Criteria, attributes(cache_key, tenant, criterion, skip, tag))]
pub fn derive_criteria(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    expand::derive(&input, ast::Derive::Criteria).into()
}

/// Derives `cache_key::CriterionValue` for a fieldless enum or a newtype.
#[proc_macro_derive(CriterionValue, attributes(cache_key, criterion))]
pub fn derive_criterion_value(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    value::derive_criterion_value(&input).into()
}

/// Derives `cache_key::TenantValue` for a newtype around a tenant value.
#[proc_macro_derive(TenantValue, attributes(cache_key))]
pub fn derive_tenant_value(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    value::derive_tenant_value(&input).into()
}

/// Derives `cache_key::CacheTags` for a cached value's struct: the tags of
/// its fields marked `#[tag = "..."]` and `#[tags]`.
#[proc_macro_derive(CacheTags, attributes(cache_key, tag, tags))]
pub fn derive_cache_tags(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    cache_tags::derive_cache_tags(&input).into()
}
