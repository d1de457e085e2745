//! The query's tags: `CacheKey::write_query_tags`, each tagged criterion's
//! values pushed in declaration order. (Their schema entries are
//! `schema`'s, their typed scopes `scopes`'.)

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};

use super::names::{local, member_at_type};
use crate::ast::Query;

/// `write_query_tags` for the `CacheKey` impl; nothing for a query without
/// tags (the trait's default writes none).
pub fn write_query_tags(query: &Query) -> TokenStream {
    if query.tags().next().is_none() {
        return TokenStream::new();
    }
    let krate = query.crate_path();
    let tags = local("tags");
    let pushes = query.tags().map(|(field, tag)| {
        let (entry_start, field_name) = (tag.entry_start(), &field.name);
        let ty = field.ty;
        let member = member_at_type(field);
        // Spanned on the field's type, through the type as written: the
        // field's assertion that its type is a tag value, reported there.
        let values = quote_spanned!(field.ty_span=> &self.#member as &#ty);
        quote! {
            #krate::Tags::push_named(
                #tags,
                const { #krate::TagName::new(#entry_start) },
                #field_name,
                #values,
            )?;
        }
    });
    quote! {
        #[inline]
        fn write_query_tags(
            &self,
            #tags: &mut #krate::Tags,
        ) -> ::core::result::Result<(), #krate::KeyError> {
            #(#pushes)*
            ::core::result::Result::Ok(())
        }
    }
}
