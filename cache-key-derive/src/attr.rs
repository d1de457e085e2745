//! Parsing of the attributes: `#[cache_key(...)]` on the struct, and
//! `#[tenant]`, `#[criterion(...)]`, `#[skip(...)]`, `#[tag...]` (and, for
//! `#[derive(CacheTags)]`, `#[tags]`) on its fields.
//!
//! Parsing records every mistake in the [`Ctxt`] and goes on, so that one build
//! reports them all.

use proc_macro2::Span;
use syn::meta::ParseNestedMeta;
use syn::spanned::Spanned;
use syn::{Attribute, Lit, LitInt, LitStr, Path, Type};

use crate::case::{self, RenameRule};
use crate::ctxt::Ctxt;

/// A value with the span to point at when it is wrong.
#[derive(Clone)]
pub struct WithSpan<T> {
    pub value: T,
    pub span: Span,
}

/// Where the namespace comes from.
pub enum Namespace {
    /// `namespace = "library"`
    Literal(LitStr),
    /// `namespace = crate::NAMESPACE`, a `&'static str` constant.
    Path(Path),
}

impl Namespace {
    pub fn span(&self) -> Span {
        match self {
            Namespace::Literal(lit) => lit.span(),
            Namespace::Path(path) => path.span(),
        }
    }
}

/// The container attribute, `#[cache_key(...)]`.
#[derive(Default)]
pub struct Container {
    pub namespace: Option<Namespace>,
    pub operation: Option<LitStr>,
    pub schema: Option<WithSpan<u32>>,
    pub rename_all: Option<RenameRule>,
    pub global: Option<LitStr>,
    pub max_len: Option<WithSpan<usize>>,
    pub hash_tag: Option<Span>,
    /// `crate = "..."`: the path of the `cache_key` crate, when it is renamed
    /// or re-exported.
    pub krate: Option<Path>,
    /// `value = Type, ttl = "5m"`: the query's `CachedQuery` impl.
    pub cached: CachedAttrs,
}

const CONTAINER_KEYS: &[&str] = &[
    "namespace",
    "operation",
    "schema",
    "rename_all",
    "global",
    "max_len",
    "hash_tag",
    "crate",
    "value",
    "value_id",
    "ttl",
    "value_tags",
];

impl Container {
    pub fn from_attrs(cx: &Ctxt, attrs: &[Attribute]) -> Self {
        let mut container = Container::default();
        for attr in attrs.iter().filter(|a| a.path().is_ident("cache_key")) {
            let result = attr.parse_nested_meta(|meta| {
                let key = path_name(&meta.path);
                match key.as_str() {
                    "namespace" => {
                        let expr = meta.value()?.parse::<syn::Expr>()?;
                        let namespace = match ungroup(&expr) {
                            syn::Expr::Lit(syn::ExprLit {
                                lit: Lit::Str(lit), ..
                            }) => Namespace::Literal(lit.clone()),
                            syn::Expr::Path(path) if path.qself.is_none() => {
                                Namespace::Path(path.path.clone())
                            }
                            _ => {
                                return Err(syn::Error::new(
                                    expr.span(),
                                    "`namespace` must be a string literal or the path of a `&'static str` constant: namespace = \"library\"",
                                ));
                            }
                        };
                        set_once(cx, &meta, &mut container.namespace, namespace);
                    }
                    "operation" => {
                        if let Some(lit) = string_value(cx, &meta, "operation = \"search\"")? {
                            set_once(cx, &meta, &mut container.operation, lit);
                        }
                    }
                    "schema" => {
                        if let Some(schema) = integer_value(cx, &meta, "schema = 2")? {
                            set_once(cx, &meta, &mut container.schema, schema);
                        }
                    }
                    "rename_all" => {
                        let Some(lit) = string_value(cx, &meta, "rename_all = \"camelCase\"")? else {
                            return Ok(());
                        };
                        match RenameRule::from_str(&lit.value()) {
                            Some(rule) => set_once(cx, &meta, &mut container.rename_all, rule),
                            None => cx.error_spanned_by(&lit, unknown_rule_message(&lit)),
                        }
                    }
                    "global" => {
                        if let Some(lit) = string_value(
                            cx,
                            &meta,
                            "global = \"why the answer is the same for every tenant\"",
                        )? {
                            set_once(cx, &meta, &mut container.global, lit);
                        }
                    }
                    "max_len" => {
                        if let Some(max) = integer_value(cx, &meta, "max_len = 250")? {
                            set_once(cx, &meta, &mut container.max_len, max);
                        }
                    }
                    "hash_tag" => {
                        flag(&meta)?;
                        let span = meta.path.span();
                        set_once(cx, &meta, &mut container.hash_tag, span);
                    }
                    "crate" => {
                        if let Some(path) = crate_value(cx, &meta)? {
                            set_once(cx, &meta, &mut container.krate, path);
                        }
                    }
                    "value" | "ttl" => container.cached.parse(cx, &meta, &key)?,
                    "value_id" => {
                        if let Some(lit) = string_value(cx, &meta, VALUE_ID_EXAMPLE)? {
                            set_once(cx, &meta, &mut container.cached.value_id, lit);
                        }
                    }
                    "value_tags" => {
                        flag(&meta)?;
                        let span = meta.path.span();
                        set_once(cx, &meta, &mut container.cached.value_tags, span);
                    }
                    _ => {
                        skip_value(&meta)?;
                        cx.error_spanned_by(
                            &meta.path,
                            unknown_message("cache_key", &key, CONTAINER_KEYS),
                        );
                    }
                }
                Ok(())
            });
            if let Err(err) = result {
                cx.syn_error(err);
            }
        }
        container
    }
}

