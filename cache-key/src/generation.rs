//! Generations: the invalidation counters a key's `g` segment is made of, the
//! scopes they invalidate, and the stores that keep them.
//!
//! # One number, several scopes
//!
//! A key carries one generation, yet a namespace, one tenant (and, for a
//! compound tenant, each run of its leading values: an organization with all
//! its repositories) and one operation within a tenant can each be
//! invalidated on its own. Each scope has a **counter**; a query's generation
//! is the **sum** of the counters of every scope that encloses it:
//!
//! ```text
//! generation(query) = namespace + tenant prefix 1 + ... + whole tenant + operation in tenant
//! ```
//!
//! Every counter only ever increases, so:
//!
//! - bumping any enclosing counter raises the sum, so every key written
//!   before the bump is named with a smaller generation than any key read
//!   after it: the old entries are unreachable at once;
//! - the sum never decreases, so once a query's generation has moved past a
//!   value it never comes back to it: no bump sequence makes an old entry
//!   reachable again.
//!
//! That argument holds only if no counter ever goes back, including a counter
//! a store drops and recreates (a bounded map evicting it, Redis evicting the
//! key or restarting without persistence). Each store says how it keeps that
//! promise: [`MemoryGenerations`] never drops a counter (a fixed table of
//! counters, shared by scopes that hash alike), and
//! `RedisGenerations` (feature `redis`) recreates a lost
//! counter at the server's clock, above any value it had. Two scopes sharing
//! a counter only ever cost extra misses (bumping one invalidates both), never
//! a stale read, since the shared counter still only increases.
//!
//! # Typed entry points
//!
//! The generation is read from the query itself
//! ([`GenerationStore::key_for`]): namespace and operation come from its
//! derived [`CacheKey::KEY_SCHEMA`], the tenant from its own fields, so a key
//! can only be built with its own tenant's counters. Invalidating takes a
//! query type and tenant values ([`GenerationScope`]), never a hand-written
//! name that could be misspelled.
//!
//! # The race rule
//!
//! Read the key (and so the generation) **before** asking the origin, and
//! store the origin's answer under that key. A bump that lands while the
//! origin works then leaves the answer under the old generation, which no
//! reader asks for any more. Building the key after the origin answered would
//! store an answer computed from old data under the new generation: a stale
//! read that no later bump can notice.
//!
//! Counters are read one at a time (not as one snapshot), and that is
//! enough. Say a bump `B` of a counter enclosing query `q` returned, then a
//! reader `R` of `q` reads generation `g` and finds an entry a writer `W`
//! stored under `g`. Every counter `R` read was at least its value when `B`
//! returned, so `g` is at least the sum right after `B`. Had `W` read all its
//! counters before `B` wrote, each would have been at most its value then,
//! and `B`'s own counter below its value after `B`: `W`'s sum would be smaller
//! than `g`. So `W` read some counter after `B` wrote, and asked the origin
//! after that, after the data change that `B` follows: `R` gets an answer at
//! least as new as the change. This needs each counter to be linearizable
//! (an atomic, a Redis key on its primary), nothing more, and holds with any
//! number of threads and processes bumping.
//!
//! # Old generations
//!
//! Entries of old generations are unreachable but still take memory until the
//! cache evicts them. Give entries a time to live (the primary answer: the
//! longest an old generation lingers); in Redis,
//! `RedisGenerations::sweep` (feature `redis`)
//! also deletes a scope's entries of older generations in batches.

use std::cell::RefCell;
use std::error::Error;
use std::fmt;
use std::sync::Arc;

use crate::CacheKey;
use crate::canonical::TenantValue;
use crate::decode::DecodedKey;
use crate::error::KeyError;
use crate::escape::push_escaped;
use crate::key::Key;
use crate::number::digits;
use crate::schema::{KeySchema, Scope};

