//! `cache_key::__private`: what `#[derive(CacheKey)]` expands to. Not a
//! public API: it may change in any release.

pub use std::string::String;

#[cfg(feature = "registry")]
pub use inventory;

use crate::cache::CachedQuery;
pub use crate::criteria::names_overlap;
pub use crate::key_writer::{Head, KeyWriter, Text};
pub use crate::normalize::{NormalizeText, Normalized};
#[cfg(feature = "registry")]
use crate::registry::Registered;
#[cfg(feature = "registry")]
use crate::schema::KeySchema;
use crate::tag::TagValues;

/// The derive's registry entry for a type: submitted to the
/// [`registry`](crate::registry) with the `registry` feature, dropped
/// unexpanded without it.
pub use crate::__register as register;

#[cfg(feature = "registry")]
#[doc(hidden)]
#[macro_export]
macro_rules! __register {
    ($($entry:tt)*) => {
        $crate::__private::inventory::submit! {
            $crate::__private::registration($($entry)*)
        }
    };
}

#[cfg(not(feature = "registry"))]
#[doc(hidden)]
#[macro_export]
macro_rules! __register {
    ($($entry:tt)*) => {};
}

/// A derived type's entry in the [`registry`](crate::registry): its
/// `core::any::type_name`, its schema, and the layout lines only the derive
/// knows (field types, normalizations, the cached value).
#[cfg(feature = "registry")]
pub const fn registration(
    type_name: fn() -> &'static str,
    schema: KeySchema,
    layout: &'static str,
) -> Registered {
    Registered {
        type_name,
        schema,
        layout,
    }
}

/// `TagValues::One` of `Self`, for a typed tag scope's value: its bound
/// `FieldType: TagValueOf<V, One = V>` mentions the scope's type parameter
/// `V`, so rustc checks it where the scope is called (and infers `V` from
/// it: a mistyped value is "expected `&u64`, found `&&str`"), never where
/// it is defined, where a field type that is no tag value would be a second
/// error beside `write_query_tags`' own.
pub trait TagValueOf<V: ?Sized> {
    /// [`TagValues::One`].
    type One: ?Sized;
}

impl<T: TagValues + ?Sized, V: ?Sized> TagValueOf<V> for T {
    type One = T::One;
}

/// A query type declared `#[cache_key(value_tags)]`: the derive implements
/// it beside `CachedQuery`. A value's typed tag scope
/// (`Book::tag_scope_book::<Search>(&branch, &42)`, written by
/// `#[derive(CacheTags)]`) takes only such a query, whose namespace and
/// tenant name the counter its caches read for an answer holding the tag. A
/// query whose answers carry no tags is the wrong one to name it by (most
/// likely another namespace's). Whether the query's value holds this type
/// is not checked: a `#[tags]` part may hold it anywhere, and every query
/// type of the namespace names the same counter.
#[diagnostic::on_unimplemented(
    message = "`{Self}` does not check its answers' tags: a value's tag scope takes a query declared `value_tags`",
    label = "not declared `value_tags`",
    note = "pass the query type whose cached answers hold this value, declared `#[cache_key(value = ..., ttl = \"...\", value_tags)]`: its namespace and tenant name the tag's counter"
)]
pub trait ValueTagsQuery: CachedQuery {}

/// Bounds that name the feature a criterion or tenant type needs: the derive
/// requires one for each field whose type looks like a feature's
/// (`NaiveDate`, `Uuid`, a `chrono::` path...). A type that implements
/// `CriterionValue` (for a tenant, `TenantValue`) meets them all, so a user's
/// own `Uuid` is never refused by its name.
pub mod features {
    use crate::{CriterionValue, TenantValue};

    // Written out per feature: diagnostic attributes take literals only, so
    // neither `concat!` nor a macro parameter can build their texts.

    #[diagnostic::on_unimplemented(
        message = "`{Self}` is a criterion only with cache-key's `chrono` feature",
        label = "needs cache-key's `chrono` feature",
        note = "enable it where cache-key is a dependency, in Cargo.toml: cache-key = {{ version = \"0.1\", features = [\"chrono\"] }}"
    )]
    pub trait WithChrono {}
    impl<T: CriterionValue + ?Sized> WithChrono for T {}

    #[diagnostic::on_unimplemented(
        message = "`{Self}` is a criterion only with cache-key's `time` feature",
        label = "needs cache-key's `time` feature",
        note = "enable it where cache-key is a dependency, in Cargo.toml: cache-key = {{ version = \"0.1\", features = [\"time\"] }}"
    )]
    pub trait WithTime {}
    impl<T: CriterionValue + ?Sized> WithTime for T {}

    #[diagnostic::on_unimplemented(
        message = "`{Self}` is a criterion only with cache-key's `uuid` feature",
        label = "needs cache-key's `uuid` feature",
        note = "enable it where cache-key is a dependency, in Cargo.toml: cache-key = {{ version = \"0.1\", features = [\"uuid\"] }}"
    )]
    pub trait WithUuid {}
    impl<T: CriterionValue + ?Sized> WithUuid for T {}

    #[diagnostic::on_unimplemented(
        message = "`{Self}` is a tenant only with cache-key's `uuid` feature",
        label = "needs cache-key's `uuid` feature",
        note = "enable it where cache-key is a dependency, in Cargo.toml: cache-key = {{ version = \"0.1\", features = [\"uuid\"] }}"
    )]
    pub trait WithUuidTenant {}
    impl<T: TenantValue + ?Sized> WithUuidTenant for T {}

    #[diagnostic::on_unimplemented(
        message = "`{Self}` is a criterion only with cache-key's `url` feature",
        label = "needs cache-key's `url` feature",
        note = "enable it where cache-key is a dependency, in Cargo.toml: cache-key = {{ version = \"0.1\", features = [\"url\"] }}"
    )]
    pub trait WithUrl {}
    impl<T: CriterionValue + ?Sized> WithUrl for T {}
}
