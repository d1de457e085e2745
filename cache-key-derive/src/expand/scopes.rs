//! The typed scopes: `CacheKey::Tenant`, the tenant fields' types that
//! `Search::tenant_scope(&branch)` and `operation_scope` take (the trait's
//! provided functions, so a query type costs no function of its own), a
//! compound tenant's `Issues::tenant_scope_by_org(&org)` for each leading
//! part, and a tag's `Search::tag_scope_product(&shop, &id)`, taking the
//! tagged field's own value type. An invalidation by a mistyped, missing or
//! swapped value does not compile.

use std::collections::BTreeSet;

use proc_macro2::TokenStream;
use quote::{format_ident, quote, quote_spanned};
use syn::Generics;

use super::names::member_at_type;
use crate::ast::{Field, Query};
use crate::attr::Tag;

/// `type Tenant<'__a> = ..;` for the `CacheKey` impl: `&'__a T` for one
/// tenant field, a tuple of them for a compound tenant, `()` for a global
/// query.
pub fn tenant_type(query: &Query) -> TokenStream {
    let types: Vec<TokenStream> = query
        .tenants()
        .map(|field| {
            let ty = field.ty;
            quote_spanned!(field.ty_span=> &'__a #ty)
        })
        .collect();
    let tenant = match types.as_slice() {
        [one] => one.clone(),
        _ => quote!((#(#types),*)),
    };
    quote! {
        type Tenant<'__a> = #tenant where Self: '__a;
    }
}

/// The inherent impl of a compound tenant's leading-part scopes,
/// `tenant_scope_by_a(a)`: every key of the namespace whose tenant starts
/// with those values (none for one tenant field or a global query); and of
/// each tag's scope, `tag_scope_<name>`. Nothing when there are neither.
///
/// Each is `#[inline]`, so a query whose scopes are never called costs no
/// code generation, and each takes the struct's visibility.
pub fn impl_scopes(query: &Query, bounded: &Generics) -> TokenStream {
    impl_with(query, bounded, Body::Scope)
}

/// The same functions beside compile errors, with bodies that never run, so
/// an invalidation written against the struct adds no second wave of errors
/// (and a tenant type the derive refused is not checked again).
pub fn fallback(query: &Query) -> TokenStream {
    let scopes = impl_with(query, query.generics, Body::Unreachable);
    if scopes.is_empty() {
        return scopes;
    }
    let use_crate = super::names::use_crate(query.attrs.krate.as_ref());
    quote! {
        const _: () = {
            #use_crate
            #scopes
        };
    }
}

#[derive(Clone, Copy)]
enum Body {
    Scope,
    Unreachable,
}

fn impl_with(query: &Query, bounded: &Generics, body: Body) -> TokenStream {
    let mut functions = leading_scopes(query, body);
    functions.extend(tag_scopes(query, body));
    if functions.is_empty() {
        return TokenStream::new();
    }
    let ident = query.ident;
    let (impl_generics, ty_generics, where_clause) = bounded.split_for_impl();
    quote! {
        // A value is taken as its field's type, `&String` included: the point
        // is that no other type is accepted; a wide tenant's leading part
        // takes as many values as it has.
        #[allow(clippy::ptr_arg, clippy::too_many_arguments)]
        impl #impl_generics #ident #ty_generics #where_clause {
            #(#functions)*
        }
    }
}

/// `namespace `shop`` for the docs.
fn namespace_doc(query: &Query) -> String {
    match &query.attrs.namespace {
        Some(crate::attr::Namespace::Literal(lit)) => format!("namespace `{}`", lit.value()),
        _ => "this query's namespace".to_owned(),
    }
}

/// A compound tenant's `tenant_scope_by_<leading>` functions.
fn leading_scopes(query: &Query, body: Body) -> Vec<TokenStream> {
    let tenants: Vec<&Field> = query.tenants().collect();
    if query.attrs.global.is_some() || tenants.len() < 2 {
        return Vec::new();
    }
    let ident = query.ident;
    let namespace_doc = namespace_doc(query);
    (1..tenants.len())
        .map(|len| {
            let leading = &tenants[..len];
            let names: Vec<&str> = leading.iter().map(|field| field.name.as_str()).collect();
            let name = format_ident!("tenant_scope_by_{}", names.join("_"), span = ident.span());
            function(
                query,
                body,
                &name,
                leading,
                &format!(
                    "The scope of every key of {namespace_doc} whose tenant starts with {}, whatever \
                     the rest and whatever its query type: pass it to `invalidate`.",
                    describe(leading)
                ),
            )
        })
        .collect()
}

/// Each tag's `tag_scope_<name>`: for a tag inside the tenant, the query's
/// tenant values (`CacheKey::Tenant`, as `tenant_scope` takes them) and one
/// value of the tagged field (`TagValues::One`: `u64` for a field of `u64`,
/// `Option<u64>` or `Vec<u64>`); for a global tag, the value alone.
fn tag_scopes(query: &Query, body: Body) -> Vec<TokenStream> {
    let krate = query.crate_path();
    let vis = query.vis;
    let namespace_doc = namespace_doc(query);
    // Beside errors, a name given twice gets one function (its error says so).
    let mut seen = BTreeSet::new();
    query
        .tags()
        .filter(|(_, tag)| seen.insert(tag.function_suffix()))
        .map(|(field, tag)| {
            let Tag { name, global, .. } = tag;
            let function =
                format_ident!("tag_scope_{}", tag.function_suffix(), span = name.span());
            let ty = field.ty;
            // The value is generic, bound to be the field's `TagValues::One`
            // (see `__private::TagValueOf`): a field type that is no tag
            // value is reported once, by `write_query_tags`, and a mistyped
            // value where it is passed.
            let (value_param, value_bounds) = match body {
                Body::Scope => {
                    let krate = query.crate_path_at(field.ty_span);
                    let bound = quote_spanned! {field.ty_span=>
                        #ty: #krate::__private::TagValueOf<__V, One = __V>
                    };
                    (
                        quote!(__V),
                        quote!(#bound, __V: #krate::TenantValue,),
                    )
                }
                // The field's type may be what the errors are about.
                Body::Unreachable => (quote!(__V: ?::core::marker::Sized), TokenStream::new()),
            };
            let tag_doc = format!(
                "The scope of every key and cached entry of {namespace_doc} tagged `{}` = `value` \
                 (the tag of field `{}`, a value as the field holds one)",
                name.value(),
                field.name
            );
            match global {
                None => {
                    let body = match body {
                        Body::Scope => quote! {
                            #krate::TenantRefs::with_values(tenant, |tenant| {
                                #krate::GenerationScope::tag_unchecked::<Self>(
                                    tenant,
                                    #krate::TagScope::Tenant,
                                    #name,
                                    value,
                                )
                            })
                        },
                        Body::Unreachable => quote! {
                            let _ = (tenant, value);
                            ::core::unreachable!("the derive reported compile errors")
                        },
                    };
                    let doc = format!(
                        "{tag_doc}, within the tenant `tenant`, whatever its query type: pass it to \
                         `invalidate`. `tenant` is what `tenant_scope` takes.\n\n# Errors\n\n\
                         An empty value (`\"\"`, `0`): `KeyError::EmptyTag`; a tenant value that \
                         writes nothing: `KeyError::EmptyTenant`, naming the field."
                    );
                    quote! {
                        #[doc = #doc]
                        #[inline]
                        #vis fn #function<'__a, #value_param>(
                            tenant: <Self as #krate::CacheKey>::Tenant<'__a>,
                            value: &__V,
                        ) -> ::core::result::Result<#krate::GenerationScope, #krate::GenerationError>
                        where
                            Self: '__a,
                            #value_bounds
                        {
                            #body
                        }
                    }
                }
                Some(reason) => {
                    let body = match body {
                        Body::Scope => quote! {
                            #krate::GenerationScope::tag_unchecked::<Self>(
                                &[],
                                #krate::TagScope::Global,
                                #name,
                                value,
                            )
                        },
                        Body::Unreachable => quote! {
                            let _ = value;
                            ::core::unreachable!("the derive reported compile errors")
                        },
                    };
                    let doc = format!(
                        "{tag_doc}, in every tenant of the namespace (a global tag: {}): pass it to \
                         `invalidate`.\n\n# Errors\n\nAn empty value (`\"\"`, `0`): `KeyError::EmptyTag`.",
                        reason.value()
                    );
                    quote! {
                        #[doc = #doc]
                        #[inline]
                        #vis fn #function<#value_param>(
                            value: &__V,
                        ) -> ::core::result::Result<#krate::GenerationScope, #krate::GenerationError>
                        where
                            #value_bounds
                        {
                            #body
                        }
                    }
                }
            }
        })
        .collect()
}

