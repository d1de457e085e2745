//! The counters a query's generation is the sum of, their names, and the
//! running sum a store adds their values to.

use std::cell::RefCell;
use std::error::Error;
use std::fmt;
use std::thread::LocalKey;

use super::error::GenerationError;
use crate::cache_key::CacheKey;
use crate::schema::Scope;
use crate::tag::{TagEntries, TagScope, Tags};
use cache_key_format::escape::push_escaped;

/// What a generation counter scopes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CounterKind {
    /// Every key of a namespace.
    Namespace,
    /// Every key of one tenant in a namespace, or of every tenant starting
    /// with these values (the leading parts of a compound tenant).
    Tenant,
    /// Every key of one operation within one tenant (or within the global keys).
    Operation,
    /// Every key and entry tagged with one entity: inside a tenant, or
    /// shared by every tenant of the namespace (see [`crate::tag`]).
    Tag,
}

/// One generation counter: a namespace, a tenant (or its leading values) in
/// a namespace, or an operation within a tenant.
///
/// Counters are only ever made from a query type, a query or its tenant
/// values ([`Counters`], [`GenerationScope`](super::GenerationScope)); a
/// store reads and bumps them. [`name`](Self::name) is how a store that keeps
/// counters under names (such as Redis) names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Counter<'a> {
    pub(super) namespace: &'a str,
    /// Escaped, as in a key; `Some("")` for an operation of the global keys.
    pub(super) tenant: Option<&'a str>,
    pub(super) operation: Option<&'a str>,
    /// A tag's scope and escaped `name=value`; the tenant, for a tag inside
    /// it.
    pub(super) tag: Option<(TagScope, &'a str)>,
}

impl<'a> Counter<'a> {
    /// What the counter scopes.
    pub fn kind(&self) -> CounterKind {
        match (self.tag, self.tenant, self.operation) {
            (Some(_), _, _) => CounterKind::Tag,
            (_, _, Some(_)) => CounterKind::Operation,
            (_, Some(_), None) => CounterKind::Tenant,
            (_, None, None) => CounterKind::Namespace,
        }
    }

    /// A [`Tag`](CounterKind::Tag) counter's scope and escaped
    /// `name=value`.
    pub fn tag(&self) -> Option<(TagScope, &'a str)> {
        self.tag
    }

    /// The namespace, as the query type declares it (unescaped).
    pub fn namespace(&self) -> &'a str {
        self.namespace
    }

    /// The tenant text as keys write it (escaped, compound parts joined with
    /// `,`): the whole tenant or its leading values for a
    /// [`Tenant`](CounterKind::Tenant) counter, the whole tenant (empty for
    /// the global keys) for an [`Operation`](CounterKind::Operation) counter,
    /// `None` for a namespace.
    pub fn tenant(&self) -> Option<&'a str> {
        self.tenant
    }

    /// The operation, as the query type declares it (unescaped), for an
    /// [`Operation`](CounterKind::Operation) counter.
    pub fn operation(&self) -> Option<&'a str> {
        self.operation
    }

    /// Appends the counter's name to `out`:
    ///
    /// ```text
    /// esc(namespace) ":g"                                  a namespace
    /// esc(namespace) ":g:t{" tenant "}"                    a tenant, or its leading values
    /// esc(namespace) ":g:t{" tenant "}:" esc(operation)    an operation within a tenant
    /// esc(namespace) ":g:t{" tenant "}:#" tag              a tag inside a tenant
    /// esc(namespace) ":g:@{" esc(namespace) "}:" tag       a tag of every tenant
    /// ```
    ///
    /// where `tag` is `esc(name) "=" esc(value)`. An escaped operation never
    /// starts with `#`, so a tag's counter is never an operation's; the tags
    /// of every tenant share one hash tag (and so one cluster slot) per
    /// namespace.
    ///
    /// Every part is escaped as in a key, so no value can forge a separator,
    /// and the tenant is always a Redis Cluster hash tag: a tenant's counters
    /// share its slot, which is also the slot of its keys when the query
    /// type uses `hash_tag`. The second segment `g` is not `s<schema>`, so a
    /// counter's name is never a key ([`decode`](crate::decode) refuses it
    /// and [`KeyPattern::matches`](crate::KeyPattern::matches) never matches it).
    ///
    /// ```
    /// use cache_key::{CacheKey, GenerationScope, Scopes};
    ///
    /// #[derive(CacheKey)]
    /// #[cache_key(namespace = "library", operation = "list")]
    /// struct BranchList { #[tenant] branch: &'static str, #[criterion] page: u32 }
    ///
    /// let scope = BranchList::operation_scope(&"branch:2")?;
    /// assert_eq!(scope.counter().name(), "library:g:t{branch%3A2}:list");
    /// assert_eq!(GenerationScope::namespace::<BranchList>().counter().name(), "library:g");
    /// # Ok::<(), cache_key::GenerationError>(())
    /// ```
    pub fn write_name(&self, out: &mut String) {
        push_escaped(out, self.namespace);
        out.push_str(":g");
        match self.tag {
            Some((TagScope::Tenant, tag)) => {
                out.push_str(":t{");
                out.push_str(self.tenant.unwrap_or_default());
                out.push_str("}:#");
                out.push_str(tag);
                return;
            }
            Some((TagScope::Global, tag)) => {
                out.push_str(":@{");
                push_escaped(out, self.namespace);
                out.push_str("}:");
                out.push_str(tag);
                return;
            }
            None => {}
        }
        if let Some(tenant) = self.tenant {
            out.push_str(":t{");
            out.push_str(tenant);
            out.push('}');
            if let Some(operation) = self.operation {
                out.push(':');
                push_escaped(out, operation);
            }
        }
    }

    /// The counter of this counter's namespace, which every key of the
    /// namespace sums.
    #[cfg_attr(not(feature = "redis"), allow(dead_code))]
    pub(crate) fn of_namespace(&self) -> Counter<'a> {
        Counter {
            namespace: self.namespace,
            tenant: None,
            operation: None,
            tag: None,
        }
    }

    /// The counter's name (see [`write_name`](Self::write_name)).
    pub fn name(&self) -> String {
        let mut out = String::new();
        self.write_name(&mut out);
        out
    }
}

