//! The typed scopes: `CacheKey::Tenant`, the tenant fields' types that
//! `Search::tenant_scope(&branch)` and `operation_scope` take (the trait's
//! provided functions, so a query type costs no function of its own), and a
//! compound tenant's `Issues::tenant_scope_by_org(&org)` for each leading part.
//! An invalidation by a mistyped, missing or swapped value does not compile.

use proc_macro2::TokenStream;
use quote::{format_ident, quote, quote_spanned};
use syn::Generics;

use super::names::member_at_type;
use crate::ast::{Field, Query};

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
/// with those values. Nothing for one tenant field or a global query.
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
    let tenants: Vec<&Field> = query.tenants().collect();
    if query.attrs.global.is_some() || tenants.len() < 2 {
        return TokenStream::new();
    }
    let ident = query.ident;
    let (impl_generics, ty_generics, where_clause) = bounded.split_for_impl();
    let namespace_doc = match &query.attrs.namespace {
        Some(crate::attr::Namespace::Literal(lit)) => format!("namespace `{}`", lit.value()),
        _ => "this query's namespace".to_owned(),
    };
    let functions = (1..tenants.len()).map(|len| {
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
    });
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
