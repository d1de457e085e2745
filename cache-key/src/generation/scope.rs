//! [`GenerationScope`]: what an invalidation bumps, made from a query type
//! and tenant values, never from a name.

use super::counters::{Counter, CounterKind};
use super::error::{GenerationError, TenantValues};
use crate::cache_key::CacheKey;
use crate::canonical::TenantValue;
use crate::decode::DecodedKey;
use crate::error::KeyError;
use crate::schema::Scope;
use crate::tag::{TagScope, Tags};

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
/// use cache_key::{CacheKey, GenerationScope, GenerationStore, MemoryGenerations, Scopes};
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
/// store.invalidate(&Issues::tenant_scope_by_org(&"acme")?)?;
/// let after_org = store.generation_for(&query)?;
/// assert!(after_org > before);
///
/// // One repository's issues only:
/// store.invalidate(&Issues::operation_scope((&"acme", &"rocket"))?)?;
/// assert!(store.generation_for(&query)? > after_org);
/// let after_repo = store.generation_for(&query)?;
///
/// // The same, from a query at hand:
/// store.invalidate(&GenerationScope::operation_of(&query)?)?;
/// assert!(store.generation_for(&query)? > after_repo);
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
    /// A tag's scope and escaped `name=value`, for a tag's scope.
    tag: Option<(TagScope, String)>,
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
            tag: None,
        }
    }

    /// **The unchecked escape hatch** of the derive's typed tag scopes
    /// (`Search::tag_scope_product(&shop, &42)`): every key and entry of
    /// `Q`'s namespace tagged `name` = `value`, inside the tenant `tenant`
    /// (all of `Q`'s tenant values) for a [`TagScope::Tenant`] tag, or of
    /// every tenant for a [`TagScope::Global`] one (`tenant` then empty).
    /// Prefer the typed scopes: here a value written otherwise than the
    /// tagged field writes it (`"42"` for a `u64`) names no entity any key
    /// is tagged with, and the invalidation silently does nothing.
    ///
    /// # Errors
    ///
    /// An empty tag value ([`KeyError::EmptyTag`]); for a tag inside the
    /// tenant, a tenant value missing, one too many or empty.
    pub fn tag_unchecked<Q: CacheKey + ?Sized>(
        tenant: &[&dyn TenantValue],
        scope: TagScope,
        name: &str,
        value: &dyn TenantValue,
    ) -> Result<Self, GenerationError> {
        let mut tags = Tags::new();
        tags.push(scope, name, "tag", value)?;
        // One tag pushed: its text is the whole list's, without its mark
        // and line break.
        let text = tags.as_str()[1..].trim_end_matches('\n').to_owned();
        let values = tenant.len();
        let tenant = match scope {
            TagScope::Tenant => {
                let fields = tenant_fields::<Q>();
                check_values::<Q>(tenant.len(), fields.len(), fields.len())?;
                Some(escaped_tenant(fields, tenant)?)
            }
            TagScope::Global => {
                check_values::<Q>(tenant.len(), 0, 0)?;
                None
            }
        };
        Ok(GenerationScope {
            tenant,
            values,
            tag: Some((scope, text)),
            ..Self::namespace::<Q>()
        })
    }

    /// **The unchecked escape hatch** of `Q::tenant_scope(..)`: every key of
    /// `Q`'s namespace whose tenant is `tenant` or, with fewer values than
    /// `Q` has tenant fields, starts with them.
    ///
    /// Prefer the typed functions of each query type
    /// ([`Scopes::tenant_scope`]: `Issues::tenant_scope((&org, &repo))`, and
    /// the derive's `Issues::tenant_scope_by_org(&org)`):
    /// they take the tenant fields' own types in their order, so a wrong value
    /// does not compile. Here the values are only counted: `&"01"`, `&"1 "`,
    /// `&"+1"` or `&-1i64` for a `u32` tenant, or a compound tenant's values
    /// swapped, return `Ok` with a scope that no key is in, and the
    /// invalidation silently does nothing. Use it where the values come from
    /// elsewhere already in key form (generic code over `Q: CacheKey` has
    /// `Q::tenant_scope` and `Q::Tenant`).
    ///
    /// The values are written as `Q`'s keys write them. Refused: a global
    /// `Q`, no value or more values than `Q` has tenant fields
    /// ([`GenerationErrorKind::TenantValues`](super::GenerationErrorKind::TenantValues)), an empty value
    /// ([`KeyError::EmptyTenant`] naming the field).
    pub fn tenant_unchecked<Q: CacheKey + ?Sized>(
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

    /// **The unchecked escape hatch** of `Q::operation_scope(..)`: every key
    /// of `Q`'s operation within one whole tenant, given as all of `Q`'s
    /// tenant values in order (`&[]` for a global `Q`: its operation among
    /// the global keys).
    ///
    /// The values are counted, not typed: a wrong one gives a scope no key is
    /// in (see [`tenant_unchecked`](Self::tenant_unchecked)). Prefer
    /// [`Scopes::operation_scope`].
    pub fn operation_unchecked<Q: CacheKey + ?Sized>(
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
            tag: self
                .tag
                .as_ref()
                .map(|(scope, text)| (*scope, text.as_str())),
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

/// The typed invalidation scopes of every query type: `tenant_scope` and
/// `operation_scope` take its tenant values in the tenant fields' own types
/// and order ([`CacheKey::Tenant`]), so an invalidation by a mistyped,
/// missing or swapped value does not compile. Implemented for every
/// [`CacheKey`]; bring it in scope with `use cache_key::Scopes`.
///
/// ```
/// use cache_key::{CacheKey, GenerationStore, MemoryGenerations, Scopes};
///
/// #[derive(CacheKey)]
/// #[cache_key(namespace = "library", operation = "list")]
/// struct BranchList {
///     #[tenant] branch: u32,
///     #[criterion] page: u32,
/// }
///
/// let store = MemoryGenerations::new();
/// store.invalidate(&BranchList::tenant_scope(&2)?)?; // branch 2, every query type of `library`
/// store.invalidate(&BranchList::operation_scope(&2)?)?; // branch 2's lists only
/// # Ok::<(), cache_key::GenerationError>(())
/// ```
///
/// A compound tenant takes a tuple, `Issues::tenant_scope((&org, &repo))`,
/// and the derive adds one function per leading part
/// (`Issues::tenant_scope_by_org(&org)`); a global query's operation scope
/// takes `()`.
pub trait Scopes: CacheKey + Sized {
    /// The scope of every key of this type's namespace whose tenant is
    /// `tenant`, whatever its query type: pass it to `invalidate`.
    ///
    /// `Search::tenant_scope(&branch)`, `Issues::tenant_scope((&org, &repo))`:
    /// the values are taken in the tenant fields' own types and order, so a
    /// mistyped, missing or swapped one does not compile, nor does a global
    /// query's (it has no tenant: see [`HasTenant`]).
    ///
    /// # Errors
    ///
    /// A value that writes nothing (an empty string): [`KeyError::EmptyTenant`]
    /// naming the field.
    #[inline]
    fn tenant_scope<'a>(tenant: Self::Tenant<'a>) -> Result<GenerationScope, GenerationError>
    where
        Self: 'a,
        Self::Tenant<'a>: HasTenant,
    {
        tenant.with_values(GenerationScope::tenant_unchecked::<Self>)
    }

    /// The scope of every key of this type's operation for the tenant
    /// `tenant` (`()` for a global query: its operation among the global
    /// keys): pass it to `invalidate`.
    ///
    /// Typed as [`tenant_scope`](Self::tenant_scope) is.
    ///
    /// # Errors
    ///
    /// A value that writes nothing (an empty string): [`KeyError::EmptyTenant`]
    /// naming the field.
    #[inline]
    fn operation_scope<'a>(tenant: Self::Tenant<'a>) -> Result<GenerationScope, GenerationError>
    where
        Self: 'a,
        Self::Tenant<'a>: TenantRefs,
    {
        tenant.with_values(GenerationScope::operation_unchecked::<Self>)
    }
}

