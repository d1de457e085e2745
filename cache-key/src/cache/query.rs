//! [`CachedQuery`]: what a query's cached answer is and how long it lives,
//! and the TTLs a cache overrides per type.

use std::collections::HashMap;
use std::time::Duration;

use crate::cache_key::CacheKey;
use crate::tag::{Tags, TooManyTags};

/// A query whose cached answer has one type and one time to live.
///
/// The derive writes it from two arguments beside the key: `value`, the
/// answer's type, and `ttl`, a string of numbers with units (`ms`, `s`, `m`,
/// `h`, `d`: `"30s"`, `"5m"`, `"1h30m"`), parsed at compile time. Each needs
/// the other, and a zero or unreadable `ttl` is a compile error. The
/// [`VALUE_ID`](Self::VALUE_ID) is `value`'s type as written (`"Vec<Book>"`),
/// or `value_id = "..."` when given.
///
/// ```
/// use std::time::Duration;
/// use cache_key::{CacheKey, cache::CachedQuery};
///
/// #[derive(Clone)]
/// struct Book { title: String }
///
/// #[derive(CacheKey)]
/// #[cache_key(namespace = "library", operation = "search", value = Vec<Book>, ttl = "5m")]
/// struct Search { #[tenant] branch: u32, #[criterion] title: String }
///
/// assert_eq!(<Search as CachedQuery>::TTL, Duration::from_secs(300));
/// assert_eq!(<Search as CachedQuery>::VALUE_ID, "Vec<Book>");
/// ```
///
/// By hand, for a value type or TTL the attribute cannot spell (a constant
/// computed elsewhere, say):
///
/// ```
/// use std::time::Duration;
/// use cache_key::{CacheKey, cache::CachedQuery};
///
/// const PROFILE_TTL: Duration = Duration::from_secs(2 * 60 * 60);
///
/// #[derive(CacheKey)]
/// #[cache_key(namespace = "library", operation = "profile")]
/// struct Profile { #[tenant] branch: u32, #[criterion] member: u64 }
///
/// impl CachedQuery for Profile {
///     type Value = String;
///     const VALUE_ID: &'static str = "member-profile";
///     const TTL: Duration = PROFILE_TTL;
/// }
/// ```
///
/// A generic query gets the impl with its `CacheKey` impl's bounds; a value
/// type built from the query's type parameters (`value = Vec<T>`) also needs
/// `Clone + Send + Sync + 'static`, checked where the query is used.
pub trait CachedQuery: CacheKey {
    /// The answer cached for this query: the only type a cache returns for it.
    type Value: Clone + Send + Sync + 'static;
    /// The identity of [`Value`](Self::Value) outside the process: written
    /// beside each value stored out of process (the Redis envelope's `type`)
    /// and checked on read, where another id is a miss
    /// ([`RejectReason::ValueType`](crate::cache::RejectReason::ValueType)),
    /// never a value read as another type's.
    ///
    /// Change it when the value's meaning changes incompatibly (fields whose
    /// old entries would decode into wrong answers); keep it when the type
    /// is only moved or renamed, and the entries written before keep
    /// hitting. Printable ASCII without whitespace, at most 128 bytes (the
    /// derive checks what it writes). Two query types whose keys can meet
    /// (a generic query's instances: one id for all) read each other's
    /// entries when their ids are equal.
    const VALUE_ID: &'static str;
    /// How long an answer lives (a cache may override it per type).
    const TTL: Duration;
    /// Whether answers carry tags of their own
    /// ([`write_value_tags`](Self::write_value_tags)): a cache then notes
    /// when each fill started, on its generation store's tag clock, and
    /// serves an answer only while none of its tags was bumped since. The
    /// derive sets it with `#[cache_key(value_tags)]`.
    const VALUE_TAGS: bool = false;

    /// Adds the tags `value` holds (the entities it shows) to `tags`, for
    /// answers invalidated by the entities they involve: the derive writes
    /// it with `#[cache_key(value_tags)]`, from the value type's
    /// [`CacheTags`](crate::CacheTags). None by default.
    #[inline]
    fn write_value_tags(
        value: &Self::Value,
        tags: &mut crate::tag::Tags,
    ) -> Result<(), crate::KeyError> {
        let _ = (value, tags);
        Ok(())
    }
}

/// TTL overrides by query type, named by namespace and operation (unique per
/// type, see `registry::check`; `TypeId` would need `'static` queries).
#[derive(Debug, Default, Clone)]
#[cfg_attr(not(any(feature = "moka", feature = "redis")), allow(dead_code))]
pub(crate) struct Ttls(HashMap<(&'static str, &'static str), Duration>);

#[cfg_attr(not(any(feature = "moka", feature = "redis")), allow(dead_code))]
impl Ttls {
    pub(crate) fn set<Q: CachedQuery + ?Sized>(&mut self, ttl: Duration) {
        let schema = &Q::KEY_SCHEMA;
        self.0.insert((schema.namespace(), schema.operation()), ttl);
    }

    pub(crate) fn get<Q: CachedQuery + ?Sized>(&self) -> Duration {
        // Read on every moka access: no hashing when nothing is overridden.
        if self.0.is_empty() {
            return Q::TTL;
        }
        let schema = &Q::KEY_SCHEMA;
        self.0
            .get(&(schema.namespace(), schema.operation()))
            .copied()
            .unwrap_or(Q::TTL)
    }
}

/// The tags of `value`, `Q`'s answer, sorted, each once; an error for an
/// empty tag value or more than `max` tags.
#[cfg_attr(not(any(feature = "moka", feature = "redis")), allow(dead_code))]
pub(crate) fn value_tags<Q: CachedQuery + ?Sized>(
    value: &Q::Value,
    max: usize,
) -> Result<Tags, Box<dyn std::error::Error + Send + Sync>> {
    let mut tags = Tags::new();
    Q::write_value_tags(value, &mut tags)?;
    tags.dedup();
    if tags.len() > max {
        return Err(Box::new(TooManyTags {
            found: tags.len(),
            max,
        }));
    }
    Ok(tags)
}
