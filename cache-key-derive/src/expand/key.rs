//! The key writer: `CacheKey::write_key_part`, one body for the key, its
//! readable form and the tenant alone; the trait's other methods call it.

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned};
use syn::Ident;
use syn::spanned::Spanned;

use super::criteria::{self, Value};
use super::names::{local, member_at_type};
use crate::ast::{Criterion, Field, Query};
use crate::attr::Namespace;
use cache_key_format::escape::escape;
use cache_key_format::{GENERATION, NAME_VALUE_SEPARATOR, SCHEMA};

/// What the key writer adds to the expansion's `const _` block.
pub struct Writer {
    /// For a namespace constant, the compile-time check that it is not empty.
    pub namespace_assert: TokenStream,
    /// `write_key_part`, for the `CacheKey` impl.
    pub method: TokenStream,
}

/// The writer of a query that passed every check, its criteria sorted.
pub fn writer(query: &Query, criteria: &[(&Field, &Criterion)]) -> Writer {
    let (head, namespace_assert) = head(query);
    Writer {
        namespace_assert,
        method: write_fn(query, criteria, head),
    }
}

/// `write_key_part`: one function (each method more is one more for rustc
/// to check per struct). The tenant fields are taken into locals with their
/// types spelled out, where a type that is not a tenant value is reported.
fn write_fn(query: &Query, criteria: &[(&Field, &Criterion)], head: Head) -> TokenStream {
    let krate = query.crate_path();
    let (out, generation, key) = (local("out"), local("generation"), local("key"));
    let part = local("part");
    let operation_escaped = escape(&query.operation()).to_string();
    let hash_tag = query.attrs.hash_tag.is_some();
    let finish = match &query.attrs.max_len {
        Some(max) => {
            let max = max.value;
            quote!(#key.finish_within(::core::option::Option::Some(#max)))
        }
        None => quote!(#key.finish()),
    };
    let tenants: Vec<&Field> = query.tenants().collect();
    let values: Vec<Ident> = (0..tenants.len())
        .map(|i| format_ident!("tenant{}", i, span = Span::mixed_site()))
        .collect();
    let take = tenants.iter().zip(&values).map(|(field, local)| {
        let member = member_at_type(field);
        let krate = query.crate_path_at(field.ty_span);
        quote_spanned! {field.ty_span=>
            let #local: &dyn #krate::TenantValue = &self.#member;
        }
    });
    let write_tenants = tenants.iter().zip(&values).map(|(field, local)| {
        let name = &field.name;
        let allow_zero = field.allows_zero();
        quote!(#key.tenant(#name, #local, #allow_zero);)
    });
    // The values' bounds and the `,` between them.
    let commas = values.len().saturating_sub(1);
    let bounds = values
        .iter()
        .map(|value| quote!(#krate::TenantValue::max_escaped_len(#value)));
    let tenant_room = match values.len() {
        0 => quote!(0),
        1 => quote!(#(#bounds)*),
        _ => quote!(#commas #(+ #bounds)*),
    };
    let writer = match head {
        Head::Escaped(head) => quote! {
            #krate::__private::KeyWriter::escaped(
                #out, #head, #operation_escaped, #generation, #hash_tag, #tenant_room, #part,
            )
        },
        Head::Parts(head) => quote! {
            #krate::__private::KeyWriter::new(
                #out,
                #head,
                #generation,
                #hash_tag,
                #tenant_room,
                #krate::__private::Text::Escaped(#operation_escaped),
                #part,
            )
        },
    };
    let write_criteria = if criteria.is_empty() && query.flattened().next().is_none() {
        quote!(#key.operation();)
    } else {
        let write_criteria = write_criteria(query, criteria, &key);
        quote!(if #key.operation() { #write_criteria })
    };
    quote! {
        #[inline]
        fn write_key_part(
            &self,
            #generation: ::core::primitive::u64,
            #out: &mut #krate::__private::String,
            #part: #krate::KeyPart,
        ) -> ::core::result::Result<(), #krate::KeyError> {
            #(#take)*
            let mut #key = #writer;
            #(#write_tenants)*
            #write_criteria
            #finish
        }
    }
}

/// What the key starts with.
enum Head {
    /// Everything before the generation, laid out and escaped.
    Escaped(String),
    /// A `Head::Parts` expression, for a namespace constant.
    Parts(TokenStream),
}

/// What the key starts with, and the check a namespace constant needs.
fn head(query: &Query) -> (Head, TokenStream) {
    let krate = query.crate_path();
    let schema = query.schema();
    match &query.attrs.namespace {
        Some(Namespace::Literal(lit)) => {
            // Everything before the generation is known: laid out once, here.
            let head = format!("{}{SCHEMA}{schema}{GENERATION}", escape(&lit.value()));
            (Head::Escaped(head), TokenStream::new())
        }
        Some(Namespace::Path(path)) => (
            Head::Parts(quote! {
                #krate::__private::Head::Parts {
                    namespace: #krate::__private::Text::Raw(#path),
                    schema: #schema,
                }
            }),
            quote_spanned! {path.span()=>
                const _: () = ::core::assert!(
                    !#path.is_empty(),
                    "the namespace of a cache key cannot be empty"
                );
            },
        ),
        None => unreachable!("the namespace is checked before expansion"),
    }
}

/// Statements writing the criteria segment through `key`.
fn write_criteria(query: &Query, criteria: &[(&Field, &Criterion)], key: &Ident) -> TokenStream {
    let krate = query.crate_path();
    if query.flattened().next().is_none() {
        // Every name is known here: the criteria are written in sorted order
        // straight into the key.
        let writes = criteria.iter().map(|(field, criterion)| {
            let escaped = format!("{}{NAME_VALUE_SEPARATOR}", escape(&criterion.name));
            match criteria::value(query, field, criterion) {
                // Generic over the field's type: monomorphic and inlined. The
                // type is spelled out so that a type which is not a criterion
                // value is reported on the whole type: a span made here covers
                // its first token only (spans do not join on stable).
                Value::Field { ty, span, member } => {
                    let krate = query.crate_path_at(span);
                    quote_spanned! {span=>
                        <#ty as #krate::CriterionValue>::write_canonical(
                            &self.#member,
                            &mut #key.criterion_writer(#escaped),
                        );
                    }
                }
                Value::Computed(value) => quote!(#key.criterion(#escaped, &#value);),
            }
        });
        return quote!(#(#writes)*);
    }
    // Flattened parts add names only known to their types: gather, then sort
    // and check for duplicates at run time.
    let (all, list) = (local("all"), local("list"));
    let collect = criteria::collect(query, criteria, &list);
    quote! {
        let mut #all = #krate::CriteriaList::new();
        let #list = &mut #all;
        #collect
        #all.write_to(&mut #key);
    }
}
