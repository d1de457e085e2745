//! [`CacheKey`]: the trait of query types, whose fields make their cache key.

use crate::error::KeyError;
use crate::key::{Key, ReadableKey};
use crate::schema::KeySchema;

/// Which text of a query's key [`CacheKey::write_key_part`] writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum KeyPart {
    /// The cache key, its criteria summarized past 48 bytes
    /// ([`CacheKey::write_key`]).
    Key,
    /// The key with its criteria never summarized and `max_len` not checked
    /// ([`CacheKey::write_readable_key`]).
    Readable,
    /// The tenant segment alone, without a hash tag's braces; the generation
    /// is not used ([`CacheKey::write_tenant`]).
    Tenant,
}

/// A query type whose cache key is derived from its fields.
///
/// Implement it with `#[derive(CacheKey)]`: the derive checks at compile time
/// that every field is marked, that the tenant is present, and sorts the
/// criteria. A manual implementation must write the key format; the simplest
/// way is [`KeyBuilder::write_part_into`](crate::KeyBuilder::write_part_into).
pub trait CacheKey {
    /// What this type's keys are made of: namespace, operation, schema, tenant
    /// fields, criteria and skipped fields.
    const KEY_SCHEMA: KeySchema;

    /// The tenant values this type's typed scopes take
    /// ([`Scopes::tenant_scope`](crate::Scopes::tenant_scope)), borrowed in
    /// the tenant fields' own types and order: `&'a T` for one tenant field,
    /// `(&'a A, &'a B)` for a compound tenant, `()` for a global query (see
    /// [`TenantRefs`](crate::TenantRefs)). The derive writes it; by hand,
    /// write the same shape.
    type Tenant<'a>
    where
        Self: 'a;

    /// Appends `part` of this query's key at `generation` to `out`, reusing
    /// its capacity: no allocation when `out` has room. On error, `out` is
    /// left unchanged. The methods below call it with each [`KeyPart`].
    ///
    /// The derive writes it. By hand, lay the key out with a
    /// [`KeyBuilder`](crate::KeyBuilder) and write the part asked for with
    /// [`write_part_into`](crate::KeyBuilder::write_part_into).
    fn write_key_part(
        &self,
        generation: u64,
        out: &mut String,
        part: KeyPart,
    ) -> Result<(), KeyError>;

    /// Appends this query's key at `generation` to `out`, reusing its capacity:
    /// no allocation when `out` has room. On error, `out` is left unchanged.
    #[inline]
    fn write_key(&self, generation: u64, out: &mut String) -> Result<(), KeyError> {
        self.write_key_part(generation, out, KeyPart::Key)
    }

    /// Appends this query's tenant segment to `out` as its key writes it
    /// ([`KeyPart::Tenant`]): each tenant value escaped, the parts of a
    /// compound tenant joined with `,`, without a hash tag's braces; nothing
    /// for a global key. An empty tenant value is [`KeyError::EmptyTenant`],
    /// as for the key; on error, `out` is left unchanged.
    ///
    /// Generation stores scope their counters by it, so a query's generation
    /// is always its own tenant's.
    #[inline]
    fn write_tenant(&self, out: &mut String) -> Result<(), KeyError> {
        self.write_key_part(0, out, KeyPart::Tenant)
    }

    /// Adds this query's tags (its `#[tag = "..."]` criterion fields) to
    /// `tags`; an empty tag value is [`KeyError::EmptyTag`]. None by
    /// default.
    ///
    /// `tags` may come after text of the caller's (a key being written):
    /// add to it, never replace it (`*tags = ...`), or reading the query's
    /// generation is an error.
    #[inline]
    fn write_query_tags(&self, tags: &mut crate::tag::Tags) -> Result<(), KeyError> {
        let _ = tags;
        Ok(())
    }

    /// Appends this query's key at `generation` with its criteria never
    /// summarized, for logs and debugging (see [`ReadableKey`]); `max_len`
    /// is not checked.
    #[inline]
    fn write_readable_key(&self, generation: u64, out: &mut String) -> Result<(), KeyError> {
        self.write_key_part(generation, out, KeyPart::Readable)
    }

    /// This query's key at `generation` with its criteria never summarized:
    /// not a cache key, but what a log line needs to explain a miss.
    fn readable_key(&self, generation: u64) -> Result<ReadableKey, KeyError> {
        let mut out = String::new();
        self.write_readable_key(generation, &mut out)?;
        Ok(ReadableKey::new(out))
    }

    /// This query's key at `generation`.
    ///
    /// The generation is the invalidation counter of the key's scope: bump it
    /// and every entry written under the old one is unreachable.
    fn cache_key(&self, generation: u64) -> Result<Key, KeyError> {
        let mut out = String::new();
        self.write_key(generation, &mut out)?;
        Ok(Key::from_canonical(out))
    }
}
