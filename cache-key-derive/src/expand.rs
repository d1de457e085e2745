//! Code generation: the `CacheKey` impl of a checked query struct.

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{DeriveInput, Ident, Type, WherePredicate};

use crate::ast::{Field, FieldKind, Query};
use crate::attr::Namespace;
use crate::case::to_snake_case;
use crate::escape::escape;

/// The impl for a query that passed every check.
pub fn impl_cache_key(query: &Query) -> TokenStream {
    let ident = query.ident;
    let operation = match &query.attrs.operation {
        Some(lit) => lit.value(),
        None => to_snake_case(ident.to_string().trim_start_matches("r#")),
    };
    let operation_escaped = escape(&operation);
    let schema = query.attrs.schema.as_ref().map_or(1, |s| s.value);

    let (namespace_const, namespace_text, namespace_assert) = match &query.attrs.namespace {
        Some(Namespace::Literal(lit)) => {
            let escaped = escape(&lit.value());
            (
                quote!(#lit),
                quote!(::cache_key::__private::Text::Escaped(#escaped)),
                TokenStream::new(),
            )
        }
        Some(Namespace::Path(path)) => (
            quote!(#path),
            quote!(::cache_key::__private::Text::Raw(#path)),
            quote_spanned! {path.span()=>
                const _: () = ::core::assert!(
                    !#path.is_empty(),
                    "the namespace of a cache key cannot be empty"
                );
            },
        ),
        // Checked before expansion.
        None => unreachable!("namespace is checked"),
    };

    let mut criteria: Vec<(&String, &Field)> = query
        .criteria()
        .filter_map(|field| match &field.kind {
            FieldKind::Criterion { name, .. } => Some((name, field)),
            _ => None,
        })
        .collect();
    // The key format sorts criteria by the bytes of their names; doing it here
    // leaves no sort for run time.
    criteria.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));

    let criterion_writes = criteria.iter().map(|(name, field)| {
        let escaped = escape(name);
        let member = member_at_type(field);
        let ty = field.ty;
        quote_spanned! {field.ty.span()=>
            __criteria.criterion::<#ty>(#escaped, &self.#member);
        }
    });
    let criterion_schema = criteria.iter().map(|(name, field)| {
        let field_name = &field.name;
        let allow = match &field.kind {
            FieldKind::Criterion {
                allow: Some(reason),
                ..
            } => quote!(.with_allow(#reason)),
            _ => TokenStream::new(),
        };
        quote!(::cache_key::CriterionField::new(#name, #field_name) #allow)
    });
    let skipped_schema = query.skipped().map(|field| {
        let field_name = &field.name;
        let reason = match &field.kind {
            FieldKind::Skip {
                reason: Some(reason),
            } => quote!(::core::option::Option::Some(#reason)),
            _ => quote!(::core::option::Option::None),
        };
        quote!(::cache_key::SkippedField::new(#field_name, #reason))
    });

    let tenants: Vec<&Field> = query.tenants().collect();
    let (scope, tenant_segment) = match &query.attrs.global {
        Some(reason) => (
            quote!(::cache_key::Scope::Global { reason: #reason }),
            quote!(::cache_key::__private::TenantSegment::Global),
        ),
        None => {
            let names = tenants.iter().map(|f| &f.name);
            let values = tenants.iter().map(|field| {
                let name = &field.name;
                let member = member_at_type(field);
                let ty = field.ty;
                quote_spanned! {field.ty.span()=>
                    (#name, ::cache_key::__private::tenant::<#ty>(&self.#member))
                }
            });
            (
                quote!(::cache_key::Scope::Tenant { fields: &[#(#names),*] }),
                quote!(::cache_key::__private::TenantSegment::Fields(&[#(#values),*])),
            )
        }
    };

    let hash_tag = query.attrs.hash_tag.is_some();
    let hash_tag_schema = hash_tag.then(|| quote!(.with_hash_tag()));
    let (max_len, max_len_schema) = match &query.attrs.max_len {
        Some(max) => {
            let max = max.value;
            (
                quote!(::core::option::Option::Some(#max)),
                quote!(.with_max_len(#max)),
            )
        }
        None => (quote!(::core::option::Option::None), TokenStream::new()),
    };

    let mut generics = query.generics.clone();
    let type_params: Vec<&Ident> = query.generics.type_params().map(|p| &p.ident).collect();
    let bounds: Vec<WherePredicate> = query
        .fields
        .iter()
        .filter(|field| mentions_any(field.ty, &type_params))
        .filter_map(|field| {
            let ty = field.ty;
            match field.kind {
                FieldKind::Tenant => Some(syn::parse_quote!(#ty: ::cache_key::TenantValue)),
                FieldKind::Criterion { .. } => {
                    Some(syn::parse_quote!(#ty: ::cache_key::CriterionValue))
                }
                _ => None,
            }
        })
        .collect();
    generics.make_where_clause().predicates.extend(bounds);
    let (impl_generics, ty_generics, where_clause) = generics.split_for_impl();

    quote! {
        #[doc(hidden)]
        const _: () = {
            #namespace_assert

            #[automatically_derived]
            impl #impl_generics ::cache_key::CacheKey for #ident #ty_generics #where_clause {
                const KEY_SCHEMA: ::cache_key::KeySchema = ::cache_key::KeySchema::new(
                    #namespace_const,
                    #operation,
                    #schema,
                    #scope,
                )
                .with_criteria(&[#(#criterion_schema),*])
                .with_skipped(&[#(#skipped_schema),*])
                #hash_tag_schema
                #max_len_schema;

                #[inline]
                fn write_key(
                    &self,
                    generation: ::core::primitive::u64,
                    out: &mut ::cache_key::__private::String,
                ) -> ::core::result::Result<(), ::cache_key::KeyError> {
                    let mut __criteria = ::cache_key::__private::Tail::new();
                    #(#criterion_writes)*
                    ::cache_key::__private::write_key(
                        out,
                        ::cache_key::__private::KeyParts {
                            namespace: #namespace_text,
                            schema: #schema,
                            generation,
                            tenant: #tenant_segment,
                            operation: ::cache_key::__private::Text::Escaped(#operation_escaped),
                            hash_tag: #hash_tag,
                            max_len: #max_len,
                        },
                        __criteria,
                    )
                }
            }
        };
    }
}

/// An impl with no behaviour, emitted beside compile errors so that code using
/// the struct as a `CacheKey` does not add a second wave of errors.
pub fn fallback(input: &DeriveInput) -> TokenStream {
    let ident = &input.ident;
    let (impl_generics, ty_generics, where_clause) = input.generics.split_for_impl();
    quote! {
        #[automatically_derived]
        impl #impl_generics ::cache_key::CacheKey for #ident #ty_generics #where_clause {
            const KEY_SCHEMA: ::cache_key::KeySchema = ::cache_key::KeySchema::new(
                "", "", 0, ::cache_key::Scope::Tenant { fields: &[] },
            );

            fn write_key(
                &self,
                _: ::core::primitive::u64,
                _: &mut ::cache_key::__private::String,
            ) -> ::core::result::Result<(), ::cache_key::KeyError> {
                ::core::unreachable!("the derive reported compile errors")
            }
        }
    }
}

/// The field's name, spanned on its type: a type that is not a criterion or
/// tenant value is then reported on the type alone.
fn member_at_type(field: &Field) -> Ident {
    let mut member = field.member.clone();
    member.set_span(field.ty.span());
    member
}

/// Whether `ty` mentions one of the struct's type parameters.
fn mentions_any(ty: &Type, params: &[&Ident]) -> bool {
    fn walk(tokens: TokenStream, params: &[&Ident]) -> bool {
        tokens.into_iter().any(|tree| match tree {
            proc_macro2::TokenTree::Ident(ident) => params.iter().any(|p| **p == ident),
            proc_macro2::TokenTree::Group(group) => walk(group.stream(), params),
            _ => false,
        })
    }
    !params.is_empty() && walk(quote!(#ty), params)
}
