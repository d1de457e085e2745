//! [`KeyDraft`]: a query's key written at generation 0, the counters its own
//! tenant segment (and its tags) name, and the generation spliced in once
//! they are read.
//! Every store and cache names its keys through it
//! ([`GenerationStore::write_key_for`](super::GenerationStore::write_key_for)
//! and the Redis read, which sends the counters and the value together).

use std::error::Error;
use std::fmt;
use std::ops::Range;

use super::counters::Counters;
use super::error::GenerationError;
use crate::cache_key::CacheKey;
use crate::error::KeyError;
use crate::number::digits;
use crate::schema::{KeySchema, Scope};
use crate::tag::Tags;

/// Where, in a caller's buffer, a query's key at generation 0 was written,
/// with where its generation digits and its tenant values are. It holds
/// offsets only; every method takes the buffer the key was written to.
///
/// The key is written once: a summary covers the criteria only, so
/// replacing the generation's digits keeps it right. A tagged query's tags
/// are written in the buffer past the key (so that reading them allocates
/// nothing), until [`finish`](Self::finish) takes them out.
#[derive(Debug, Clone)]
pub(crate) struct KeyDraft {
    /// Where the key starts in the buffer.
    start: usize,
    /// Where the generation's digits start, after `start`, and how many
    /// there are now.
    digits: usize,
    digit_count: usize,
    generation: u64,
    /// The tenant values (inside a hash tag's braces), from the end of the
    /// digits, so that a generation of another width leaves them in place.
    tenant: (usize, usize),
    marks: Landmarks,
    /// The query's tags, as [`Tags`] writes them, at the buffer's end: how
    /// many bytes and tags (none for most types).
    tags_len: usize,
    tag_count: usize,
}

impl KeyDraft {
    /// Appends `query`'s key at generation 0 to `out`; on error `out` is left
    /// unchanged.
    #[inline]
    pub(crate) fn write<Q: CacheKey + ?Sized>(
        query: &Q,
        out: &mut String,
    ) -> Result<Self, GenerationError> {
        let marks = const { Landmarks::of(&Q::KEY_SCHEMA) };
        let start = out.len();
        query.write_key(0, out)?;
        let Some((zero, tenant)) = marks.locate(&out[start..]) else {
            out.truncate(start);
            return Err(GenerationError::internal(NotAKey));
        };
        let (mut tags_len, mut tag_count) = (0, 0);
        if !Q::KEY_SCHEMA.tags().is_empty() {
            let key_end = out.len();
            let mut tags = Tags::appending_to(std::mem::take(out));
            let written = query.write_query_tags(&mut tags);
            tag_count = tags.len();
            // What `out` held went with the tags replaced: it is left empty.
            let Some(text) = tags.into_text(key_end) else {
                return Err(GenerationError::internal(ReplacedTags));
            };
            *out = text;
            if let Err(error) = written {
                out.truncate(start);
                return Err(error.into());
            }
            tags_len = out.len() - key_end;
        }
        let after = zero + 1;
        Ok(KeyDraft {
            start,
            digits: zero,
            digit_count: 1,
            generation: 0,
            tenant: (tenant.start - after, tenant.end - after),
            marks,
            tags_len,
            tag_count,
        })
    }

    /// The counters the key's own tenant segment names; `out` is the buffer
    /// the key was written to.
    #[inline]
    pub(crate) fn counters<'a>(&'a self, out: &'a str) -> Counters<'a> {
        let after = self.start + self.digits + self.digit_count;
        // Each tenant field writes one value, so no `,` needs counting (a
        // key with other values makes the store's count differ: an error).
        Counters::with_tenant_values(
            self.marks.namespace,
            self.marks
                .tenant_values
                .map(|_| &out[after + self.tenant.0..after + self.tenant.1]),
            self.marks.operation,
            self.marks.tenant_values.unwrap_or(0),
        )
        .with_tag_text(&out[out.len() - self.tags_len..], self.tag_count)
    }

    /// Writes `generation` in place of the current one; `max_len`, which
    /// `write_key` checked with one digit, is checked again.
    #[inline]
    pub(crate) fn set_generation(
        &mut self,
        out: &mut String,
        generation: u64,
    ) -> Result<(), GenerationError> {
        if generation == self.generation {
            return Ok(());
        }
        self.generation = generation;
        let at = self.start + self.digits;
        let mut buffer = itoa::Buffer::new();
        let text = digits(&mut buffer, generation);
        out.replace_range(at..at + self.digit_count, text);
        self.digit_count = text.len();
        self.check_len(out.len() - self.tags_len - self.start)
    }

    /// A key of `len` bytes against `max_len`, which `write_key` checked
    /// with one digit of generation.
    #[inline]
    fn check_len(&self, len: usize) -> Result<(), GenerationError> {
        match self.marks.max_len {
            Some(max) if len > max => Err(KeyError::TooLong { len, max }.into()),
            _ => Ok(()),
        }
    }

    /// The key in `out`, as it stands.
    #[inline]
    #[cfg(feature = "redis")]
    pub(crate) fn key<'a>(&self, out: &'a str) -> &'a str {
        &out[self.start..out.len() - self.tags_len]
    }

    /// The query's tags' text in `out`, as [`Tags`] writes them.
    #[inline]
    #[cfg(feature = "redis")]
    pub(crate) fn tags_text<'a>(&self, out: &'a str) -> &'a str {
        &out[out.len() - self.tags_len..]
    }

    /// Leaves the key alone at the end of `out`: its tags taken out.
    #[inline]
    pub(crate) fn finish(self, out: &mut String) {
        out.truncate(out.len() - self.tags_len);
    }

    /// Takes the key out of `out` again.
    #[inline]
    pub(crate) fn discard(self, out: &mut String) {
        out.truncate(self.start);
    }
}

/// Where a key of one query type puts its generation and tenant, made at
/// compile time from the type's schema.
#[derive(Debug, Clone, Copy)]
struct Landmarks {
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

impl Landmarks {
    const fn of(schema: &KeySchema) -> Self {
        let mut schema_digits = 1;
        let mut rest = schema.schema() / 10;
        while rest > 0 {
            schema_digits += 1;
            rest /= 10;
        }
        Landmarks {
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
    fn locate(&self, key: &str) -> Option<(usize, Range<usize>)> {
        use cache_key_format::{
            GENERATION, HASH_TAG_CLOSE, HASH_TAG_OPEN, SCHEMA, SEPARATOR, TENANT,
        };
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

/// `write_query_tags` replaced the tags it was lent (which follow the key
/// being written) instead of adding to them: a bug of that implementation.
#[derive(Debug)]
struct ReplacedTags;

impl fmt::Display for ReplacedTags {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(
            "the query's write_query_tags replaced the tags it was given instead of adding to them",
        )
    }
}

impl Error for ReplacedTags {}

/// A query's counters, owned: its key written once, for a caller that
/// holds them across an `await` or several calls.
#[derive(Debug)]
#[cfg_attr(not(any(feature = "moka", feature = "redis")), allow(dead_code))]
pub(crate) struct QueryCounters {
    out: String,
    draft: KeyDraft,
}

#[cfg_attr(not(any(feature = "moka", feature = "redis")), allow(dead_code))]
impl QueryCounters {
    pub(crate) fn of<Q: CacheKey + ?Sized>(query: &Q) -> Result<Self, GenerationError> {
        let mut out = String::with_capacity(128);
        let draft = KeyDraft::write(query, &mut out)?;
        Ok(QueryCounters { out, draft })
    }

    pub(crate) fn counters(&self) -> Counters<'_> {
        self.draft.counters(&self.out)
    }
}
