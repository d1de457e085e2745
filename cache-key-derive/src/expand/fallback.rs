//! The impls emitted beside compile errors, so that code using the struct
//! does not add a second wave of errors.

use proc_macro2::TokenStream;
use quote::quote;
use syn::DeriveInput;

use super::names::use_crate;
use crate::ast::Derive;

/// A `CacheKey` or `Criteria` impl with no behaviour. A `CacheKey` impl keeps
/// the query's `Tenant` type when it is known (`tenant`), so its typed scopes
/// still take the right values; when it is not, they take any one tenant
/// value: a call written for the tenant the error asks for adds no error of
/// its own (with `()`, rustc would call the query global).
pub fn stub(
    input: &DeriveInput,
    derive: Derive,
    krate: Option<&syn::Path>,
    tenant: Option<TokenStream>,
) -> TokenStream {
    let ident = &input.ident;
    let (impl_generics, ty_generics, where_clause) = input.generics.split_for_impl();
    let use_crate = use_crate(krate);
    let tenant = tenant.unwrap_or_else(|| {
        quote!(
            type Tenant<'__a>
                = &'__a dyn __cache_key::TenantValue
            where
                Self: '__a;
        )
    });
    let stub = match derive {
        Derive::CacheKey => quote! {
            #[automatically_derived]
            impl #impl_generics __cache_key::CacheKey for #ident #ty_generics #where_clause {
                const KEY_SCHEMA: __cache_key::KeySchema = __cache_key::KeySchema::new(
                    "", "", 0, __cache_key::Scope::Tenant { fields: &[] },
                );
                #tenant

                fn write_key_part(
                    &self,
                    _: ::core::primitive::u64,
                    _: &mut __cache_key::__private::String,
                    _: __cache_key::KeyPart,
                ) -> ::core::result::Result<(), __cache_key::KeyError> {
                    ::core::unreachable!("the derive reported compile errors")
                }
            }
        },
        Derive::Criteria => quote! {
            #[automatically_derived]
            impl #impl_generics __cache_key::Criteria for #ident #ty_generics #where_clause {
                const NAMES: &'static [&'static ::core::primitive::str] = &[];

                fn collect_criteria<'__a>(&'__a self, _: &mut __cache_key::CriteriaList<'__a>) {
                    ::core::unreachable!("the derive reported compile errors")
                }
            }
        },
    };
    quote! {
        const _: () = {
            #use_crate
            #stub
        };
    }
}
