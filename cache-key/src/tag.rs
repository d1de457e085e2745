//! Tags: the entities a cached answer involves (product 42, author 7), so
//! that changing one entity invalidates every answer that involves it.
//!
//! A tag is a name (`product`) and a value (`42`), inside the query's
//! tenant or, declared on purpose, shared by every tenant of the namespace
//! (`global`). Tags come from two places:
//!
//! - **the query**: a criterion field marked `#[tag = "product"]`; its tag's
//!   counter joins the counters the key's generation is the sum of, so
//!   bumping it makes every key of every query type tagged with it new;
//! - **the value**: the ids an answer holds, known only once the origin
//!   answered ([`CacheTags`], derived with `#[derive(CacheTags)]` and turned
//!   on with `#[cache_key(value_tags)]`); an entry records them with the
//!   time its fill started, and is served only while no tag of it was
//!   bumped since.
//!
//! Either way a tag is bumped with its typed scope (`tag_scope_product`, a
//! function the derive writes per tag) and
//! [`TypedCache::invalidate`](crate::cache::TypedCache::invalidate): one
//! counter, whatever the number of entries holding the tag.
//!
//! A tag value is written as a tenant value is (text or an integer,
//! percent-escaped): [`TagValues`] is implemented for every
//! [`TenantValue`], `Option` of one (no tag for `None`) and lists and sets
//! of them (one tag per element).

use std::collections::{BTreeSet, HashSet};
use std::error::Error;
use std::fmt;
use std::sync::Arc;

use crate::canonical::{CanonicalWriter, TenantValue};
use crate::error::KeyError;

/// A tag a query type's key carries, as [`KeySchema`](crate::KeySchema)
/// records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TagField {
    name: &'static str,
    field: &'static str,
    global: Option<&'static str>,
}

impl TagField {
    #[doc(hidden)]
    pub const fn new(
        name: &'static str,
        field: &'static str,
        global: Option<&'static str>,
    ) -> Self {
        TagField {
            name,
            field,
            global,
        }
    }

    /// The tag's name (`product`).
    pub const fn name(&self) -> &'static str {
        self.name
    }

    /// The field it is read from.
    pub const fn field(&self) -> &'static str {
        self.field
    }

    /// Why the tag is shared by every tenant of the namespace, when it is
    /// (`#[tag(name = "...", global = "why")]`); `None` for a tag inside
    /// the tenant.
    pub const fn global(&self) -> Option<&'static str> {
        self.global
    }
}

/// Where a tag lives: inside the query's tenant, or shared by every tenant
/// of the namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TagScope {
    /// Inside the tenant: product 42 of shop 7 is not product 42 of shop 8.
    Tenant,
    /// Shared by every tenant of the namespace (a global catalog).
    Global,
}

impl TagScope {
    /// The mark a tag's entry starts with in [`Tags`]' text.
    fn mark(self) -> char {
        match self {
            TagScope::Tenant => '#',
            TagScope::Global => '@',
        }
    }
}

/// The values a field gives a tag: none, one or several.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be a tag value",
    label = "not text, an integer, or an `Option` or collection of them",
    note = "a tag names an entity by its id: text or an integer (a `TenantValue`), an `Option` of one (no tag for `None`), or a list or set of them (a tag each)"
)]
pub trait TagValues {
    /// One value: what a typed tag scope takes (`u64` for a field of
    /// `u64`, `Option<u64>` or `Vec<u64>`).
    type One: TenantValue + ?Sized;

    /// Calls `tag` with each value.
    fn each_tag_value(&self, tag: &mut dyn FnMut(&dyn TenantValue));
}

// Not recommended: a type that is no tag value is reported as such, not as
// a missing `TenantValue`.
#[diagnostic::do_not_recommend]
impl<T: TenantValue> TagValues for T {
    type One = T;

    fn each_tag_value(&self, tag: &mut dyn FnMut(&dyn TenantValue)) {
        tag(self);
    }
}

macro_rules! tag_values_of_each {
    ($($ty:ty),*) => {$(
        impl<T: TagValues> TagValues for $ty {
            type One = T::One;

            fn each_tag_value(&self, tag: &mut dyn FnMut(&dyn TenantValue)) {
                self.iter().for_each(|value| value.each_tag_value(tag));
            }
        }
    )*};
}

tag_values_of_each!(Option<T>, Vec<T>, [T], BTreeSet<T>);

impl<T: TagValues, const N: usize> TagValues for [T; N] {
    type One = T::One;

    fn each_tag_value(&self, tag: &mut dyn FnMut(&dyn TenantValue)) {
        self.iter().for_each(|value| value.each_tag_value(tag));
    }
}

impl<T: TagValues, S> TagValues for HashSet<T, S> {
    type One = T::One;

    fn each_tag_value(&self, tag: &mut dyn FnMut(&dyn TenantValue)) {
        self.iter().for_each(|value| value.each_tag_value(tag));
    }
}

/// A list of tags, as text: each entry `#name=value` (inside the tenant) or
/// `@name=value` (global), name and value percent-escaped as in a key, one
/// per line. An escaped part holds no raw `#`, `@`, `=` or line break, so
/// the entries can be read back exactly.
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct Tags {
    text: String,
    count: usize,
}

