//! The typed scopes: `Search::tenant_scope(&branch)` and its kin, inherent
//! functions taking the tenant values in the fields' own types and order, so
//! an invalidation by a mistyped, missing or swapped value does not compile.

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned};
use syn::Generics;
use syn::spanned::Spanned;

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
    name: &syn::Ident,
    fields: &[&Field],
    make: TokenStream,
    doc: &str,
) -> TokenStream {
    let vis = query.vis;
    // Named after the fields (rustdoc shows them), at the macro's own
    // hygiene so no constant of the user's can turn one into a pattern.
    let names: Vec<syn::Ident> = fields
        .iter()
        .map(|field| {
            let mut name = field.member.clone();
            name.set_span(Span::mixed_site().located_at(field.member.span()));
            name
        })
        .collect();
    let params = fields.iter().zip(&names).map(|(field, name)| {
        let ty = field.ty;
        quote_spanned!(ty.span()=> #name: &#ty)
    });
    let values = names
        .iter()
        .map(|name| quote!(#name as &dyn __cache_key::TenantValue));
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
        #vis fn #name(#(#params),*) -> ::core::result::Result<__cache_key::GenerationScope, __cache_key::GenerationError> {
            __cache_key::GenerationScope::#make::<Self>(&[#(#values),*])
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
