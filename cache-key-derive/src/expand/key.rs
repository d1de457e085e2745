//! The key writer: one function writes the key and its readable form, and
//! the `CacheKey` methods call it; the tenant alone is written apart.

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{Generics, Ident};

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
    /// The inherent impl holding the query's one writer.
    pub items: TokenStream,
    /// `write_key`, `write_readable_key` (each a call of the writer) and
    /// `write_tenant`, for the `CacheKey` impl.
    pub methods: TokenStream,
}

/// The writer of a query that passed every check, its criteria sorted.
pub fn writer(query: &Query, criteria: &[(&Field, &Criterion)], generics: &Generics) -> Writer {
    let tenants = Tenants::new(query);
    let (head, namespace_assert) = head(query);
    Writer {
        namespace_assert,
        items: write_fn(query, criteria, generics, &tenants, head),
        methods: methods(&tenants),
    }
}

/// The tenant fields, each taken into a local with its type spelled out
/// (where a type that is not a tenant value is reported: the same tokens in
/// the writer and `write_tenant`, so rustc reports it once), then sized and
/// written.
struct Tenants<'q, 'a> {
    fields: Vec<&'q Field<'a>>,
    /// The locals holding them.
    values: Vec<Ident>,
    /// `let tenant0: &dyn TenantValue = &self.branch;`, one a field.
    take: Vec<TokenStream>,
}

impl<'q, 'a> Tenants<'q, 'a> {
    fn new(query: &'q Query<'a>) -> Self {
        let fields: Vec<&Field> = query.tenants().collect();
        let values: Vec<Ident> = (0..fields.len())
            .map(|i| format_ident!("tenant{}", i, span = Span::mixed_site()))
            .collect();
        let take = fields
            .iter()
            .zip(&values)
            .map(|(field, local)| {
                let member = member_at_type(field);
                quote_spanned! {field.ty_span=>
                    let #local: &dyn __cache_key::TenantValue = &self.#member;
                }
            })
            .collect();
        Tenants {
            fields,
            values,
            take,
        }
    }
}

/// The key's one writer, for each `Part` the `CacheKey` methods ask for: an
/// inherent function (an impl of a trait of the block's own costs rustc a
/// trait and an impl more per struct), private to the struct's module and
/// named so that no method of the user's meets it.
fn write_fn(
    query: &Query,
    criteria: &[(&Field, &Criterion)],
    generics: &Generics,
    tenants: &Tenants,
    head: TokenStream,
) -> TokenStream {
    let ident = query.ident;
    let (out, generation, key) = (local("out"), local("generation"), local("key"));
    let part = local("part");
    let operation_escaped = escape(&query.operation()).to_string();
    let hash_tag = query.attrs.hash_tag.is_some();
    let max_len = match &query.attrs.max_len {
        Some(max) => {
            let max = max.value;
            quote!(::core::option::Option::Some(#max))
        }
        None => quote!(::core::option::Option::None),
    };
    let Tenants { take, values, .. } = tenants;
    let write_tenants = tenants.fields.iter().zip(values).map(|(field, local)| {
        let name = &field.name;
        let allow_zero = field.allows_zero();
        quote!(#key.tenant(#name, #local, #allow_zero);)
    });
    // The values' bounds and the `,` between them.
    let commas = values.len().saturating_sub(1);
    let tenant_room = quote!(#commas #(+ __cache_key::TenantValue::max_escaped_len(#values))*);
    let write_criteria = write_criteria(query, criteria, &key);
    let (impl_generics, ty_generics, where_clause) = generics.split_for_impl();
    quote! {
        #[automatically_derived]
        impl #impl_generics #ident #ty_generics #where_clause {
            #[doc(hidden)]
            #[inline]
            fn __cache_key_write(
                &self,
                #generation: ::core::primitive::u64,
                #out: &mut __cache_key::__private::String,
                #part: __cache_key::__private::Part,
            ) -> ::core::result::Result<(), __cache_key::KeyError> {
                #(#take)*
                let mut #key = __cache_key::__private::KeyWriter::new(
                    #out,
                    #head,
                    #generation,
                    #hash_tag,
                    #tenant_room,
                    __cache_key::__private::Text::Escaped(#operation_escaped),
                    #part,
                );
                #(#write_tenants)*
                #key.operation();
                #write_criteria
                #key.finish(#max_len)
            }
        }
    }
}

/// The `CacheKey` methods: the key and the readable key, each the writer of
/// one `Part`, and the tenant values alone, taken as in the writer, token for
/// token, so a type that is not a tenant value is reported once, not once
/// per method.
fn methods(tenants: &Tenants) -> TokenStream {
    let (out, generation) = (local("out"), local("generation"));
    let Tenants { take, values, .. } = tenants;
    let parts = tenants.fields.iter().zip(values).map(|(field, local)| {
        let name = &field.name;
        let allow_zero = field.allows_zero();
        quote!((#name, #local, #allow_zero))
    });
    quote! {
        #[inline]
        fn write_key(
            &self,
            #generation: ::core::primitive::u64,
            #out: &mut __cache_key::__private::String,
        ) -> ::core::result::Result<(), __cache_key::KeyError> {
            Self::__cache_key_write(self, #generation, #out, __cache_key::__private::Part::Key)
        }

        #[inline]
        fn write_readable_key(
            &self,
            #generation: ::core::primitive::u64,
            #out: &mut __cache_key::__private::String,
        ) -> ::core::result::Result<(), __cache_key::KeyError> {
            Self::__cache_key_write(self, #generation, #out, __cache_key::__private::Part::Readable)
        }

        #[inline]
        fn write_tenant(
            &self,
            #out: &mut __cache_key::__private::String,
        ) -> ::core::result::Result<(), __cache_key::KeyError> {
            #(#take)*
            __cache_key::__private::write_tenant(#out, [#(#parts),*])
        }
    }
}

/// What the key starts with (`Head`), and the check a namespace constant needs.
fn head(query: &Query) -> (TokenStream, TokenStream) {
    let schema = query.schema();
    match &query.attrs.namespace {
        Some(Namespace::Literal(lit)) => {
            // Everything before the generation is known: laid out once, here.
            let head = format!("{}{SCHEMA}{schema}{GENERATION}", escape(&lit.value()));
            (
                quote!(__cache_key::__private::Head::Escaped(#head)),
                TokenStream::new(),
            )
        }
        Some(Namespace::Path(path)) => (
            quote! {
                __cache_key::__private::Head::Parts {
                    namespace: __cache_key::__private::Text::Raw(#path),
                    schema: #schema,
                }
            },
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
    if query.flattened().next().is_none() {
        // Every name is known here: the criteria are written in sorted order
        // straight into the key.
        let writes = criteria.iter().map(|(field, criterion)| {
            let escaped = format!("{}{NAME_VALUE_SEPARATOR}", escape(&criterion.name));
            match criteria::value(field, criterion) {
                // Generic over the field's type: monomorphic and inlined. The
                // type is spelled out so that a type which is not a criterion
                // value is reported on the field's type.
                Value::Field { ty, span, member } => quote_spanned! {span=>
                    <#ty as __cache_key::CriterionValue>::write_canonical(
                        &self.#member,
                        &mut #key.criterion_writer(#escaped),
                    );
                },
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
        let mut #all = __cache_key::CriteriaList::new();
        let #list = &mut #all;
        #collect
        #all.write_to(&mut #key);
    }
}
