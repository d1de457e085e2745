//! Rules that need the whole struct: the tenant is present (or the data is
//! declared global), criterion names are unique, no secret or volatile
//! input reaches the key, and tags sit on criteria, once each.

use std::collections::BTreeMap;

use syn::Type;

use crate::ast::{Criterion, Derive, Field, FieldKind, Query};
use crate::attr::{
    GLOBAL_TAG_EXAMPLE, Namespace, TTL_EXAMPLE, TTL_UNITS, Tag, VALUE_EXAMPLE, VALUE_ID_EXAMPLE,
};
use crate::ctxt::Ctxt;
use crate::sensitive::{self, CRITERION_FIX, Sensitivity, TAG_IN_CLEAR};
use cache_key_format::escape::escaped_len;
use cache_key_format::{MAX_GENERATION_LEN, head_len, max_decimal_len, max_key_len};

pub fn check(cx: &Ctxt, query: &Query) {
    match query.derive {
        Derive::CacheKey => {
            check_namespace(cx, query);
            check_scope(cx, query);
            check_tenant_from_serde(cx, query);
            check_max_len(cx, query);
        }
        Derive::Criteria => check_criteria_only(cx, query),
    }
    check_tenant_types(cx, query);
    check_criterion_names(cx, query);
    check_sensitive_names(cx, query);
    check_tags(cx, query);
    check_tagged_names(cx, query);
    check_skip_reasons(cx, query);
    check_cached(cx, query);
}

/// A `#[derive(Criteria)]` struct holds criteria only: the tenant and the
/// key's other parts belong to the query it is flattened into.
fn check_criteria_only(cx: &Ctxt, query: &Query) {
    let attrs = &query.attrs;
    let misplaced = [
        attrs.namespace.as_ref().map(|n| ("namespace", n.span())),
        attrs.operation.as_ref().map(|l| ("operation", l.span())),
        attrs.schema.as_ref().map(|s| ("schema", s.span)),
        attrs.global.as_ref().map(|l| ("global", l.span())),
        attrs.max_len.as_ref().map(|m| ("max_len", m.span)),
        attrs.hash_tag.map(|s| ("hash_tag", s)),
    ];
    for (name, span) in misplaced.into_iter().flatten() {
        cx.syn_error(syn::Error::new(
            span,
            format!(
                "`{name}` belongs on the query struct that derives `CacheKey`; a `Criteria` struct only takes `rename_all`"
            ),
        ));
    }
    for tenant in query.tenants() {
        cx.error_spanned_by(
            tenant.member,
            format!(
                "`{}` is a `Criteria` struct, flattened into queries: the tenant belongs on the query itself. Move `#[tenant] {}` to the struct that derives `CacheKey`",
                query.ident, tenant.name
            ),
        );
    }
}

/// The pattern that keeps the tenant out of serde's reach, in the query's own
/// names, for the messages below.
fn tenant_from_auth(query: &Query, tenant: &Field) -> String {
    format!(
        "take the tenant from authentication instead: deserialize the request into a `#[derive(Deserialize, Criteria)]` params struct, hold it in a `#[criterion(flatten)] params` field here, and build the query as `{} {{ {tenant}: auth.{tenant}, params }}`; a forgotten tenant is then a missing field, a compile error",
        query.ident,
        tenant = tenant.name,
    )
}

/// A tenant serde can fill by itself (`skip`, `skip_deserializing`, `default`,
/// or the container's `default`) silently keys every tenant under its type's
/// default (`t0`) whenever the code that should set it forgets.
fn check_tenant_from_serde(cx: &Ctxt, query: &Query) {
    for tenant in query.tenants() {
        if let Some((span, attr)) = tenant.serde.filled_by_serde {
            // `skip` also keeps it out of serialization, which
            // `skip_deserializing` alone does not: say which one to keep.
            let serialized_only = if attr == "skip" {
                format!(
                    " (if `{}` is only ever serialized, `#[serde(skip_serializing)]` keeps the tenant out of the output without letting serde fill it)",
                    query.ident
                )
            } else {
                String::new()
            };
            cx.syn_error(syn::Error::new(
                span,
                format!(
                    "tenant `{}` is `#[serde({attr})]`: serde fills it with a default (0, \"\") whenever the code that should set it forgets, and every tenant's entries then share one cache scope; {}{serialized_only}",
                    tenant.name,
                    tenant_from_auth(query, tenant),
                ),
            ));
        }
    }
    if let (Some(span), Some(tenant)) = (query.serde.default, query.tenants().next()) {
        cx.syn_error(syn::Error::new(
            span,
            format!(
                "`#[serde(default)]` on `{}` lets serde fill its tenant `{}` with a default (0, \"\") whenever the request lacks it, and every tenant's entries then share one cache scope; {}",
                query.ident,
                tenant.name,
                tenant_from_auth(query, tenant),
            ),
        ));
    }
}

