//! The typed scopes: `Search::tenant_scope(&branch)` and its kin, inherent
//! functions taking the tenant values in the fields' own types and order, so
//! an invalidation by a mistyped, missing or swapped value does not compile.

use proc_macro2::TokenStream;
use quote::{format_ident, quote, quote_spanned};
use syn::Generics;

use super::names::member_at_type;
use crate::ast::{Field, Query};

/// The inherent impl holding the query's scope functions:
/// - `tenant_scope(a, b)`: every key of the namespace for the whole tenant;
/// - `tenant_scope_by_a(a)`: for each leading part of a compound tenant;
/// - `operation_scope(a, b)`: the query's operation within the tenant
///   (`operation_scope()` for a global query).
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
    let use_crate = super::names::use_crate(query.attrs.krate.as_ref());
    let scopes = impl_with(query, query.generics, Body::Unreachable);
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
    let ident = query.ident;
    let (impl_generics, ty_generics, where_clause) = bounded.split_for_impl();
    let tenants: Vec<&Field> = query.tenants().collect();
    let namespace_doc = match &query.attrs.namespace {
        Some(crate::attr::Namespace::Literal(lit)) => format!("namespace `{}`", lit.value()),
        _ => "this query's namespace".to_owned(),
    };
    let operation = query.operation();
    let mut functions = Vec::new();
    if query.attrs.global.is_none() {
        let all = describe(&tenants);
        functions.push(function(
            query,
            body,
            &format_ident!("tenant_scope", span = ident.span()),
            &tenants,
            quote!(tenant_unchecked),
            &format!(
                "The scope of every key of {namespace_doc} whose tenant is {all}, whatever its query type: \
                 pass it to `invalidate`."
            ),
        ));
        for len in 1..tenants.len() {
            let leading = &tenants[..len];
            let names: Vec<&str> = leading.iter().map(|field| field.name.as_str()).collect();
            let name = format_ident!("tenant_scope_by_{}", names.join("_"), span = ident.span());
            functions.push(function(
                query,
                body,
                &name,
                leading,
                quote!(tenant_unchecked),
                &format!(
                    "The scope of every key of {namespace_doc} whose tenant starts with {}, whatever \
                     the rest and whatever its query type: pass it to `invalidate`.",
                    describe(leading)
                ),
            ));
        }
    }
    let within = if tenants.is_empty() {
        "among the global keys".to_owned()
    } else {
        format!("for the tenant {}", describe(&tenants))
    };
    functions.push(function(
        query,
        body,
        &format_ident!("operation_scope", span = ident.span()),
        &tenants,
        quote!(operation_unchecked),
        &format!(
            "The scope of every key of operation `{operation}` in {namespace_doc}, {within}: pass it \
             to `invalidate`."
        ),
    ));
    quote! {
        // A value is taken as its field's type, `&String` included: the point
        // is that no other type is accepted.
        #[automatically_derived]
        #[allow(clippy::ptr_arg)]
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
    make: TokenStream,
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
            quote!(#krate::GenerationScope::#make::<Self>(&[#(#values),*]))
        }
        Body::Unreachable => quote! {
            let _ = (#(#names,)*);
            ::core::unreachable!("the derive reported compile errors")
        },
    };
    let doc = if fields.is_empty() {
        doc.to_owned()
    } else {
        format!(
            "{doc}\n\n# Errors\n\nA value that writes nothing (an empty string): `KeyError::EmptyTenant`, naming the field."
        )
    };
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
