//! [`Key`]: a finished cache key.

use std::borrow::Borrow;
use std::fmt;

/// A cache key in the canonical format, ready to be used with any cache.
///
/// A `Key` is only ever made by a [`CacheKey`](crate::CacheKey) implementation
/// or a [`KeyBuilder`](crate::KeyBuilder), so it always follows the key format.
/// It compares, orders and hashes as its text, and borrows as `str`, so a map
/// keyed by `Key` can be looked up with a `&str`:
///
/// ```
/// use std::collections::HashMap;
/// use cache_key::KeyBuilder;
///
/// let key = KeyBuilder::new("library", "list").tenant("branch-2").criterion("page", 1).build()?;
/// let mut cache = HashMap::new();
/// cache.insert(key, vec!["The Book of Sand"]);
/// assert!(cache.contains_key("library:s1:g1:tbranch-2:list:page=1"));
/// # Ok::<(), cache_key::KeyError>(())
/// ```
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Key(String);

impl Key {
    /// Wraps text the crate itself wrote in the key format.
    pub(crate) fn from_canonical(text: String) -> Self {
        Key(text)
    }

    /// The key's text.
    #[inline]
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The key's text, as an owned `String`.
    #[inline]
    pub fn into_string(self) -> String {
        self.0
    }
}

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Key").field(&self.0).finish()
    }
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl AsRef<str> for Key {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl AsRef<[u8]> for Key {
    fn as_ref(&self) -> &[u8] {
        self.0.as_bytes()
    }
}

impl Borrow<str> for Key {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl From<Key> for String {
    fn from(key: Key) -> String {
        key.0
    }
}

impl PartialEq<str> for Key {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<&str> for Key {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

/// A key written with its criteria in full, for logs and debugging: **not a
/// cache key**. Past 48 bytes a cache key replaces its criteria with `c_` and
/// a digest; a readable key keeps them, so a miss can be explained. It has the
/// key's text otherwise (and is the key itself when nothing was summarized),
/// but it converts to nothing a cache takes: it has no `Borrow<str>`, no
/// `Hash` and no way into a [`Key`].
///
/// ```
/// use cache_key::CacheKey;
///
/// #[derive(CacheKey)]
/// #[cache_key(namespace = "library", operation = "search")]
/// struct Search<'a> {
///     #[tenant]
///     branch: u32,
///     #[criterion]
///     title: &'a str,
///     #[criterion]
///     author: &'a str,
/// }
///
/// let query = Search { branch: 2, title: "Tutunamayanlar II", author: "Oğuz Atay" };
/// let key = query.cache_key(4)?;
/// let readable = query.readable_key(4)?;
/// assert_eq!(key.as_str(), "library:s1:g4:t2:search:c_86b84470b8308c86a61ab85f725736ae");
/// assert_eq!(
///     readable.to_string(),
///     "library:s1:g4:t2:search:author=O%C4%9Fuz%20Atay&title=Tutunamayanlar%20II"
/// );
/// # Ok::<(), cache_key::KeyError>(())
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct ReadableKey(String);

impl ReadableKey {
    pub(crate) fn new(text: String) -> Self {
        ReadableKey(text)
    }

    /// The text, for a log line.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ReadableKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for ReadableKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("ReadableKey").field(&self.0).finish()
    }
}