fn check_namespace(cx: &Ctxt, query: &Query) {
    match &query.attrs.namespace {
        None => cx.error_spanned_by(
            query.ident,
            format!(
                "`{}` has no namespace: every key starts with its application's namespace; add `#[cache_key(namespace = \"my_app\")]`",
                query.ident
            ),
        ),
        Some(Namespace::Literal(lit)) if lit.value().is_empty() => cx.error_spanned_by(
            lit,
            "the namespace cannot be empty: write the application's name, e.g. namespace = \"library\"",
        ),
        Some(_) => {}
    }
    if let Some(operation) = &query.attrs.operation
        && operation.value().is_empty()
    {
        cx.error_spanned_by(
            operation,
            "the operation cannot be empty: write the query's name, e.g. operation = \"search\", or leave it out to use the struct's name",
        );
    }
}

/// The most tenant fields a query has: cache-key's `TenantRefs` is
/// implemented for tuples of up to this many (`generation/scope.rs`).
const MAX_TENANT_FIELDS: usize = 12;

fn check_scope(cx: &Ctxt, query: &Query) {
    let tenants: Vec<&Field> = query.tenants().collect();
    match &query.attrs.global {
        None if tenants.is_empty() => {
            cx.error_spanned_by(
                query.ident,
                format!(
                    "`{}` has no `#[tenant]` field: its keys would serve one tenant's cached data to another. Mark the field that holds the authorization scope (branch, organization, account) `#[tenant]`, or, if every tenant truly gets the same answer, declare `#[cache_key(global = \"why\")]`",
                    query.ident
                ),
            );
        }
        None => {
            if let Some(extra) = tenants.get(MAX_TENANT_FIELDS) {
                cx.error_spanned_by(
                    extra.member,
                    format!(
                        "`{}` has {} tenant fields, and a query has at most {MAX_TENANT_FIELDS}: its typed scopes take the tenant values as one tuple. Fold related values into one field of a type of your own that implements `TenantValue`",
                        query.ident,
                        tenants.len()
                    ),
                );
            }
        }
        Some(reason) => {
            if reason.value().trim().is_empty() {
                cx.error_spanned_by(
                    reason,
                    "`global` needs a reason a reviewer can check: global = \"the catalog of branches is public\"",
                );
            }
            for tenant in tenants {
                cx.error_spanned_by(
                    tenant.member,
                    format!(
                        "`{}` is declared `global` but field `{}` is `#[tenant]`: a key is either scoped to a tenant or global. Remove `global` if the answer depends on `{}`, or make the field `#[skip]` if it does not",
                        query.ident, tenant.name, tenant.name
                    ),
                );
            }
        }
    }
}

fn check_tenant_types(cx: &Ctxt, query: &Query) {
    for tenant in query.tenants() {
        if is_option(tenant.ty) {
            cx.error_spanned_by(
                tenant.ty,
                format!(
                    "tenant field `{}` is an `Option`: the authorization scope cannot be optional, or every request without it would share one cache scope. Use the non-optional type, and build the query only once the tenant is known",
                    tenant.name
                ),
            );
        }
    }
}

fn check_criterion_names(cx: &Ctxt, query: &Query) {
    let mut seen: BTreeMap<&str, &Field> = BTreeMap::new();
    for (field, Criterion { name, rename, .. }) in query.criteria() {
        if let Some(first) = seen.insert(name, field) {
            let message = format!(
                "criterion name `{name}` is used by both `{}` and `{}`: names must be unique in a key; rename one with #[criterion(rename = \"...\")]",
                first.name, field.name
            );
            match rename {
                Some(lit) => cx.error_spanned_by(lit, message),
                None => cx.error_spanned_by(field.member, message),
            }
        }
    }
}