mod memory;
#[cfg(feature = "redis")]
mod redis;
#[cfg(feature = "redis-async")]
mod redis_async;

pub use self::memory::MemoryGenerations;
#[cfg(feature = "redis")]
pub use self::redis::{NotACounter, RedisGenerations, ScanPrimaries, SweepOptions, SweepReport};
#[cfg(feature = "redis-async")]
pub use self::redis_async::{AsyncGenerationStore, AsyncRedisGenerations};

/// The in-process store's one error: a counter bumped past `u64::MAX`.
fn overflow() -> GenerationError {
    GenerationError::new(Repr::Overflow)
}

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
}

/// One generation counter: a namespace, a tenant (or its leading values) in
/// a namespace, or an operation within a tenant.
///
/// Counters are only ever made from a query type, a query or its tenant
/// values ([`Counters`], [`GenerationScope`]); a store reads and bumps them.
/// [`name`](Self::name) is how a store that keeps counters under names (such
/// as Redis) names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Counter<'a> {
    namespace: &'a str,
    /// Escaped, as in a key; `Some("")` for an operation of the global keys.
    tenant: Option<&'a str>,
    operation: Option<&'a str>,
}

impl<'a> Counter<'a> {
    /// What the counter scopes.
    pub fn kind(&self) -> CounterKind {
        match (self.tenant, self.operation) {
            (_, Some(_)) => CounterKind::Operation,
            (Some(_), None) => CounterKind::Tenant,
            (None, None) => CounterKind::Namespace,
        }
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
    /// ```
    ///
    /// Every part is escaped as in a key, so no value can forge a separator,
    /// and the tenant is always a Redis Cluster hash tag: a tenant's counters
    /// share its slot, which is also the slot of its keys when the query
    /// type uses `hash_tag`. The second segment `g` is not `s<schema>`, so a
    /// counter's name is never a key ([`decode`](crate::decode) refuses it
    /// and [`KeyPattern::matches`](crate::KeyPattern::matches) never matches it).
    ///
    /// ```
    /// use cache_key::{CacheKey, GenerationScope};
    ///
    /// #[derive(CacheKey)]
    /// #[cache_key(namespace = "library", operation = "list")]
    /// struct BranchList { #[tenant] branch: &'static str, #[criterion] page: u32 }
    ///
    /// let scope = GenerationScope::operation::<BranchList>(&[&"branch:2"])?;
    /// assert_eq!(scope.counter().name(), "library:g:t{branch%3A2}:list");
    /// assert_eq!(GenerationScope::namespace::<BranchList>().counter().name(), "library:g");
    /// # Ok::<(), cache_key::GenerationError>(())
    /// ```
    pub fn write_name(&self, out: &mut String) {
        push_escaped(out, self.namespace);
        out.push_str(":g");
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
    fn with_tenant_values(
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
        }
    }

    /// How many counters there are.
    #[inline]
    pub(crate) fn count(&self) -> usize {
        self.tenant_values + 2
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
    Done,
}

impl<'a> Iterator for CountersIter<'a> {
    type Item = Counter<'a>;

    fn next(&mut self) -> Option<Counter<'a>> {
        let Counters {
            namespace,
            tenant,
            operation,
            ..
        } = self.counters;
        let counter = |tenant, operation| Counter {
            namespace,
            tenant,
            operation,
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
                self.next = Next::Done;
                Some(counter(Some(tenant.unwrap_or_default()), Some(operation)))
            }
            Next::Done => None,
        }
    }
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

