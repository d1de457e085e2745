//! [`CacheKey`]: the trait of query types, whose fields make their cache key.

use cache_key_format::escape::push_escaped;

use crate::decode::decode;
use crate::error::KeyError;
use crate::key::{Key, ReadableKey};
use crate::schema::KeySchema;

/// A query type whose cache key is derived from its fields.
///
/// Implement it with `#[derive(CacheKey)]`: the derive checks at compile time
/// that every field is marked, that the tenant is present, and sorts the
/// criteria. A manual implementation must write the key format; the simplest
/// way is [`KeyBuilder::write_into`](crate::KeyBuilder::write_into).
pub trait CacheKey {
    /// What this type's keys are made of: namespace, operation, schema, tenant
    /// fields, criteria and skipped fields.
    const KEY_SCHEMA: KeySchema;

    /// Appends this query's key at `generation` to `out`, reusing its capacity:
    /// no allocation when `out` has room. On error, `out` is left unchanged.
    fn write_key(&self, generation: u64, out: &mut String) -> Result<(), KeyError>;

    /// Appends this query's tenant segment to `out` as its key writes it,
    /// without a hash tag's braces: each tenant value escaped, the parts of a
    /// compound tenant joined with `,`; nothing for a global key. An empty
    /// tenant value is [`KeyError::EmptyTenant`], as for the key; on error,
    /// `out` is left unchanged.
    ///
    /// Generation stores scope their counters by it, so a query's generation
    /// is always its own tenant's. The derive writes it directly; the default
    /// reads it back from the key at generation 0.
    ///
    /// # Panics
    ///
    /// The default panics when [`write_key`](Self::write_key) writes text
    /// that is not a key, a bug of that implementation.
    fn write_tenant(&self, out: &mut String) -> Result<(), KeyError> {
        let key = self.cache_key(0)?;
        let decoded = decode(key.as_str()).expect("a key this crate laid out decodes");
        for (i, part) in decoded.tenant().parts().iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            push_escaped(out, part);
        }
        Ok(())
    }

    /// Appends this query's key at `generation` with its criteria never
    /// summarized, for logs and debugging (see [`ReadableKey`]); `max_len`
    /// is not checked. The derive writes it; the default writes the key
    /// itself, summarized or not.
    fn write_readable_key(&self, generation: u64, out: &mut String) -> Result<(), KeyError> {
        self.write_key(generation, out)
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