fn check_sensitive_names(cx: &Ctxt, query: &Query) {
    for field in &query.fields {
        let (names, allow, marker): (Vec<&str>, _, _) = match &field.kind {
            FieldKind::Tenant { .. } => (vec![&field.name], None, "tenant"),
            // A tagged criterion's name is checked with its tag's.
            FieldKind::Criterion(_) if field.tag.is_some() => continue,
            FieldKind::Criterion(Criterion { name, allow, .. }) => {
                let mut names = vec![field.name.as_str()];
                if *name != field.name {
                    names.push(name);
                }
                (names, allow.as_ref(), "criterion")
            }
            FieldKind::Flatten | FieldKind::Skip { .. } | FieldKind::Unmarked => continue,
        };
        let found = names
            .iter()
            .find_map(|name| sensitive::classify(name).map(|c| (*name, c)));
        match (found, allow) {
            (Some(_), Some(reason)) if reason.value().trim().is_empty() => cx.error_spanned_by(
                reason,
                "`allow` needs a reason a reviewer can check: #[criterion(allow = \"the nonce is a public page seed, not a secret\")]",
            ),
            (Some(_), Some(_)) => {}
            (Some((name, (sensitivity, word))), None) => {
                let why = sensitivity.why(&word);
                let fix = if marker == "tenant" {
                    "mark it `#[skip]`; a tenant must be the authorization scope itself".to_owned()
                } else {
                    CRITERION_FIX.to_owned()
                };
                let what = if marker == "tenant" { "the tenant" } else { "a criterion" };
                let target = if name == field.name {
                    format!("field `{name}` cannot be {what}")
                } else {
                    format!("field `{}` cannot be {what} named `{name}`", field.name)
                };
                cx.error_spanned_by(field.member, format!("{target}: {why}; {fix}"));
            }
            (None, Some(reason)) => cx.error_spanned_by(
                reason,
                format!(
                    "`allow` is only for names that look like a secret, a volatile input, request metadata or personal data, and `{}` does not: remove it",
                    field.name
                ),
            ),
            (None, None) => {}
        }
    }
}

/// A tag goes on a criterion of a query (its value selects the answer), at
/// most once per name (each names a typed scope, `tag_scope_<name>`), and
/// inside the tenant only where there is one.
fn check_tags(cx: &Ctxt, query: &Query) {
    let mut names: BTreeMap<String, (&Field, &Tag)> = BTreeMap::new();
    let mut functions: BTreeMap<String, &Tag> = BTreeMap::new();
    for field in &query.fields {
        let Some(tag) = &field.tag else { continue };
        let tag_name = tag.name.value();
        if query.derive == Derive::Criteria {
            cx.error_spanned_by(
                &tag.path,
                format!(
                    "`#[tag]` belongs on the query struct that derives `CacheKey`: a tag's typed scope (`tag_scope_{}`) is a function of the query type, and `{}` is a `Criteria` part; tag the field in the query instead",
                    tag.function_suffix(),
                    query.ident
                ),
            );
            continue;
        }
        match &field.kind {
            FieldKind::Tenant { .. } => {
                let tenant: Vec<String> = query.tenants().map(|t| format!("&{}", t.name)).collect();
                let tenant = match tenant.as_slice() {
                    [one] => one.clone(),
                    all => format!("({})", all.join(", ")),
                };
                cx.error_spanned_by(
                    &tag.path,
                    format!(
                        "field `{}` is the tenant, already a scope of its own: invalidate it with `{}::tenant_scope({tenant})` (`use cache_key::Scopes`), and remove this `#[tag]`; tags are for the entities a query selects, on `#[criterion]` fields",
                        field.name, query.ident
                    ),
                );
                continue;
            }
            FieldKind::Skip { .. } => {
                cx.error_spanned_by(
                    &tag.path,
                    format!(
                        "field `{}` is `#[skip]`: a tag goes on a `#[criterion]` field, whose value selects the answer. Mark it `#[criterion]` if it does; if the answer's entities are only known once it is loaded, tag the cached value instead (`#[derive(CacheTags)]` on it, and `#[cache_key(value_tags)]`)",
                        field.name
                    ),
                );
                continue;
            }
            FieldKind::Flatten => {
                cx.error_spanned_by(
                    &tag.path,
                    format!(
                        "`#[tag]` does not apply to `flatten`: field `{}` adds its type's criteria, not one value; tag a `#[criterion]` field holding the entity's id instead",
                        field.name
                    ),
                );
                continue;
            }
            FieldKind::Unmarked => continue,
            FieldKind::Criterion(criterion) => check_tag_of_normalized(cx, field, criterion, tag),
        }
        if tag.global.is_none() && query.attrs.global.is_some() {
            cx.error_spanned_by(
                &tag.path,
                format!(
                    "`{}` is declared `global`: its keys have no tenant, so a tag inside the tenant has none to live in; declare the tag shared by every tenant of the namespace, with a reason: {}",
                    query.ident,
                    GLOBAL_TAG_EXAMPLE.replace("product", &tag_name)
                ),
            );
        }
        if let Some((first, _)) = names.get(&tag_name) {
            cx.error_spanned_by(
                &tag.name,
                format!(
                    "tag `{tag_name}` is already given by field `{}`: a tag name is used once in a query, its typed scope being `{}::tag_scope_{}`; give this one a name of its own",
                    first.name,
                    query.ident,
                    tag.function_suffix()
                ),
            );
            continue;
        }
        if let Some(other) = functions.get(&tag.function_suffix()) {
            cx.error_spanned_by(
                &tag.name,
                format!(
                    "tags `{}` and `{tag_name}` would both have the typed scope `{}::tag_scope_{}` (a `-` is written `_` there): rename one",
                    other.name.value(),
                    query.ident,
                    tag.function_suffix()
                ),
            );
            continue;
        }
        functions.insert(tag.function_suffix(), tag);
        names.insert(tag_name, (field, tag));
    }
}