    /// The generation, once every one of `counters` was added.
    #[inline]
    pub(crate) fn finish(self, counters: &Counters<'_>) -> Result<u64, GenerationError> {
        let expected = counters.count();
        if self.added != expected {
            return Err(GenerationError::store(CounterCount {
                expected,
                added: self.added,
            }));
        }
        u64::try_from(self.sum).map_err(|_| GenerationError::new(Repr::Overflow))
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

/// Why a generation could not be read or bumped.
///
/// A store never answers with a guess: when it cannot read a counter (Redis
/// unreachable, a counter key holding something else) the caller gets this
/// error, never generation 0 or a remembered value. [`kind`](Self::kind)
/// says what went wrong; the store's own error (a `redis::RedisError`, say)
/// is the [`source`](Error::source).
///
/// It is one pointer wide, so the `Result` of a generation read is returned
/// in registers.
#[derive(Debug)]
pub struct GenerationError(Box<Repr>);

#[derive(Debug)]
enum Repr {
    Key(KeyError),
    TenantValues(TenantValues),
    Overflow,
    Store(Box<dyn Error + Send + Sync + 'static>),
}

/// Tenant values that do not fit a query type.
#[derive(Debug)]
struct TenantValues {
    namespace: &'static str,
    operation: &'static str,
    /// The query type's tenant fields, in order (empty for a global query).
    fields: &'static [&'static str],
    /// The fewest and the most values that name a scope of this kind.
    min: usize,
    max: usize,
    given: usize,
}

/// What kind of [`GenerationError`] it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum GenerationErrorKind {
    /// The query's tenant (or a tenant value given to invalidate) is not a
    /// valid tenant: an empty value, most likely
    /// ([`key_error`](GenerationError::key_error) says which).
    Key,
    /// The tenant values given to invalidate do not fit the query type: too
    /// many, too few, or any for a global query.
    TenantValues,
    /// The sum of a query's counters does not fit in a `u64`.
    Overflow,
    /// The store failed: it could not reach its backend, or found something
    /// that is not a counter where a counter should be
    /// ([`store_error`](GenerationError::store_error) is its own error).
    Store,
}

impl GenerationError {
    fn new(repr: Repr) -> Self {
        GenerationError(Box::new(repr))
    }

    /// Wraps a store's own error.
    pub fn store(error: impl Into<Box<dyn Error + Send + Sync + 'static>>) -> Self {
        Self::new(Repr::Store(error.into()))
    }

    /// What kind of error it is.
    pub fn kind(&self) -> GenerationErrorKind {
        match *self.0 {
            Repr::Key(_) => GenerationErrorKind::Key,
            Repr::TenantValues(_) => GenerationErrorKind::TenantValues,
            Repr::Overflow => GenerationErrorKind::Overflow,
            Repr::Store(_) => GenerationErrorKind::Store,
        }
    }

    /// The key error, for [`GenerationErrorKind::Key`].
    pub fn key_error(&self) -> Option<&KeyError> {
        match &*self.0 {
            Repr::Key(error) => Some(error),
            _ => None,
        }
    }

    /// The store's own error, for [`GenerationErrorKind::Store`]; downcast it
    /// to the store's error type (`redis::RedisError`, ...).
    pub fn store_error(&self) -> Option<&(dyn Error + Send + Sync + 'static)> {
        match &*self.0 {
            Repr::Store(error) => Some(&**error),
            _ => None,
        }
    }
}

impl fmt::Display for GenerationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &*self.0 {
            Repr::Key(error) => write!(f, "{error}"),
            Repr::TenantValues(TenantValues {
                namespace,
                operation,
                fields,
                min,
                max,
                given,
            }) => {
                write!(f, "`{namespace}:{operation}` ")?;
                if fields.is_empty() {
                    f.write_str("is global (it has no tenant fields)")?;
                } else {
                    write!(f, "has the tenant fields ({})", fields.join(", "))?;
                }
                if min == max {
                    write!(f, ": this scope takes {min} tenant values, ")?;
                } else {
                    write!(f, ": this scope takes {min} to {max} tenant values, ")?;
                }
                write!(f, "{given} given")
            }
            Repr::Overflow => {
                f.write_str("the sum of the generation counters does not fit in a u64")
            }
            Repr::Store(error) => write!(f, "generation store: {error}"),
        }
    }
}

