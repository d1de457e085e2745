//! Strong entity tags from a key at its generation, and `If-None-Match`.

use std::fmt::Write as _;

use http::HeaderMap;
use http::header::{IF_NONE_MATCH, ToStrError};
use sha2::{Digest, Sha256};

/// What an `ETag` of this crate is a digest of, besides the key: the
/// version of this encoding, so a change of the body's encoding makes
/// every tag new.
const DOMAIN: &[u8] = b"cache-key/http/json/1\0";

/// A strong entity tag: `"` and 32 hex digits (128 bits of SHA-256) `"`.
///
/// Made from the query's key at its current generation, which names the
/// tenant, every criterion and, through the generation, every counter the
/// answer depends on (namespace, tenant, operation, the query's tags): the
/// tag changes when any of them is bumped, never otherwise. The key itself
/// is not shown (it holds the tenant and the criteria); only its digest.
#[derive(Clone, PartialEq, Eq)]
pub struct ETag(String);

impl ETag {
    /// The tag of `value_id`'s answer named by `key`, plus `extra` bytes (a
    /// body, for an answer whose tags are known only from its value).
    pub(crate) fn of(value_id: &str, key: &str, extra: &[u8]) -> Self {
        let mut digest = Sha256::new();
        digest.update(DOMAIN);
        digest.update(value_id.as_bytes());
        digest.update(b"\0");
        digest.update(key.as_bytes());
        digest.update(b"\0");
        digest.update(extra);
        let digest = digest.finalize();
        let mut text = String::with_capacity(34);
        text.push('"');
        for byte in &digest[..16] {
            // Writing to a String cannot fail.
            let _ = write!(text, "{byte:02x}");
        }
        text.push('"');
        ETag(text)
    }

    /// The header value, quotes included.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether a request with `headers` already holds this representation,
    /// which exists: its `If-None-Match` lists this tag (weak comparison, as
    /// RFC 9110 §13.1.2 asks: `W/"x"` matches `"x"`) or is `*` (any current
    /// representation). A header that is not text matches nothing.
    pub fn matches(&self, headers: &HeaderMap) -> bool {
        self.found_in(headers, true)
    }

    /// Whether `headers`' `If-None-Match` lists this tag itself: what a
    /// `304` may be answered on before the answer is known to exist (`*`
    /// would match a query whose origin fails).
    pub(crate) fn listed(&self, headers: &HeaderMap) -> bool {
        self.found_in(headers, false)
    }

    fn found_in(&self, headers: &HeaderMap, star: bool) -> bool {
        headers
            .get_all(IF_NONE_MATCH)
            .iter()
            .any(|value| match value.to_str() {
                Ok(text) => self.listed_in(text, star),
                Err(ToStrError { .. }) => false,
            })
    }

    /// Whether the list `text` (`"a", W/"b"` or `*`) holds this tag (`*`
    /// too, with `star`).
    fn listed_in(&self, text: &str, star: bool) -> bool {
        text.split(',').map(str::trim).any(|candidate| {
            (star && candidate == "*")
                || candidate.strip_prefix("W/").unwrap_or(candidate) == self.0
        })
    }
}

impl std::fmt::Debug for ETag {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn request(if_none_match: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(IF_NONE_MATCH, HeaderValue::from_str(if_none_match).unwrap());
        headers
    }

    #[test]
    fn a_tag_is_a_digest_of_the_value_id_and_the_key() {
        let tag = ETag::of("Vec<Book>", "library:s1:g4:t2:search:title=Sand", b"");
        assert_eq!(tag.as_str().len(), 34);
        assert!(!tag.as_str().contains("library"));
        assert_ne!(
            tag,
            ETag::of("Vec<Book>", "library:s1:g5:t2:search:title=Sand", b"")
        );
        assert_ne!(
            tag,
            ETag::of("Book", "library:s1:g4:t2:search:title=Sand", b"")
        );
        assert_ne!(
            tag,
            ETag::of("Vec<Book>", "library:s1:g4:t2:search:title=Sand", b"x")
        );
    }

    #[test]
    fn if_none_match_is_a_list_compared_weakly() {
        let tag = ETag::of("u64", "k", b"");
        let own = tag.as_str();
        assert!(tag.matches(&request(own)));
        assert!(tag.matches(&request(&format!("\"other\", W/{own}"))));
        assert!(tag.matches(&request("*")));
        assert!(!tag.listed(&request("*")));
        assert!(tag.listed(&request(&format!("\"other\", W/{own}"))));
        assert!(!tag.matches(&request("\"other\"")));
        assert!(!tag.matches(&request(own.trim_matches('"'))));
        assert!(!tag.matches(&HeaderMap::new()));
    }
}
