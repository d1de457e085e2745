//! [`GenerationScope`]: what an invalidation bumps, made from a query type
//! and tenant values, never from a name.

use super::counters::{Counter, CounterKind};
use super::error::{GenerationError, TenantValues};
use crate::cache_key::CacheKey;
use crate::canonical::TenantValue;
use crate::decode::DecodedKey;
use crate::error::KeyError;
use crate::schema::Scope;

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
/// store.invalidate(&Issues::tenant_scope_by_org(&"acme")?)?;
/// let after_org = store.generation_for(&query)?;
/// assert!(after_org > before);
///
/// // One repository's issues only:
/// store.invalidate(&Issues::operation_scope(&"acme", &"rocket")?)?;
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

    /// **The unchecked escape hatch** of `Q::tenant_scope(..)`: every key of
    /// `Q`'s namespace whose tenant is `tenant` or, with fewer values than
    /// `Q` has tenant fields, starts with them.
    ///
    /// Prefer the typed functions the derive gives each query type
    /// (`Issues::tenant_scope(&org, &repo)`, `Issues::tenant_scope_by_org(&org)`):
    /// they take the tenant fields' own types in their order, so a wrong value
    /// does not compile. Here the values are only counted: `&"01"`, `&"1 "`,
    /// `&"+1"` or `&-1i64` for a `u32` tenant, or a compound tenant's values
    /// swapped, return `Ok` with a scope that no key is in, and the
    /// invalidation silently does nothing. Use it where the query type is
    /// generic or the values come from elsewhere already in key form.
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
    /// in (see [`tenant_unchecked`](Self::tenant_unchecked)). Prefer the
    /// derive's `operation_scope`.
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
