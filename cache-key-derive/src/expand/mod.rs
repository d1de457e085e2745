//! Code generation for a struct that passed every check, one module a piece:
//! the key writer (`key`), the schema constant (`schema`), the registry entry
//! (`registry`), the criteria and their clash checks (`criteria`), the typed
//! invalidation scopes (`scopes`), the query's tags (`tags`) and the
//! `CachedQuery` impl (`cached`). A struct with mistakes gets its errors and
//! the `fallback` impls instead.

mod cached;
mod criteria;
mod fallback;
mod features;
mod key;
pub mod names;
mod registry;
mod schema;
mod scopes;
mod tags;

use proc_macro2::TokenStream;
use quote::quote;
use syn::DeriveInput;

use crate::ast::{Derive, Query};
use crate::check;
use crate::ctxt::Ctxt;
use crate::generics;
use names::{local, use_crate};

/// `#[derive(CacheKey)]` or `#[derive(Criteria)]`: the model is built and
/// checked, then expanded, or its errors are reported beside fallback impls.
pub fn derive(input: &DeriveInput, derive: Derive) -> TokenStream {
    let cx = Ctxt::new();
    let query = Query::from_ast(&cx, input, derive);
    if let Some(query) = &query {
        check::check(&cx, query);
    }
    match (cx.check(), query) {
        (Ok(()), Some(query)) => match derive {
            Derive::CacheKey => {
                let mut impls = impl_cache_key(&query);
                impls.extend(cached::impl_cached_query(&query));
                impls
            }
            Derive::Criteria => impl_criteria(&query),
        },
        (Err(errors), query) => {
            let krate = query.as_ref().and_then(|query| query.attrs.krate.as_ref());
            // Unknown without a model, or without a tenant field in a query
            // not declared global (the error says which it should be).
            let tenant = query
                .as_ref()
                .filter(|query| query.attrs.global.is_some() || query.tenants().next().is_some())
                .map(scopes::tenant_type);
            let stub = fallback::stub(input, derive, krate, tenant);
            let cached = match (&query, derive) {
                (Some(query), Derive::CacheKey) => {
                    let mut impls = cached::fallback(query);
                    impls.extend(scopes::fallback(query));
                    impls
                }
                _ => TokenStream::new(),
            };
            quote!(#errors #stub #cached)
        }
        (Ok(()), None) => unreachable!("a missing model always comes with an error"),
    }
}

/// The `CacheKey` impl, with the registry entry and the compile-time checks
/// (each an anonymous `const`), all naming the crate by its path.
fn impl_cache_key(query: &Query) -> TokenStream {
    let krate = query.crate_path();
    let ident = query.ident;
    let criteria = criteria::sorted(query);
    let bounded = generics::with_field_bounds(query);
    let (impl_generics, ty_generics, where_clause) = bounded.split_for_impl();
    let key::Writer {
        namespace_assert,
        method,
    } = key::writer(query, &criteria);
    let register = registry::register(query, &criteria);
    let clash_checks = criteria::clash_checks(query, &criteria);
    let feature_checks = features::checks(query, &criteria);
    let key_schema = schema::key_schema(query, &criteria);
    let tenant = scopes::tenant_type(query);
    let scopes = scopes::impl_scopes(query, &bounded);
    let write_query_tags = tags::write_query_tags(query);
    quote! {
        #namespace_assert
        #register
        #clash_checks
        #feature_checks

        #[automatically_derived]
        impl #impl_generics #krate::CacheKey for #ident #ty_generics #where_clause {
            const KEY_SCHEMA: #krate::KeySchema = #key_schema;
            #tenant

            #method
            #write_query_tags
        }

        #scopes
    }
}

/// The `Criteria` impl of a criteria-only struct, in a `const _` block with
/// its compile-time checks.
fn impl_criteria(query: &Query) -> TokenStream {
    let krate = query.crate_path();
    let ident = query.ident;
    let criteria = criteria::sorted(query);
    let names = criteria.iter().map(|(_, criterion)| &criterion.name);
    let list = local("list");
    let collect = criteria::collect(query, &criteria, &list);
    let clash_checks = criteria::clash_checks(query, &criteria);
    let feature_checks = features::checks(query, &criteria);
    let bounded = generics::with_field_bounds(query);
    let (impl_generics, ty_generics, where_clause) = bounded.split_for_impl();
    let use_crate = use_crate(query.attrs.krate.as_ref());
    quote! {
        #[doc(hidden)]
        const _: () = {
            #use_crate
            #clash_checks
            #feature_checks

            #[automatically_derived]
            impl #impl_generics #krate::Criteria for #ident #ty_generics #where_clause {
                const NAMES: &'static [&'static ::core::primitive::str] = &[#(#names),*];

                fn collect_criteria<'__a>(&'__a self, #list: &mut #krate::CriteriaList<'__a>) {
                    #collect
                }
            }
        };
    }
}
