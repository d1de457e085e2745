//! The registry entry: the type added to `cache_key::registry`, where
//! `check()` finds two types sharing a key space.

use proc_macro2::TokenStream;
use quote::quote;

use crate::ast::Query;

/// The `inventory` entry of the query's `KEY_SCHEMA`. Only concrete types can
/// be named there: a struct with type or const parameters is left out, and
/// lifetimes are `'static`.
pub fn register(query: &Query) -> TokenStream {
    let generics = query.generics;
    if generics.type_params().next().is_some() || generics.const_params().next().is_some() {
        return TokenStream::new();
    }
    let ident = query.ident;
    let lifetimes = generics.lifetimes().map(|_| quote!('static));
    let ty = if generics.params.is_empty() {
        quote!(#ident)
    } else {
        quote!(#ident<#(#lifetimes),*>)
    };
    quote! {
        __cache_key::__private::inventory::submit! {
            __cache_key::__private::registration(
                ::core::concat!(::core::module_path!(), "::", ::core::stringify!(#ident)),
                <#ty as __cache_key::CacheKey>::KEY_SCHEMA,
            )
        }
    }
}
