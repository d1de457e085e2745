//! The model of a query struct: the container's settings and each field with
//! its role in the key, each holding the syntax nodes errors point at.

use syn::{Data, DeriveInput, Fields, Generics, Ident, LitStr, Type};

use crate::attr::{self, Container, CriterionAttrs, Marker, Role};
use crate::case::RenameRule;
use crate::ctxt::Ctxt;

/// A `#[derive(CacheKey)]` struct.
pub struct Query<'a> {
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
    Criterion {
        /// The criterion's name in the key (after `rename` / `rename_all`).
        name: String,
        /// Where the name came from, for errors: the `rename` literal, or the field.
        rename: Option<LitStr>,
        allow: Option<LitStr>,
    },
    Skip {
        reason: Option<LitStr>,
    },
    /// Not marked: an error has been recorded.
    Unmarked,
}

impl<'a> Query<'a> {
    /// Builds the model, recording every mistake in `cx`. `None` when the input
    /// is not a struct with named fields.
    pub fn from_ast(cx: &Ctxt, input: &'a DeriveInput) -> Option<Self> {
        let attrs = Container::from_attrs(cx, &input.attrs);
        let named = match &input.data {
            Data::Struct(data) => match &data.fields {
                Fields::Named(named) => named,
                Fields::Unnamed(_) => {
                    cx.error_spanned_by(
                        &input.ident,
                        "`#[derive(CacheKey)]` needs a struct with named fields: the key names each criterion after its field, so write `struct Name { field: Type, .. }`",
                    );
                    return None;
                }
                Fields::Unit => {
                    cx.error_spanned_by(
                        &input.ident,
                        "`#[derive(CacheKey)]` needs a struct with named fields: a unit struct has no tenant and no criteria to key on",
                    );
                    return None;
                }
            },
            Data::Enum(data) => {
                cx.error_spanned_by(
                    data.enum_token,
                    "`#[derive(CacheKey)]` works on structs only: make each query its own struct with named fields (for an enum used as a criterion value, derive `CriterionValue`)",
                );
                return None;
            }
            Data::Union(data) => {
                cx.error_spanned_by(
                    data.union_token,
                    "`#[derive(CacheKey)]` works on structs with named fields, not unions",
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

    pub fn criteria(&self) -> impl Iterator<Item = &Field<'a>> {
        self.fields
            .iter()
            .filter(|f| matches!(f.kind, FieldKind::Criterion { .. }))
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
                role: Role::Criterion(CriterionAttrs { rename, allow }),
                ..
            }) => FieldKind::Criterion {
                name: match (&rename, rename_all) {
                    (Some(lit), _) => lit.value(),
                    (None, Some(rule)) => rule.apply(&name),
                    (None, None) => name.clone(),
                },
                rename,
                allow,
            },
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

/// Whether the field carries a marker attribute at all (a malformed one has
/// its own error already).
fn has_marker(field: &syn::Field) -> bool {
    field
        .attrs
        .iter()
        .any(|a| attr::MARKERS.iter().any(|m| a.path().is_ident(m)))
}
