//! `#[derive(CacheKey)]`, the derive macro of the [`cache-key`] crate. Use it
//! through `cache_key::CacheKey`; this crate is an implementation detail and its
//! version moves with `cache-key`'s.
//!
//! The pipeline follows serde's and thiserror's, one module a step: `ast`
//! builds the model of the struct, `attr` parses its attributes, `check`
//! applies the rules that need the whole struct (`sensitive` holds the secret
//! and volatile names), and `expand` writes the `CacheKey` and `Criteria`
//! impls; `cached_query` writes `CachedQuery` from `value` and `ttl`;
//! `value` derives `CriterionValue` and `TenantValue` for enums and newtypes.
//! Every mistake is collected in a `ctxt::Ctxt`, so one build reports them
//! all.
//!
//! [`cache-key`]: https://docs.rs/cache-key

mod ast;
mod attr;
mod cached_query;
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
#[proc_macro_derive(CacheKey, attributes(cache_key, tenant, criterion, skip))]
pub fn derive_cache_key(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    derive_struct(&input, ast::Derive::CacheKey).into()
}

/// Derives `cache_key::Criteria` for a criteria-only struct.
#[proc_macro_derive(Criteria, attributes(cache_key, tenant, criterion, skip))]
pub fn derive_criteria(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    derive_struct(&input, ast::Derive::Criteria).into()
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

fn derive_struct(input: &DeriveInput, derive: ast::Derive) -> proc_macro2::TokenStream {
    let cx = ctxt::Ctxt::new();
    let query = ast::Query::from_ast(&cx, input, derive);
    if let Some(query) = &query {
        check::check(&cx, query);
    }
    match (cx.check(), query) {
        (Ok(()), Some(query)) => match derive {
            ast::Derive::CacheKey => {
                let mut impls = expand::impl_cache_key(&query);
                impls.extend(cached_query::expand(&query));
                impls
            }
            ast::Derive::Criteria => expand::impl_criteria(&query),
        },
        (Err(errors), query) => {
            let krate = query.as_ref().and_then(|query| query.attrs.krate.as_ref());
            let fallback = expand::fallback(input, derive, krate);
            let cached = match (&query, derive) {
                (Some(query), ast::Derive::CacheKey) => cached_query::fallback(query),
                _ => proc_macro2::TokenStream::new(),
            };
            quote::quote!(#errors #fallback #cached)
        }
        (Ok(()), None) => unreachable!("a missing model always comes with an error"),
    }
}
