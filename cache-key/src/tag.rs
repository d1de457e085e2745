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
use std::hash::{Hash, Hasher};
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

/// A tag's scope and name as its entries start (`#book=`, `@author=`),
/// checked when made: what the derives push tags with (in a `const`, so
/// that a name that is not one fails the build).
#[doc(hidden)]
#[derive(Debug, Clone, Copy)]
pub struct TagName(&'static str);

impl TagName {
    /// `entry_start`: `#` (inside the tenant) or `@` (global), the name in
    /// ASCII letters, digits, `_` or `-` (which need no escaping), then `=`.
    ///
    /// # Panics
    ///
    /// When `entry_start` is not so.
    pub const fn new(entry_start: &'static str) -> Self {
        let bytes = entry_start.as_bytes();
        let last = bytes.len().saturating_sub(1);
        assert!(
            bytes.len() >= 3 && (bytes[0] == b'#' || bytes[0] == b'@') && bytes[last] == b'=',
            "a tag's entry starts with `#` or `@`, its name, then `=`"
        );
        let mut at = 1;
        while at < last {
            let b = bytes[at];
            assert!(
                b.is_ascii_alphanumeric() || b == b'_' || b == b'-',
                "a tag name is ASCII letters, digits, `_` or `-`"
            );
            at += 1;
        }
        TagName(entry_start)
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

    /// Adds a tag `name` per value to `tags`, stopping at the first error
    /// (what the derives' [`Tags::push_named`] calls; a single value pushes
    /// itself, without `each_tag_value`'s indirect calls).
    #[doc(hidden)]
    fn push_each(
        &self,
        tags: &mut Tags,
        name: TagName,
        field: &'static str,
    ) -> Result<(), KeyError> {
        tags.push_each_value(self, |text| text.push_str(name.0), field)
    }
}

// Not recommended: a type that is no tag value is reported as such, not as
// a missing `TenantValue`.
#[diagnostic::do_not_recommend]
impl<T: TenantValue> TagValues for T {
    type One = T;

    fn each_tag_value(&self, tag: &mut dyn FnMut(&dyn TenantValue)) {
        tag(self);
    }

    #[inline]
    fn push_each(
        &self,
        tags: &mut Tags,
        name: TagName,
        field: &'static str,
    ) -> Result<(), KeyError> {
        tags.push_entry(|text| text.push_str(name.0), field, self)
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

/// The entries of a [`Tags`]' text, each as its scope and its escaped
/// `name=value`.
#[derive(Debug, Clone)]
pub(crate) struct TagEntries<'a> {
    rest: &'a str,
    /// How many entries `rest` holds, when known: the last one needs no
    /// search for its end.
    left: Option<usize>,
}

impl<'a> TagEntries<'a> {
    /// The entries of `text`, as [`Tags::as_str`] writes it.
    #[inline]
    pub(crate) fn of(text: &'a str) -> Self {
        TagEntries {
            rest: text,
            left: None,
        }
    }

    /// The `count` entries of `text`, as [`Tags::as_str`] writes them.
    #[inline]
    pub(crate) fn counted(text: &'a str, count: usize) -> Self {
        TagEntries {
            rest: text,
            left: Some(count),
        }
    }

    /// How many bytes of the text are still to be read.
    #[inline]
    pub(crate) fn rest_len(&self) -> usize {
        self.rest.len()
    }
}

impl<'a> Iterator for TagEntries<'a> {
    type Item = (TagScope, &'a str);

    #[inline]
    fn next(&mut self) -> Option<(TagScope, &'a str)> {
        let bytes = self.rest.as_bytes();
        let &mark = bytes.first()?;
        // Every entry ends with a line break, which no escaped part holds:
        // the last one's is the text's last byte. A byte search: `str::find`
        // of a char costs a searcher's set-up, more than the short line it
        // scans.
        let end = match self.left {
            Some(0) => return None,
            Some(1) => bytes.len() - 1,
            _ => (bytes.iter())
                .position(|&b| b == b'\n')
                .unwrap_or(bytes.len()),
        };
        self.left = self.left.map(|left| left - 1);
        let entry = self.rest.get(1..end).unwrap_or_default();
        self.rest = self.rest.get(end + 1..).unwrap_or_default();
        let scope = match mark {
            b'@' => TagScope::Global,
            _ => TagScope::Tenant,
        };
        Some((scope, entry))
    }
}

/// Writes the start of an entry of the tag `name` in `scope`: its mark,
/// the name escaped, `=`.
fn entry_start(scope: TagScope, name: &str) -> impl Fn(&mut String) + '_ {
    move |text| {
        text.push(scope.mark());
        cache_key_format::escape::push_escaped(text, name);
        text.push('=');
    }
}

/// A list of tags, as text: each entry `#name=value` (inside the tenant) or
/// `@name=value` (global), name and value percent-escaped as in a key, one
/// per line. An escaped part holds no raw `#`, `@`, `=` or line break, so
/// the entries can be read back exactly.
#[derive(Clone, Default)]
pub struct Tags {
    /// The tags' text from `base` on: a key writer lends text of its own,
    /// which precedes them.
    text: String,
    base: usize,
    count: usize,
}

impl PartialEq for Tags {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for Tags {}

impl Hash for Tags {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_str().hash(state);
    }
}

impl Tags {
    /// No tags.
    pub fn new() -> Self {
        Tags::default()
    }

    /// Tags written after `text`, which a writer of keys takes back with
    /// [`into_text`](Self::into_text): the tags past the text it held.
    pub(crate) fn appending_to(text: String) -> Self {
        Tags {
            base: text.len(),
            text,
            count: 0,
        }
    }

    /// The text given to [`appending_to`](Self::appending_to) and the tags
    /// past it; `None` when these are not the tags it made (a hand-written
    /// `write_query_tags` that replaced them).
    pub(crate) fn into_text(self, base: usize) -> Option<String> {
        (self.base == base).then_some(self.text)
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
    pub fn push<V: TenantValue + ?Sized>(
        &mut self,
        scope: TagScope,
        name: &str,
        field: &'static str,
        value: &V,
    ) -> Result<(), KeyError> {
        self.push_entry(entry_start(scope, name), field, value)
    }

    /// Adds every value `values` gives the tag `name` in `scope`.
    pub fn push_values(
        &mut self,
        scope: TagScope,
        name: &str,
        field: &'static str,
        values: &(impl TagValues + ?Sized),
    ) -> Result<(), KeyError> {
        self.push_each_value(values, entry_start(scope, name), field)
    }

    /// [`push_values`](Self::push_values) for a name checked when made:
    /// what the derives write.
    #[doc(hidden)]
    #[inline]
    pub fn push_named(
        &mut self,
        name: TagName,
        field: &'static str,
        values: &(impl TagValues + ?Sized),
    ) -> Result<(), KeyError> {
        values.push_each(self, name, field)
    }

    /// Adds an entry per value `values` gives, each started by `start`,
    /// stopping at the first error.
    fn push_each_value(
        &mut self,
        values: &(impl TagValues + ?Sized),
        start: impl Fn(&mut String),
        field: &'static str,
    ) -> Result<(), KeyError> {
        let mut result = Ok(());
        values.each_tag_value(&mut |value| {
            if result.is_ok() {
                result = self.push_entry(&start, field, value);
            }
        });
        result
    }

    /// Adds an entry: its start (mark, escaped name, `=`) written by
    /// `start`, then `value`, escaped; an empty value is an error naming
    /// `field`, and adds nothing.
    #[inline]
    fn push_entry<V: TenantValue + ?Sized>(
        &mut self,
        start: impl FnOnce(&mut String),
        field: &'static str,
        value: &V,
    ) -> Result<(), KeyError> {
        let empty = || KeyError::EmptyTag {
            field: field.into(),
        };
        if value.is_empty_value() {
            return Err(empty());
        }
        let entry = self.text.len();
        start(&mut self.text);
        let value_start = self.text.len();
        value.write_canonical(&mut CanonicalWriter::escaped(&mut self.text));
        if self.text.len() == value_start {
            self.text.truncate(entry);
            return Err(empty());
        }
        self.text.push('\n');
        self.count += 1;
        Ok(())
    }

    /// The tags, each as its scope and its escaped `name=value`.
    pub fn iter(&self) -> impl Iterator<Item = (TagScope, &str)> + '_ {
        TagEntries::counted(self.as_str(), self.count)
    }

    /// The whole text (see the type's documentation).
    pub fn as_str(&self) -> &str {
        &self.text[self.base..]
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
            base: 0,
            count,
        })
    }

    /// Empties the list, keeping its room.
    pub fn clear(&mut self) {
        self.text.truncate(self.base);
        self.count = 0;
    }

    /// Sorts the tags and drops repeated ones: a value listing product 42
    /// twice holds one tag, and two values with the same tags write the
    /// same list.
    pub fn dedup(&mut self) {
        let mut entries: Vec<&str> = self.as_str().split_terminator('\n').collect();
        let sorted = entries.is_sorted_by(|a, b| a < b);
        if sorted {
            return;
        }
        entries.sort_unstable();
        entries.dedup();
        let mut text = String::with_capacity(self.text.len());
        text.push_str(&self.text[..self.base]);
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
        f.debug_list().entries(self.as_str().lines()).finish()
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
    fn entries_read_with_and_without_their_count_agree() {
        let mut tags = Tags::appending_to("a key|".to_owned());
        tags.push(TagScope::Tenant, "book", "id", &42u64).unwrap();
        tags.push_values(TagScope::Global, "author", "authors", &["a=b", "c"])
            .unwrap();
        let counted: Vec<_> = tags.iter().collect();
        let searched: Vec<_> = TagEntries::of(tags.as_str()).collect();
        assert_eq!(
            counted,
            [
                (TagScope::Tenant, "book=42"),
                (TagScope::Global, "author=a%3Db"),
                (TagScope::Global, "author=c"),
            ]
        );
        assert_eq!(searched, counted);
        assert_eq!(TagEntries::counted("", 0).next(), None);
        assert_eq!(
            tags.into_text(6).as_deref(),
            Some("a key|#book=42\n@author=a%3Db\n@author=c\n")
        );
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
