//! `#[derive(CacheTags)]`: the tags a cached value holds, read from its
//! fields marked `#[tag = "..."]` (ids of the tag's entity) or `#[tags]`
//! (values that hold tags of their own), and the typed scopes of its tags
//! (`scopes`).

mod field;
mod scopes;

use std::collections::BTreeMap;

use proc_macro2::TokenStream;
use quote::{ToTokens, quote, quote_spanned};
use syn::{DeriveInput, WherePredicate};

use crate::ast::type_span;
use crate::attr::{self, FieldTag, Tag};
use crate::ctxt::Ctxt;
use crate::expand::names::{local, use_crate};
use crate::generics::mentions_any;
use crate::sensitive::{self, Sensitivity, TAG_IN_CLEAR};
use field::{TaggedField, tagged_fields};

pub fn derive_cache_tags(input: &DeriveInput) -> TokenStream {
    let cx = Ctxt::new();
    let krate = attr::crate_attr(&cx, &input.attrs);
    let use_crate = use_crate(krate.as_ref());
    let fields = tagged_fields(&cx, input);
    if let Some(fields) = &fields {
        check(&cx, input, fields);
    }
    let ident = &input.ident;
    let tags = local("tags");
    let (body, generics, scopes) = match (cx.check(), fields) {
        (Ok(()), Some(fields)) => (
            write_tags(&fields, &tags),
            bounded(input, &fields),
            scopes::impl_scopes(input, krate.as_ref(), &fields, scopes::Body::Scope),
        ),
        (Err(errors), fields) => {
            let (impl_generics, ty_generics, where_clause) = input.generics.split_for_impl();
            // Beside the errors, an impl and scopes that never run: a
            // query's `value_tags` and an invalidation add no error of their
            // own.
            let scopes = fields.map(|fields| {
                scopes::impl_scopes(input, krate.as_ref(), &fields, scopes::Body::Unreachable)
            });
            return quote! {
                #errors
                const _: () = {
                    #use_crate
                    #[automatically_derived]
                    impl #impl_generics __cache_key::CacheTags for #ident #ty_generics #where_clause {
                        fn write_tags(
                            &self,
                            _: &mut __cache_key::Tags,
                        ) -> ::core::result::Result<(), __cache_key::KeyError> {
                            ::core::unreachable!("the derive reported compile errors")
                        }
                    }
                };
                #scopes
            };
        }
        (Ok(()), None) => unreachable!("missing fields always come with an error"),
    };
    let (impl_generics, ty_generics, where_clause) = generics.split_for_impl();
    quote! {
        const _: () = {
            #use_crate
            #[automatically_derived]
            impl #impl_generics __cache_key::CacheTags for #ident #ty_generics #where_clause {
                fn write_tags(
                    &self,
                    #tags: &mut __cache_key::Tags,
                ) -> ::core::result::Result<(), __cache_key::KeyError> {
                    #body
                    ::core::result::Result::Ok(())
                }
            }
        };
        #scopes
    }
}

fn check(cx: &Ctxt, input: &DeriveInput, fields: &[TaggedField]) {
    if fields.is_empty() {
        cx.error_spanned_by(
            &input.ident,
            format!(
                "`{}` derives `CacheTags` but no field is marked, so it has no tags: mark each field holding an entity's id `#[tag = \"...\"]` (or `#[tag(name = \"...\", global = \"why\")]` for a tag shared by every tenant of the namespace), and each field whose value holds tags of its own `#[tags]`",
                input.ident
            ),
        );
    }
    // One name, one scope: a tag inside the tenant and a global one of the
    // same name are two counters, and bumping one would miss the other.
    let mut scopes: BTreeMap<String, (&str, bool)> = BTreeMap::new();
    // One typed scope per name: two names must not give one function.
    let mut functions: BTreeMap<String, String> = BTreeMap::new();
    for field in fields {
        let FieldTag::Tag(tag) = &field.tag else {
            continue;
        };
        check_name(cx, field, tag);
        let name = tag.name.value();
        let global = tag.global.is_some();
        match functions.get(&tag.function_suffix()) {
            Some(other) if *other != name => cx.error_spanned_by(
                &tag.name,
                format!(
                    "tags `{other}` and `{name}` would both have the typed scope `{}::tag_scope_{}` (a `-` is written `_` there): rename one",
                    input.ident,
                    tag.function_suffix()
                ),
            ),
            Some(_) => {}
            None => {
                functions.insert(tag.function_suffix(), name.clone());
            }
        }
        match scopes.get(&name) {
            Some(&(first, first_global)) if first_global != global => cx.error_spanned_by(
                &tag.path,
                format!(
                    "tag `{name}` is {} on field `{first}` and {} here: one name is one tag, either inside the tenant or shared by every tenant; make them agree",
                    scope_text(first_global),
                    scope_text(global)
                ),
            ),
            Some(_) => {}
            None => {
                scopes.insert(name, (&field.name, global));
            }
        }
    }
}

