//! A field of a `#[derive(CacheTags)]` value with its tag attribute: what
//! the derive's checks, its `write_value_tags` and its scopes read.

use syn::{Data, DeriveInput, Fields, Member, Type};

use crate::attr::{self, FieldTag, TAG_EXAMPLE};
use crate::ctxt::Ctxt;

/// A field with its tag attribute.
pub(super) struct TaggedField<'a> {
    pub(super) member: Member,
    /// The field's name (its index for a tuple struct), for `KeyError::EmptyTag`.
    pub(super) name: String,
    pub(super) ty: &'a Type,
    pub(super) tag: FieldTag,
}

/// The struct's fields that carry a tag attribute; `None` (with an error)
/// for an enum or a union.
pub(super) fn tagged_fields<'a>(cx: &Ctxt, input: &'a DeriveInput) -> Option<Vec<TaggedField<'a>>> {
    let fields = match &input.data {
        Data::Struct(data) => &data.fields,
        Data::Enum(data) => {
            cx.error_spanned_by(
                data.enum_token,
                "`#[derive(CacheTags)]` works on structs: mark the fields that hold entity ids `#[tag = \"...\"]`; for an enum, implement `CacheTags` by hand, pushing each variant's ids with `Tags::push_values`",
            );
            return None;
        }
        Data::Union(data) => {
            cx.error_spanned_by(
                data.union_token,
                "`#[derive(CacheTags)]` works on structs, not unions",
            );
            return None;
        }
    };
    let tagged = fields
        .iter()
        .enumerate()
        .filter_map(|(index, field)| {
            let tag = attr::field_tag(cx, &field.attrs, true)?;
            let (member, name) = match &field.ident {
                Some(ident) => (
                    Member::Named(ident.clone()),
                    ident.to_string().trim_start_matches("r#").to_owned(),
                ),
                None => (Member::Unnamed(index.into()), index.to_string()),
            };
            Some(TaggedField {
                member,
                name,
                ty: &field.ty,
                tag,
            })
        })
        .collect();
    if matches!(fields, Fields::Unit) {
        cx.error_spanned_by(
            &input.ident,
            format!(
                "`{}` has no fields, so no tags: `#[derive(CacheTags)]` reads them from fields marked {TAG_EXAMPLE} or `#[tags]`",
                input.ident
            ),
        );
        return None;
    }
    Some(tagged)
}
