//! `#[derive(CacheKey)]`, the derive macro of the [`cache-key`] crate. Use it
//! through `cache_key::CacheKey`; this crate is an implementation detail and its
//! version moves with `cache-key`'s.
//!
//! The pipeline follows serde's and thiserror's: [`ast`] builds the model of
//! the struct, [`attr`] parses its attributes, [`check`] applies the rules that
//! need the whole struct, and [`expand`] writes the impl. Every mistake is
//! collected in a [`ctxt::Ctxt`], so one build reports them all.
//!
//! [`cache-key`]: https://docs.rs/cache-key

mod ast;
mod attr;
mod case;
mod check;
mod ctxt;
mod escape;
mod expand;
mod sensitive;

use proc_macro::TokenStream;
use syn::{DeriveInput, parse_macro_input};

/// Derives `cache_key::CacheKey`. See the `cache-key` crate for the attributes.
#[proc_macro_derive(CacheKey, attributes(cache_key, tenant, criterion, skip))]
pub fn derive_cache_key(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    derive(&input).into()
}

fn derive(input: &DeriveInput) -> proc_macro2::TokenStream {
    let cx = ctxt::Ctxt::new();
    let query = ast::Query::from_ast(&cx, input);
    if let Some(query) = &query {
        check::check(&cx, query);
    }
    match (cx.check(), query) {
        (Ok(()), Some(query)) => expand::impl_cache_key(&query),
        (Err(errors), _) => {
            let fallback = expand::fallback(input);
            quote::quote!(#errors #fallback)
        }
        (Ok(()), None) => unreachable!("a missing model always comes with an error"),
    }
}
