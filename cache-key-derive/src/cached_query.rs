//! `#[cache_key(value = Type, ttl = "5m")]`: the query's cached answer and
//! how long it lives, declared beside the key, become an
//! `impl cache_key::cache::CachedQuery`.
//!
//! The two arguments go together (an answer without a lifetime would never
//! expire; a lifetime without an answer means nothing), and the duration is
//! parsed here, so a typo is a compile error on the literal.

use proc_macro2::{Span, TokenStream};
use quote::{quote, quote_spanned};
use syn::meta::ParseNestedMeta;
use syn::spanned::Spanned;
use syn::{Lit, Type};

use crate::ast::{Derive, Query};
use crate::attr::set_once;
use crate::ctxt::Ctxt;

const VALUE_EXAMPLE: &str = "value = Vec<Book>";
const TTL_EXAMPLE: &str = "ttl = \"5m\"";
const UNITS: &str = "units: ms, s, m, h, d";

/// `value = Type` and `ttl = "..."`, as parsed.
#[derive(Default)]
pub struct CachedAttrs {
    pub value: Option<Type>,
    /// The time to live in milliseconds, with the literal's span.
    pub ttl: Option<(u64, Span)>,
    /// Where `ttl` was written, valid or not (for "needs `value`").
    ttl_span: Option<Span>,
}

impl CachedAttrs {
    /// Parses `value = ...` or `ttl = ...` (`key` says which), reporting a
    /// mistake in `cx` and going on.
    pub fn parse(&mut self, cx: &Ctxt, meta: &ParseNestedMeta, key: &str) -> syn::Result<()> {
        let value = meta
            .value()
            .map_err(|_| meta.error(format!("`{key}` needs a value: {}", example(key))))?;
        if key == "value" {
            let ty = value.parse::<Type>().map_err(|err| {
                syn::Error::new(
                    err.span(),
                    format!(
                        "`value` takes the cached answer's type, without quotes: {VALUE_EXAMPLE}"
                    ),
                )
            })?;
            set_once(cx, meta, &mut self.value, ty);
            return Ok(());
        }
        let expr = value.parse::<syn::Expr>()?;
        self.ttl_span.get_or_insert(meta.path.span());
        let millis = match crate::attr::ungroup(&expr) {
            syn::Expr::Lit(syn::ExprLit {
                lit: Lit::Str(lit), ..
            }) => match parse_duration(&lit.value()) {
                Ok(0) => Err(
                    "`ttl` cannot be zero: an entry that expires at once is never read; give the answer a lifetime, as ttl = \"30s\", or do not cache this query"
                        .to_owned(),
                ),
                Ok(millis) => Ok((millis, lit.span())),
                Err(why) => Err(format!(
                    "`ttl = {:?}` is not a duration ({why}): write a number and a unit, as ttl = \"30s\", \"5m\", \"2h\" or \"1h30m\" ({UNITS})",
                    lit.value()
                )),
            },
            syn::Expr::Lit(syn::ExprLit {
                lit: Lit::Int(int), ..
            }) => Err(format!(
                "`ttl` needs a unit, in a string: ttl = \"{}s\" for seconds ({UNITS})",
                int.base10_digits()
            )),
            _ => Err(format!(
                "`ttl` must be a string literal with a unit: {TTL_EXAMPLE} ({UNITS})"
            )),
        };
        match millis {
            Ok(ttl) => set_once(cx, meta, &mut self.ttl, ttl),
            Err(message) => cx.syn_error(syn::Error::new(expr.span(), message)),
        }
        Ok(())
    }
}

fn example(key: &str) -> &'static str {
    if key == "value" {
        VALUE_EXAMPLE
    } else {
        TTL_EXAMPLE
    }
}

/// `"1h30m"` in milliseconds: one or more numbers, each with its unit; the
/// error says what is wrong.
fn parse_duration(text: &str) -> Result<u64, String> {
    if text.is_empty() {
        return Err("it is empty".to_owned());
    }
    let mut rest = text;
    let mut total: u64 = 0;
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return Err(format!("expected a number at `{rest}`"));
        }
        let (number, after) = rest.split_at(digits);
        let unit = after.bytes().take_while(u8::is_ascii_alphabetic).count();
        let (unit, after) = after.split_at(unit);
        let millis_per: u64 = match unit {
            "ms" => 1,
            "s" => 1_000,
            "m" => 60_000,
            "h" => 3_600_000,
            "d" => 86_400_000,
            "" if after.starts_with(char::is_whitespace) => {
                return Err(format!(
                    "`{number}` is followed by a space: write the unit right after it"
                ));
            }
            "" => return Err(format!("`{number}` has no unit")),
            _ => return Err(format!("unknown unit `{unit}`")),
        };
        total = number
            .parse::<u64>()
            .ok()
            .and_then(|number| number.checked_mul(millis_per))
            .and_then(|millis| total.checked_add(millis))
            .ok_or("it is too long for a `Duration` of milliseconds in a u64")?;
        rest = after;
    }
    Ok(total)
}