impl Tags {
    /// No tags.
    pub fn new() -> Self {
        Tags::default()
    }

    /// How many tags there are.
    pub fn len(&self) -> usize {
        self.count
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Adds `name` = `value` in `scope`; an empty value (or its type's empty
    /// value: 0, the nil UUID) is an error naming `field`, never a tag that
    /// would stand for no entity.
    pub fn push(
        &mut self,
        scope: TagScope,
        name: &str,
        field: &'static str,
        value: &dyn TenantValue,
    ) -> Result<(), KeyError> {
        if value.is_empty_value() {
            return Err(KeyError::EmptyTag {
                field: field.into(),
            });
        }
        let start = self.text.len();
        self.text.push(scope.mark());
        cache_key_format::escape::push_escaped(&mut self.text, name);
        self.text.push('=');
        let value_start = self.text.len();
        value.write_canonical(&mut CanonicalWriter::escaped(&mut self.text));
        if self.text.len() == value_start {
            self.text.truncate(start);
            return Err(KeyError::EmptyTag {
                field: field.into(),
            });
        }
        self.text.push('\n');
        self.count += 1;
        Ok(())
    }

    /// Adds every value `values` gives the tag `name` in `scope`.
    pub fn push_values(
        &mut self,
        scope: TagScope,
        name: &str,
        field: &'static str,
        values: &(impl TagValues + ?Sized),
    ) -> Result<(), KeyError> {
        let mut result = Ok(());
        values.each_tag_value(&mut |value| {
            if result.is_ok() {
                result = self.push(scope, name, field, value);
            }
        });
        result
    }

    /// The tags, each as its scope and its escaped `name=value`.
    pub fn iter(&self) -> impl Iterator<Item = (TagScope, &str)> + '_ {
        self.text.lines().map(|entry| {
            let scope = match entry.as_bytes()[0] {
                b'@' => TagScope::Global,
                _ => TagScope::Tenant,
            };
            (scope, &entry[1..])
        })
    }

    /// The whole text (see the type's documentation).
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Tags read back from [`as_str`](Self::as_str)'s text; `None` for text
    /// that is not such a list (another writer's entry).
    pub fn parse(text: &str) -> Option<Tags> {
        let mut count = 0;
        for entry in text.split_terminator('\n') {
            let body = entry
                .strip_prefix('#')
                .or_else(|| entry.strip_prefix('@'))?;
            let (name, value) = body.split_once('=')?;
            let plain = |part: &str| {
                !part.is_empty()
                    && part
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b"-_.!~*'()%".contains(&b))
            };
            if !plain(name) || !plain(value) {
                return None;
            }
            count += 1;
        }
        (text.is_empty() || text.ends_with('\n')).then(|| Tags {
            text: text.to_owned(),
            count,
        })
    }

    /// The bytes its text has room for.
    pub(crate) fn capacity(&self) -> usize {
        self.text.capacity()
    }

    /// Empties the list, keeping its room.
    pub fn clear(&mut self) {
        self.text.clear();
        self.count = 0;
    }

    /// Sorts the tags and drops repeated ones: a value listing product 42
    /// twice holds one tag, and two values with the same tags write the
    /// same list.
    pub fn dedup(&mut self) {
        let mut entries: Vec<&str> = self.text.split_terminator('\n').collect();
        let sorted = entries.is_sorted_by(|a, b| a < b);
        if sorted {
            return;
        }
        entries.sort_unstable();
        entries.dedup();
        let mut text = String::with_capacity(self.text.len());
        for entry in &entries {
            text.push_str(entry);
            text.push('\n');
        }
        self.count = entries.len();
        self.text = text;
    }
}

/// An answer's tags and when the fill that made it started, on the tag
/// clock of its generation store: the answer is served only while no tag's
/// counter reached that time (no tag was bumped since).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TagStamp {
    /// The entities the answer holds.
    pub tags: Tags,
    /// When its fill started (before the origin was asked).
    pub since: TagClock,
}

/// An answer holding more tags than its cache keeps per entry: it is
/// returned, but never cached (untagged, it would outlive a change of an
/// entity it shows).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooManyTags {
    /// How many tags the answer holds.
    pub found: usize,
    /// The most the cache keeps per entry.
    pub max: usize,
}

impl fmt::Display for TooManyTags {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the answer holds {} tags, more than the {} a cache entry keeps: it is not cached \
             (raise the cache's `with_max_tags`, or tag a coarser entity)",
            self.found, self.max
        )
    }
}

impl Error for TooManyTags {}

/// When an answer's fill started, on a store's tag clock: for the tags
/// inside the tenant, and for the tags of every tenant (which a Redis
/// Cluster may keep on another server, with a clock of its own).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TagClock {
    /// The clock of the tags inside the tenant.
    pub tenant: u64,
    /// The clock of the tags of every tenant.
    pub global: u64,
}