impl Error for GenerationError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match &*self.0 {
            Repr::Key(error) => Some(error),
            Repr::Store(error) => Some(&**error),
            _ => None,
        }
    }
}

impl From<KeyError> for GenerationError {
    fn from(error: KeyError) -> Self {
        Self::new(Repr::Key(error))
    }
}

/// A scope to invalidate: a namespace, a tenant (or its leading values), or
/// an operation within a tenant, always made from a query type and tenant
/// values, never from a name.
///
/// Scopes belong to the namespace, not to one query type: the tenant scope
/// of `branch 2` taken from `BranchList` also covers `Search` keys of branch
/// 2 in the same namespace, and the leading value `acme` of a compound
/// tenant `(org, repo)` covers every key whose tenant starts with `acme`
/// (and a one-value tenant `acme`).
///
/// ```
/// use cache_key::{CacheKey, GenerationScope, GenerationStore, MemoryGenerations};
///
/// #[derive(CacheKey)]
/// #[cache_key(namespace = "forge", operation = "issues")]
/// struct Issues<'a> {
///     #[tenant] org: &'a str,
///     #[tenant] repo: &'a str,
///     #[criterion] page: u32,
/// }
///
/// let store = MemoryGenerations::new();
/// let query = Issues { org: "acme", repo: "rocket", page: 1 };
/// let before = store.generation_for(&query)?;
///
/// // The organization with all its repositories:
/// store.invalidate(&GenerationScope::tenant::<Issues>(&[&"acme"])?)?;
/// let after_org = store.generation_for(&query)?;
/// assert!(after_org > before);
///
/// // One repository's issues only:
/// store.invalidate(&GenerationScope::operation_of(&query)?)?;
/// assert!(store.generation_for(&query)? > after_org);
/// # Ok::<(), cache_key::GenerationError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct GenerationScope {
    namespace: &'static str,
    /// Escaped; `Some("")` for an operation of the global keys.
    tenant: Option<String>,
    operation: Option<&'static str>,
    /// How many tenant values `tenant` holds, and how many the query type has.
    values: usize,
    fields: usize,
    hash_tag: bool,
}

impl GenerationScope {
    /// Every key of `Q`'s namespace, whatever its type.
    pub fn namespace<Q: CacheKey + ?Sized>() -> Self {
        GenerationScope {
            namespace: Q::KEY_SCHEMA.namespace(),
            tenant: None,
            operation: None,
            values: 0,
            fields: tenant_fields::<Q>().len(),
            hash_tag: Q::KEY_SCHEMA.hash_tag(),
        }
    }

    /// Every key of `Q`'s namespace whose tenant is `tenant` or, with fewer
    /// values than `Q` has tenant fields, starts with them: `&[&org]` for an
    /// organization with all its repositories, `&[&org, &repo]` for one
    /// repository.
    ///
    /// The values are written as `Q`'s keys write them. Refused: a global
    /// `Q`, no value or more values than `Q` has tenant fields
    /// ([`GenerationErrorKind::TenantValues`]), an empty value
    /// ([`KeyError::EmptyTenant`] naming the field).
    pub fn tenant<Q: CacheKey + ?Sized>(
        tenant: &[&dyn TenantValue],
    ) -> Result<Self, GenerationError> {
        let fields = tenant_fields::<Q>();
        check_values::<Q>(tenant.len(), 1, fields.len())?;
        Ok(GenerationScope {
            tenant: Some(escaped_tenant(fields, tenant)?),
            values: tenant.len(),
            ..Self::namespace::<Q>()
        })
    }

    /// Every key of `Q`'s namespace with the same tenant as `query`.
    pub fn tenant_of<Q: CacheKey + ?Sized>(query: &Q) -> Result<Self, GenerationError> {
        let fields = tenant_fields::<Q>();
        check_values::<Q>(fields.len(), 1, fields.len())?;
        let mut tenant = String::new();
        query.write_tenant(&mut tenant)?;
        Ok(GenerationScope {
            tenant: Some(tenant),
            values: fields.len(),
            ..Self::namespace::<Q>()
        })
    }

