//! The schema constant: `CacheKey::KEY_SCHEMA`, what the key is made of, as
//! the registry and reviewers read it.

use proc_macro2::TokenStream;
use quote::quote;

use crate::ast::{Criterion, Field, FieldKind, Query};
use crate::attr::Namespace;

/// The `KeySchema` expression of a query, its criteria sorted as in the key.
pub fn key_schema(query: &Query, criteria: &[(&Field, &Criterion)]) -> TokenStream {
    let namespace = match &query.attrs.namespace {
        Some(Namespace::Literal(lit)) => quote!(#lit),
        Some(Namespace::Path(path)) => quote!(#path),
        None => unreachable!("the namespace is checked before expansion"),
    };
    let (operation, schema) = (query.operation(), query.schema());
    let scope = match &query.attrs.global {
        Some(reason) => quote!(__cache_key::Scope::Global { reason: #reason }),
        None => {
            let names = query.tenants().map(|f| &f.name);
            quote!(__cache_key::Scope::Tenant { fields: &[#(#names),*] })
        }
    };
    // Only the lists a query has: each `&[...]` is a constant for rustc to check.
    let criteria = (!criteria.is_empty()).then(|| {
        let criteria = criteria_schema(criteria);
        quote!(.with_criteria(#criteria))
    });
    let skipped = query.skipped().next().is_some().then(|| {
        let skipped = skipped_schema(query);
        quote!(.with_skipped(#skipped))
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
    quote! {
        __cache_key::KeySchema::new(
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
    }
}

fn criteria_schema(criteria: &[(&Field, &Criterion)]) -> TokenStream {
    let entries = criteria.iter().map(|(field, criterion)| {
        let name = &criterion.name;
        let field_name = &field.name;
        let allow = criterion
            .allow
            .as_ref()
            .map(|reason| quote!(.with_allow(#reason)));
        quote!(__cache_key::CriterionField::new(#name, #field_name) #allow)
    });
    quote!(&[#(#entries),*])
}

fn skipped_schema(query: &Query) -> TokenStream {
    let entries = query.skipped().map(|field| {
        let field_name = &field.name;
        let reason = match &field.kind {
            FieldKind::Skip {
                reason: Some(reason),
            } => quote!(::core::option::Option::Some(#reason)),
            _ => quote!(::core::option::Option::None),
        };
        quote!(__cache_key::SkippedField::new(#field_name, #reason))
    });
    quote!(&[#(#entries),*])
}

fn flattened_schema(query: &Query) -> TokenStream {
    let entries = query.flattened().map(|field| {
        let field_name = &field.name;
        let ty = field.ty;
        quote!(__cache_key::FlattenedField::new(#field_name, <#ty as __cache_key::Criteria>::NAMES))
    });
    quote!(&[#(#entries),*])
}