/// The counters whose sum is one query's generation, outermost first: the
/// namespace, each run of leading tenant values (the whole tenant last), then
/// the operation within the tenant. A global query has the namespace and its
/// operation among the global keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counters<'a> {
    namespace: &'a str,
    /// Escaped; `None` for the global keys.
    tenant: Option<&'a str>,
    operation: &'a str,
    /// How many values `tenant` joins (0 for a global key).
    tenant_values: usize,
    /// The query's tags, as [`Tags`] writes them (empty for most queries).
    tags: &'a str,
    tag_count: usize,
}

impl<'a> Counters<'a> {
    /// The counters of a key of `operation` in `namespace`, with `tenant` as
    /// the key writes it (`None` for a global key).
    #[inline]
    pub(crate) fn new(namespace: &'a str, tenant: Option<&'a str>, operation: &'a str) -> Self {
        let values = tenant.map_or(0, |tenant| {
            tenant.bytes().filter(|&b| b == b',').count() + 1
        });
        Self::with_tenant_values(namespace, tenant, operation, values)
    }

    /// [`new`](Self::new) for a tenant already known to join `tenant_values`
    /// values (its raw `,` plus one).
    #[inline]
    pub(super) fn with_tenant_values(
        namespace: &'a str,
        tenant: Option<&'a str>,
        operation: &'a str,
        tenant_values: usize,
    ) -> Self {
        Counters {
            namespace,
            tenant,
            operation,
            tenant_values,
            tags: "",
            tag_count: 0,
        }
    }

    /// These counters and those of `tags`, the query's tags.
    #[inline]
    pub(crate) fn with_tags(self, tags: &'a Tags) -> Self {
        self.with_tag_text(tags.as_str(), tags.len())
    }

    /// These counters and those of `count` tags, the query's, as [`Tags`]
    /// writes them.
    #[inline]
    pub(crate) fn with_tag_text(mut self, text: &'a str, count: usize) -> Self {
        self.tags = text;
        self.tag_count = count;
        self
    }

    /// The query's tags' text, as [`Tags`] writes it.
    #[cfg(feature = "redis")]
    pub(crate) fn tags_text(&self) -> &'a str {
        self.tags
    }

    /// How many counters there are.
    #[inline]
    pub fn count(&self) -> usize {
        self.tenant_values + 2 + self.tag_count
    }

    /// The namespace (unescaped).
    pub fn namespace(&self) -> &'a str {
        self.namespace
    }

    /// The tenant segment as keys write it, `None` for a global key.
    pub fn tenant(&self) -> Option<&'a str> {
        self.tenant
    }

    /// The operation (unescaped).
    pub fn operation(&self) -> &'a str {
        self.operation
    }

    /// The counters, outermost first.
    pub fn iter(&self) -> CountersIter<'a> {
        CountersIter {
            counters: *self,
            next: Next::Namespace,
        }
    }

    /// The query's tags alone, each as its scope and escaped `name=value`.
    #[inline]
    pub(crate) fn tag_entries(&self) -> TagEntries<'a> {
        TagEntries::counted(self.tags, self.tag_count)
    }
}

