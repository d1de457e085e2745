//! `#[derive(CriterionValue)]` for fieldless enums and newtypes, and
//! `#[derive(TenantValue)]` for newtypes.

use std::collections::BTreeMap;

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{Data, DeriveInput, Fields, Type};

use crate::attr::{self, ValueAttrs};
use crate::ctxt::Ctxt;
use crate::expand::names::use_crate;
use crate::serde_attr;

pub fn derive_criterion_value(input: &DeriveInput) -> TokenStream {
    let cx = Ctxt::new();
    let use_crate = use_crate(attr::crate_attr(&cx, &input.attrs).as_ref());
    let body = match &input.data {
        Data::Enum(data) => enum_body(&cx, input, data),
        Data::Struct(data) => newtype_field(&cx, input, &data.fields, "CriterionValue").map(|ty| {
            quote_spanned! {ty.span()=>
                <#ty as __cache_key::CriterionValue>::write_canonical(&self.0, out)
            }
        }),
        Data::Union(data) => {
            cx.error_spanned_by(
                data.union_token,
                "`#[derive(CriterionValue)]` works on fieldless enums and newtypes (`struct BranchId(u32)`), not unions",
            );
            None
        }
    };
    let ident = &input.ident;
    let mut generics = input.generics.clone();
    if let (Data::Struct(data), Some(_)) = (&input.data, input.generics.type_params().next()) {
        // A generic newtype is a criterion value when its inner value is.
        if let Some(field) = data.fields.iter().next() {
            let ty = &field.ty;
            generics
                .make_where_clause()
                .predicates
                .push(syn::parse_quote!(#ty: __cache_key::CriterionValue));
        }
    }
    let (impl_generics, ty_generics, where_clause) = generics.split_for_impl();
    let body = match (cx.check(), body) {
        (Ok(()), Some(body)) => body,
        (Err(errors), _) => return with_fallback_value(input, errors, use_crate),
        (Ok(()), None) => unreachable!("a missing body always comes with an error"),
    };
    quote! {
        const _: () = {
            #use_crate
            #[automatically_derived]
            impl #impl_generics __cache_key::CriterionValue for #ident #ty_generics #where_clause {
                #[inline]
                fn write_canonical(&self, out: &mut __cache_key::CanonicalWriter<'_>) {
                    #body
                }
            }
        };
    }
}

pub fn derive_tenant_value(input: &DeriveInput) -> TokenStream {
    let cx = Ctxt::new();
    let use_crate = use_crate(attr::crate_attr(&cx, &input.attrs).as_ref());
    let inner = match &input.data {
        Data::Struct(data) => newtype_field(&cx, input, &data.fields, "TenantValue"),
        _ => {
            cx.error_spanned_by(
                &input.ident,
                "`#[derive(TenantValue)]` works on newtypes around a tenant value, such as `struct BranchId(u32)`; an enum is a criterion, not a tenant",
            );
            None
        }
    };
    let ident = &input.ident;
    match (cx.check(), inner) {
        (Ok(()), Some(inner)) => {
            let mut generics = input.generics.clone();
            if input.generics.type_params().next().is_some() {
                // A generic newtype is a tenant value when its inner value is.
                generics
                    .make_where_clause()
                    .predicates
                    .push(syn::parse_quote!(#inner: __cache_key::TenantValue));
            }
            let (impl_generics, ty_generics, where_clause) = generics.split_for_impl();
            // Spanned on the inner type: one that is not a tenant value is reported there.
            let forward = |method: TokenStream| quote_spanned!(inner.span()=> <#inner as __cache_key::TenantValue>::#method(&self.0));
            let (max_escaped_len, is_empty_value) = (
                forward(quote!(max_escaped_len)),
                forward(quote!(is_empty_value)),
            );
            quote! {
                const _: () = {
                    #use_crate
                    #[automatically_derived]
                    impl #impl_generics __cache_key::TenantValue for #ident #ty_generics #where_clause {
                        #[inline]
                        fn max_escaped_len(&self) -> ::core::primitive::usize {
                            #max_escaped_len
                        }

                        #[inline]
                        fn is_empty_value(&self) -> ::core::primitive::bool {
                            #is_empty_value
                        }
                    }
                };
            }
        }
        (Err(errors), _) => errors,
        (Ok(()), None) => unreachable!("a missing field always comes with an error"),
    }
}

/// `match self { Self::TitleAsc => out.write_str("title_asc"), ... }`
fn enum_body(cx: &Ctxt, input: &DeriveInput, data: &syn::DataEnum) -> Option<TokenStream> {
    let ValueAttrs { rename_all, .. } = attr::value_attrs(cx, &input.attrs, true);
    // serde's names are the wire's: used when the criterion attributes give none.
    let serde_rename_all = serde_attr::container(&input.attrs).rename_all;
    let mut seen: BTreeMap<String, &syn::Ident> = BTreeMap::new();
    let mut arms = Vec::new();
    for variant in &data.variants {
        let attrs = attr::value_attrs(cx, &variant.attrs, false);
        if !matches!(variant.fields, Fields::Unit) {
            cx.error_spanned_by(
                &variant.fields,
                format!(
                    "variant `{}` has fields, so it has no single canonical string: `#[derive(CriterionValue)]` takes fieldless enums. Make it a unit variant, or implement `CriterionValue` by hand",
                    variant.ident
                ),
            );
            continue;
        }
        let variant_name = variant.ident.to_string();
        let name = match (&attrs.rename, rename_all) {
            (Some(lit), _) => lit.value(),
            (None, Some(rule)) => rule.apply_to_variant(&variant_name),
            (None, None) => match (serde_attr::field(&variant.attrs).rename, serde_rename_all) {
                (Some(serde_name), _) => serde_name,
                (None, Some(rule)) => rule.apply_to_variant(&variant_name),
                (None, None) => variant_name,
            },
        };
        if let Some(first) = seen.get(&name) {
            let message = format!(
                "variants `{first}` and `{}` would both be written `{name}`, so two different queries would share a key: rename one",
                variant.ident
            );
            match &attrs.rename {
                Some(lit) => cx.error_spanned_by(lit, message),
                None => cx.error_spanned_by(&variant.ident, message),
            }
            continue;
        }
        seen.insert(name.clone(), &variant.ident);
        let ident = &variant.ident;
        arms.push(quote!(Self::#ident => #name,));
    }
    if data.variants.is_empty() {
        return Some(quote!(match *self {}));
    }
    Some(quote! {
        out.write_str(match self {
            #(#arms)*
        })
    })
}

/// The one field of a tuple newtype, or an error.
fn newtype_field<'a>(
    cx: &Ctxt,
    input: &'a DeriveInput,
    fields: &'a Fields,
    derive: &str,
) -> Option<&'a Type> {
    match fields {
        Fields::Unnamed(unnamed) if unnamed.unnamed.len() == 1 => Some(&unnamed.unnamed[0].ty),
        _ => {
            cx.error_spanned_by(
                &input.ident,
                format!(
                    "`#[derive({derive})]` works on a newtype with one unnamed field, such as `struct BranchId(u32)`, written as its inner value{}",
                    if derive == "CriterionValue" { ", or on a fieldless enum" } else { "" }
                ),
            );
            None
        }
    }
}

/// The errors, and an impl that keeps the rest of the crate free of a second
/// wave of "not a `CriterionValue`" errors.
fn with_fallback_value(
    input: &DeriveInput,
    errors: TokenStream,
    use_crate: TokenStream,
) -> TokenStream {
    let ident = &input.ident;
    let (impl_generics, ty_generics, where_clause) = input.generics.split_for_impl();
    quote! {
        #errors
        const _: () = {
            #use_crate
            #[automatically_derived]
            impl #impl_generics __cache_key::CriterionValue for #ident #ty_generics #where_clause {
                fn write_canonical(&self, _: &mut __cache_key::CanonicalWriter<'_>) {
                    ::core::unreachable!("the derive reported compile errors")
                }
            }
        };
    }
}
