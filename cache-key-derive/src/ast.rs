//! The model of a query struct: the container's settings and each field with
//! its role in the key, each holding the syntax nodes errors point at.

use proc_macro2::{Punct, Spacing, Span, TokenStream};
use quote::{ToTokens, TokenStreamExt};
use syn::spanned::Spanned;
use syn::{
    Data, DeriveInput, Fields, Generics, Ident, LitStr, Path, PathArguments, Type, TypePath,
    Visibility,
};

use crate::attr::{self, Container, CriterionAttrs, FieldTag, Marker, Role, Tag};
use crate::case::{RenameRule, to_snake_case};
use crate::ctxt::Ctxt;
use crate::sensitive::{self, CRITERION_FIX};
use crate::serde_attr::{self, SerdeContainer, SerdeField};

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

/// The path to the cache_key crate in an expansion. It appends its tokens to
/// the stream being built: a `TokenStream` interpolated into `quote!` is
/// instead concatenated through the proc-macro bridge, once per path.
#[derive(Clone, Copy)]
pub enum CratePath<'a> {
    /// `::cache_key`, spanned here.
    Default(Span),
    /// `#[cache_key(crate = "...")]`'s path.
    Given(&'a Path),
}

impl ToTokens for CratePath<'_> {
    fn to_tokens(&self, tokens: &mut TokenStream) {
        match *self {
            CratePath::Default(span) => {
                for spacing in [Spacing::Joint, Spacing::Alone] {
                    let mut colon = Punct::new(':', spacing);
                    colon.set_span(span);
                    tokens.append(colon);
                }
                tokens.append(Ident::new("cache_key", span));
            }
            CratePath::Given(path) => path.to_tokens(tokens),
        }
    }
}

/// A `#[derive(CacheKey)]` or `#[derive(Criteria)]` struct.
pub struct Query<'a> {
    pub derive: Derive,
    pub ident: &'a Ident,
    pub vis: &'a Visibility,
    pub generics: &'a Generics,
    pub attrs: Container,
    /// serde's attributes on the struct (its names and `default`).
    pub serde: SerdeContainer,
    pub fields: Vec<Field<'a>>,
}

/// One field and what it is to the key.
pub struct Field<'a> {
    /// The field's name as written (`r#type` stays raw, so it can be accessed).
    pub member: &'a Ident,
    /// The field's name without `r#`, as reviewers read it.
    pub name: String,
    pub ty: &'a Type,
    /// The type's span, where errors about the type belong: taken once, as
    /// each `Spanned::span` writes the type out as tokens again.
    pub ty_span: Span,
    pub kind: FieldKind,
    /// `#[tag = "..."]`: the field's values are ids of the tag's entity.
    pub tag: Option<Tag>,
    /// serde's attributes on the field (its name, and whether serde fills it).
    pub serde: SerdeField,
}

pub enum FieldKind {
    /// `#[tenant]`; `allow_zero` holds the reason when 0 is a real tenant.
    Tenant {
        allow_zero: Option<LitStr>,
    },
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
    /// The path to the cache_key crate, written out in each path of the
    /// `CacheKey` expansion (a block with a `use` costs rustc two items more
    /// per struct): `::cache_key`, or the path given with
    /// `#[cache_key(crate = "...")]`.
    pub fn crate_path(&self) -> CratePath<'_> {
        self.crate_path_at(Span::call_site())
    }

    /// [`crate_path`](Self::crate_path), `::cache_key` spanned at `span`:
    /// for a bound whose error rustc reports on the path's first token.
    pub fn crate_path_at(&self, span: Span) -> CratePath<'_> {
        match &self.attrs.krate {
            Some(path) => CratePath::Given(path),
            None => CratePath::Default(span),
        }
    }

    /// Builds the model, recording every mistake in `cx`. `None` when the input
    /// is not a struct with named fields.
    pub fn from_ast(cx: &Ctxt, input: &'a DeriveInput, derive: Derive) -> Option<Self> {
        let name = derive.name();
        let attrs = Container::from_attrs(cx, &input.attrs);
        let serde = serde_attr::container(&input.attrs);
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
            .filter_map(|field| Field::from_ast(cx, field, &attrs, &serde))
            .collect();
        Some(Query {
            derive,
            ident: &input.ident,
            vis: &input.vis,
            generics: &input.generics,
            attrs,
            serde,
            fields,
        })
    }

    /// The operation's name in the key: `operation = "..."`, or the struct's
    /// name in snake_case.
    pub fn operation(&self) -> String {
        match &self.attrs.operation {
            Some(lit) => lit.value(),
            None => to_snake_case(&self.ident.to_string()),
        }
    }

    /// The schema version in the key: `schema = N`, or 1.
    pub fn schema(&self) -> u32 {
        self.attrs.schema.as_ref().map_or(1, |s| s.value)
    }

    pub fn tenants(&self) -> impl Iterator<Item = &Field<'a>> {
        self.fields
            .iter()
            .filter(|f| matches!(f.kind, FieldKind::Tenant { .. }))
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

    /// The tagged criterion fields, each with its tag, in declaration order.
    pub fn tags(&self) -> impl Iterator<Item = (&Field<'a>, &Tag)> {
        self.fields.iter().filter_map(|f| match (&f.kind, &f.tag) {
            (FieldKind::Criterion(_), Some(tag)) => Some((f, tag)),
            _ => None,
        })
    }
}