/// One scope function over `fields`, made by `GenerationScope::#make`.
fn function(
    query: &Query,
    body: Body,
    name: &syn::Ident,
    fields: &[&Field],
    doc: &str,
) -> TokenStream {
    let krate = query.crate_path();
    let vis = query.vis;
    // Named after the fields: rustdoc and rustc's "defined here" show them.
    let names: Vec<&syn::Ident> = fields.iter().map(|field| field.member).collect();
    let params = fields.iter().zip(&names).map(|(field, name)| {
        let ty = field.ty;
        quote_spanned!(field.ty_span=> #name: &#ty)
    });
    let body = match body {
        Body::Scope => {
            // Spanned on the type, as the key writer's cast: a type that is
            // not a tenant value is reported once, not again per function.
            let values = fields.iter().map(|field| {
                let name = member_at_type(field);
                let krate = query.crate_path_at(field.ty_span);
                quote_spanned!(field.ty_span=> #name as &dyn #krate::TenantValue)
            });
            quote!(#krate::GenerationScope::tenant_unchecked::<Self>(&[#(#values),*]))
        }
        Body::Unreachable => quote! {
            let _ = (#(#names,)*);
            ::core::unreachable!("the derive reported compile errors")
        },
    };
    let doc = format!(
        "{doc}\n\n# Errors\n\nA value that writes nothing (an empty string): `KeyError::EmptyTenant`, naming the field."
    );
    quote! {
        #[doc = #doc]
        #[inline]
        #vis fn #name(#(#params),*) -> ::core::result::Result<#krate::GenerationScope, #krate::GenerationError> {
            #body
        }
    }
}

/// `` `org`, `repo` `` for the docs.
fn describe(fields: &[&Field]) -> String {
    let names: Vec<String> = fields
        .iter()
        .map(|field| format!("`{}`", field.name))
        .collect();
    names.join(", ")
}