/// A tag's value is the field's own, while a normalized criterion's key
/// holds another: two queries the key holds as one (` Mug`, `mug`) would be
/// tagged apart, and an invalidation by one value would miss the other.
fn check_tag_of_normalized(cx: &Ctxt, field: &Field, criterion: &Criterion, tag: &Tag) {
    let normalization = match criterion {
        Criterion { with: Some(_), .. } => "with",
        Criterion { trim: true, .. } => "trim",
        Criterion {
            lowercase: true, ..
        } => "lowercase",
        _ => return,
    };
    cx.error_spanned_by(
        &tag.path,
        format!(
            "field `{}` is keyed through `{normalization}`, but a tag holds the field's value as it is: two queries with one key would carry two tags, and invalidating the entity by one value would miss the other; normalize the id where the query is built and drop `{normalization}`, or tag another field that holds the id as the origin knows it",
            field.name
        ),
    );
}

/// A tagged criterion's names (the field's, the criterion's and the tag's):
/// what refuses a criterion refuses it, and personal data is refused even
/// when `allow`ed as a criterion, a tag's value being written in clear into
/// counter names.
fn check_tagged_names(cx: &Ctxt, query: &Query) {
    for (field, tag) in query.tags() {
        let FieldKind::Criterion(Criterion { name, allow, .. }) = &field.kind else {
            continue;
        };
        let tag_name = tag.name.value();
        let field_names = [field.name.as_str(), name.as_str()];
        let found = field_names
            .iter()
            .find_map(|name| sensitive::classify(name));
        if let Some(reason) = allow
            && reason.value().trim().is_empty()
            && found.is_some()
        {
            cx.error_spanned_by(
                reason,
                "`allow` needs a reason a reviewer can check: #[criterion(allow = \"the nonce is a public page seed, not a secret\")]",
            );
            continue;
        }
        let field_is_sensitive = found.is_some();
        match (found, allow) {
            (Some((Sensitivity::Personal, word)), Some(_)) => {
                let id = sensitive::id_field_instead(&field.name, &word);
                cx.error_spanned_by(
                    &tag.path,
                    format!(
                        "field `{}` cannot be a tag, even with `allow`: `{word}` names personal data, and {TAG_IN_CLEAR}; tag the person's id field instead (`{id}`, with #[tag = \"{tag_name}\"]) and remove this `#[tag]`",
                        field.name
                    ),
                );
            }
            (Some(_), Some(_)) => {}
            (Some((Sensitivity::Personal, word)), None) => {
                let id = sensitive::id_field_instead(&field.name, &word);
                cx.error_spanned_by(
                    field.member,
                    format!(
                        "field `{}` cannot be a criterion or a tag: `{word}` names personal data, keys are written wherever they are listed or logged, and {TAG_IN_CLEAR}; key and tag by the person's id instead: put `#[criterion] #[tag = \"{tag_name}\"]` on the id field (`{id}`) and mark this one `#[skip]`",
                        field.name
                    ),
                );
            }
            (Some((sensitivity, word)), None) => cx.error_spanned_by(
                field.member,
                format!(
                    "field `{}` cannot be a criterion or a tag: {} (a tag's value also goes, in clear, into the names of generation counters); {CRITERION_FIX}; to invalidate by an entity, tag a field holding its id",
                    field.name,
                    sensitivity.why(&word),
                ),
            ),
            (None, Some(reason)) => cx.error_spanned_by(
                reason,
                format!(
                    "`allow` is only for names that look like a secret, a volatile input, request metadata or personal data, and `{}` does not: remove it",
                    field.name
                ),
            ),
            (None, None) => {}
        }
        // The tag's own name says what its values are.
        if !field_is_sensitive
            && let Some((sensitivity @ (Sensitivity::Personal | Sensitivity::Secret), word)) =
                sensitive::classify(&tag_name)
        {
            let kind = match sensitivity {
                Sensitivity::Personal => "personal data",
                _ => "a secret",
            };
            let id = sensitive::id_field_instead(&field.name, &word);
            cx.error_spanned_by(
                &tag.name,
                format!(
                    "tag `{tag_name}` names {kind} (`{word}`), and {TAG_IN_CLEAR}: a tag names an entity by its id; tag the id (`{id}`, with #[tag = \"{}\"])",
                    id.trim_end_matches("_id")
                ),
            );
        }
    }
}

