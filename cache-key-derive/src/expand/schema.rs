//! The schema constant: `CacheKey::KEY_SCHEMA`, what the key is made of, as
//! the registry and reviewers read it.

use proc_macro2::TokenStream;
use quote::quote;
use syn::LitStr;

use crate::ast::{CratePath, Criterion, Field, FieldKind, Query};
use crate::attr::Namespace;

/// The `KeySchema` expression of a query, its criteria sorted as in the key.
pub fn key_schema(query: &Query, criteria: &[(&Field, &Criterion)]) -> TokenStream {
    let krate = query.crate_path();
    let namespace = match &query.attrs.namespace {
        Some(Namespace::Literal(lit)) => quote!(#lit),
        Some(Namespace::Path(path)) => quote!(#path),
        None => unreachable!("the namespace is checked before expansion"),
    };
    let (operation, schema) = (query.operation(), query.schema());
    let scope = match &query.attrs.global {
        Some(reason) => quote!(#krate::Scope::Global { reason: #reason }),
        None => {
            let names = query.tenants().map(|f| &f.name);
            quote!(#krate::Scope::Tenant { fields: &[#(#names),*] })
        }
    };
    // Only the lists a query has, as text where it can be: each `&[...]` is
    // a constant for rustc to check, a string literal is not.
    let criteria = (!criteria.is_empty()).then(|| {
        let entries = criteria.iter().map(|(field, criterion)| {
            let allow = criterion.allow.as_ref().map(LitStr::value);
            [
                Some(criterion.name.clone()),
                Some(field.name.clone()),
                allow,
            ]
        });
        match text(entries) {
            Some(text) => quote!(.with_criteria_text(#text)),
            None => {
                let criteria = criteria_schema(krate, criteria);
                quote!(.with_criteria(#criteria))
            }
        }
    });
    let skipped = query.skipped().next().is_some().then(|| {
        let entries = query
            .skipped()
            .map(|field| [Some(field.name.clone()), skip_reason(field)]);
        match text(entries) {
            Some(text) => quote!(.with_skipped_text(#text)),
            None => {
                let skipped = skipped_schema(query);
                quote!(.with_skipped(#skipped))
            }
        }
    });
    let flattened = query.flattened().next().is_some().then(|| {
        let flattened = flattened_schema(query);
        quote!(.with_flattened(#flattened))
    });
    let hash_tag = query
        .attrs
        .hash_tag
        .is_some()
        .then(|| quote!(.with_hash_tag()));
    let max_len = query.attrs.max_len.as_ref().map(|max| {
        let max = max.value;
        quote!(.with_max_len(#max))
    });
    let tags = query.tags().next().is_some().then(|| {
        let entries = query.tags().map(|(field, tag)| {
            let (name, field_name) = (&tag.name, &field.name);
            let global = match &tag.global {
                Some(reason) => quote!(::core::option::Option::Some(#reason)),
                None => quote!(::core::option::Option::None),
            };
            quote!(#krate::TagField::new(#name, #field_name, #global))
        });
        quote!(.with_tags(&[#(#entries),*]))
    });
    quote! {
        #krate::KeySchema::new(
            #namespace,
            #operation,
            #schema,
            #scope,
        )
        #criteria
        #skipped
        #flattened
        #hash_tag
        #max_len
        #tags
    }
}

/// The entries as `KeySchema`'s text lists read them: every part ended by
/// `\0`, an empty part for none. `None` when a part would not read back the
/// same: it holds a `\0`, or it is empty (which reads as none).
fn text<const N: usize>(entries: impl Iterator<Item = [Option<String>; N]>) -> Option<String> {
    let mut text = String::new();
    for part in entries.flatten() {
        if let Some(part) = part {
            if part.is_empty() || part.contains('\0') {
                return None;
            }
            text.push_str(&part);
        }
        text.push('\0');
    }
    Some(text)
}

fn skip_reason(field: &Field) -> Option<String> {
    match &field.kind {
        FieldKind::Skip { reason } => reason.as_ref().map(LitStr::value),
        _ => None,
    }
}

fn criteria_schema(krate: CratePath<'_>, criteria: &[(&Field, &Criterion)]) -> TokenStream {
    let entries = criteria.iter().map(|(field, criterion)| {
        let name = &criterion.name;
        let field_name = &field.name;
        let allow = criterion
            .allow
            .as_ref()
            .map(|reason| quote!(.with_allow(#reason)));
        quote!(#krate::CriterionField::new(#name, #field_name) #allow)
    });
    quote!(&[#(#entries),*])
}

fn skipped_schema(query: &Query) -> TokenStream {
    let krate = query.crate_path();
    let entries = query.skipped().map(|field| {
        let field_name = &field.name;
        let reason = match &field.kind {
            FieldKind::Skip {
                reason: Some(reason),
            } => quote!(::core::option::Option::Some(#reason)),
            _ => quote!(::core::option::Option::None),
        };
        quote!(#krate::SkippedField::new(#field_name, #reason))
    });
    quote!(&[#(#entries),*])
}

fn flattened_schema(query: &Query) -> TokenStream {
    let krate = query.crate_path();
    let entries = query.flattened().map(|field| {
        let field_name = &field.name;
        let ty = field.ty;
        quote!(#krate::FlattenedField::new(#field_name, <#ty as #krate::Criteria>::NAMES))
    });
    quote!(&[#(#entries),*])
}