/// The syntax that messages about `value`, `value_id` and `ttl` show, here
/// and in `check`.
pub const VALUE_EXAMPLE: &str = "value = Vec<Book>";
pub const VALUE_ID_EXAMPLE: &str = "value_id = \"library.books\"";
pub const TTL_EXAMPLE: &str = "ttl = \"5m\"";
pub const TTL_UNITS: &str = "units: ms, s, m, h, d";

/// `value = Type`, `value_id = "..."` and `ttl = "..."`: the query's cached
/// answer, its identity outside the process and how long it lives. The
/// duration is parsed here, so a typo is a compile error on the literal.
#[derive(Default)]
pub struct CachedAttrs {
    pub value: Option<Type>,
    pub value_id: Option<LitStr>,
    /// The time to live in milliseconds, with the literal's span.
    pub ttl: Option<(u64, Span)>,
    /// Where `ttl` was written, valid or not (for "needs `value`").
    pub ttl_span: Option<Span>,
    /// `value_tags`: the cached answer's own tags (`CacheTags`) are recorded
    /// with each entry.
    pub value_tags: Option<Span>,
}

impl CachedAttrs {
    /// Parses `value = ...` or `ttl = ...` (`key` says which), reporting a
    /// mistake in `cx` and going on.
    pub fn parse(&mut self, cx: &Ctxt, meta: &ParseNestedMeta, key: &str) -> syn::Result<()> {
        let value = meta
            .value()
            .map_err(|_| meta.error(format!("`{key}` needs a value: {}", example(key))))?;
        if key == "value" {
            let without_quotes =
                format!("`value` takes the cached answer's type, without quotes: {VALUE_EXAMPLE}");
            // A quoted type is reported and still read, so the fallback's
            // `CachedQuery` impl has its value type and parsing goes on.
            if value.peek(LitStr) {
                let lit = value.parse::<LitStr>()?;
                cx.error_spanned_by(&lit, without_quotes);
                if let Ok(ty) = lit.parse::<Type>() {
                    set_once(cx, meta, &mut self.value, ty);
                }
                return Ok(());
            }
            let ty = value
                .parse::<Type>()
                .map_err(|err| syn::Error::new(err.span(), without_quotes))?;
            set_once(cx, meta, &mut self.value, ty);
            return Ok(());
        }
        let expr = value.parse::<syn::Expr>()?;
        self.ttl_span.get_or_insert(meta.path.span());
        let millis = match ungroup(&expr) {
            syn::Expr::Lit(syn::ExprLit {
                lit: Lit::Str(lit), ..
            }) => match parse_duration(&lit.value()) {
                Ok(0) => Err(
                    "`ttl` cannot be zero: an entry that expires at once is never read; give the answer a lifetime, as ttl = \"30s\", or do not cache this query"
                        .to_owned(),
                ),
                Ok(millis) => Ok((millis, lit.span())),
                Err(why) => Err(format!(
                    "`ttl = {:?}` is not a duration ({why}): write a number and a unit, as ttl = \"30s\", \"5m\", \"2h\" or \"1h30m\" ({TTL_UNITS})",
                    lit.value()
                )),
            },
            syn::Expr::Lit(syn::ExprLit {
                lit: Lit::Int(int), ..
            }) => Err(format!(
                "`ttl` needs a unit, in a string: ttl = \"{}s\" for seconds ({TTL_UNITS})",
                int.base10_digits()
            )),
            _ => Err(format!(
                "`ttl` must be a string literal with a unit: {TTL_EXAMPLE} ({TTL_UNITS})"
            )),
        };
        match millis {
            Ok(ttl) => set_once(cx, meta, &mut self.ttl, ttl),
            Err(message) => cx.syn_error(syn::Error::new(expr.span(), message)),
        }
        Ok(())
    }
}