impl<Q: CacheKey> Scopes for Q {}

/// A query type's tenant values as its typed scopes take them
/// ([`CacheKey::Tenant`]), borrowed in the tenant fields' own types and
/// order: `&T` for one tenant field, a tuple `(&A, &B, ..)` of up to 12 for a
/// compound tenant, `()` for a global query; and `&dyn TenantValue`, one
/// tenant value of a type not known, which the derive's stand-in impl beside
/// its compile errors takes so that calls to the struct's scopes add none.
///
/// Sealed: those are its only implementations.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not the tenant values of a query type",
    label = "expected the query's `CacheKey::Tenant`",
    note = "a typed scope takes `&T` for one tenant field, a tuple `(&A, &B)` of up to 12 for a compound tenant, `()` for a global query"
)]
pub trait TenantRefs: sealed::Sealed {
    /// Calls `scope` with the values, in the tenant fields' order.
    fn with_values<R>(self, scope: impl FnOnce(&[&dyn TenantValue]) -> R) -> R;
}

mod sealed {
    pub trait Sealed {}
}

impl sealed::Sealed for () {}

impl TenantRefs for () {
    #[inline]
    fn with_values<R>(self, scope: impl FnOnce(&[&dyn TenantValue]) -> R) -> R {
        scope(&[])
    }
}

