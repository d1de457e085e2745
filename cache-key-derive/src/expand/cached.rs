//! The `CachedQuery` impl: `#[cache_key(value = Type, ttl = "5m")]`, the
//! query's cached answer, its id (`value_id`, or the type as written) and
//! how long it lives.

use proc_macro2::{Span, TokenStream};
use quote::{quote, quote_spanned};
use syn::Type;
use syn::spanned::Spanned;

use super::names::use_crate;
use crate::ast::Query;
use crate::generics;

/// `impl CachedQuery` for a query that declares `value` and `ttl`, with the
/// same generics and bounds as its `CacheKey` impl; nothing otherwise.
pub fn impl_cached_query(query: &Query) -> TokenStream {
    let attrs = &query.attrs.cached;
    match (&attrs.value, attrs.ttl) {
        (Some(value), Some((millis, span))) => impl_with(query, value, millis, span),
        _ => TokenStream::new(),
    }
}

/// The impl emitted beside compile errors when `value` was readable, so code
/// reading the query from a cache adds no second wave of errors.
pub fn fallback(query: &Query) -> TokenStream {
    let attrs = &query.attrs.cached;
    match (&attrs.value, attrs.ttl) {
        (Some(value), ttl) => {
            let (millis, span) = ttl.unwrap_or((u64::MAX, Span::call_site()));
            impl_with(query, value, millis, span)
        }
        (None, _) => TokenStream::new(),
    }
}

fn impl_with(query: &Query, value: &Type, millis: u64, ttl_span: Span) -> TokenStream {
    let ident = query.ident;
    let bounded = generics::with_value_bound(query, value);
    let (impl_generics, ty_generics, where_clause) = bounded.split_for_impl();
    let use_crate = use_crate(query.attrs.krate.as_ref());
    // Spanned on the type: a value that is not `Clone + Send + Sync + 'static`
    // is reported on what the user wrote.
    let value_item = quote_spanned!(value.span()=> type Value = #value;);
    let value_id = query
        .attrs
        .cached
        .value_id()
        .expect("a query with `value` has a value id");
    let ttl_item = quote_spanned! {ttl_span=>
        const TTL: ::core::time::Duration = ::core::time::Duration::from_millis(#millis);
    };
    // `value_tags`: the answer's tags are checked by caches (`VALUE_TAGS`)
    // and read from the value's `CacheTags`, spanned on its type, where a
    // value that is not `CacheTags` is reported.
    let value_tags = query.attrs.cached.value_tags.map(|_| {
        let write = quote_spanned! {value.span()=>
            <Self::Value as __cache_key::CacheTags>::write_tags(value, tags)
        };
        quote! {
            const VALUE_TAGS: ::core::primitive::bool = true;

            #[inline]
            fn write_value_tags(
                value: &Self::Value,
                tags: &mut __cache_key::Tags,
            ) -> ::core::result::Result<(), __cache_key::KeyError> {
                #write
            }
        }
    });
    // What a value's typed tag scopes (`Book::tag_scope_book::<Search>`)
    // require of the query they take.
    let value_tags_query = query.attrs.cached.value_tags.map(|_| {
        quote! {
            #[automatically_derived]
            impl #impl_generics __cache_key::__private::ValueTagsQuery for #ident #ty_generics #where_clause {}
        }
    });
    quote! {
        #[doc(hidden)]
        const _: () = {
            #use_crate

            #[automatically_derived]
            impl #impl_generics __cache_key::cache::CachedQuery for #ident #ty_generics #where_clause {
                #value_item
                const VALUE_ID: &'static ::core::primitive::str = #value_id;
                #ttl_item
                #value_tags
            }

            #value_tags_query
        };
    }
}
