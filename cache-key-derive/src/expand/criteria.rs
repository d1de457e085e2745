//! The struct's own criteria as the key takes them: sorted, each field's
//! value, pushed to a `CriteriaList` with the flattened parts' criteria, and
//! the compile-time checks that no two of their names clash.

use proc_macro2::{Span, TokenStream};
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{Ident, Type};

use super::names::member_at_type;
use crate::ast::{Criterion, Field, Query};
use crate::generics;
use cache_key_format::NAME_VALUE_SEPARATOR;
use cache_key_format::escape::escape;

/// The struct's own criteria, sorted as the key format sorts them: by the
/// bytes of their names. Doing it here leaves no sort for run time.
pub fn sorted<'q, 'a>(query: &'q Query<'a>) -> Vec<(&'q Field<'a>, &'q Criterion)> {
    let mut criteria: Vec<_> = query.criteria().collect();
    criteria.sort_by(|a, b| a.1.name.as_bytes().cmp(b.1.name.as_bytes()));
    criteria
}

/// The value a criterion field contributes to the key.
pub enum Value<'a> {
    /// The field itself.
    Field {
        ty: &'a Type,
        /// The type's span.
        span: Span,
        member: Ident,
    },
    /// An expression computing an owned `CriterionValue` from the field
    /// (`trim`, `lowercase`, `with`).
    Computed(TokenStream),
}

pub fn value<'a>(query: &Query, field: &Field<'a>, criterion: &Criterion) -> Value<'a> {
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
        let krate = query.crate_path_at(field.ty_span);
        return Value::Computed(quote_spanned! {field.ty_span=>
            #krate::__private::Normalized::new(
                &self.#member as &dyn #krate::__private::NormalizeText,
                #trim,
                #lowercase,
            )
        });
    }
    Value::Field {
        ty,
        span: field.ty_span,
        member,
    }
}

/// Statements adding every criterion, own and flattened, to `list` (a
/// `&mut CriteriaList`).
pub fn collect(query: &Query, criteria: &[(&Field, &Criterion)], list: &Ident) -> TokenStream {
    let krate = query.crate_path();
    let own = criteria.iter().map(|(field, criterion)| {
        let name = &criterion.name;
        let escaped = format!("{}{NAME_VALUE_SEPARATOR}", escape(name));
        match value(query, field, criterion) {
            Value::Field { span, member, .. } => quote_spanned! {span=>
                #list.push_escaped(
                    #name,
                    #escaped,
                    &self.#member as &dyn #krate::CriterionValue,
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
        let krate = query.crate_path_at(field.ty_span);
        quote_spanned! {field.ty_span=>
            <#ty as #krate::Criteria>::collect_criteria(&self.#member, &mut *#list);
        }
    });
    quote!(#(#own)* #(#flattened)*)
}

/// Compile-time checks that a flattened part's criterion names do not clash
/// with the struct's own, or with another part's: `const` assertions, so they
/// work across crates. Parts whose type a `const` item cannot name (it depends
/// on the struct's parameters) are checked at run time only.
pub fn clash_checks(query: &Query, criteria: &[(&Field, &Criterion)]) -> TokenStream {
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
        let krate = query.crate_path_at(part.ty_span);
        checks.push(quote_spanned! {part.ty_span=>
            const _: () = ::core::assert!(
                !#krate::__private::names_overlap(&[#(#own),*], <#ty as #krate::Criteria>::NAMES),
                #message
            );
        });
        for other in &parts[i + 1..] {
            let other_ty = other.ty;
            let message = format!(
                "the flattened fields `{}` and `{}` of `{}` have a criterion name in common: rename it in one of them",
                part.name, other.name, query.ident
            );
            let krate = query.crate_path_at(other.ty_span);
            checks.push(quote_spanned! {other.ty_span=>
                const _: () = ::core::assert!(
                    !#krate::__private::names_overlap(
                        <#ty as #krate::Criteria>::NAMES,
                        <#other_ty as #krate::Criteria>::NAMES,
                    ),
                    #message
                );
            });
        }
    }
    quote!(#(#checks)*)
}