    /// Every key of `Q`'s operation within one whole tenant: all of `Q`'s
    /// tenant values, in order (`&[]` for a global `Q`: its operation among
    /// the global keys).
    pub fn operation<Q: CacheKey + ?Sized>(
        tenant: &[&dyn TenantValue],
    ) -> Result<Self, GenerationError> {
        let fields = tenant_fields::<Q>();
        check_values::<Q>(tenant.len(), fields.len(), fields.len())?;
        Ok(GenerationScope {
            tenant: Some(escaped_tenant(fields, tenant)?),
            operation: Some(Q::KEY_SCHEMA.operation()),
            values: tenant.len(),
            ..Self::namespace::<Q>()
        })
    }

    /// Every key of `query`'s operation within its tenant.
    pub fn operation_of<Q: CacheKey + ?Sized>(query: &Q) -> Result<Self, GenerationError> {
        let mut tenant = String::new();
        query.write_tenant(&mut tenant)?;
        Ok(GenerationScope {
            tenant: Some(tenant),
            operation: Some(Q::KEY_SCHEMA.operation()),
            values: tenant_fields::<Q>().len(),
            ..Self::namespace::<Q>()
        })
    }

    /// The counter that bumping this scope increases.
    pub fn counter(&self) -> Counter<'_> {
        Counter {
            namespace: self.namespace,
            tenant: self.tenant.as_deref(),
            operation: self.operation,
        }
    }

    /// What the scope covers.
    pub fn kind(&self) -> CounterKind {
        self.counter().kind()
    }

    /// Whether `key` is in this scope, at any schema and generation, with or
    /// without a hash tag: its namespace, its tenant (or the tenant's leading
    /// values) and its operation are the scope's.
    pub fn contains(&self, key: &DecodedKey) -> bool {
        if key.namespace() != self.namespace {
            return false;
        }
        if let Some(operation) = self.operation
            && key.operation() != operation
        {
            return false;
        }
        let Some(tenant) = &self.tenant else {
            return true;
        };
        let parts = key.tenant().parts();
        if tenant.is_empty() {
            return self.operation.is_some() && key.tenant().is_global();
        }
        let scope_parts = tenant_parts(tenant);
        if self.operation.is_some() && parts.len() != scope_parts.len() {
            return false;
        }
        parts.len() >= scope_parts.len() && parts[..scope_parts.len()] == scope_parts[..]
    }
}

/// A tenant segment's values, unescaped.
fn tenant_parts(tenant: &str) -> Vec<String> {
    tenant
        .split(',')
        .map(|part| {
            percent_encoding::percent_decode_str(part)
                .decode_utf8_lossy()
                .into_owned()
        })
        .collect()
}

fn tenant_fields<Q: CacheKey + ?Sized>() -> &'static [&'static str] {
    match Q::KEY_SCHEMA.scope() {
        Scope::Tenant { fields } => fields,
        _ => &[],
    }
}

fn check_values<Q: CacheKey + ?Sized>(
    given: usize,
    min: usize,
    max: usize,
) -> Result<(), GenerationError> {
    if (min..=max).contains(&given) {
        return Ok(());
    }
    Err(GenerationError::new(Repr::TenantValues(TenantValues {
        namespace: Q::KEY_SCHEMA.namespace(),
        operation: Q::KEY_SCHEMA.operation(),
        fields: tenant_fields::<Q>(),
        min,
        max,
        given,
    })))
}

