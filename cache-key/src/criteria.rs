//! [`Criteria`]: groups of criteria flattened into a query's key, such as a
//! shared pagination part or a filter map from a query string.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::hash::BuildHasher;

use cache_key_format::escape::escape;

use crate::canonical::CriterionValue;
use crate::error::KeyError;
use crate::key_writer::KeyWriter;

/// Criteria that join a query's own criteria with `#[criterion(flatten)]`.
///
/// Derive it for a criteria-only struct shared by several queries
/// (`#[derive(Criteria)]`, whose fields are `#[criterion]` or `#[skip]`), or
/// use a map: each entry of a `BTreeMap<K, V>` or `HashMap<K, V>` is one
/// criterion named by its key. The flattened criteria are sorted together with
/// the query's own; a name that appears twice is
/// [`KeyError::DuplicateCriterion`] (and, when both names are known at compile
/// time, a compile error).
///
/// ```
/// use std::collections::BTreeMap;
/// use cache_key::{CacheKey, Criteria};
///
/// #[derive(Criteria)]
/// struct Page {
///     #[criterion]
///     page: u32,
///     #[criterion]
///     per_page: u32,
/// }
///
/// #[derive(CacheKey)]
/// #[cache_key(namespace = "library", operation = "search")]
/// struct Search {
///     #[tenant]
///     branch: u32,
///     #[criterion]
///     title: String,
///     #[criterion(flatten)]
///     page: Page,
///     #[criterion(flatten)]
///     filters: BTreeMap<String, String>,
/// }
///
/// let query = Search {
///     branch: 2,
///     title: "Sand".into(),
///     page: Page { page: 1, per_page: 20 },
///     filters: [("lang".to_owned(), "es".to_owned())].into(),
/// };
/// assert_eq!(
///     query.cache_key(4)?.as_str(),
///     "library:s1:g4:t2:search:lang=es&page=1&per_page=20&title=Sand"
/// );
/// # Ok::<(), cache_key::KeyError>(())
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be flattened into a cache key",
    label = "`{Self}` does not implement `Criteria`",
    note = "derive `Criteria` for a struct of `#[criterion]` fields, or use a `BTreeMap<String, V>` / `HashMap<String, V>` of criterion values",
    note = "for a single value, drop `flatten`: `#[criterion]`"
)]
pub trait Criteria {
    /// The names of this type's criteria, sorted by their bytes, when they are
    /// known at compile time; empty for maps, whose names come at run time.
    const NAMES: &'static [&'static str];

    /// Adds each criterion (name and value) to `list`, in any order.
    fn collect_criteria<'a>(&'a self, list: &mut CriteriaList<'a>);
}

/// The criteria of one key, gathered from a query and its flattened parts
/// before they are sorted.
pub struct CriteriaList<'a> {
    entries: Vec<Entry<'a>>,
}

struct Entry<'a> {
    name: Cow<'a, str>,
    /// The name escaped at compile time with its `=`, for names the derive knows.
    escaped: Option<&'static str>,
    value: Value<'a>,
}

enum Value<'a> {
    Borrowed(&'a dyn CriterionValue),
    /// A value computed from a field (`trim`, `lowercase`, `with`).
    Owned(Box<dyn CriterionValue + 'a>),
}

impl Value<'_> {
    fn get(&self) -> &dyn CriterionValue {
        match self {
            Value::Borrowed(value) => *value,
            Value::Owned(value) => &**value,
        }
    }
}

impl<'a> CriteriaList<'a> {
    #[doc(hidden)]
    pub fn new() -> Self {
        CriteriaList {
            entries: Vec::new(),
        }
    }

    /// Adds a criterion.
    pub fn push(&mut self, name: impl Into<Cow<'a, str>>, value: &'a dyn CriterionValue) {
        self.entries.push(Entry {
            name: name.into(),
            escaped: None,
            value: Value::Borrowed(value),
        });
    }

    /// Adds a criterion whose value is computed rather than borrowed.
    pub fn push_owned(
        &mut self,
        name: impl Into<Cow<'a, str>>,
        value: Box<dyn CriterionValue + 'a>,
    ) {
        self.entries.push(Entry {
            name: name.into(),
            escaped: None,
            value: Value::Owned(value),
        });
    }

    /// Adds a criterion whose escaped `name=` the derive computed.
    #[doc(hidden)]
    pub fn push_escaped(
        &mut self,
        name: &'static str,
        escaped: &'static str,
        value: &'a dyn CriterionValue,
    ) {
        self.entries.push(Entry {
            name: Cow::Borrowed(name),
            escaped: Some(escaped),
            value: Value::Borrowed(value),
        });
    }

    /// Adds a computed criterion whose escaped `name=` the derive computed.
    #[doc(hidden)]
    pub fn push_owned_escaped(
        &mut self,
        name: &'static str,
        escaped: &'static str,
        value: Box<dyn CriterionValue + 'a>,
    ) {
        self.entries.push(Entry {
            name: Cow::Borrowed(name),
            escaped: Some(escaped),
            value: Value::Owned(value),
        });
    }

    /// Sorts the criteria by name and writes them: the key's criteria
    /// segment. A duplicate or empty name fails the key.
    #[doc(hidden)]
    pub fn write_to(mut self, key: &mut KeyWriter<'_>) {
        if let Some(position) = self.entries.iter().position(|e| e.name.is_empty()) {
            return key.fail(KeyError::EmptyCriterionName { position });
        }
        self.entries
            .sort_by(|a, b| a.name.as_bytes().cmp(b.name.as_bytes()));
        if let Some(pair) = self.entries.windows(2).find(|p| p[0].name == p[1].name) {
            return key.fail(KeyError::DuplicateCriterion {
                name: pair[0].name.clone().into_owned(),
            });
        }
        for entry in &self.entries {
            match entry.escaped {
                Some(escaped_eq) => key.criterion(escaped_eq, entry.value.get()),
                None => {
                    let escaped_eq = format!("{}=", escape(&entry.name));
                    key.criterion(&escaped_eq, entry.value.get());
                }
            }
        }
    }
}

impl Default for CriteriaList<'_> {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for CriteriaList<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.entries.iter().map(|e| &e.name))
            .finish()
    }
}

// Not listed in "the following types implement `Criteria`" when a struct is
// flattened by mistake: a map is rarely the fix, `#[derive(Criteria)]` is.
#[diagnostic::do_not_recommend]
impl<K: AsRef<str>, V: CriterionValue> Criteria for BTreeMap<K, V> {
    const NAMES: &'static [&'static str] = &[];

    fn collect_criteria<'a>(&'a self, list: &mut CriteriaList<'a>) {
        for (name, value) in self {
            list.push(name.as_ref(), value);
        }
    }
}

#[diagnostic::do_not_recommend]
impl<K: AsRef<str>, V: CriterionValue, S: BuildHasher> Criteria for HashMap<K, V, S> {
    const NAMES: &'static [&'static str] = &[];

    fn collect_criteria<'a>(&'a self, list: &mut CriteriaList<'a>) {
        for (name, value) in self {
            list.push(name.as_ref(), value);
        }
    }
}

/// Whether two sorted name lists share a name: the compile-time clash check
/// between a query and a flattened part.
#[doc(hidden)]
pub const fn names_overlap(a: &[&str], b: &[&str]) -> bool {
    let mut i = 0;
    while i < a.len() {
        let mut j = 0;
        while j < b.len() {
            if str_eq(a[i], b[j]) {
                return true;
            }
            j += 1;
        }
        i += 1;
    }
    false
}

const fn str_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}