/// The tenant values of a query type that has a tenant: [`TenantRefs`] but
/// `()`. What [`Scopes::tenant_scope`] takes: a global query has no tenant
/// scope.
#[diagnostic::on_unimplemented(
    message = "a global query has no tenant scope",
    label = "this query type is global",
    note = "invalidate its operation with `operation_scope(())`, or its whole namespace with `GenerationScope::namespace`"
)]
pub trait HasTenant: TenantRefs {}

impl<T: TenantValue> sealed::Sealed for &T {}

#[diagnostic::do_not_recommend]
impl<T: TenantValue> HasTenant for &T {}

impl<T: TenantValue> TenantRefs for &T {
    #[inline]
    fn with_values<R>(self, scope: impl FnOnce(&[&dyn TenantValue]) -> R) -> R {
        scope(&[self])
    }
}

impl sealed::Sealed for &dyn TenantValue {}

#[diagnostic::do_not_recommend]
impl HasTenant for &dyn TenantValue {}

impl TenantRefs for &dyn TenantValue {
    #[inline]
    fn with_values<R>(self, scope: impl FnOnce(&[&dyn TenantValue]) -> R) -> R {
        scope(&[self])
    }
}

macro_rules! tenant_refs_tuple {
    ($($value:ident: $ty:ident),+) => {
        impl<$($ty: TenantValue),+> sealed::Sealed for ($(&$ty,)+) {}

        #[diagnostic::do_not_recommend]
        impl<$($ty: TenantValue),+> HasTenant for ($(&$ty,)+) {}

        impl<$($ty: TenantValue),+> TenantRefs for ($(&$ty,)+) {
            #[inline]
            fn with_values<R>(self, scope: impl FnOnce(&[&dyn TenantValue]) -> R) -> R {
                let ($($value,)+) = self;
                scope(&[$($value),+])
            }
        }
    };
}

tenant_refs_tuple!(a: A, b: B);
tenant_refs_tuple!(a: A, b: B, c: C);
tenant_refs_tuple!(a: A, b: B, c: C, d: D);
tenant_refs_tuple!(a: A, b: B, c: C, d: D, e: E);
tenant_refs_tuple!(a: A, b: B, c: C, d: D, e: E, f: F);
tenant_refs_tuple!(a: A, b: B, c: C, d: D, e: E, f: F, g: G);
tenant_refs_tuple!(a: A, b: B, c: C, d: D, e: E, f: F, g: G, h: H);
tenant_refs_tuple!(a: A, b: B, c: C, d: D, e: E, f: F, g: G, h: H, i: I);
tenant_refs_tuple!(a: A, b: B, c: C, d: D, e: E, f: F, g: G, h: H, i: I, j: J);
tenant_refs_tuple!(a: A, b: B, c: C, d: D, e: E, f: F, g: G, h: H, i: I, j: J, k: K);
tenant_refs_tuple!(a: A, b: B, c: C, d: D, e: E, f: F, g: G, h: H, i: I, j: J, k: K, l: L);

/// A tenant segment's values, unescaped.
fn tenant_parts(tenant: &str) -> Vec<String> {
    tenant
        .split(',')
        .map(|part| cache_key_format::unescape::unescape_lossy(part).into_owned())
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
    Err(GenerationError::tenant_values(TenantValues {
        namespace: Q::KEY_SCHEMA.namespace(),
        operation: Q::KEY_SCHEMA.operation(),
        fields: tenant_fields::<Q>(),
        min,
        max,
        given,
    }))
}

/// The tenant values written as a key writes them, joined with `,`.
fn escaped_tenant(
    fields: &'static [&'static str],
    values: &[&dyn TenantValue],
) -> Result<String, KeyError> {
    let mut out = String::new();
    // Zero is accepted: invalidating a tenant that no key can have bumps a
    // counter nothing reads, while refusing it would leave a declared
    // `allow_zero` tenant without invalidation.
    let parts = fields
        .iter()
        .zip(values)
        .map(|(&field, &value)| (field, value, true));
    crate::key_writer::write_tenant(&mut out, parts)?;
    Ok(out)
}
