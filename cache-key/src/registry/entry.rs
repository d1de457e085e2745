//! [`Registered`]: one derived type as the registry holds it, and [`all`].

use std::fmt;

use crate::schema::KeySchema;

/// A `#[derive(CacheKey)]` type, as the registry holds it.
#[derive(Clone, Copy)]
pub struct Registered {
    pub(crate) type_name: fn() -> &'static str,
    pub(crate) schema: KeySchema,
    pub(crate) layout: &'static str,
}

impl Registered {
    /// The type's full path, as [`core::any::type_name`] writes it: with the
    /// function a type is local to (`app::tests::lookup::Query`), without
    /// its lifetimes (`app::Search`, not `app::Search<'_>`).
    pub fn type_path(&self) -> &'static str {
        let name = (self.type_name)();
        match name.rfind('<') {
            Some(open)
                if name.ends_with('>')
                    && name[open + 1..name.len() - 1]
                        .split(',')
                        .all(|param| param.trim() == "'_") =>
            {
                &name[..open]
            }
            _ => name,
        }
    }

    /// The type's [`CacheKey::KEY_SCHEMA`](crate::CacheKey::KEY_SCHEMA).
    pub fn schema(&self) -> &KeySchema {
        &self.schema
    }
}

impl fmt::Debug for Registered {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Registered")
            .field("type_path", &self.type_path())
            .field("schema", &self.schema)
            .finish_non_exhaustive()
    }
}

/// Two entries are equal when they are of one type: the same name, schema
/// and layout.
impl PartialEq for Registered {
    fn eq(&self, other: &Self) -> bool {
        self.type_path() == other.type_path()
            && self.schema == other.schema
            && self.layout == other.layout
    }
}

impl Eq for Registered {}

inventory::collect!(Registered);

/// Every registered type in the binary, sorted by type path.
pub fn all() -> Vec<&'static Registered> {
    let mut all: Vec<&'static Registered> = inventory::iter::<Registered>.into_iter().collect();
    // `type_path` trims `type_name`'s text: once per entry, not per comparison.
    all.sort_by_cached_key(|registered| registered.type_path());
    all
}