/// The tenant values written as a key writes them, joined with `,`.
fn escaped_tenant(
    fields: &'static [&'static str],
    values: &[&dyn TenantValue],
) -> Result<String, KeyError> {
    let mut out = String::new();
    for (i, (value, field)) in values.iter().zip(fields).enumerate() {
        // Zero is accepted: invalidating a tenant that no key can have
        // bumps a counter nothing reads, while refusing it would leave a
        // declared `allow_zero` tenant without invalidation.
        crate::layout::push_tenant_part(&mut out, i == 0, field, *value, true)?;
    }
    Ok(out)
}

/// Reads the generation of the `Q` whose key `out[start..]` holds at
/// generation 0, and writes it in place of the `0`.
#[inline]
fn read_into_key<S, Q>(store: &S, out: &mut String, start: usize) -> Result<u64, GenerationError>
where
    S: GenerationStore + ?Sized,
    Q: CacheKey + ?Sized,
{
    let layout = const { KeyLayout::of(&Q::KEY_SCHEMA) };
    let key = &out[start..];
    let (zero, tenant) = layout
        .locate(key)
        .ok_or_else(|| GenerationError::store(NotAKey))?;
    // Each tenant field writes one value, so no `,` needs counting (a key
    // with other values makes the store's count differ: an error).
    let counters = Counters::with_tenant_values(
        layout.namespace,
        layout.tenant_values.map(|_| &key[tenant]),
        layout.operation,
        layout.tenant_values.unwrap_or(0),
    );
    let mut sum = GenerationSum::default();
    store.read(counters, &mut sum)?;
    let generation = sum.finish(&counters)?;
    if generation != 0 {
        let zero = start + zero;
        out.replace_range(zero..zero + 1, digits(&mut itoa::Buffer::new(), generation));
        // `write_key` measured the key against `max_len` with one digit.
        if let Some(max) = layout.max_len
            && out.len() - start > max
        {
            let len = out.len() - start;
            return Err(KeyError::TooLong { len, max }.into());
        }
    }
    Ok(generation)
}

/// What `read_into_key` needs of a query type's schema, made at compile time.
struct KeyLayout {
    namespace: &'static str,
    operation: &'static str,
    /// `esc(namespace)`'s length when the namespace needs no escaping.
    plain_namespace_len: usize,
    schema_digits: usize,
    hash_tag: bool,
    /// How many values the tenant joins; `None` for a global key.
    tenant_values: Option<usize>,
    max_len: Option<usize>,
}

impl KeyLayout {
    const fn of(schema: &KeySchema) -> Self {
        let mut schema_digits = 1;
        let mut rest = schema.schema() / 10;
        while rest > 0 {
            schema_digits += 1;
            rest /= 10;
        }
        KeyLayout {
            namespace: schema.namespace(),
            operation: schema.operation(),
            plain_namespace_len: schema.namespace().len(),
            schema_digits,
            hash_tag: schema.hash_tag(),
            tenant_values: match schema.scope() {
                Scope::Tenant { fields } => Some(fields.len()),
                Scope::Global { .. } => None,
            },
            max_len: schema.max_len(),
        }
    }

    /// In a key written at generation 0, where the `0` is and where the
    /// tenant values are (inside a hash tag's braces). Every segment before
    /// the operation is escaped, so the separators only delimit; `None` when
    /// `key` is not laid out so.
    #[inline(always)]
    fn locate(&self, key: &str) -> Option<(usize, std::ops::Range<usize>)> {
        use crate::syntax::{GENERATION, HASH_TAG_CLOSE, HASH_TAG_OPEN, SCHEMA, SEPARATOR, TENANT};
        let bytes = key.as_bytes();
        let after_namespace = SCHEMA.len() + self.schema_digits + GENERATION.len();
        // The `0`, then the tenant marker: found where a namespace that needs
        // no escaping puts it, or else after the first separator.
        let [separator, marker] = *TENANT.as_bytes() else {
            unreachable!("the tenant marker is two bytes")
        };
        let at = |zero: usize| bytes.get(zero..zero + 3) == Some(&[b'0', separator, marker]);
        let mut zero = self.plain_namespace_len + after_namespace;
        if !at(zero) {
            zero = key.find(SEPARATOR)? + after_namespace;
            if !at(zero) {
                return None;
            }
        }
        let mut from = zero + 3;
        // A hash tag the schema does not declare would make these counters
        // differ from `write_tenant`'s.
        if (bytes.get(from) == Some(&(HASH_TAG_OPEN as u8))) != self.hash_tag {
            return None;
        }
        let close = if self.hash_tag {
            from += 1;
            HASH_TAG_CLOSE
        } else {
            SEPARATOR
        };
        let len = bytes[from..].iter().position(|&b| b == close as u8)?;
        Some((zero, from..from + len))
    }
}

