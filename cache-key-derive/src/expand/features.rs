//! Checks that name the missing feature of `cache-key` when a criterion's
//! type is one the crate supports only behind a feature (`chrono`, `time`,
//! `uuid`, `url`), or a tenant's is a `Uuid`: without them, the only error
//! would say that the type cannot be part of a key at all.

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{GenericArgument, Ident, PathArguments, Type};

use crate::ast::{Criterion, Field, Query};
use crate::generics;

/// The feature-backed type inside `ty` (itself, or inside an `Option`, a
/// reference, a list...) and the bound that names its feature: one of the
/// types a feature implements `CriterionValue` for, or a path into its crate.
fn feature_type(ty: &Type) -> Option<(&Type, &'static str)> {
    match ty {
        Type::Path(path) if path.qself.is_none() => {
            let segments = &path.path.segments;
            let first = segments.first()?.ident.to_string();
            let last = segments.last()?.ident.to_string();
            let bound = match (first.as_str(), last.as_str()) {
                ("chrono", _) | (_, "NaiveDate" | "DateTime") => Some("WithChrono"),
                ("time", _) | (_, "OffsetDateTime" | "UtcDateTime") => Some("WithTime"),
                ("uuid", _) | (_, "Uuid") => Some("WithUuid"),
                ("url", _) | (_, "Url") => Some("WithUrl"),
                _ => None,
            };
            if let Some(bound) = bound {
                return Some((ty, bound));
            }
            segments
                .iter()
                .find_map(|segment| match &segment.arguments {
                    PathArguments::AngleBracketed(args) => {
                        args.args.iter().find_map(|arg| match arg {
                            GenericArgument::Type(ty) => feature_type(ty),
                            _ => None,
                        })
                    }
                    _ => None,
                })
        }
        Type::Reference(reference) => feature_type(&reference.elem),
        Type::Slice(slice) => feature_type(&slice.elem),
        Type::Array(array) => feature_type(&array.elem),
        Type::Paren(paren) => feature_type(&paren.elem),
        Type::Group(group) => feature_type(&group.elem),
        _ => None,
    }
}

/// A function, never called, whose `where` clause requires each
/// feature-backed criterion type through a trait whose message names the
/// feature. Types built from the struct's parameters are left to the key
/// writer's own bound.
pub fn checks(query: &Query, criteria: &[(&Field, &Criterion)]) -> TokenStream {
    let criteria = criteria
        .iter()
        .filter(|(_, criterion)| criterion.with.is_none())
        .filter_map(|(field, _)| feature_type(field.ty));
    // Of the feature types, only `Uuid` is a tenant value.
    let tenants = query
        .tenants()
        .filter_map(|field| feature_type(field.ty))
        .filter(|(_, bound)| *bound == "WithUuid")
        .map(|(ty, _)| (ty, "WithUuidTenant"));
    let bounds: Vec<TokenStream> = criteria
        .chain(tenants)
        .filter(|(ty, _)| generics::nameable_in_const(ty, query.generics))
        .map(|(ty, bound)| {
            // On the type's own name, not on the crate's path to it.
            let span = match ty {
                Type::Path(path) => path.path.segments.last().map(|s| s.ident.span()),
                _ => None,
            }
            .unwrap_or_else(|| ty.span());
            let bound = Ident::new(bound, span);
            let krate = query.crate_path_at(span);
            quote_spanned!(span=> #ty: #krate::__private::features::#bound)
        })
        .collect();
    if bounds.is_empty() {
        return TokenStream::new();
    }
    quote! {
        const _: () = {
            #[allow(dead_code)]
            fn __cache_key_features() where #(#bounds),* {}
        };
    }
}