fn check_skip_reasons(cx: &Ctxt, query: &Query) {
    for field in query.skipped() {
        if let FieldKind::Skip {
            reason: Some(reason),
        } = &field.kind
            && reason.value().trim().is_empty()
        {
            cx.error_spanned_by(
                reason,
                "an empty `reason` says nothing: write why the field does not change the response, or use plain `#[skip]`",
            );
        }
    }
}

/// With `max_len`, when every part of the key has a bounded length (a literal
/// namespace, integer tenants), the longest possible key must fit: checked here,
/// at compile time. Otherwise the limit is checked when each key is built.
fn check_max_len(cx: &Ctxt, query: &Query) {
    let Some(max) = &query.attrs.max_len else {
        return;
    };
    let Some(Namespace::Literal(namespace)) = &query.attrs.namespace else {
        return;
    };
    let tenant_len: Option<usize> = query
        .tenants()
        .map(|tenant| max_integer_len(tenant.ty))
        .try_fold(0, |sum, len| len.map(|len| sum + len));
    let Some(tenant_len) = tenant_len else {
        return;
    };
    let tenants = query.tenants().count();
    let (schema, operation) = (query.schema(), query.operation());
    let head = head_len(
        escaped_len(&namespace.value()),
        schema.to_string().len(),
        MAX_GENERATION_LEN,
    );
    let hash_tag = query.attrs.hash_tag.is_some();
    let tenant_len = tenant_len + tenants.saturating_sub(1);
    let longest = max_key_len(head, hash_tag, tenant_len, escaped_len(&operation));
    if longest > max.value {
        cx.syn_error(syn::Error::new(
            max.span,
            format!(
                "keys of `{}` can be up to {longest} bytes long, over max_len = {}: the longest generation (20 digits), the longest tenant values and a 48-byte criteria segment must fit. Raise `max_len` or shorten the namespace or operation",
                query.ident, max.value
            ),
        ));
    }
}

/// The longest decimal form of an integer type written as a tenant, if the
/// type is an integer (or a `NonZero` one).
fn max_integer_len(ty: &Type) -> Option<usize> {
    let Type::Path(path) = ty else {
        return match ty {
            Type::Group(group) => max_integer_len(&group.elem),
            Type::Paren(paren) => max_integer_len(&paren.elem),
            _ => None,
        };
    };
    let segment = path.path.segments.last()?;
    let name = segment.ident.to_string();
    let inner = match (&segment.arguments, name.as_str()) {
        (syn::PathArguments::AngleBracketed(args), "NonZero") => match args.args.first()? {
            syn::GenericArgument::Type(Type::Path(inner)) => {
                inner.path.segments.last()?.ident.to_string()
            }
            _ => return None,
        },
        (syn::PathArguments::None, name) => name
            .strip_prefix("NonZero")
            .unwrap_or(name)
            .to_ascii_lowercase(),
        _ => return None,
    };
    max_decimal_len(&inner)
}

