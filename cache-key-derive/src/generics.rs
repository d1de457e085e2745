//! The generics of the impls a query gets, and which of its types mention the
//! struct's parameters.

use proc_macro2::{TokenStream, TokenTree};
use quote::quote;
use syn::{Generics, Ident, Type, WherePredicate};

use crate::ast::{Criterion, FieldKind, Query};

/// The struct's generics, with a bound for each field whose type mentions a
/// type parameter (`T: CriterionValue` for a `#[criterion] filter: T`, and
/// `T: TagValues` too when it is tagged).
pub fn with_field_bounds(query: &Query) -> Generics {
    let krate = query.crate_path();
    let mut generics = query.generics.clone();
    let type_params = type_params(query.generics);
    let bounds: Vec<WherePredicate> = query
        .fields
        .iter()
        .filter(|field| mentions_any(field.ty, &type_params))
        .filter_map(|field| {
            let ty = field.ty;
            match &field.kind {
                FieldKind::Tenant { .. } => Some(syn::parse_quote!(#ty: #krate::TenantValue)),
                FieldKind::Criterion(Criterion {
                    with: None,
                    trim: false,
                    lowercase: false,
                    ..
                }) => Some(syn::parse_quote!(#ty: #krate::CriterionValue)),
                FieldKind::Criterion(_) => None,
                FieldKind::Flatten => Some(syn::parse_quote!(#ty: #krate::Criteria)),
                FieldKind::Skip { .. } | FieldKind::Unmarked => None,
            }
        })
        .collect();
    let tag_bounds: Vec<WherePredicate> = query
        .tags()
        .filter(|(field, _)| mentions_any(field.ty, &type_params))
        .map(|(field, _)| {
            let ty = field.ty;
            syn::parse_quote!(#ty: #krate::TagValues)
        })
        .collect();
    let where_clause = generics.make_where_clause();
    where_clause.predicates.extend(bounds);
    where_clause.predicates.extend(tag_bounds);
    generics
}

/// [`with_field_bounds`], and the bounds `CachedQuery` puts on its `Value`
/// when the cached answer's type is built from the type parameters (with
/// `value_tags`, `CacheTags` too), so that a missing one is reported where
/// the query is used.
pub fn with_value_bound(query: &Query, value: &Type) -> Generics {
    let mut generics = with_field_bounds(query);
    if mentions_any(value, &type_params(query.generics)) {
        let krate = query.crate_path();
        let predicates = &mut generics.make_where_clause().predicates;
        predicates.push(syn::parse_quote!(
            #value: ::core::clone::Clone + ::core::marker::Send + ::core::marker::Sync + 'static
        ));
        if query.attrs.cached.value_tags.is_some() {
            predicates.push(syn::parse_quote!(#value: #krate::CacheTags));
        }
    }
    generics
}

/// Whether a `const` item beside the impl can name `ty`: it mentions none of
/// the struct's type or const parameters, and no lifetime.
pub fn nameable_in_const(ty: &Type, generics: &Generics) -> bool {
    let params: Vec<&Ident> = generics
        .type_params()
        .map(|p| &p.ident)
        .chain(generics.const_params().map(|p| &p.ident))
        .collect();
    !mentions_any(ty, &params) && !has_lifetime(ty)
}

fn type_params(generics: &Generics) -> Vec<&Ident> {
    generics.type_params().map(|p| &p.ident).collect()
}

/// Whether `ty` mentions one of `params`.
pub fn mentions_any(ty: &Type, params: &[&Ident]) -> bool {
    fn walk(tokens: TokenStream, params: &[&Ident]) -> bool {
        tokens.into_iter().any(|tree| match tree {
            TokenTree::Ident(ident) => params.iter().any(|p| **p == ident),
            TokenTree::Group(group) => walk(group.stream(), params),
            _ => false,
        })
    }
    !params.is_empty() && walk(quote!(#ty), params)
}

/// Whether `ty` mentions a lifetime.
fn has_lifetime(ty: &Type) -> bool {
    fn walk(tokens: TokenStream) -> bool {
        tokens.into_iter().any(|tree| match tree {
            TokenTree::Punct(punct) => punct.as_char() == '\'',
            TokenTree::Group(group) => walk(group.stream()),
            _ => false,
        })
    }
    walk(quote!(#ty))
}
