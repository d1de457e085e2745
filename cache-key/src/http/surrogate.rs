//! Surrogate keys (`Surrogate-Key`, `Cache-Tag`): the names a CDN purges a
//! `public` answer by, the same ones a bump's purge hook is given.
//!
//! A `public` answer (a global query's) carries its namespace (`library`),
//! its operation (`library/catalog`) and each of its global tags
//! (`library@book=42`): the scopes whose bump ends it. Every part is escaped
//! as in a key, so a key holds no space, comma, `/` or `@` of its own.

use std::fmt::Write as _;

use sha2::{Digest, Sha256};

use crate::generation::{CounterKind, GenerationScope};
use crate::tag::TagScope;
use cache_key_format::escape::push_escaped;

/// The longest surrogate key sent as it is (Next.js's limit for a tag,
/// the strictest of the CDNs': Fastly allows 1,024 bytes): a longer one is
/// sent as a digest, the same for the response and the purge.
pub const MAX_SURROGATE_KEY_LEN: usize = 256;
/// The most surrogate keys one answer carries (Next.js's 128 tags per
/// entry): an answer with more is sent `private`, never public with some
/// of its keys missing (a purge of a missing one would not reach it).
pub const MAX_SURROGATE_KEYS: usize = 128;
/// The longest `Surrogate-Key` or `Cache-Tag` header (Fastly's and
/// Cloudflare's 16 KiB): past it, the answer is sent `private`.
pub const MAX_SURROGATE_HEADER_LEN: usize = 16 * 1024;

/// The surrogate key a CDN purges when `scope` is bumped, or `None` for a
/// scope no `public` answer is in (a tenant's: tenant-scoped answers are
/// always `private`).
pub fn surrogate_key(scope: &GenerationScope) -> Option<String> {
    let counter = scope.counter();
    let mut key = String::new();
    push_escaped(&mut key, counter.namespace());
    match counter.kind() {
        CounterKind::Namespace => {}
        CounterKind::Operation if counter.tenant() == Some("") => {
            key.push('/');
            push_escaped(&mut key, counter.operation()?);
        }
        CounterKind::Tag => match counter.tag()? {
            (TagScope::Global, tag) => {
                key.push('@');
                key.push_str(tag);
            }
            (TagScope::Tenant, _) => return None,
        },
        _ => return None,
    }
    Some(bounded(key))
}

/// `key`, or its digest when longer than [`MAX_SURROGATE_KEY_LEN`].
fn bounded(key: String) -> String {
    if key.len() <= MAX_SURROGATE_KEY_LEN {
        return key;
    }
    let digest = Sha256::digest(key.as_bytes());
    let mut short = String::from("ck~");
    for byte in &digest[..16] {
        let _ = write!(short, "{byte:02x}");
    }
    short
}

/// The surrogate keys of one `public` answer, checked against the limits
/// as they are added.
#[derive(Debug, Default)]
pub(crate) struct SurrogateKeys {
    keys: Vec<String>,
    /// Space-separated length (`Surrogate-Key`; `Cache-Tag`'s commas are as long).
    len: usize,
}

impl SurrogateKeys {
    /// The namespace's and the operation's keys of a global query type.
    pub(crate) fn of_operation(namespace: &str, operation: &str) -> Self {
        let mut keys = SurrogateKeys::default();
        let mut key = String::new();
        push_escaped(&mut key, namespace);
        keys.push(key.clone());
        key.push('/');
        push_escaped(&mut key, operation);
        keys.push(bounded(key));
        keys
    }

    /// Adds a global tag's key (`tag`: its escaped `name=value`).
    pub(crate) fn push_tag(&mut self, namespace: &str, tag: &str) {
        let mut key = String::new();
        push_escaped(&mut key, namespace);
        key.push('@');
        key.push_str(tag);
        self.push(bounded(key));
    }

    fn push(&mut self, key: String) {
        self.len += key.len() + usize::from(!self.keys.is_empty());
        self.keys.push(key);
    }

    /// Whether the keys fit every CDN's limits.
    pub(crate) fn fit(&self) -> bool {
        self.keys.len() <= MAX_SURROGATE_KEYS && self.len <= MAX_SURROGATE_HEADER_LEN
    }

    /// The keys joined with `separator`.
    pub(crate) fn joined(&self, separator: &str) -> String {
        self.keys.join(separator)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_key_is_sent_as_its_digest() {
        let mut keys = SurrogateKeys::of_operation("library", "catalog");
        keys.push_tag("library", &format!("book={}", "9".repeat(300)));
        keys.push_tag("library", "book=42");
        let joined = keys.joined(" ");
        let parts: Vec<&str> = joined.split(' ').collect();
        assert_eq!(parts[0], "library");
        assert_eq!(parts[1], "library/catalog");
        assert!(
            parts[2].starts_with("ck~") && parts[2].len() == 35,
            "{joined}"
        );
        assert_eq!(parts[3], "library@book=42");
        assert!(keys.fit());
    }

    #[test]
    fn too_many_keys_do_not_fit() {
        let mut keys = SurrogateKeys::of_operation("library", "catalog");
        for id in 1..=MAX_SURROGATE_KEYS as u64 - 2 {
            keys.push_tag("library", &format!("book={id}"));
        }
        assert!(keys.fit());
        keys.push_tag("library", "book=0");
        assert!(!keys.fit());
    }
}
