//! The registry entry: the type added to `cache_key::registry`, where
//! `check()` finds two types sharing a key space and `check_lock()` compares
//! each type's key layout with the reviewed lock file.

use proc_macro2::TokenStream;
use quote::quote;

use crate::ast::{Criterion, Field, Query};

/// The registry entry of the query (an `inventory` entry with cache-key's
/// `registry` feature, nothing without): its full type name (through
/// `core::any::type_name`, so types local to two functions stay apart), its
/// `KEY_SCHEMA` and the layout lines only the derive knows. Only concrete
/// types can be named there: a struct with type or const parameters is left
/// out, and lifetimes are `'static`.
pub fn register(query: &Query, criteria: &[(&Field, &Criterion)]) -> TokenStream {
    let krate = query.crate_path();
    if !cfg!(feature = "registry") {
        return TokenStream::new();
    }
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
    let layout = layout(query, criteria);
    quote! {
        #krate::__private::register! {
            ::core::any::type_name::<#ty>,
            <#ty as #krate::CacheKey>::KEY_SCHEMA,
            #layout
        }
    }
}

/// The lines of the lock file that the schema cannot give: each tenant's and
/// criterion's type as written and its normalization, each flattened field's
/// type, each tag (its name, field, and whether it is global; not the
/// reason, which changes no key nor counter), the cached value's type, TTL,
/// id and `value_tags`. Tenants and tags in declaration order, criteria in
/// key order.
fn layout(query: &Query, criteria: &[(&Field, &Criterion)]) -> String {
    let mut lines = Vec::new();
    for field in query.tenants() {
        let mut line = format!("tenant {}: {}", field.name, type_text(field.ty));
        if field.allows_zero() {
            line.push_str(", allow_zero");
        }
        lines.push(line);
    }
    for (field, criterion) in criteria {
        let mut line = format!(
            "criterion {} = {}: {}",
            criterion.name,
            field.name,
            type_text(field.ty)
        );
        if criterion.trim {
            line.push_str(", trim");
        }
        if criterion.lowercase {
            line.push_str(", lowercase");
        }
        if let Some(with) = &criterion.with {
            line.push_str(&format!(", with = {}", tokens_text(quote!(#with))));
        }
        lines.push(line);
    }
    for field in query.flattened() {
        lines.push(format!("flatten {}: {}", field.name, type_text(field.ty)));
    }
    for (field, tag) in query.tags() {
        let mut line = format!("tag {} = {}", tag.name.value(), field.name);
        if tag.global.is_some() {
            line.push_str(", global");
        }
        lines.push(line);
    }
    let cached = &query.attrs.cached;
    if let (Some(value), Some((millis, _)), Some(id)) =
        (&cached.value, cached.ttl, cached.value_id())
    {
        lines.push(format!("value {}, ttl {millis} ms", type_text(value)));
        lines.push(format!("value_id = {id}"));
        if cached.value_tags.is_some() {
            lines.push("value_tags".to_owned());
        }
    }
    lines.join("\n")
}

fn type_text(ty: &syn::Type) -> String {
    tokens_text(quote!(#ty))
}

/// Tokens as a reviewer writes them: `Option<Vec<String>>`, `&'a str`, with
/// a space only between two words.
fn tokens_text(tokens: TokenStream) -> String {
    let spaced = tokens.to_string();
    let mut out = String::with_capacity(spaced.len());
    let word = |c: char| c.is_alphanumeric() || c == '_';
    for piece in spaced.split(' ').filter(|piece| !piece.is_empty()) {
        if let (Some(last), Some(first)) = (out.chars().last(), piece.chars().next())
            && word(last)
            && (word(first) || first == '\'')
        {
            out.push(' ');
        }
        out.push_str(piece);
    }
    out
}