impl<'a> IntoIterator for Counters<'a> {
    type Item = Counter<'a>;
    type IntoIter = CountersIter<'a>;

    fn into_iter(self) -> CountersIter<'a> {
        self.iter()
    }
}

impl<'a> IntoIterator for &Counters<'a> {
    type Item = Counter<'a>;
    type IntoIter = CountersIter<'a>;

    fn into_iter(self) -> CountersIter<'a> {
        self.iter()
    }
}

/// The iterator of [`Counters`].
#[derive(Debug, Clone)]
pub struct CountersIter<'a> {
    counters: Counters<'a>,
    next: Next,
}

#[derive(Debug, Clone, Copy)]
enum Next {
    Namespace,
    /// The tenant prefix ending before the first `,` at or after this offset.
    Tenant(usize),
    Operation,
    /// The tag whose line starts at this offset of the tags' text (past
    /// its end: none left).
    Tag(usize),
}

impl<'a> Iterator for CountersIter<'a> {
    type Item = Counter<'a>;

    fn next(&mut self) -> Option<Counter<'a>> {
        let Counters {
            namespace,
            tenant,
            operation,
            tags,
            ..
        } = self.counters;
        let counter = |tenant, operation| Counter {
            namespace,
            tenant,
            operation,
            tag: None,
        };
        match self.next {
            Next::Namespace => {
                self.next = match tenant {
                    Some(_) => Next::Tenant(0),
                    None => Next::Operation,
                };
                Some(counter(None, None))
            }
            Next::Tenant(from) => {
                let tenant = tenant.unwrap_or_default();
                // A `,` inside a value is escaped (`%2C`): every raw `,`
                // separates two tenant values.
                let end = tenant[from..]
                    .find(',')
                    .map_or(tenant.len(), |at| from + at);
                self.next = if end == tenant.len() {
                    Next::Operation
                } else {
                    Next::Tenant(end + 1)
                };
                Some(counter(Some(&tenant[..end]), None))
            }
            Next::Operation => {
                self.next = Next::Tag(0);
                Some(counter(Some(tenant.unwrap_or_default()), Some(operation)))
            }
            Next::Tag(from) => {
                let mut entries = TagEntries::of(tags.get(from..).unwrap_or_default());
                let tag = entries.next()?;
                self.next = Next::Tag(tags.len() - entries.rest_len());
                Some(Counter {
                    namespace,
                    tenant: Some(tenant.unwrap_or_default()),
                    operation: None,
                    tag: Some(tag),
                })
            }
        }
    }
}

/// The counters of a value's `tags`, in the namespace and tenant of
/// `counters` (a query's), each with its tag.
#[cfg(feature = "redis")]
pub(crate) fn tag_counters<'a>(
    counters: Counters<'a>,
    tags: &'a Tags,
) -> impl Iterator<Item = (Counter<'a>, (TagScope, &'a str))> + 'a {
    tags.iter().map(move |tag| {
        let counter = Counter {
            namespace: counters.namespace,
            tenant: Some(counters.tenant.unwrap_or_default()),
            operation: None,
            tag: Some(tag),
        };
        (counter, tag)
    })
}

/// The running sum of a query's counters, as a store reads them.
///
/// A store adds each counter's value in turn. The caller then checks that
/// every counter was added exactly once, and that the sum fits in a `u64`
/// (an error otherwise, never a wrapped generation).
#[derive(Debug, Default)]
pub struct GenerationSum {
    /// Wide enough that no number of `u64` additions a store can make overflows.
    sum: u128,
    added: usize,
}

impl GenerationSum {
    /// Adds one counter's current value.
    #[inline]
    pub fn add(&mut self, value: u64) {
        self.sum += u128::from(value);
        self.added += 1;
    }

    /// Adds the values of `counters` counters at once, as their `total`
    /// (a store that keeps their sum).
    #[inline]
    #[cfg(feature = "redis")]
    pub(crate) fn add_total(&mut self, total: u64, counters: usize) {
        self.sum += u128::from(total);
        self.added += counters;
    }

    /// The generation, once every one of `counters` was added.
    #[inline]
    pub(crate) fn finish(self, counters: &Counters<'_>) -> Result<u64, GenerationError> {
        let expected = counters.count();
        if self.added != expected {
            return Err(GenerationError::internal(CounterCount {
                expected,
                added: self.added,
            }));
        }
        u64::try_from(self.sum).map_err(|_| GenerationError::overflow())
    }
}