impl<'a> Field<'a> {
    /// Whether the field is a tenant that says 0 is a real tenant
    /// (`#[tenant(allow_zero = "...")]`).
    pub fn allows_zero(&self) -> bool {
        matches!(
            self.kind,
            FieldKind::Tenant {
                allow_zero: Some(_)
            }
        )
    }

    fn from_ast(
        cx: &Ctxt,
        field: &'a syn::Field,
        container: &Container,
        serde_container: &SerdeContainer,
    ) -> Option<Self> {
        let member = field.ident.as_ref()?;
        let name = member.to_string().trim_start_matches("r#").to_owned();
        let serde = serde_attr::field(&field.attrs);
        // cache-key's own names win; serde's are the wire's, used when
        // cache-key gives none, so that the key and the request agree.
        let naming = Naming {
            rename_all: container.rename_all,
            serde_rename: serde.rename.as_deref(),
            serde_rename_all: serde_container.rename_all,
        };
        let kind = match attr::field_marker(cx, &field.attrs) {
            Some(Marker {
                role: Role::Tenant { allow_zero },
                ..
            }) => FieldKind::Tenant { allow_zero },
            Some(Marker {
                role: Role::Criterion(attrs),
                ..
            }) => criterion_kind(cx, attrs, &name, naming),
            Some(Marker {
                role: Role::Skip { reason },
                ..
            }) => FieldKind::Skip { reason },
            None => {
                if !has_marker(field) {
                    // A name refused as a criterion gets the fix that holds
                    // the first time: `#[skip]`, not `#[criterion]`.
                    let message = match sensitive::classify(&name) {
                        Some((sensitivity, word)) => format!(
                            "field `{name}` is not marked, and cannot be a criterion: {}; {CRITERION_FIX}",
                            sensitivity.why(&word)
                        ),
                        None => format!(
                            "field `{name}` is not marked: mark it `#[criterion]` if it changes the response, `#[skip]` if it does not, or `#[tenant]` if it is the authorization scope"
                        ),
                    };
                    cx.error_spanned_by(member, message);
                }
                FieldKind::Unmarked
            }
        };
        let tag = match attr::field_tag(cx, &field.attrs, false) {
            Some(FieldTag::Tag(tag)) => Some(tag),
            Some(FieldTag::Nested) | None => None,
        };
        Some(Field {
            member,
            name,
            ty: &field.ty,
            ty_span: type_span(&field.ty),
            kind,
            tag,
            serde,
        })
    }
}

/// The span of a type, as `Spanned::span` gives it (its first token joined to
/// its last where the compiler can join spans, else the first), read from
/// the syntax tree for the common shapes: `Spanned::span` prints the type
/// into tokens to find them, the dearest step of reading a field.
pub fn type_span(ty: &Type) -> Span {
    let (first, last) = match ty {
        Type::Path(TypePath {
            qself: None,
            path,
            attrs,
        }) if attrs.is_empty() => {
            let (Some(first), Some(last)) = (path.segments.first(), path.segments.last()) else {
                return ty.span();
            };
            let first = match &path.leading_colon {
                Some(colon) => colon.spans[0],
                None => first.ident.span(),
            };
            let last = match &last.arguments {
                PathArguments::None => last.ident.span(),
                PathArguments::AngleBracketed(args) => args.gt_token.span,
                PathArguments::Parenthesized(_) => return ty.span(),
            };
            (first, last)
        }
        Type::Reference(reference) => (reference.and_token.span, type_span(&reference.elem)),
        _ => return ty.span(),
    };
    first.join(last).unwrap_or(first)
}

/// Where a criterion's name can come from, besides `#[criterion(rename)]`.
#[derive(Clone, Copy)]
struct Naming<'s> {
    rename_all: Option<RenameRule>,
    serde_rename: Option<&'s str>,
    serde_rename_all: Option<RenameRule>,
}

fn criterion_kind(cx: &Ctxt, attrs: CriterionAttrs, field: &str, naming: Naming) -> FieldKind {
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
        name: match (&rename, naming) {
            (Some(lit), _) => lit.value(),
            (
                None,
                Naming {
                    rename_all: Some(rule),
                    ..
                },
            ) => rule.apply_to_field(field),
            (
                None,
                Naming {
                    serde_rename: Some(name),
                    ..
                },
            ) => name.to_owned(),
            (
                None,
                Naming {
                    serde_rename_all: Some(rule),
                    ..
                },
            ) => rule.apply_to_field(field),
            (None, _) => field.to_owned(),
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