/// `write_key` wrote text that is not a key laid out as its schema says: a
/// bug of that implementation.
#[derive(Debug)]
struct NotAKey;

impl fmt::Display for NotAKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the query's write_key wrote text that is not laid out as its KEY_SCHEMA says")
    }
}

impl Error for NotAKey {}

thread_local! {
    /// Where a query's tenant segment is written to look its counters up.
    static TENANT: RefCell<String> = const { RefCell::new(String::new()) };
}

/// Calls `f` with `query`'s counters, its tenant written in a reused
/// per-thread buffer (a fresh one if that buffer is in use further up the
/// stack).
#[inline]
fn with_counters<Q, R>(
    query: &Q,
    f: impl FnOnce(Counters<'_>) -> Result<R, GenerationError>,
) -> Result<R, GenerationError>
where
    Q: CacheKey + ?Sized,
{
    let schema = Q::KEY_SCHEMA;
    let global = matches!(schema.scope(), Scope::Global { .. });
    let run = |tenant: &mut String| {
        tenant.clear();
        query.write_tenant(tenant)?;
        let tenant = (!global).then_some(tenant.as_str());
        f(Counters::new(
            schema.namespace(),
            tenant,
            schema.operation(),
        ))
    };
    TENANT.with(|buffer| match buffer.try_borrow_mut() {
        Ok(mut buffer) => {
            let result = run(&mut buffer);
            // One huge tenant does not keep its buffer for the thread's life.
            if buffer.capacity() > 4096 {
                *buffer = String::new();
            }
            result
        }
        Err(_) => run(&mut String::new()),
    })
}

/// Where generation counters live: in the process ([`MemoryGenerations`]),
/// in Redis (`RedisGenerations` (feature `redis`)), or
/// a store of your own.
///
/// A store implements two operations on [`Counter`]s, and every typed entry
/// point (`key_for`, `invalidate`, ...) comes with the trait. An
/// implementation must keep one promise: **a counter never goes back**, not
/// even when the store drops it and makes it again. Reading a counter it
/// cannot read is an error, never 0 or a remembered value.
///
/// The typed methods are also available on `&S`, `Box<S>` and `Arc<S>`, so a
/// store can be shared as `Arc<dyn GenerationStore + Send + Sync>`.
pub trait GenerationStore {
    /// Adds the current value of each of `counters` to `sum`, in order. A
    /// counter the store has never seen is added at its starting value (which
    /// the store chooses, never below a value it could have had before).
    fn read(&self, counters: Counters<'_>, sum: &mut GenerationSum) -> Result<(), GenerationError>;

    /// Increases `counter`. When this returns `Ok`, every read that starts
    /// afterwards sees the increase.
    fn bump(&self, counter: Counter<'_>) -> Result<(), GenerationError>;

    /// `query`'s generation: the sum of its counters.
    #[inline]
    fn generation_for<Q: CacheKey + ?Sized>(&self, query: &Q) -> Result<u64, GenerationError>
    where
        Self: Sized,
    {
        with_counters(query, |counters| {
            let mut sum = GenerationSum::default();
            self.read(counters, &mut sum)?;
            sum.finish(&counters)
        })
    }

    /// `query`'s key at its current generation. Read it **before** asking the
    /// origin, and store the answer under it (see [the race
    /// rule](crate::generation#the-race-rule)).
    #[inline]
    fn key_for<Q: CacheKey + ?Sized>(&self, query: &Q) -> Result<Key, GenerationError>
    where
        Self: Sized,
    {
        let mut out = String::new();
        self.write_key_for(query, &mut out)?;
        Ok(Key::from_canonical(out))
    }

    /// Appends `query`'s key at its current generation to `out` and returns
    /// the generation; on error `out` is left unchanged.
    #[inline]
    fn write_key_for<Q: CacheKey + ?Sized>(
        &self,
        query: &Q,
        out: &mut String,
    ) -> Result<u64, GenerationError>
    where
        Self: Sized,
    {
        // The key is written once, at generation 0: its own tenant segment
        // names the counters, then the generation's digits replace the `0`
        // (a summary covers the criteria only, so it stays right).
        let start = out.len();
        query.write_key(0, out)?;
        let spliced = read_into_key::<_, Q>(self, out, start);
        if spliced.is_err() {
            out.truncate(start);
        }
        spliced
    }

    /// Bumps `scope`'s counter: every key in the scope becomes unreachable.
    fn invalidate(&self, scope: &GenerationScope) -> Result<(), GenerationError>
    where
        Self: Sized,
    {
        self.bump(scope.counter())
    }

    /// Invalidates every key of `Q`'s namespace.
    fn invalidate_namespace<Q: CacheKey + ?Sized>(&self) -> Result<(), GenerationError>
    where
        Self: Sized,
    {
        self.invalidate(&GenerationScope::namespace::<Q>())
    }

    /// Invalidates every key of `Q`'s namespace whose tenant is `tenant`, or
    /// starts with it (see [`GenerationScope::tenant`]).
    fn invalidate_tenant<Q: CacheKey + ?Sized>(
        &self,
        tenant: &[&dyn TenantValue],
    ) -> Result<(), GenerationError>
    where
        Self: Sized,
    {
        self.invalidate(&GenerationScope::tenant::<Q>(tenant)?)
    }

    /// Invalidates every key of `Q`'s operation within one whole tenant (see
    /// [`GenerationScope::operation`]).
    fn invalidate_operation<Q: CacheKey + ?Sized>(
        &self,
        tenant: &[&dyn TenantValue],
    ) -> Result<(), GenerationError>
    where
        Self: Sized,
    {
        self.invalidate(&GenerationScope::operation::<Q>(tenant)?)
    }
}

impl<S: GenerationStore + ?Sized> GenerationStore for &S {
    fn read(&self, counters: Counters<'_>, sum: &mut GenerationSum) -> Result<(), GenerationError> {
        (**self).read(counters, sum)
    }

    fn bump(&self, counter: Counter<'_>) -> Result<(), GenerationError> {
        (**self).bump(counter)
    }
}

impl<S: GenerationStore + ?Sized> GenerationStore for Box<S> {
    fn read(&self, counters: Counters<'_>, sum: &mut GenerationSum) -> Result<(), GenerationError> {
        (**self).read(counters, sum)
    }

    fn bump(&self, counter: Counter<'_>) -> Result<(), GenerationError> {
        (**self).bump(counter)
    }
}

impl<S: GenerationStore + ?Sized> GenerationStore for Arc<S> {
    fn read(&self, counters: Counters<'_>, sum: &mut GenerationSum) -> Result<(), GenerationError> {
        (**self).read(counters, sum)
    }

    fn bump(&self, counter: Counter<'_>) -> Result<(), GenerationError> {
        (**self).bump(counter)
    }
}

#[cfg(test)]
mod tests {
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
        assert_eq!(error.kind(), GenerationErrorKind::Store);
        assert!(error.to_string().contains("1 counter values"), "{error}");
    }
}