/// Whether the type is written `Option<..>` (with any path prefix).
fn is_option(ty: &Type) -> bool {
    match ty {
        Type::Path(path) if path.qself.is_none() => path
            .path
            .segments
            .last()
            .is_some_and(|segment| segment.ident == "Option"),
        Type::Group(group) => is_option(&group.elem),
        Type::Paren(paren) => is_option(&paren.elem),
        _ => false,
    }
}

/// `value` and `ttl` go together (an answer without a lifetime would never
/// expire; a lifetime without an answer means nothing), and only a `CacheKey`
/// query has a cached answer.
fn check_cached(cx: &Ctxt, query: &Query) {
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
        if let Some(lit) = &attrs.value_id {
            cx.error_spanned_by(lit, message("value_id"));
        }
        if let Some(span) = attrs.ttl_span {
            cx.syn_error(syn::Error::new(span, message("ttl")));
        }
        if let Some(span) = attrs.value_tags {
            cx.syn_error(syn::Error::new(span, message("value_tags")));
        }
        return;
    }
    if let (Some(span), None) = (attrs.value_tags, &attrs.value) {
        cx.syn_error(syn::Error::new(
            span,
            format!("`value_tags` needs `value`: the tags are read from the cached answer, whose type `value` declares (it derives `CacheTags`); add {VALUE_EXAMPLE} (with `ttl`), or, with `CachedQuery` implemented by hand, write its `write_value_tags` there"),
        ));
    }
    match (&attrs.value, attrs.ttl_span) {
        (Some(value), None) => cx.error_spanned_by(
            value,
            format!("`value` needs `ttl`: every cached answer expires; say how long this one lives, as {TTL_EXAMPLE} ({TTL_UNITS})"),
        ),
        (None, Some(span)) => cx.syn_error(syn::Error::new(
            span,
            format!("`ttl` needs `value`: say what the cached answer is, as {VALUE_EXAMPLE}, or implement `CachedQuery` by hand"),
        )),
        _ => {}
    }
    check_value_id(cx, query);
}

/// The longest value id the derive writes: it is stored beside every value
/// and is a line of the layout lock.
const MAX_VALUE_ID_LEN: usize = 128;

/// `CachedQuery::VALUE_ID`, `value_id` or `value`'s type as written: printable
/// ASCII without whitespace (readable in `redis-cli`, one word in the lock),
/// at most [`MAX_VALUE_ID_LEN`] bytes; and `value_id` only beside `value`.
fn check_value_id(cx: &Ctxt, query: &Query) {
    let attrs = &query.attrs.cached;
    let (given, Some(value)) = (&attrs.value_id, &attrs.value) else {
        if let Some(lit) = &attrs.value_id {
            cx.error_spanned_by(
                lit,
                format!("`value_id` needs `value`: it names the cached answer `value` declares; add {VALUE_EXAMPLE} (with `ttl`), or, with `CachedQuery` implemented by hand, set its `VALUE_ID` there"),
            );
        }
        return;
    };
    let id = attrs.value_id().unwrap_or_default();
    let Some(fault) = value_id_fault(&id) else {
        return;
    };
    match given {
        Some(lit) if id.is_empty() => cx.error_spanned_by(
            lit,
            format!("`value_id` cannot be empty: name what the cached answer is, as {VALUE_ID_EXAMPLE}, or leave it out for `value`'s type as written"),
        ),
        Some(lit) => cx.error_spanned_by(
            lit,
            format!("`value_id` {fault}: a value id is printable ASCII without whitespace, at most {MAX_VALUE_ID_LEN} bytes, as {VALUE_ID_EXAMPLE}"),
        ),
        None => cx.error_spanned_by(
            value,
            format!("the value id stored beside each entry is `value`'s type as written unless `value_id` gives one, and this type {fault}: give one, as {VALUE_ID_EXAMPLE} (printable ASCII without whitespace, at most {MAX_VALUE_ID_LEN} bytes)"),
        ),
    }
}

/// What keeps `id` from being a value id, as "it ..."; `None` when it is one.
fn value_id_fault(id: &str) -> Option<String> {
    if id.is_empty() {
        return Some("is empty".to_owned());
    }
    if let Some(c) = id.chars().find(|c| !c.is_ascii_graphic()) {
        return Some(if c.is_whitespace() {
            "holds whitespace".to_owned()
        } else {
            format!("holds {c:?}, which is not printable ASCII")
        });
    }
    (id.len() > MAX_VALUE_ID_LEN)
        .then(|| format!("is {} bytes long, over {MAX_VALUE_ID_LEN}", id.len()))
}
