//! The model of a query struct: the container's settings and each field with
//! its role in the key, each holding the syntax nodes errors point at.

use syn::{Data, DeriveInput, Fields, Generics, Ident, LitStr, Path, Type};

use crate::attr::{self, Container, CriterionAttrs, Marker, Role};
use crate::case::RenameRule;
use crate::ctxt::Ctxt;

/// Which derive the struct is for.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Derive {
    /// `#[derive(CacheKey)]`: a whole query, with its tenant.
    CacheKey,
    /// `#[derive(Criteria)]`: a group of criteria flattened into queries.
    Criteria,
}

impl Derive {
    pub fn name(self) -> &'static str {
        match self {
            Derive::CacheKey => "CacheKey",
            Derive::Criteria => "Criteria",
        }
    }
}

/// A `#[derive(CacheKey)]` or `#[derive(Criteria)]` struct.
pub struct Query<'a> {
    pub derive: Derive,
    pub ident: &'a Ident,
    pub generics: &'a Generics,
    pub attrs: Container,
    pub fields: Vec<Field<'a>>,
}

/// One field and what it is to the key.
pub struct Field<'a> {
    /// The field's name as written (`r#type` stays raw, so it can be accessed).
    pub member: &'a Ident,
    /// The field's name without `r#`, as reviewers read it.
    pub name: String,
    pub ty: &'a Type,
    pub kind: FieldKind,
}

pub enum FieldKind {
    Tenant,
    Criterion(Criterion),
    /// `#[criterion(flatten)]`: the field's type adds its own criteria.
    Flatten,
    Skip {
        reason: Option<LitStr>,
    },
    /// Not marked: an error has been recorded.
    Unmarked,
}

/// A field that is one criterion of the key.
pub struct Criterion {
    /// The criterion's name in the key (after `rename` / `rename_all`).
    pub name: String,
    /// Where the name came from, for errors: the `rename` literal, or the field.
    pub rename: Option<LitStr>,
    pub allow: Option<LitStr>,
    pub trim: bool,
    pub lowercase: bool,
    pub with: Option<Path>,
}

impl<'a> Query<'a> {
    /// Builds the model, recording every mistake in `cx`. `None` when the input
    /// is not a struct with named fields.
    pub fn from_ast(cx: &Ctxt, input: &'a DeriveInput, derive: Derive) -> Option<Self> {
        let name = derive.name();
        let attrs = Container::from_attrs(cx, &input.attrs);
        let named = match &input.data {
            Data::Struct(data) => match &data.fields {
                Fields::Named(named) => named,
                Fields::Unnamed(_) => {
                    cx.error_spanned_by(
                        &input.ident,
                        format!("`#[derive({name})]` needs a struct with named fields: the key names each criterion after its field, so write `struct Name {{ field: Type, .. }}`"),
                    );
                    return None;
                }
                Fields::Unit => {
                    cx.error_spanned_by(
                        &input.ident,
                        format!("`#[derive({name})]` needs a struct with named fields: a unit struct has no criteria to key on"),
                    );
                    return None;
                }
            },
            Data::Enum(data) => {
                cx.error_spanned_by(
                    data.enum_token,
                    format!("`#[derive({name})]` works on structs only: make each query its own struct with named fields (for an enum used as a criterion value, derive `CriterionValue`)"),
                );
                return None;
            }
            Data::Union(data) => {
                cx.error_spanned_by(
                    data.union_token,
                    format!("`#[derive({name})]` works on structs with named fields, not unions"),
                );
                return None;
            }
        };
        let fields = named
            .named
            .iter()
            .filter_map(|field| Field::from_ast(cx, field, attrs.rename_all))
            .collect();
        Some(Query {
            derive,
            ident: &input.ident,
            generics: &input.generics,
            attrs,
            fields,
        })
    }

