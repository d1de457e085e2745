//! The typed scopes of a value's tags: for each tag a `#[derive(CacheTags)]`
//! struct declares on a field of its own, `Book::tag_scope_book::<Search>`,
//! taking the query type whose cached answers hold the value (its namespace
//! and tenant name the tag's counter), the query's tenant values as its
//! `tenant_scope` takes them, and one value of the tagged field's own type.
//! An invalidation by a mistyped id or tenant does not compile.

use std::collections::BTreeSet;

use proc_macro2::{Span, TokenStream, TokenTree};
use quote::{ToTokens, format_ident, quote, quote_spanned};
use syn::{DeriveInput, Ident};

use super::field::TaggedField;
use crate::ast::{CratePath, type_span};
use crate::attr::{FieldTag, Tag};
use crate::expand::names::local;

/// What the functions do: make the scope, or, beside compile errors, never
/// run (so calls written against the struct add no second wave of errors).
#[derive(Clone, Copy)]
pub enum Body {
    Scope,
    Unreachable,
}

/// The inherent impl of the struct's `tag_scope_<name>` functions, one per
/// tag name of its own fields (a `#[tags]` field's type has its own);
/// nothing when it has none. Each is `#[inline]`, so a scope never called
/// costs no code generation, and takes the struct's visibility.
///
/// Outside the `CacheTags` impl's `const _` block, so that rustc names the
/// functions `Book::tag_scope_book`, not `_::<impl Book>::tag_scope_book`:
/// the crate is named by its path (`krate`: `#[cache_key(crate = "...")]`'s).
pub fn impl_scopes(
    input: &DeriveInput,
    krate: Option<&syn::Path>,
    fields: &[TaggedField],
    body: Body,
) -> TokenStream {
    let query = query_param(input, fields);
    // Beside errors, names giving one function get one (the error says so).
    let mut seen = BTreeSet::new();
    let functions: Vec<TokenStream> = fields
        .iter()
        .filter_map(|field| match &field.tag {
            FieldTag::Tag(tag) => Some((field, tag)),
            FieldTag::Nested => None,
        })
        .filter(|(_, tag)| seen.insert(tag.function_suffix()))
        .map(|(field, tag)| function(input, krate, field, tag, &query, body))
        .collect();
    if functions.is_empty() {
        return TokenStream::new();
    }
    let ident = &input.ident;
    // The struct's own generics: each function bounds what its field needs.
    let (impl_generics, ty_generics, where_clause) = input.generics.split_for_impl();
    quote! {
        impl #impl_generics #ident #ty_generics #where_clause {
            #(#functions)*
        }
    }
}

/// The query type parameter, `Q` (as rustc's "consider specifying the
/// generic argument: `::<Q>`" shows it), or `__Q` where the struct's
/// generics or a tagged field's type could name a `Q` of the user's (a
/// macro's type might).
fn query_param(input: &DeriveInput, fields: &[TaggedField]) -> Ident {
    let mut tokens = input.generics.to_token_stream();
    input.generics.where_clause.to_tokens(&mut tokens);
    for field in fields {
        if let FieldTag::Tag(_) = field.tag {
            field.ty.to_tokens(&mut tokens);
        }
    }
    let name = if may_name_q(tokens) { "__Q" } else { "Q" };
    Ident::new(name, Span::call_site())
}

fn may_name_q(tokens: TokenStream) -> bool {
    tokens.into_iter().any(|tree| match tree {
        TokenTree::Ident(ident) => ident == "Q",
        TokenTree::Punct(punct) => punct.as_char() == '!',
        TokenTree::Group(group) => may_name_q(group.stream()),
        TokenTree::Literal(_) => false,
    })
}

/// `::cache_key`, spanned at `span`, or the path `#[cache_key(crate = "...")]`
/// gives.
fn crate_path(krate: Option<&syn::Path>, span: Span) -> CratePath<'_> {
    match krate {
        Some(path) => CratePath::Given(path),
        None => CratePath::Default(span),
    }
}