/// A store that reported the wrong number of counters: a bug of that store.
#[derive(Debug)]
struct CounterCount {
    expected: usize,
    added: usize,
}

impl fmt::Display for CounterCount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the generation store added {} counter values for a query with {} counters",
            self.added, self.expected
        )
    }
}

impl Error for CounterCount {}

thread_local! {
    /// Where a query's tenant segment is written to look its counters up.
    static TENANT: RefCell<String> = const { RefCell::new(String::new()) };
}

/// Calls `f` with `query`'s counters, its tenant written in a reused
/// per-thread buffer (a fresh one if that buffer is in use further up the
/// stack).
#[inline]
pub(crate) fn with_counters_of<Q, R>(
    query: &Q,
    f: impl FnOnce(Counters<'_>) -> Result<R, GenerationError>,
) -> Result<R, GenerationError>
where
    Q: CacheKey + ?Sized,
{
    let schema = Q::KEY_SCHEMA;
    let global = matches!(schema.scope(), Scope::Global { .. });
    let mut tags = Tags::new();
    if !schema.tags().is_empty() {
        query.write_query_tags(&mut tags)?;
    }
    let run = |tenant: &mut String| {
        tenant.clear();
        query.write_tenant(tenant)?;
        let tenant = (!global).then_some(tenant.as_str());
        f(Counters::new(schema.namespace(), tenant, schema.operation()).with_tags(&tags))
    };
    with_thread_buffer(&TENANT, run)
}

/// Calls `f` with the thread's buffer `key`, or a fresh one if that buffer
/// is in use further up the stack. One huge text does not keep its buffer
/// for the thread's life.
#[inline]
pub(crate) fn with_thread_buffer<R>(
    key: &'static LocalKey<RefCell<String>>,
    f: impl FnOnce(&mut String) -> R,
) -> R {
    key.with(|buffer| match buffer.try_borrow_mut() {
        Ok(mut buffer) => {
            let result = f(&mut buffer);
            if buffer.capacity() > 4096 {
                *buffer = String::new();
            }
            result
        }
        Err(_) => f(&mut String::new()),
    })
}

#[cfg(test)]
mod tests {
    use super::super::error::GenerationErrorKind;
    use super::*;

    fn names(counters: Counters<'_>) -> Vec<String> {
        counters.iter().map(|counter| counter.name()).collect()
    }

    #[test]
    fn a_query_has_its_namespace_each_tenant_prefix_and_its_operation() {
        let counters = Counters::new("forge", Some("acme,rocket%2Cv2,main"), "issues");
        assert_eq!(
            names(counters),
            [
                "forge:g",
                "forge:g:t{acme}",
                "forge:g:t{acme,rocket%2Cv2}",
                "forge:g:t{acme,rocket%2Cv2,main}",
                "forge:g:t{acme,rocket%2Cv2,main}:issues",
            ]
        );
        assert_eq!(counters.count(), 5);
        let kinds: Vec<_> = counters.iter().map(|c| c.kind()).collect();
        assert_eq!(
            kinds,
            [
                CounterKind::Namespace,
                CounterKind::Tenant,
                CounterKind::Tenant,
                CounterKind::Tenant,
                CounterKind::Operation
            ]
        );
    }

    #[test]
    fn a_global_query_has_its_namespace_and_its_operation() {
        let counters = Counters::new("li:b", None, "count ries");
        assert_eq!(names(counters), ["li%3Ab:g", "li%3Ab:g:t{}:count%20ries"]);
        assert_eq!(counters.count(), 2);
    }

    #[test]
    fn the_sum_is_checked() {
        let counters = Counters::new("a", Some("b"), "c");
        let mut sum = GenerationSum::default();
        sum.add(u64::MAX - 1);
        sum.add(1);
        sum.add(0);
        assert_eq!(sum.finish(&counters).unwrap(), u64::MAX);
        let mut sum = GenerationSum::default();
        sum.add(u64::MAX - 1);
        sum.add(1);
        sum.add(1);
        let error = sum.finish(&counters).unwrap_err();
        assert_eq!(error.kind(), GenerationErrorKind::Overflow);
        let mut sum = GenerationSum::default();
        sum.add(1);
        let error = sum.finish(&counters).unwrap_err();
        assert_eq!(error.kind(), GenerationErrorKind::Internal);
        let cause = std::error::Error::source(&error).unwrap().to_string();
        assert!(cause.contains("1 counter values"), "{cause}");
    }
}
