//! Code generation: the `CacheKey` and `Criteria` impls of a checked struct.

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{DeriveInput, Ident, Type};

use crate::ast::{Criterion, Field, FieldKind, Query};
use crate::attr::Namespace;
use crate::generics;
use cache_key_format::escape::escape;
use cache_key_format::{GENERATION, NAME_VALUE_SEPARATOR, SCHEMA};

/// The `CacheKey` impl of a query that passed every check.
pub fn impl_cache_key(query: &Query) -> TokenStream {
    let ident = query.ident;
    let (out, generation, key, list) = (
        local("out"),
        local("generation"),
        local("key"),
        local("list"),
    );
    let (write_trait, write, readable) = (local("Write"), local("write"), local("readable"));
    let operation = query.operation();
    let operation_escaped = escape(&operation).to_string();
    let schema = query.schema();

    let (namespace_const, head, namespace_assert) = match &query.attrs.namespace {
        Some(Namespace::Literal(lit)) => {
            // Everything before the generation is known: laid out once, here.
            let head = format!("{}{SCHEMA}{schema}{GENERATION}", escape(&lit.value()));
            (
                quote!(#lit),
                quote!(__cache_key::__private::Head::Escaped(#head)),
                TokenStream::new(),
            )
        }
        Some(Namespace::Path(path)) => (
            quote!(#path),
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
    };

    let criteria = sorted_criteria(query);
    let write_criteria = if query.flattened().next().is_none() {
        // Every name is known here: the criteria are written in sorted order
        // straight into the key.
        let writes = criteria.iter().map(|(field, criterion)| {
            let escaped = format!("{}{NAME_VALUE_SEPARATOR}", escape(&criterion.name));
            match criterion_value(field, criterion) {
                // Generic over the field's type: monomorphic and inlined. The
                // type is spelled out so that a type which is not a criterion
                // value is reported on the field's type.
                Value::Field { ty, member } => quote_spanned! {ty.span()=>
                    <#ty as __cache_key::CriterionValue>::write_canonical(
                        &self.#member,
                        &mut #key.criterion_writer(#escaped),
                    );
                },
                Value::Computed(value) => quote!(#key.criterion(#escaped, &#value);),
            }
        });
        quote!(#(#writes)*)
    } else {
        // Flattened parts add names only known to their types: gather, then
        // sort and check for duplicates at run time.
        let collect = collect_criteria(query, &criteria, &list);
        let all = local("all");
        quote! {
            let mut #all = __cache_key::CriteriaList::new();
            let #list = &mut #all;
            #collect
            #all.write_to(&mut #key);
        }
    };

    let tenants: Vec<&Field> = query.tenants().collect();
    // Each tenant field is taken once, with its type spelled out (the one place
    // a type that is not a tenant value is reported), then sized and written.
    let tenant_values: Vec<Ident> = (0..tenants.len())
        .map(|i| format_ident!("tenant{}", i, span = Span::mixed_site()))
        .collect();
    let take_tenants: Vec<TokenStream> = tenants
        .iter()
        .zip(&tenant_values)
        .map(|(field, local)| {
            let member = member_at_type(field);
            let ty = field.ty;
            quote_spanned! {ty.span()=>
                let #local: &dyn __cache_key::TenantValue = &self.#member;
            }
        })
        .collect();
    let allow_zero = |field: &Field| {
        matches!(
            field.kind,
            FieldKind::Tenant {
                allow_zero: Some(_)
            }
        )
    };
    let write_tenants = tenants.iter().zip(&tenant_values).map(|(field, local)| {
        let name = &field.name;
        let allow_zero = allow_zero(field);
        quote!(#key.tenant(#name, #local, #allow_zero);)
    });
    let write_tenant_parts = tenants.iter().zip(&tenant_values).enumerate().map(
        |(i, (field, local))| {
            let name = &field.name;
            let first = i == 0;
            let allow_zero = allow_zero(field);
            quote! {
                __cache_key::__private::push_tenant_part(#out, #first, #name, #local, #allow_zero)?;
            }
        },
    );
    let (start, written) = (local("start"), local("written"));
    // The values' bounds and the `,` between them.
    let commas = tenants.len().saturating_sub(1);
    let tenant_room =
        quote!(#commas #(+ __cache_key::TenantValue::max_escaped_len(#tenant_values))*);
    let scope = match &query.attrs.global {
        Some(reason) => quote!(__cache_key::Scope::Global { reason: #reason }),
        None => {
            let names = tenants.iter().map(|f| &f.name);
            quote!(__cache_key::Scope::Tenant { fields: &[#(#names),*] })
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

    let criteria_schema = criteria_schema(&criteria);
    let skipped_schema = skipped_schema(query);
    let flattened_schema = flattened_schema(query);
    let clash_checks = clash_checks(query, &criteria);
    let bounded = generics::with_field_bounds(query);
    let (impl_generics, ty_generics, where_clause) = bounded.split_for_impl();
    let use_crate = use_crate(query.attrs.krate.as_ref());
    let register = register(query);

    quote! {
        #[doc(hidden)]
        const _: () = {
            #use_crate
            #namespace_assert
            #register
            #clash_checks

            // The key's one writer, for the key and its readable form: a
            // trait of this block, so the type gains no visible method.
            trait #write_trait {
                fn #write(
                    &self,
                    #generation: ::core::primitive::u64,
                    #out: &mut __cache_key::__private::String,
                    #readable: ::core::primitive::bool,
                ) -> ::core::result::Result<(), __cache_key::KeyError>;
            }

            #[automatically_derived]
            impl #impl_generics #write_trait for #ident #ty_generics #where_clause {
                #[inline]
                fn #write(
                    &self,
                    #generation: ::core::primitive::u64,
                    #out: &mut __cache_key::__private::String,
                    #readable: ::core::primitive::bool,
                ) -> ::core::result::Result<(), __cache_key::KeyError> {
                    #(#take_tenants)*
                    let mut #key = __cache_key::__private::KeyWriter::new(
                        #out,
                        #head,
                        #generation,
                        #hash_tag,
                        #tenant_room,
                        __cache_key::__private::Text::Escaped(#operation_escaped),
                    );
                    if #readable {
                        #key.readable();
                    }
                    #(#write_tenants)*
                    #key.operation();
                    #write_criteria
                    #key.finish(#max_len)
                }
            }

            #[automatically_derived]
            impl #impl_generics __cache_key::CacheKey for #ident #ty_generics #where_clause {
                const KEY_SCHEMA: __cache_key::KeySchema = __cache_key::KeySchema::new(
                    #namespace_const,
                    #operation,
                    #schema,
                    #scope,
                )
                .with_criteria(#criteria_schema)
                .with_skipped(#skipped_schema)
                .with_flattened(#flattened_schema)
                #hash_tag_schema
                #max_len_schema;

                #[inline]
                fn write_key(
                    &self,
                    #generation: ::core::primitive::u64,
                    #out: &mut __cache_key::__private::String,
                ) -> ::core::result::Result<(), __cache_key::KeyError> {
                    #write_trait::#write(self, #generation, #out, false)
                }

                fn write_readable_key(
                    &self,
                    #generation: ::core::primitive::u64,
                    #out: &mut __cache_key::__private::String,
                ) -> ::core::result::Result<(), __cache_key::KeyError> {
                    #write_trait::#write(self, #generation, #out, true)
                }

                fn write_tenant(
                    &self,
                    #out: &mut __cache_key::__private::String,
                ) -> ::core::result::Result<(), __cache_key::KeyError> {
                    // Taken as in `write_key`, token for token: a type that is
                    // not a tenant value is reported once, not once per method.
                    #(#take_tenants)*
                    let #start = #out.len();
                    let #written = (|| {
                        #(#write_tenant_parts)*
                        ::core::result::Result::Ok(())
                    })();
                    if #written.is_err() {
                        #out.truncate(#start);
                    }
                    #written
                }
            }
        };
    }
}

/// The `Criteria` impl of a criteria-only struct that passed every check.
pub fn impl_criteria(query: &Query) -> TokenStream {
    let ident = query.ident;
    let criteria = sorted_criteria(query);
    let names = criteria.iter().map(|(_, criterion)| &criterion.name);
    let list = local("list");
    let collect = collect_criteria(query, &criteria, &list);
    let clash_checks = clash_checks(query, &criteria);
    let bounded = generics::with_field_bounds(query);
    let (impl_generics, ty_generics, where_clause) = bounded.split_for_impl();
    let use_crate = use_crate(query.attrs.krate.as_ref());
    quote! {
        #[doc(hidden)]
        const _: () = {
            #use_crate
            #clash_checks

            #[automatically_derived]
            impl #impl_generics __cache_key::Criteria for #ident #ty_generics #where_clause {
                const NAMES: &'static [&'static ::core::primitive::str] = &[#(#names),*];

                fn collect_criteria<'__a>(&'__a self, #list: &mut __cache_key::CriteriaList<'__a>) {
                    #collect
                }
            }
        };
    }
}

/// The struct's own criteria, sorted as the key format sorts them: by the
/// bytes of their names. Doing it here leaves no sort for run time.
fn sorted_criteria<'q, 'a>(query: &'q Query<'a>) -> Vec<(&'q Field<'a>, &'q Criterion)> {
    let mut criteria: Vec<_> = query.criteria().collect();
    criteria.sort_by(|a, b| a.1.name.as_bytes().cmp(b.1.name.as_bytes()));
    criteria
}

/// The value a criterion field contributes to the key.
enum Value<'a> {
    /// The field itself.
    Field { ty: &'a Type, member: Ident },
    /// An expression computing an owned `CriterionValue` from the field
    /// (`trim`, `lowercase`, `with`).
    Computed(TokenStream),
}

fn criterion_value<'a>(field: &Field<'a>, criterion: &Criterion) -> Value<'a> {
    let member = member_at_type(field);
    let ty = field.ty;
    if let Some(with) = &criterion.with {
        // Spanned on the path alone: a function of the wrong type is reported there.
        let mut member = field.member.clone();
        member.set_span(with.span());
        return Value::Computed(quote_spanned!(with.span()=> #with(&self.#member)));
    }
    if criterion.trim || criterion.lowercase {
        let (trim, lowercase) = (criterion.trim, criterion.lowercase);
        return Value::Computed(quote_spanned! {ty.span()=>
            __cache_key::__private::Normalized::new(
                &self.#member as &dyn __cache_key::__private::NormalizeText,
                #trim,
                #lowercase,
            )
        });
    }
    Value::Field { ty, member }
}

/// Statements adding every criterion, own and flattened, to `list` (a
/// `&mut CriteriaList`).
fn collect_criteria(query: &Query, criteria: &[(&Field, &Criterion)], list: &Ident) -> TokenStream {
    let own = criteria.iter().map(|(field, criterion)| {
        let name = &criterion.name;
        let escaped = format!("{}{NAME_VALUE_SEPARATOR}", escape(name));
        match criterion_value(field, criterion) {
            Value::Field { ty, member } => quote_spanned! {ty.span()=>
                #list.push_escaped(
                    #name,
                    #escaped,
                    &self.#member as &dyn __cache_key::CriterionValue,
                );
            },
            // A computed value must live as long as the list: boxed.
            Value::Computed(value) => quote! {
                #list.push_owned_escaped(#name, #escaped, ::std::boxed::Box::new(#value));
            },
        }
    });
    let flattened = query.flattened().map(|field| {
        let member = member_at_type(field);
        let ty = field.ty;
        quote_spanned! {ty.span()=>
            <#ty as __cache_key::Criteria>::collect_criteria(&self.#member, &mut *#list);
        }
    });
    quote!(#(#own)* #(#flattened)*)
}

/// Compile-time checks that a flattened part's criterion names do not clash
/// with the struct's own, or with another part's: `const` assertions, so they
/// work across crates. Parts whose type depends on the struct's type or const
/// parameters (which a `const` item cannot name) are checked at run time only.
fn clash_checks(query: &Query, criteria: &[(&Field, &Criterion)]) -> TokenStream {
    let own: Vec<&String> = criteria.iter().map(|(_, c)| &c.name).collect();
    let parts: Vec<&Field> = query
        .flattened()
        .filter(|field| generics::nameable_in_const(field.ty, query.generics))
        .collect();
    let mut checks = Vec::new();
    for (i, part) in parts.iter().enumerate() {
        let ty = part.ty;
        let message = format!(
            "a criterion of `{}` and one of its flattened field `{}` have the same name: rename one of them",
            query.ident, part.name
        );
        checks.push(quote_spanned! {ty.span()=>
            const _: () = ::core::assert!(
                !__cache_key::__private::names_overlap(&[#(#own),*], <#ty as __cache_key::Criteria>::NAMES),
                #message
            );
        });
        for other in &parts[i + 1..] {
            let other_ty = other.ty;
            let message = format!(
                "the flattened fields `{}` and `{}` of `{}` have a criterion name in common: rename it in one of them",
                part.name, other.name, query.ident
            );
            checks.push(quote_spanned! {other_ty.span()=>
                const _: () = ::core::assert!(
                    !__cache_key::__private::names_overlap(
                        <#ty as __cache_key::Criteria>::NAMES,
                        <#other_ty as __cache_key::Criteria>::NAMES,
                    ),
                    #message
                );
            });
        }
    }
    quote!(#(#checks)*)
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

/// An impl with no behaviour, emitted beside compile errors so that code using
/// the struct does not add a second wave of errors.
pub fn fallback(
    input: &DeriveInput,
    derive: crate::ast::Derive,
    krate: Option<&syn::Path>,
) -> TokenStream {
    let ident = &input.ident;
    let (impl_generics, ty_generics, where_clause) = input.generics.split_for_impl();
    let use_crate = use_crate(krate);
    let fallback = match derive {
        crate::ast::Derive::CacheKey => quote! {
            #[automatically_derived]
            impl #impl_generics __cache_key::CacheKey for #ident #ty_generics #where_clause {
                const KEY_SCHEMA: __cache_key::KeySchema = __cache_key::KeySchema::new(
                    "", "", 0, __cache_key::Scope::Tenant { fields: &[] },
                );

                fn write_key(
                    &self,
                    _: ::core::primitive::u64,
                    _: &mut __cache_key::__private::String,
                ) -> ::core::result::Result<(), __cache_key::KeyError> {
                    ::core::unreachable!("the derive reported compile errors")
                }
            }
        },
        crate::ast::Derive::Criteria => quote! {
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
            #fallback
        };
    }
}

/// The field's name, spanned on its type: a type that is not a criterion or
/// tenant value is then reported on the type alone.
fn member_at_type(field: &Field) -> Ident {
    let mut member = field.member.clone();
    member.set_span(field.ty.span());
    member
}

/// Adds the type to `cache_key::registry`, where `check()` finds two types
/// sharing a key space. Only concrete types can be named there: a struct with
/// type or const parameters is left out, and lifetimes are `'static`.
fn register(query: &Query) -> TokenStream {
    let generics = query.generics;
    if generics.type_params().next().is_some() || generics.const_params().next().is_some() {
        return TokenStream::new();
    }
    let ident = query.ident;
    let lifetimes = generics.lifetimes().map(|_| quote!('static));
    let ty = if generics.params.is_empty() {
        quote!(#ident)
    } else {
        quote!(#ident<#(#lifetimes),*>)
    };
    quote! {
        __cache_key::__private::inventory::submit! {
            __cache_key::__private::registration(
                ::core::concat!(::core::module_path!(), "::", ::core::stringify!(#ident)),
                <#ty as __cache_key::CacheKey>::KEY_SCHEMA,
            )
        }
    }
}

/// A name for a local of the expansion, which code the user wrote (a `with`
/// function named `out`, say) can neither see nor shadow.
fn local(name: &str) -> Ident {
    Ident::new(name, Span::mixed_site())
}

/// Names the cache_key crate `__cache_key` inside an expansion's `const _`
/// block: `::cache_key`, or the path given with `#[cache_key(crate = "...")]`
/// for a renamed or re-exported dependency.
pub fn use_crate(krate: Option<&syn::Path>) -> TokenStream {
    match krate {
        Some(path) => quote!(#[allow(unused_imports)] use #path as __cache_key;),
        None => quote!(
            #[allow(unused_imports)]
            use ::cache_key as __cache_key;
        ),
    }
}