fn scope_text(global: bool) -> &'static str {
    if global {
        "global"
    } else {
        "inside the tenant"
    }
}

/// A value's secret or personal data must not become a counter name.
fn check_name(cx: &Ctxt, field: &TaggedField, tag: &Tag) {
    let tag_name = tag.name.value();
    let found = [field.name.as_str(), tag_name.as_str()]
        .into_iter()
        .find_map(|name| sensitive::classify(name).map(|found| (name, found)));
    let Some((matched, (sensitivity, word))) = found else {
        return;
    };
    let what = if matched == field.name {
        format!("field `{}`", field.name)
    } else {
        format!("tag `{matched}` of field `{}`", field.name)
    };
    let (kind, instead) = match sensitivity {
        Sensitivity::Personal => (
            "personal data",
            format!(
                "tag the person's id field instead (`{}`)",
                sensitive::id_field_instead(&field.name, &word)
            ),
        ),
        Sensitivity::Secret => ("a secret", "tag the entity's id field instead".to_owned()),
        Sensitivity::Volatile | Sensitivity::RequestMetadata => return,
    };
    cx.error_spanned_by(
        &tag.path,
        format!("{what} cannot be a tag: `{word}` names {kind}, and {TAG_IN_CLEAR}; {instead}"),
    );
}

/// Statements adding each field's tags, in declaration order. Each is
/// spanned on the field's type, where a type that is not a tag value (or,
/// for `#[tags]`, not `CacheTags`) is reported.
fn write_tags(fields: &[TaggedField], tags: &syn::Ident) -> TokenStream {
    let writes = fields.iter().map(|field| {
        let (ty, member) = (field.ty, &field.member);
        let span = type_span(ty);
        let mut member = member.to_token_stream();
        member = respan(member, span);
        match &field.tag {
            FieldTag::Tag(tag) => {
                let (entry_start, field_name) = (tag.entry_start(), &field.name);
                let values = quote_spanned!(span=> &self.#member as &#ty);
                quote! {
                    __cache_key::Tags::push_named(
                        #tags,
                        const { __cache_key::TagName::new(#entry_start) },
                        #field_name,
                        #values,
                    )?;
                }
            }
            FieldTag::Nested => {
                let write = quote_spanned! {span=>
                    <#ty as __cache_key::CacheTags>::write_tags(&self.#member, #tags)
                };
                quote!(#write?;)
            }
        }
    });
    quote!(#(#writes)*)
}

fn respan(tokens: TokenStream, span: proc_macro2::Span) -> TokenStream {
    tokens
        .into_iter()
        .map(|mut tree| {
            tree.set_span(span);
            tree
        })
        .collect()
}

/// The struct's generics, with `T: TagValues` (or `CacheTags`) for each
/// tagged field whose type mentions a type parameter.
fn bounded(input: &DeriveInput, fields: &[TaggedField]) -> syn::Generics {
    let mut generics = input.generics.clone();
    let params: Vec<&syn::Ident> = input.generics.type_params().map(|p| &p.ident).collect();
    let bounds: Vec<WherePredicate> = fields
        .iter()
        .filter(|field| mentions_any(field.ty, &params))
        .map(|field| {
            let ty = field.ty;
            match field.tag {
                FieldTag::Tag(_) => syn::parse_quote!(#ty: __cache_key::TagValues),
                FieldTag::Nested => syn::parse_quote!(#ty: __cache_key::CacheTags),
            }
        })
        .collect();
    generics.make_where_clause().predicates.extend(bounds);
    generics
}