/// The rules that need both arguments: each needs the other, and only a
/// `CacheKey` query has a cached answer.
pub fn check(cx: &Ctxt, query: &Query) {
    let attrs = &query.attrs.cached;
    if query.derive == Derive::Criteria {
        let message = |name: &str| {
            format!(
                "`{name}` belongs on the query struct that derives `CacheKey`: a `Criteria` struct is part of a query and has no cached answer of its own"
            )
        };
        if let Some(value) = &attrs.value {
            cx.error_spanned_by(value, message("value"));
        }
        if let Some(span) = attrs.ttl_span {
            cx.syn_error(syn::Error::new(span, message("ttl")));
        }
        return;
    }
    match (&attrs.value, attrs.ttl_span) {
        (Some(value), None) => cx.error_spanned_by(
            value,
            format!("`value` needs `ttl`: every cached answer expires; say how long this one lives, as {TTL_EXAMPLE} ({UNITS})"),
        ),
        (None, Some(span)) => cx.syn_error(syn::Error::new(
            span,
            format!("`ttl` needs `value`: say what the cached answer is, as {VALUE_EXAMPLE}, or implement `CachedQuery` by hand"),
        )),
        _ => {}
    }
}

/// `impl CachedQuery` for a query that declares `value` and `ttl`, with the
/// same generics and bounds as its `CacheKey` impl; nothing otherwise.
pub fn expand(query: &Query) -> TokenStream {
    let attrs = &query.attrs.cached;
    match (&attrs.value, attrs.ttl) {
        (Some(value), Some((millis, span))) => impl_cached_query(query, value, millis, span),
        _ => TokenStream::new(),
    }
}

/// The impl emitted beside compile errors when `value` was readable, so code
/// reading the query from a cache adds no second wave of errors.
pub fn fallback(query: &Query) -> TokenStream {
    let attrs = &query.attrs.cached;
    match (&attrs.value, attrs.ttl) {
        (Some(value), ttl) => {
            let (millis, span) = ttl.unwrap_or((u64::MAX, Span::call_site()));
            impl_cached_query(query, value, millis, span)
        }
        (None, _) => TokenStream::new(),
    }
}

fn impl_cached_query(query: &Query, value: &Type, millis: u64, ttl_span: Span) -> TokenStream {
    let ident = query.ident;
    let mut generics = crate::expand::generics_with_bounds(query);
    // A value type built from the query's type parameters gets the trait's
    // bounds here, so a missing one is reported where the query is used.
    let params: Vec<&syn::Ident> = query.generics.type_params().map(|p| &p.ident).collect();
    if crate::expand::mentions_any(value, &params) {
        generics
            .make_where_clause()
            .predicates
            .push(syn::parse_quote!(
                #value: ::core::clone::Clone + ::core::marker::Send + ::core::marker::Sync + 'static
            ));
    }
    let (impl_generics, ty_generics, where_clause) = generics.split_for_impl();
    let use_crate = crate::expand::use_crate(query.attrs.krate.as_ref());
    // Spanned on the type: a value that is not `Clone + Send + Sync + 'static`
    // is reported on what the user wrote.
    let value_item = quote_spanned!(value.span()=> type Value = #value;);
    let ttl_item = quote_spanned! {ttl_span=>
        const TTL: ::core::time::Duration = ::core::time::Duration::from_millis(#millis);
    };
    quote! {
        #[doc(hidden)]
        const _: () = {
            #use_crate

            #[automatically_derived]
            impl #impl_generics __cache_key::cache::CachedQuery for #ident #ty_generics #where_clause {
                #value_item
                #ttl_item
            }
        };
    }
}

#[cfg(test)]
mod tests {
    use super::parse_duration;

    #[test]
    fn durations_parse_with_their_units() {
        assert_eq!(parse_duration("500ms"), Ok(500));
        assert_eq!(parse_duration("30s"), Ok(30_000));
        assert_eq!(parse_duration("5m"), Ok(300_000));
        assert_eq!(parse_duration("2h"), Ok(7_200_000));
        assert_eq!(parse_duration("1d"), Ok(86_400_000));
        assert_eq!(parse_duration("1h30m"), Ok(5_400_000));
        assert_eq!(parse_duration("0s"), Ok(0));
    }

    #[test]
    fn bad_durations_say_why() {
        let error = |text: &str| parse_duration(text).unwrap_err();
        assert_eq!(error(""), "it is empty");
        assert_eq!(error("5"), "`5` has no unit");
        assert_eq!(
            error("5 minutes"),
            "`5` is followed by a space: write the unit right after it"
        );
        assert_eq!(error("5min"), "unknown unit `min`");
        assert_eq!(error("m"), "expected a number at `m`");
        assert_eq!(error("1h-30m"), "expected a number at `-30m`");
        let too_long = "it is too long for a `Duration` of milliseconds in a u64";
        assert_eq!(error("99999999999999999999s"), too_long);
        assert_eq!(error("300000000000000d"), too_long);
    }
}
