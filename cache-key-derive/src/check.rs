//! Rules that need the whole struct: the tenant is present (or the data is
//! declared global), criterion names are unique, and no secret or volatile
//! input reaches the key.

use std::collections::BTreeMap;

use syn::Type;

use crate::ast::{Field, FieldKind, Query};
use crate::attr::Namespace;
use crate::ctxt::Ctxt;
use crate::sensitive::{self, Sensitivity};

pub fn check(cx: &Ctxt, query: &Query) {
    check_namespace(cx, query);
    check_scope(cx, query);
    check_tenant_types(cx, query);
    check_criterion_names(cx, query);
    check_sensitive_names(cx, query);
    check_skip_reasons(cx, query);
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
    if let Some(operation) = &query.attrs.operation {
        if operation.value().is_empty() {
            cx.error_spanned_by(
                operation,
                "the operation cannot be empty: write the query's name, e.g. operation = \"search\", or leave it out to use the struct's name",
            );
        }
    }
}

fn check_scope(cx: &Ctxt, query: &Query) {
    let tenants: Vec<&Field> = query.tenants().collect();
    match &query.attrs.global {
        None if tenants.is_empty()
            && !query
                .fields
                .iter()
                .any(|f| matches!(f.kind, FieldKind::Unmarked)) =>
        {
            cx.error_spanned_by(
                query.ident,
                format!(
                    "`{}` has no `#[tenant]` field: its keys would serve one tenant's cached data to another. Mark the field that holds the authorization scope (branch, organization, account) `#[tenant]`, or, if every tenant truly gets the same answer, declare `#[cache_key(global = \"why\")]`",
                    query.ident
                ),
            );
        }
        None => {}
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
    for field in query.criteria() {
        let FieldKind::Criterion { name, rename, .. } = &field.kind else {
            continue;
        };
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
            FieldKind::Tenant => (vec![&field.name], None, "tenant"),
            FieldKind::Criterion { name, allow, .. } => {
                let mut names = vec![field.name.as_str()];
                if *name != field.name {
                    names.push(name);
                }
                (names, allow.as_ref(), "criterion")
            }
            FieldKind::Skip { .. } | FieldKind::Unmarked => continue,
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
                let why = match sensitivity {
                    Sensitivity::Secret => format!(
                        "`{word}` names a secret, and keys are written wherever they are listed or logged"
                    ),
                    Sensitivity::Volatile => format!(
                        "`{word}` names a volatile input: a value that differs on every request makes every key unique and the hit ratio zero"
                    ),
                };
                let fix = if marker == "tenant" {
                    "mark it `#[skip]`; a tenant must be the authorization scope itself".to_owned()
                } else {
                    "mark it `#[skip]`, or, if it truly selects the answer and is safe to log, write `#[criterion(allow = \"reason\")]`".to_owned()
                };
                cx.error_spanned_by(
                    field.member,
                    format!("field `{}` cannot be `#[{marker}]` as `{name}`: {why}; {fix}", field.name),
                );
            }
            (None, Some(reason)) => cx.error_spanned_by(
                reason,
                format!(
                    "`allow` is only for names that look like a secret or a volatile input, and `{}` does not: remove it",
                    field.name
                ),
            ),
            (None, None) => {}
        }
    }
}

fn check_skip_reasons(cx: &Ctxt, query: &Query) {
    for field in query.skipped() {
        if let FieldKind::Skip {
            reason: Some(reason),
        } = &field.kind
        {
            if reason.value().trim().is_empty() {
                cx.error_spanned_by(
                    reason,
                    "an empty `reason` says nothing: write why the field does not change the response, or use plain `#[skip]`",
                );
            }
        }
    }
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