impl CachedAttrs {
    /// `CachedQuery::VALUE_ID`: `value_id`, or else `value`'s type as
    /// written without its whitespace (`Vec<Book>`), so formatting does not
    /// change it. `None` without `value`.
    pub fn value_id(&self) -> Option<String> {
        let ty = self.value.as_ref()?;
        Some(match &self.value_id {
            Some(lit) => lit.value(),
            None => {
                let mut text = quote::ToTokens::to_token_stream(ty).to_string();
                text.retain(|c| !c.is_whitespace());
                text
            }
        })
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

/// What a field is to the key.
pub enum Role {
    /// `#[tenant]`, or `#[tenant(allow_zero = "why")]`.
    Tenant {
        allow_zero: Option<LitStr>,
    },
    Criterion(CriterionAttrs),
    Skip {
        reason: Option<LitStr>,
    },
}

/// The arguments of `#[criterion(...)]`.
#[derive(Default)]
pub struct CriterionAttrs {
    pub rename: Option<LitStr>,
    pub allow: Option<LitStr>,
    pub flatten: Option<Span>,
    pub trim: Option<Span>,
    pub lowercase: Option<Span>,
    pub with: Option<Path>,
}

const CRITERION_KEYS: &[&str] = &["rename", "allow", "flatten", "trim", "lowercase", "with"];
const SKIP_KEYS: &[&str] = &["reason"];
pub const MARKERS: &[&str] = &["tenant", "criterion", "skip"];

/// A field's marker attribute, parsed.
pub struct Marker {
    pub role: Role,
    /// The marker's path, where errors about the marker point.
    pub path: Path,
}

/// Parses the markers of one field. Returns the first valid one; a second
/// marker is an error on the second.
pub fn field_marker(cx: &Ctxt, attrs: &[Attribute]) -> Option<Marker> {
    let mut found: Option<Marker> = None;
    for attr in attrs {
        let Some(kind) = MARKERS.iter().find(|m| attr.path().is_ident(m)) else {
            continue;
        };
        let role = match *kind {
            "tenant" => match &attr.meta {
                syn::Meta::Path(_) => Some(Role::Tenant { allow_zero: None }),
                _ => tenant_attrs(cx, attr),
            },
            "criterion" => criterion_attrs(cx, attr).map(Role::Criterion),
            _ => skip_attrs(cx, attr),
        };
        let Some(role) = role else { continue };
        match &found {
            Some(first) => cx.error_spanned_by(
                attr.path(),
                format!(
                    "this field is already marked `#[{}]`: a field is exactly one of `#[tenant]`, `#[criterion]` or `#[skip]`; remove one of them",
                    path_name(&first.path)
                ),
            ),
            None => {
                found = Some(Marker {
                    role,
                    path: attr.path().clone(),
                })
            }
        }
    }
    found
}

fn criterion_attrs(cx: &Ctxt, attr: &Attribute) -> Option<CriterionAttrs> {
    let mut attrs = CriterionAttrs::default();
    if let syn::Meta::Path(_) = attr.meta {
        return Some(attrs);
    }
    let result = attr.parse_nested_meta(|meta| {
        let key = path_name(&meta.path);
        match key.as_str() {
            "rename" => {
                if let Some(lit) = string_value(cx, &meta, "rename = \"yearFrom\"")? {
                    if lit.value().is_empty() {
                        cx.error_spanned_by(
                            &lit,
                            "a criterion name cannot be empty: rename = \"yearFrom\"",
                        );
                    }
                    set_once(cx, &meta, &mut attrs.rename, lit);
                }
            }
            "allow" => {
                if let Some(lit) =
                    string_value(cx, &meta, "allow = \"why this value is safe in a key\"")?
                {
                    set_once(cx, &meta, &mut attrs.allow, lit);
                }
            }
            "flatten" | "trim" | "lowercase" => {
                flag(&meta)?;
                let slot = match key.as_str() {
                    "flatten" => &mut attrs.flatten,
                    "trim" => &mut attrs.trim,
                    _ => &mut attrs.lowercase,
                };
                let span = meta.path.span();
                set_once(cx, &meta, slot, span);
            }
            "with" => {
                let value = meta.value().map_err(|_| {
                    meta.error("`with` needs the path of a function: with = crate::normalize_isbn")
                })?;
                let path: Path = value.parse().map_err(|err| {
                    syn::Error::new(
                        err.span(),
                        "`with` takes the path of a function, without quotes: with = crate::normalize_isbn",
                    )
                })?;
                set_once(cx, &meta, &mut attrs.with, path);
            }
            _ => {
                skip_value(&meta)?;
                cx.error_spanned_by(
                    &meta.path,
                    unknown_message("criterion", &key, CRITERION_KEYS),
                );
            }
        }
        Ok(())
    });
    match result {
        Ok(()) => Some(attrs),
        Err(err) => {
            cx.syn_error(err);
            None
        }
    }
}

/// `#[tenant(allow_zero = "why 0 is a real tenant")]`.
fn tenant_attrs(cx: &Ctxt, attr: &Attribute) -> Option<Role> {
    const EXAMPLE: &str = "allow_zero = \"branch 0 is the head office\"";
    let mut allow_zero = None;
    let result = attr.parse_nested_meta(|meta| {
        let key = path_name(&meta.path);
        if key == "allow_zero" {
            if let Some(lit) = string_value(cx, &meta, EXAMPLE)? {
                if lit.value().trim().is_empty() {
                    cx.error_spanned_by(
                        &lit,
                        format!("`allow_zero` needs a reason a reviewer can check: {EXAMPLE}"),
                    );
                }
                set_once(cx, &meta, &mut allow_zero, lit);
            }
        } else {
            skip_value(&meta)?;
            cx.error_spanned_by(
                &meta.path,
                format!(
                    "unknown argument `{key}` in `#[tenant(...)]`: `#[tenant]` takes only `{EXAMPLE}`, for a tenant whose 0 (or nil UUID) is a real tenant"
                ),
            );
        }
        Ok(())
    });
    if let Err(err) = result {
        cx.syn_error(err);
    }
    Some(Role::Tenant { allow_zero })
}

fn skip_attrs(cx: &Ctxt, attr: &Attribute) -> Option<Role> {
    let mut reason = None;
    if let syn::Meta::Path(_) = attr.meta {
        return Some(Role::Skip { reason });
    }
    let result = attr.parse_nested_meta(|meta| {
        let key = path_name(&meta.path);
        if key == "reason" {
            if let Some(lit) = string_value(cx, &meta, "reason = \"tracing only\"")? {
                set_once(cx, &meta, &mut reason, lit);
            }
        } else {
            skip_value(&meta)?;
            cx.error_spanned_by(&meta.path, unknown_message("skip", &key, SKIP_KEYS));
        }
        Ok(())
    });
    match result {
        Ok(()) => Some(Role::Skip { reason }),
        Err(err) => {
            cx.syn_error(err);
            None
        }
    }
}

/// A tag on a field: `#[tag = "product"]`, or `#[tag(name = "product",
/// global = "why")]` for a tag shared by every tenant of the namespace.
pub struct Tag {
    /// The tag's name, a valid one (see [`tag_name_fault`]).
    pub name: LitStr,
    /// Why every tenant of the namespace shares the tag, for a global one.
    pub global: Option<LitStr>,
    /// The attribute's path, where errors about the tag as a whole point.
    pub path: Path,
}

impl Tag {
    /// The tag's name with `-` written `_`, for the name of its typed scope.
    pub fn function_suffix(&self) -> String {
        self.name.value().replace('-', "_")
    }

    /// How the tag's entries start in `Tags`' text: its scope's mark, the
    /// name (which needs no escaping), `=`; spanned on the name.
    pub fn entry_start(&self) -> LitStr {
        let mark = match self.global {
            None => '#',
            Some(_) => '@',
        };
        let text = format!("{mark}{}=", self.name.value());
        LitStr::new(&text, self.name.span())
    }
}

/// What a field's tag attributes make of it.
pub enum FieldTag {
    /// `#[tag = "..."]`: its values are ids of the tag's entity.
    Tag(Tag),
    /// `#[tags]` (with `#[derive(CacheTags)]`): its value holds tags of its own.
    Nested,
}

pub const TAG_EXAMPLE: &str = "#[tag = \"product\"]";
pub const GLOBAL_TAG_EXAMPLE: &str =
    "#[tag(name = \"product\", global = \"the catalog is shared by every shop\")]";

/// Parses a field's `#[tag...]` attributes, and `#[tags]` when `nested` (for
/// `#[derive(CacheTags)]`; `#[derive(CacheKey)]` leaves `#[tags]` alone). A
/// second one is an error on it; a malformed one is reported and dropped.
pub fn field_tag(cx: &Ctxt, attrs: &[Attribute], nested: bool) -> Option<FieldTag> {
    let mut found: Option<FieldTag> = None;
    for attr in attrs {
        let tag = if attr.path().is_ident("tag") {
            tag_attr(cx, attr).map(FieldTag::Tag)
        } else if nested && attr.path().is_ident("tags") {
            if !matches!(attr.meta, syn::Meta::Path(_)) {
                cx.error_spanned_by(
                    attr,
                    "`#[tags]` takes no arguments: it says that the field's value holds tags of its own (its type implements `CacheTags`); write `#[tags]`",
                );
            }
            Some(FieldTag::Nested)
        } else {
            continue;
        };
        let Some(tag) = tag else { continue };
        match (&found, &tag) {
            (None, _) => found = Some(tag),
            (Some(FieldTag::Tag(first)), FieldTag::Tag(_)) => cx.error_spanned_by(
                attr,
                format!(
                    "this field already has the tag `{}`: a field gives one tag, its values being ids of one kind of entity; remove one, or tag another field",
                    first.name.value()
                ),
            ),
            (Some(FieldTag::Nested), FieldTag::Nested) => {
                cx.error_spanned_by(attr, "`#[tags]` is given twice; keep one")
            }
            (Some(_), _) => cx.error_spanned_by(
                attr,
                "a field is either `#[tag = \"...\"]`, its values being ids of the tag's entity, or `#[tags]`, its value holding tags of its own (`CacheTags`), not both; keep one",
            ),
        }
    }
    found
}

fn tag_attr(cx: &Ctxt, attr: &Attribute) -> Option<Tag> {
    let needs_name = format!(
        "`#[tag]` needs the tag's name: {TAG_EXAMPLE} for a tag inside the tenant, or {GLOBAL_TAG_EXAMPLE} for one shared by every tenant of the namespace"
    );
    let mut name = None;
    let mut global = None;
    // A misspelled `name` has its own error: no second one for the name.
    let mut unknown = false;
    match &attr.meta {
        syn::Meta::Path(_) => {
            cx.error_spanned_by(attr, needs_name);
            return None;
        }
        syn::Meta::NameValue(pair) => match ungroup(&pair.value) {
            syn::Expr::Lit(syn::ExprLit {
                lit: Lit::Str(lit), ..
            }) => name = Some(lit.clone()),
            other => {
                cx.error_spanned_by(
                    other,
                    format!("a tag's name must be a string literal: {TAG_EXAMPLE}"),
                );
                return None;
            }
        },
        syn::Meta::List(_) => {
            let result = attr.parse_nested_meta(|meta| {
                let key = path_name(&meta.path);
                match key.as_str() {
                    "name" => {
                        if let Some(lit) = string_value(cx, &meta, "name = \"product\"")? {
                            set_once(cx, &meta, &mut name, lit);
                        }
                    }
                    "global" => {
                        if let Some(lit) = string_value(
                            cx,
                            &meta,
                            "global = \"the catalog is shared by every shop\"",
                        )? {
                            set_once(cx, &meta, &mut global, lit);
                        }
                    }
                    _ => {
                        skip_value(&meta)?;
                        unknown = true;
                        cx.error_spanned_by(
                            &meta.path,
                            unknown_message("tag", &key, &["name", "global"]),
                        );
                    }
                }
                Ok(())
            });
            if let Err(err) = result {
                cx.syn_error(err);
                return None;
            }
        }
    }
    let Some(name) = name else {
        if !unknown {
            cx.error_spanned_by(attr, needs_name);
        }
        return None;
    };
    if let Some(fault) = tag_name_fault(&name.value()) {
        cx.error_spanned_by(&name, fault);
        return None;
    }
    if let Some(reason) = &global
        && reason.value().trim().is_empty()
    {
        cx.error_spanned_by(
            reason,
            format!(
                "`global` needs a reason a reviewer can check: a global tag is shared by every tenant of the namespace, so bumping it invalidates every tenant's entries tagged with it: {}; for a tag inside the tenant, write {}",
                GLOBAL_TAG_EXAMPLE.replace("product", &name.value()),
                TAG_EXAMPLE.replace("product", &name.value()),
            ),
        );
    }
    Some(Tag {
        name,
        global,
        path: attr.path().clone(),
    })
}

/// What keeps `name` from being a tag name (non-empty ASCII letters, digits,
/// `_` or `-`: a tag names its typed scope, `tag_scope_<name>`); `None` when
/// it is one.
pub fn tag_name_fault(name: &str) -> Option<String> {
    const RULE: &str = "a tag name is ASCII letters, digits, `_` or `-`, as #[tag = \"product\"] or #[tag = \"order-line\"]";
    if name.is_empty() {
        return Some(format!(
            "a tag name cannot be empty: name the entity whose ids the field holds; {RULE}"
        ));
    }
    let c = name
        .chars()
        .find(|&c| !(c.is_ascii_alphanumeric() || c == '_' || c == '-'))?;
    Some(format!("tag name {name:?} holds {c:?}: {RULE}"))
}

/// A flag argument (`flatten`, `hash_tag`...): it takes no value.
fn flag(meta: &ParseNestedMeta) -> syn::Result<()> {
    if meta.input.peek(syn::Token![=]) || meta.input.peek(syn::token::Paren) {
        let name = path_name(&meta.path);
        return Err(meta.error(format!("`{name}` takes no value: write `{name}`")));
    }
    Ok(())
}

/// Parses `#[cache_key(crate = "...")]`, the one container argument of
/// `#[derive(CriterionValue)]` and `#[derive(TenantValue)]`.
pub fn crate_attr(cx: &Ctxt, attrs: &[Attribute]) -> Option<Path> {
    let mut krate = None;
    for attr in attrs.iter().filter(|a| a.path().is_ident("cache_key")) {
        let result = attr.parse_nested_meta(|meta| {
            let key = path_name(&meta.path);
            if key == "crate" {
                if let Some(path) = crate_value(cx, &meta)? {
                    set_once(cx, &meta, &mut krate, path);
                }
            } else {
                skip_value(&meta)?;
                cx.error_spanned_by(&meta.path, unknown_message("cache_key", &key, &["crate"]));
            }
            Ok(())
        });
        if let Err(err) = result {
            cx.syn_error(err);
        }
    }
    krate
}

/// The path in `crate = "path"`.
fn crate_value(cx: &Ctxt, meta: &ParseNestedMeta) -> syn::Result<Option<Path>> {
    const EXAMPLE: &str = "crate = \"my_crate::cache_key\"";
    let Some(lit) = string_value(cx, meta, EXAMPLE)? else {
        return Ok(None);
    };
    match lit.parse::<Path>() {
        Ok(path) => Ok(Some(path)),
        Err(_) => {
            cx.error_spanned_by(
                &lit,
                format!("`crate` must name the path of the cache_key crate: {EXAMPLE}"),
            );
            Ok(None)
        }
    }
}

/// The arguments of `#[criterion(...)]` on an enum (for `#[derive(CriterionValue)]`)
/// or on one of its variants.
#[derive(Default)]
pub struct ValueAttrs {
    pub rename: Option<LitStr>,
    pub rename_all: Option<RenameRule>,
}

/// Parses `#[criterion(rename_all = "...")]` on an enum (`container`) or
/// `#[criterion(rename = "...")]` on a variant.
pub fn value_attrs(cx: &Ctxt, attrs: &[Attribute], container: bool) -> ValueAttrs {
    let mut parsed = ValueAttrs::default();
    let known: &[&str] = if container {
        &["rename_all"]
    } else {
        &["rename"]
    };
    for attr in attrs.iter().filter(|a| a.path().is_ident("criterion")) {
        let result = attr.parse_nested_meta(|meta| {
            let key = path_name(&meta.path);
            match key.as_str() {
                "rename" if !container => {
                    if let Some(lit) = string_value(cx, &meta, "rename = \"title_asc\"")? {
                        if lit.value().is_empty() {
                            cx.error_spanned_by(
                                &lit,
                                "a value's name cannot be empty: rename = \"title_asc\"",
                            );
                        }
                        set_once(cx, &meta, &mut parsed.rename, lit);
                    }
                }
                "rename_all" if container => {
                    if let Some(lit) = string_value(cx, &meta, "rename_all = \"snake_case\"")? {
                        match RenameRule::from_str(&lit.value()) {
                            Some(rule) => set_once(cx, &meta, &mut parsed.rename_all, rule),
                            None => cx.error_spanned_by(&lit, unknown_rule_message(&lit)),
                        }
                    }
                }
                _ => {
                    skip_value(&meta)?;
                    cx.error_spanned_by(&meta.path, unknown_message("criterion", &key, known));
                }
            }
            Ok(())
        });
        if let Err(err) = result {
            cx.syn_error(err);
        }
    }
    parsed
}

fn unknown_rule_message(lit: &LitStr) -> String {
    format!(
        "unknown `rename_all` rule {:?}; expected one of: {}",
        lit.value(),
        case::RULES
            .iter()
            .map(|(name, _)| format!("\"{name}\""))
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// Stores an argument, or reports it as given twice.
fn set_once<T>(cx: &Ctxt, meta: &ParseNestedMeta, slot: &mut Option<T>, value: T) {
    if slot.is_some() {
        cx.error_spanned_by(
            &meta.path,
            format!("`{}` is given twice; keep one", path_name(&meta.path)),
        );
    } else {
        *slot = Some(value);
    }
}

/// The string literal after `name =`. A literal of another kind is recorded
/// as an error and gives `None`, so parsing goes on; a missing `=` ends it.
fn string_value(cx: &Ctxt, meta: &ParseNestedMeta, example: &str) -> syn::Result<Option<LitStr>> {
    let name = path_name(&meta.path);
    let value = meta
        .value()
        .map_err(|_| meta.error(format!("`{name}` needs a string value: {example}")))?;
    // The common case, a literal and then `,` or the end, without parsing an
    // expression (the derive's dearest step per attribute).
    if value.peek(LitStr) && (value.peek2(syn::Token![,]) || ends_after_one(value)) {
        return value.parse().map(Some);
    }
    let expr = value.parse::<syn::Expr>()?;
    match ungroup(&expr) {
        syn::Expr::Lit(syn::ExprLit {
            lit: Lit::Str(lit), ..
        }) => Ok(Some(lit.clone())),
        other => {
            cx.error_spanned_by(
                other,
                format!("`{name}` must be a string literal: {example}"),
            );
            Ok(None)
        }
    }
}

/// The integer literal after `name =`, like [`string_value`].
fn integer_value<N>(
    cx: &Ctxt,
    meta: &ParseNestedMeta,
    example: &str,
) -> syn::Result<Option<WithSpan<N>>>
where
    N: std::str::FromStr,
    N::Err: std::fmt::Display,
{
    let name = path_name(&meta.path);
    let value = meta
        .value()
        .map_err(|_| meta.error(format!("`{name}` needs an integer value: {example}")))?;
    let expr = value.parse::<syn::Expr>()?;
    let parsed = match ungroup(&expr) {
        syn::Expr::Lit(syn::ExprLit {
            lit: Lit::Int(int), ..
        }) => parse_int(int, &name, example),
        _ => Err(syn::Error::new(
            expr.span(),
            format!("`{name}` must be an integer literal: {example}"),
        )),
    };
    match parsed {
        Ok(value) => Ok(Some(WithSpan {
            value,
            span: expr.span(),
        })),
        Err(err) => {
            cx.syn_error(err);
            Ok(None)
        }
    }
}

fn parse_int<N>(int: &LitInt, name: &str, example: &str) -> syn::Result<N>
where
    N: std::str::FromStr,
    N::Err: std::fmt::Display,
{
    int.base10_parse::<N>().map_err(|err| {
        syn::Error::new(
            int.span(),
            format!("`{name}` is out of range ({err}): {example}"),
        )
    })
}

/// Whether `input` holds one token tree and nothing after it.
fn ends_after_one(input: syn::parse::ParseStream) -> bool {
    input
        .cursor()
        .token_tree()
        .is_some_and(|(_, rest)| rest.eof())
}

/// The expression inside the invisible groups a `macro_rules!` fragment
/// arrives in (`operation = $op` with `$op:literal`).
pub fn ungroup(mut expr: &syn::Expr) -> &syn::Expr {
    while let syn::Expr::Group(group) = expr {
        expr = &group.expr;
    }
    expr
}

/// Consumes `= value` or `(...)` after an unknown key, so parsing can go on.
pub fn skip_value(meta: &ParseNestedMeta) -> syn::Result<()> {
    if meta.input.peek(syn::Token![=]) {
        meta.value()?.parse::<syn::Expr>().map(drop)
    } else if meta.input.peek(syn::token::Paren) {
        meta.parse_nested_meta(|nested| skip_value(&nested))
    } else {
        Ok(())
    }
}

pub fn path_name(path: &Path) -> String {
    path.segments
        .iter()
        .map(|s| s.ident.to_string())
        .collect::<Vec<_>>()
        .join("::")
}

/// "unknown attribute `namspace` in `#[cache_key(...)]`; did you mean `namespace`? ..."
fn unknown_message(attr: &str, key: &str, known: &[&str]) -> String {
    let list = known
        .iter()
        .map(|k| format!("`{k}`"))
        .collect::<Vec<_>>()
        .join(", ");
    match closest(key, known) {
        Some(guess) => format!(
            "unknown argument `{key}` in `#[{attr}(...)]`: did you mean `{guess}`? expected one of {list}"
        ),
        None => format!("unknown argument `{key}` in `#[{attr}(...)]`: expected one of {list}"),
    }
}

/// The known word within edit distance 2 of `word`, if any.
fn closest<'k>(word: &str, known: &[&'k str]) -> Option<&'k str> {
    known
        .iter()
        .map(|k| (edit_distance(word, k), *k))
        .filter(|&(d, _)| d <= 2)
        .min()
        .map(|(_, k)| k)
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let next = (diagonal + usize::from(ca != cb))
                .min(row[j] + 1)
                .min(row[j + 1] + 1);
            diagonal = row[j + 1];
            row[j + 1] = next;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;
    use syn::parse_quote;

    #[test]
    fn suggests_the_closest_key() {
        assert_eq!(closest("namspace", CONTAINER_KEYS), Some("namespace"));
        assert_eq!(closest("renmae", CRITERION_KEYS), Some("rename"));
        assert_eq!(closest("colour", CONTAINER_KEYS), None);
    }

    #[test]
    fn parses_a_full_container_attribute() {
        let attrs: Vec<Attribute> = vec![parse_quote!(
            #[cache_key(namespace = "library", operation = "search", schema = 2, rename_all = "camelCase", max_len = 250, hash_tag)]
        )];
        let cx = Ctxt::new();
        let container = Container::from_attrs(&cx, &attrs);
        assert!(cx.check().is_ok());
        assert!(
            matches!(container.namespace, Some(Namespace::Literal(ref lit)) if lit.value() == "library")
        );
        assert_eq!(
            container.operation.map(|l| l.value()).as_deref(),
            Some("search")
        );
        assert_eq!(container.schema.map(|s| s.value), Some(2));
        assert_eq!(container.rename_all, Some(RenameRule::Camel));
        assert_eq!(container.max_len.map(|m| m.value), Some(250));
        assert!(container.hash_tag.is_some());
    }

    #[test]
    fn reports_every_mistake_of_a_container_attribute() {
        let attrs: Vec<Attribute> = vec![parse_quote!(
            #[cache_key(namspace = "library", schema = "1", rename_all = "camel")]
        )];
        let cx = Ctxt::new();
        let _ = Container::from_attrs(&cx, &attrs);
        let errors = cx.check().unwrap_err().to_string();
        assert!(errors.contains("did you mean `namespace`"), "{errors}");
        assert!(
            errors.contains("`schema` must be an integer literal"),
            "{errors}"
        );
        assert!(errors.contains("unknown `rename_all` rule"), "{errors}");
    }

    #[test]
    fn a_second_marker_is_an_error() {
        let field: syn::Field = parse_quote!(#[tenant] #[criterion] branch: u32);
        let cx = Ctxt::new();
        let marker = field_marker(&cx, &field.attrs);
        assert!(matches!(
            marker.map(|m| m.role),
            Some(Role::Tenant { allow_zero: None })
        ));
        assert!(
            cx.check()
                .unwrap_err()
                .to_string()
                .contains("already marked `#[tenant]`")
        );
    }

    #[test]
    fn the_value_id_is_the_type_as_written_without_whitespace_or_value_id() {
        let value_id = |attr: Attribute| {
            let cx = Ctxt::new();
            let container = Container::from_attrs(&cx, &[attr]);
            assert!(cx.check().is_ok());
            container.cached.value_id()
        };
        assert_eq!(
            value_id(parse_quote!(#[cache_key(value = Vec<Book>, ttl = "5m")])).as_deref(),
            Some("Vec<Book>")
        );
        assert_eq!(
            value_id(parse_quote!(#[cache_key(value = std::vec::Vec< books::Book >, ttl = "5m")]))
                .as_deref(),
            Some("std::vec::Vec<books::Book>")
        );
        assert_eq!(
            value_id(
                parse_quote!(#[cache_key(value = Vec<Book>, value_id = "books-v2", ttl = "5m")])
            )
            .as_deref(),
            Some("books-v2")
        );
        assert_eq!(
            value_id(parse_quote!(#[cache_key(value_id = "books")])),
            None
        );
    }

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
