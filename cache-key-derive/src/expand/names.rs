//! The names an expansion writes: its own locals, the `cache_key` crate, and
//! a field spanned where its errors belong.

use proc_macro2::{Span, TokenStream};
use quote::quote;
use syn::Ident;

use crate::ast::Field;

/// A name for a local of the expansion, which code the user wrote (a `with`
/// function named `out`, say) can neither see nor shadow.
pub fn local(name: &str) -> Ident {
    Ident::new(name, Span::mixed_site())
}

/// Names the cache_key crate `__cache_key` inside an expansion's `const _`
/// block: `::cache_key`, or the path given with `#[cache_key(crate = "...")]`
/// for a renamed or re-exported dependency.
pub fn use_crate(krate: Option<&syn::Path>) -> TokenStream {
    match krate {
        Some(path) => quote!(#[allow(unused_imports)] use #path as __cache_key;),
        None => quote!(
            #[allow(unused_imports)]
            use ::cache_key as __cache_key;
        ),
    }
}

/// The field's name, spanned on its type: a type that is not a criterion or
/// tenant value is then reported on the type alone.
pub fn member_at_type(field: &Field) -> Ident {
    let mut member = field.member.clone();
    member.set_span(field.ty_span);
    member
}