fn function(
    input: &DeriveInput,
    krate: Option<&syn::Path>,
    field: &TaggedField,
    tag: &Tag,
    query: &Ident,
    body: Body,
) -> TokenStream {
    let Tag { name, global, .. } = tag;
    let krate_path = crate_path(krate, Span::call_site());
    let vis = &input.vis;
    let function = format_ident!("tag_scope_{}", tag.function_suffix(), span = name.span());
    let (tenant, value) = (local("tenant"), local("value"));
    let ty = field.ty;
    // The value is the field's `TagValues::One` (`u64` for a field of `u64`,
    // `Option<u64>` or `Vec<u64>`), named through `__private::TagValueOf`,
    // whose bound mentions `Q`: rustc checks it where the scope is called,
    // with `Q` known (a mistyped value is "expected `&u64`, found
    // `&&str`"), never here, where a field type that is no tag value would
    // be a second error beside `write_tags`' own.
    let (value_ty, bounds) = match body {
        Body::Scope => {
            let one = quote!(<#ty as #krate_path::__private::TagValueOf<#query>>::One);
            let span = type_span(ty);
            let at_type = crate_path(krate, span);
            let bounds = quote_spanned! {span=>
                #ty: #at_type::__private::TagValueOf<#query>,
                #one: #at_type::TenantValue,
            };
            (one, bounds)
        }
        // The field's type may be what the errors are about.
        Body::Unreachable => (quote!(impl ?::core::marker::Sized), TokenStream::new()),
    };
    // A query whose answers carry tags: the derive implements the marker
    // with `value_tags`.
    let query_bound = match body {
        Body::Scope => quote!(#query: #krate_path::__private::ValueTagsQuery),
        Body::Unreachable => quote!(#query: #krate_path::CacheKey),
    };
    let returns = quote! {
        ::core::result::Result<#krate_path::GenerationScope, #krate_path::GenerationError>
    };
    let ident = &input.ident;
    let tag_doc = format!(
        "The scope of tag `{}` = `value` (field `{}` of `{ident}`, a value as the field holds \
         one) in the namespace of the query type `{query}`",
        name.value(),
        field.name,
    );
    let query_doc = format!(
        "`{query}`, named with a turbofish (for a query type `Search`, \
         `{ident}::{function}::<Search>(..)`), is a query type declared `value_tags` whose \
         cached answers hold `{ident}` values: its namespace names \
         the tag's counter, the one its caches read for an answer holding the tag. Every query \
         type of that namespace names the same counter; a value that the queries of two \
         namespaces show needs a scope for each."
    );
    match global {
        None => {
            let tenant_bound = match body {
                Body::Scope => quote! {
                    <#query as #krate_path::CacheKey>::Tenant<'__a>: #krate_path::TenantRefs,
                },
                Body::Unreachable => TokenStream::new(),
            };
            let body = match body {
                Body::Scope => quote! {
                    #krate_path::TenantRefs::with_values(#tenant, |#tenant| {
                        #krate_path::GenerationScope::tag_unchecked::<#query>(
                            #tenant,
                            #krate_path::TagScope::Tenant,
                            #name,
                            &#value,
                        )
                    })
                },
                Body::Unreachable => quote! {
                    let _ = (#tenant, #value);
                    ::core::unreachable!("the derive reported compile errors")
                },
            };
            let doc = format!(
                "{tag_doc}, within the tenant `tenant`: every answer of that namespace cached for \
                 the tenant whose value holds the tag, whatever its query type, and every key \
                 tagged so. Pass it to `invalidate`.\n\n{query_doc} `tenant` is what \
                 `{query}::tenant_scope` takes (`&branch`, a tuple for a compound tenant).\n\n\
                 # Errors\n\nAn empty value (`\"\"`, `0`): `KeyError::EmptyTag`; a tenant value \
                 that writes nothing: `KeyError::EmptyTenant`, naming the field."
            );
            quote! {
                #[doc = #doc]
                #[inline]
                #vis fn #function<'__a, #query>(
                    #tenant: <#query as #krate_path::CacheKey>::Tenant<'__a>,
                    #value: &#value_ty,
                ) -> #returns
                where
                    #query_bound + '__a,
                    #tenant_bound
                    #bounds
                {
                    #body
                }
            }
        }
        Some(reason) => {
            let body = match body {
                Body::Scope => quote! {
                    #krate_path::GenerationScope::tag_unchecked::<#query>(
                        &[],
                        #krate_path::TagScope::Global,
                        #name,
                        &#value,
                    )
                },
                Body::Unreachable => quote! {
                    let _ = #value;
                    ::core::unreachable!("the derive reported compile errors")
                },
            };
            let doc = format!(
                "{tag_doc}, in every tenant (a global tag: {}): every answer of \
                 the namespace whose value holds the tag, whatever its query type and tenant, and \
                 every key tagged so. Pass it to `invalidate`.\n\n{query_doc}\n\n# Errors\n\n\
                 An empty value (`\"\"`, `0`): `KeyError::EmptyTag`.",
                reason.value()
            );
            quote! {
                #[doc = #doc]
                #[inline]
                #vis fn #function<#query>(
                    #value: &#value_ty,
                ) -> #returns
                where
                    #query_bound,
                    #bounds
                {
                    #body
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn param(input: &str) -> String {
        let input: DeriveInput = syn::parse_str(input).unwrap();
        let cx = crate::ctxt::Ctxt::new();
        let fields = super::super::field::tagged_fields(&cx, &input).unwrap();
        assert!(cx.check().is_ok());
        query_param(&input, &fields).to_string()
    }

    #[test]
    fn the_query_parameter_is_q_unless_the_struct_could_name_a_q() {
        assert_eq!(param("struct B { #[tag = \"b\"] id: u64, q: Q }"), "Q");
        assert_eq!(param("struct B<Q> { #[tag = \"b\"] id: u64, q: Q }"), "__Q");
        assert_eq!(
            param("struct B<T> where T: Into<Q> { #[tag = \"b\"] id: T }"),
            "__Q"
        );
        assert_eq!(param("struct B { #[tag = \"b\"] id: Vec<Q> }"), "__Q");
        assert_eq!(param("struct B { #[tag = \"b\"] id: id_type!() }"), "__Q");
        assert_eq!(param("struct B { #[tags] inner: Vec<Q> }"), "Q");
    }
}