impl TagClock {
    /// The time for a tag of `scope`.
    pub fn of(&self, scope: TagScope) -> u64 {
        match scope {
            TagScope::Tenant => self.tenant,
            TagScope::Global => self.global,
        }
    }
}

/// The most tags one cache entry keeps, unless the cache says otherwise.
pub const DEFAULT_MAX_TAGS: usize = 128;

impl fmt::Debug for Tags {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.text.lines()).finish()
    }
}

/// The tags a cached value holds: the entities it shows, known only once
/// the origin answered. Derive it with `#[derive(CacheTags)]` (a field
/// `#[tag = "book"] id: u64`, or `#[tag(name = "book", global = "why")]`
/// for a tag shared by every tenant), and turn it on for a query with
/// `#[cache_key(value = Vec<Book>, ttl = "5m", value_tags)]`.
///
/// Implemented for `Option`, `Vec`, slices, arrays, `Box` and `Arc` of a
/// `CacheTags` type: the tags of each element.
///
/// ```
/// use cache_key::{CacheTags, Tags};
///
/// #[derive(CacheTags)]
/// struct Book {
///     #[tag = "book"]
///     id: u64,
///     #[tag = "author"]
///     authors: Vec<u64>,
///     title: String,
/// }
///
/// let books = vec![
///     Book { id: 1, authors: vec![7], title: "Dune".into() },
///     Book { id: 2, authors: vec![], title: "Emma".into() },
/// ];
/// let mut tags = Tags::new();
/// books.write_tags(&mut tags)?;
/// assert_eq!(tags.as_str(), "#book=1\n#author=7\n#book=2\n");
/// # let _ = &books[0].title;
/// # Ok::<(), cache_key::KeyError>(())
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` holds no cache tags",
    label = "does not implement `CacheTags`",
    note = "derive `CacheTags` on the value's struct (or its elements'), marking the fields that hold entity ids `#[tag = \"...\"]`; `Option`, `Vec`, slices, arrays, `Box` and `Arc` of a `CacheTags` type are `CacheTags`"
)]
pub trait CacheTags {
    /// Adds this value's tags to `tags`.
    fn write_tags(&self, tags: &mut Tags) -> Result<(), KeyError>;
}

macro_rules! cache_tags_of_each {
    ($($ty:ty),*) => {$(
        impl<T: CacheTags> CacheTags for $ty {
            fn write_tags(&self, tags: &mut Tags) -> Result<(), KeyError> {
                self.iter().try_for_each(|value| value.write_tags(tags))
            }
        }
    )*};
}

cache_tags_of_each!(Option<T>, Vec<T>, [T]);

impl<T: CacheTags, const N: usize> CacheTags for [T; N] {
    fn write_tags(&self, tags: &mut Tags) -> Result<(), KeyError> {
        self.iter().try_for_each(|value| value.write_tags(tags))
    }
}

impl<T: CacheTags + ?Sized> CacheTags for Box<T> {
    fn write_tags(&self, tags: &mut Tags) -> Result<(), KeyError> {
        (**self).write_tags(tags)
    }
}

impl<T: CacheTags + ?Sized> CacheTags for Arc<T> {
    fn write_tags(&self, tags: &mut Tags) -> Result<(), KeyError> {
        (**self).write_tags(tags)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_read_back_exactly_and_refuse_empty_values() {
        let mut tags = Tags::new();
        tags.push(TagScope::Tenant, "product", "id", &42u64)
            .unwrap();
        tags.push_values(TagScope::Global, "author", "authors", &vec!["a=b", "c\nd"])
            .unwrap();
        assert_eq!(tags.len(), 3);
        assert_eq!(
            tags.iter().collect::<Vec<_>>(),
            [
                (TagScope::Tenant, "product=42"),
                (TagScope::Global, "author=a%3Db"),
                (TagScope::Global, "author=c%0Ad"),
            ]
        );
        assert_eq!(Tags::parse(tags.as_str()), Some(tags.clone()));
        assert_eq!(
            tags.push(TagScope::Tenant, "product", "id", &0u64),
            Err(KeyError::EmptyTag { field: "id".into() })
        );
        assert_eq!(
            tags.push(TagScope::Tenant, "product", "id", &""),
            Err(KeyError::EmptyTag { field: "id".into() })
        );
        assert_eq!(tags.len(), 3, "nothing added by a refused value");
        for foreign in ["product=42", "#product=42", "#=1\n", "#a=b=c\n", "#a b=c\n"] {
            assert_eq!(Tags::parse(foreign), None, "{foreign:?}");
        }
        assert_eq!(Tags::parse(""), Some(Tags::new()));
    }

    #[test]
    fn dedup_sorts_and_keeps_each_tag_once() {
        let mut tags = Tags::new();
        tags.push_values(TagScope::Tenant, "book", "books", &[42u64, 7, 42])
            .unwrap();
        tags.push(TagScope::Global, "author", "author", &"borges")
            .unwrap();
        tags.dedup();
        assert_eq!(tags.len(), 3);
        assert_eq!(tags.as_str(), "#book=42\n#book=7\n@author=borges\n");
        assert_eq!(Tags::parse(tags.as_str()), Some(tags.clone()));
    }
}
