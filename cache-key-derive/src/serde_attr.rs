//! What serde's own attributes say about a struct, a field or an enum:
//! the names the wire uses, and whether serde may fill a field by itself.
//!
//! Like schemars, the derive reads `#[serde(...)]` so that a key and the wire
//! agree without names written twice. Only the arguments that matter here are
//! read; serde checks the rest. Where serialize and deserialize names differ,
//! the deserialize name is the key's: a query type is what a request
//! deserializes into.

use proc_macro2::Span;
use syn::meta::ParseNestedMeta;
use syn::spanned::Spanned;
use syn::{Attribute, Lit, LitStr};

use crate::attr::{skip_value, ungroup};
use crate::case::RenameRule;

/// The `#[serde(...)]` arguments of a container (struct or enum).
#[derive(Default)]
pub struct SerdeContainer {
    pub rename_all: Option<RenameRule>,
    /// `#[serde(default)]` on the container: where it is written.
    pub default: Option<Span>,
}

/// The `#[serde(...)]` arguments of a field or a variant.
#[derive(Default)]
pub struct SerdeField {
    pub rename: Option<String>,
    /// `skip`, `skip_deserializing` or `default` (`= "path"` or not): serde
    /// fills the field when the input lacks it. The argument's span and name.
    pub filled_by_serde: Option<(Span, &'static str)>,
}

pub fn container(attrs: &[Attribute]) -> SerdeContainer {
    let mut parsed = SerdeContainer::default();
    for_each_argument(attrs, |meta| {
        if meta.path.is_ident("rename_all") {
            if let Some(rule) = deserialize_name(meta)?.and_then(|n| RenameRule::from_str(&n)) {
                parsed.rename_all = Some(rule);
            }
        } else if meta.path.is_ident("default") {
            parsed.default = Some(meta.path.span());
            skip_value(meta)?;
        } else {
            skip_value(meta)?;
        }
        Ok(())
    });
    parsed
}

pub fn field(attrs: &[Attribute]) -> SerdeField {
    let mut parsed = SerdeField::default();
    for_each_argument(attrs, |meta| {
        let filler = ["skip", "skip_deserializing", "default"]
            .into_iter()
            .find(|name| meta.path.is_ident(name));
        if meta.path.is_ident("rename") {
            parsed.rename = deserialize_name(meta)?;
        } else if let Some(name) = filler {
            parsed
                .filled_by_serde
                .get_or_insert((meta.path.span(), name));
            skip_value(meta)?;
        } else {
            skip_value(meta)?;
        }
        Ok(())
    });
    parsed
}

/// Calls `f` for each argument of each `#[serde(...)]`. Malformed serde
/// attributes are serde's to report: what cannot be parsed is left alone.
fn for_each_argument(attrs: &[Attribute], mut f: impl FnMut(&ParseNestedMeta) -> syn::Result<()>) {
    for attr in attrs.iter().filter(|a| a.path().is_ident("serde")) {
        let _ = attr.parse_nested_meta(|meta| f(&meta));
    }
}

/// The name in `rename = "..."` or `rename(deserialize = "...")`; `None` when
/// only a serialize name is given (the field deserializes as itself).
fn deserialize_name(meta: &ParseNestedMeta) -> syn::Result<Option<String>> {
    if meta.input.peek(syn::Token![=]) {
        return Ok(string(meta)?.map(|lit| lit.value()));
    }
    let mut name = None;
    meta.parse_nested_meta(|nested| {
        let value = string(&nested)?;
        if nested.path.is_ident("deserialize") {
            name = value.map(|lit| lit.value());
        }
        Ok(())
    })?;
    Ok(name)
}

fn string(meta: &ParseNestedMeta) -> syn::Result<Option<LitStr>> {
    let expr = meta.value()?.parse::<syn::Expr>()?;
    Ok(match ungroup(&expr) {
        syn::Expr::Lit(syn::ExprLit {
            lit: Lit::Str(lit), ..
        }) => Some(lit.clone()),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use syn::parse_quote;

    #[test]
    fn reads_names_and_fillers() {
        let field_attrs: Vec<Attribute> = vec![
            parse_quote!(#[serde(rename(serialize = "s", deserialize = "d"), skip_deserializing)]),
            parse_quote!(#[serde(with = "x", borrow)]),
        ];
        let parsed = field(&field_attrs);
        assert_eq!(parsed.rename.as_deref(), Some("d"));
        assert_eq!(
            parsed.filled_by_serde.map(|f| f.1),
            Some("skip_deserializing")
        );

        let container_attrs: Vec<Attribute> =
            vec![parse_quote!(#[serde(deny_unknown_fields, rename_all = "camelCase", default)])];
        let parsed = container(&container_attrs);
        assert_eq!(parsed.rename_all, Some(RenameRule::Camel));
        assert!(parsed.default.is_some());

        let only_serialize: Vec<Attribute> =
            vec![parse_quote!(#[serde(rename(serialize = "s"), default = "path::to")])];
        let parsed = field(&only_serialize);
        assert_eq!(parsed.rename, None);
        assert_eq!(parsed.filled_by_serde.map(|f| f.1), Some("default"));
    }
}