    pub fn tenants(&self) -> impl Iterator<Item = &Field<'a>> {
        self.fields
            .iter()
            .filter(|f| matches!(f.kind, FieldKind::Tenant))
    }

    /// The criterion fields, each with its criterion.
    pub fn criteria(&self) -> impl Iterator<Item = (&Field<'a>, &Criterion)> {
        self.fields.iter().filter_map(|f| match &f.kind {
            FieldKind::Criterion(criterion) => Some((f, criterion)),
            _ => None,
        })
    }

    pub fn flattened(&self) -> impl Iterator<Item = &Field<'a>> {
        self.fields
            .iter()
            .filter(|f| matches!(f.kind, FieldKind::Flatten))
    }

    pub fn skipped(&self) -> impl Iterator<Item = &Field<'a>> {
        self.fields
            .iter()
            .filter(|f| matches!(f.kind, FieldKind::Skip { .. }))
    }
}

impl<'a> Field<'a> {
    fn from_ast(cx: &Ctxt, field: &'a syn::Field, rename_all: Option<RenameRule>) -> Option<Self> {
        let member = field.ident.as_ref()?;
        let name = member.to_string().trim_start_matches("r#").to_owned();
        let kind = match attr::field_marker(cx, &field.attrs) {
            Some(Marker {
                role: Role::Tenant, ..
            }) => FieldKind::Tenant,
            Some(Marker {
                role: Role::Criterion(attrs),
                ..
            }) => criterion_kind(cx, attrs, &name, rename_all),
            Some(Marker {
                role: Role::Skip { reason },
                ..
            }) => FieldKind::Skip { reason },
            None => {
                if !has_marker(field) {
                    cx.error_spanned_by(
                        member,
                        format!(
                            "field `{name}` is not marked: mark it `#[criterion]` if it changes the response, `#[skip]` if it does not, or `#[tenant]` if it is the authorization scope"
                        ),
                    );
                }
                FieldKind::Unmarked
            }
        };
        Some(Field {
            member,
            name,
            ty: &field.ty,
            kind,
        })
    }
}

fn criterion_kind(
    cx: &Ctxt,
    attrs: CriterionAttrs,
    field: &str,
    rename_all: Option<RenameRule>,
) -> FieldKind {
    let CriterionAttrs {
        rename,
        allow,
        flatten,
        trim,
        lowercase,
        with,
    } = attrs;
    if flatten.is_some() {
        let others = [
            rename.as_ref().map(|l| ("rename", l.span())),
            allow.as_ref().map(|l| ("allow", l.span())),
            trim.map(|s| ("trim", s)),
            lowercase.map(|s| ("lowercase", s)),
            with.as_ref()
                .map(|p| ("with", syn::spanned::Spanned::span(p))),
        ];
        for (name, span) in others.into_iter().flatten() {
            cx.syn_error(syn::Error::new(
                span,
                format!(
                    "`{name}` does not apply to `flatten`: the flattened type names and writes its own criteria; put `{name}` on its fields instead"
                ),
            ));
        }
        return FieldKind::Flatten;
    }
    if let Some(with) = &with {
        for (name, span) in [("trim", trim), ("lowercase", lowercase)] {
            if let Some(span) = span {
                cx.syn_error(syn::Error::new(
                    span,
                    format!(
                        "`{name}` and `with` together are ambiguous: normalize inside `{}` instead",
                        attr::path_name(with)
                    ),
                ));
            }
        }
    }
    FieldKind::Criterion(Criterion {
        name: match (&rename, rename_all) {
            (Some(lit), _) => lit.value(),
            (None, Some(rule)) => rule.apply_to_field(field),
            (None, None) => field.to_owned(),
        },
        rename,
        allow,
        trim: trim.is_some(),
        lowercase: lowercase.is_some(),
        with,
    })
}

/// Whether the field carries a marker attribute at all (a malformed one has
/// its own error already).
fn has_marker(field: &syn::Field) -> bool {
    field
        .attrs
        .iter()
        .any(|a| attr::MARKERS.iter().any(|m| a.path().is_ident(m)))
}
