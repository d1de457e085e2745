//! The envelope a value is stored in outside the process: enough beside the
//! value to check on read that it is this query's answer, of this value
//! type, under this schema.
//!
//! ```text
//! {"v":4,"schema":1,"type":"Vec<String>",
//!  "query":"<64 hex digits>","fresh":1796212800000,"value":["Dune"]}
//! {"v":4,"schema":1,"type":"Vec<Book>","query":"<64 hex digits>",
//!  "fresh":1796212800000,"tags":["#book=42","@author=borges"],
//!  "since":[218937600000000,218937600000000],"value":[...]}
//! ```
//!
//! JSON (serde_json): readable in `redis-cli`, and a value that does not
//! decode is an error value, never a panic. `type` is the query's declared
//! [`CachedQuery::VALUE_ID`](crate::cache::CachedQuery::VALUE_ID), the same
//! in every build: a value type moved or renamed under the same id keeps its
//! entries, a changed id leaves them behind. `query` is the SHA-256 (hex) of
//! the readable key
//! ([`CacheKey::write_readable_key`](crate::CacheKey::write_readable_key)),
//! criteria never summarized: another query's entry copied onto the key is
//! caught, and a summarized key's collision too, while criteria the key
//! summarizes (an e-mail address, a name) are written nowhere in Redis, its
//! files, replicas or `MONITOR`. `fresh` is when the value stops being
//! fresh, in milliseconds since 1970 (UTC): an entry kept past it (a cache
//! with fail-safe keeps entries longer than their TTL) is only served when
//! the origin fails. `tags` and `since`, together or not at all, are an
//! answer's tags from its value ([`TagStamp`]: each `#name=value` inside
//! the tenant or `@name=value` of every tenant, as [`Tags`] writes them)
//! and when its fill started on the tag clock of the tenant's and of the
//! namespace's tags: a reader serves the entry only while every tag's
//! counter is below its scope's `since` (WIRE-FORMAT.md, "Tags"). Why JSON
//! rather than a smaller binary format, with the measurements:
//! BENCHMARKS.md, "Redis values".
//!
//! [`RedisCache`](super::RedisCache) writes and checks entries with
//! [`encode`] and [`decode`]; they are public so that another writer (a
//! migration, a service in another language following this layout) can
//! produce entries the caches accept, and a reader can check them the same
//! way.

use std::borrow::Cow;
use std::error::Error;
use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::query_digest::query_digest;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::finite::{self, NonFinite};
use crate::cache::RejectReason;
use crate::tag::{TagClock, TagStamp, Tags};

/// The envelope format this crate writes and reads (the `v` field). Version
/// 1 held the readable key itself, version 2 `std::any::type_name` of the
/// value type in `type` (which std promises neither stable nor unique),
/// version 3 had no tags (a reader of it would serve a tagged entry after
/// its tag was bumped); their entries are read as another version, a miss.
pub const VERSION: u32 = 4;

/// What an entry must match to be served: the query's key schema, the
/// value id and the digest of the query's readable key; and the query's own
/// tags, which an entry records (`qtags`) but a read does not check (the
/// key's generation holds their counters).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Expected<'a> {
    schema: u32,
    value_id: &'a str,
    query: [u8; 64],
    /// The query's tags' text, as [`Tags::as_str`] writes it (`None` for
    /// none).
    query_tags: Option<&'a str>,
}

impl<'a> Expected<'a> {
    /// An entry under key schema `schema`, of the value identified by
    /// `value_id` (the caches use the query's
    /// [`CachedQuery::VALUE_ID`](crate::cache::CachedQuery::VALUE_ID)), for
    /// the query whose readable key is `readable_key`.
    pub fn new(schema: u32, value_id: &'a str, readable_key: &str) -> Self {
        Expected {
            schema,
            value_id,
            query: query_digest(readable_key),
            query_tags: None,
        }
    }

    /// The same, for a query tagged with `tags` (its criteria's tags, as
    /// [`CacheKey::write_query_tags`](crate::CacheKey::write_query_tags)
    /// writes them): [`encode`] records them in the entry as `qtags`, so
    /// that a sweep can tell the counters the key's generation was made of.
    /// Empty tags are not recorded.
    pub fn with_query_tags(self, tags: &'a Tags) -> Self {
        self.with_query_tag_text(tags.as_str())
    }

    /// [`with_query_tags`](Self::with_query_tags) from their text, as
    /// [`Tags::as_str`] writes it.
    pub(crate) fn with_query_tag_text(mut self, text: &'a str) -> Self {
        self.query_tags = (!text.is_empty()).then_some(text);
        self
    }

    /// The SHA-256 of the readable key, in lowercase hex: the `query` field.
    pub fn query_digest(&self) -> &str {
        std::str::from_utf8(&self.query).expect("hex digits are ASCII")
    }
}

/// A value read from an envelope, until when it is fresh, and its tags.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Decoded<T> {
    /// The value.
    pub value: T,
    /// When the value stops being fresh.
    pub fresh_until: SystemTime,
    /// The value's tags and when its fill started: serve it only while none
    /// was bumped since. `None` for a value without tags.
    pub tags: Option<TagStamp>,
}

/// Milliseconds since 1970 for `time` (0 before it, `u64::MAX` past it).
fn millis(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH).map_or(0, |since| {
        u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
    })
}

/// Why a value could not be put in an envelope.
#[derive(Debug)]
pub struct EncodeError(EncodeRepr);

#[derive(Debug)]
enum EncodeRepr {
    NonFinite(NonFinite),
    Json(serde_json::Error),
}

impl fmt::Display for EncodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // What is wrong with the value is the source.
        f.write_str("the value cannot be cached as JSON")
    }
}

impl Error for EncodeError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match &self.0 {
            EncodeRepr::NonFinite(found) => Some(found),
            EncodeRepr::Json(error) => Some(error),
        }
    }
}

#[derive(Serialize)]
struct Write<'a, T> {
    v: u32,
    schema: u32,
    #[serde(rename = "type")]
    value_id: &'a str,
    query: &'a str,
    fresh: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    qtags: Option<Vec<&'a str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tags: Option<Vec<&'a str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    since: Option<[u64; 2]>,
    value: &'a T,
}

/// The header, read first; every field but `v` optional so that another
/// version's header is reported as a version, not as undecodable bytes.
#[derive(Deserialize)]
struct Header<'a> {
    v: u32,
    schema: Option<u32>,
    #[serde(rename = "type", borrow)]
    value_id: Option<Cow<'a, str>>,
    #[serde(borrow)]
    query: Option<Cow<'a, str>>,
}

/// A whole envelope, read in one pass on the way to a hit.
#[derive(Deserialize)]
struct Entry<'a, T> {
    v: u32,
    schema: u32,
    #[serde(rename = "type", borrow)]
    value_id: Cow<'a, str>,
    #[serde(borrow)]
    query: Cow<'a, str>,
    fresh: u64,
    #[serde(borrow, default)]
    tags: Option<Vec<Cow<'a, str>>>,
    #[serde(default)]
    since: Option<[u64; 2]>,
    value: T,
}

/// `value` in an envelope for `expected`, fresh until `fresh_until`, with
/// its `tags` if it has any: the bytes the caches store.
///
/// Refused: a value holding a NaN or infinite float (JSON would write
/// `null`, which reads back as another value or not at all, so the entry
/// would miss on every read), and whatever serde_json refuses (a map whose
/// keys are not strings, say).
pub fn encode<T: Serialize>(
    expected: &Expected<'_>,
    value: &T,
    fresh_until: SystemTime,
    tags: Option<&TagStamp>,
) -> Result<Vec<u8>, EncodeError> {
    finite::check(value).map_err(|found| EncodeError(EncodeRepr::NonFinite(found)))?;
    let tags = tags.filter(|stamp| !stamp.tags.is_empty());
    serde_json::to_vec(&Write {
        v: VERSION,
        schema: expected.schema,
        value_id: expected.value_id,
        query: expected.query_digest(),
        fresh: millis(fresh_until),
        qtags: expected.query_tags.map(|tags| tags.lines().collect()),
        tags: tags.map(|stamp| stamp.tags.as_str().lines().collect()),
        since: tags.map(|stamp| [stamp.since.tenant, stamp.since.global]),
        value,
    })
    .map_err(|error| EncodeError(EncodeRepr::Json(error)))
}

/// The value in `bytes` if the envelope matches `expected`, otherwise why
/// not: an envelope of another [`VERSION`], schema, value id or query, or
/// bytes that are not an envelope, hold a value that does not deserialize
/// as `T` or tags that do not read as [`Tags`] (or `tags` without `since`)
/// ([`RejectReason::Undecodable`]). Never panics.
pub fn decode<T: DeserializeOwned>(
    bytes: &[u8],
    expected: &Expected<'_>,
) -> Result<Decoded<T>, RejectReason> {
    match read_as_written(bytes, expected) {
        Some(decoded) => Ok(decoded),
        None => decode_walked(bytes, expected),
    }
}

/// [`decode`] by serde's walk of the whole envelope: fields in any order,
/// escapes, whitespace, unknown fields, and every reason a header is refused.
fn decode_walked<T: DeserializeOwned>(
    bytes: &[u8],
    expected: &Expected<'_>,
) -> Result<Decoded<T>, RejectReason> {
    // One pass when the entry is whole; only an entry that does not read
    // as one is read again, header only, to say why.
    match serde_json::from_slice::<Entry<'_, T>>(bytes) {
        Ok(entry) => {
            check(
                entry.v,
                Some(entry.schema),
                Some(&entry.value_id),
                Some(&entry.query),
                expected,
            )?;
            Ok(Decoded {
                value: entry.value,
                fresh_until: UNIX_EPOCH + Duration::from_millis(entry.fresh),
                tags: stamp(entry.tags, entry.since)?,
            })
        }
        Err(_) => {
            let header: Header<'_> =
                serde_json::from_slice(bytes).map_err(|_| RejectReason::Undecodable)?;
            check(
                header.v,
                header.schema,
                header.value_id.as_deref(),
                header.query.as_deref(),
                expected,
            )?;
            // A matching header around a value that is not a `T`.
            Err(RejectReason::Undecodable)
        }
    }
}

/// A hit read without serde's walk of the header: the envelope exactly as
/// [`encode`] lays it out (its fields in its order, no whitespace, no escape
/// in a string, numbers in their shortest form), every field matching
/// `expected`, the tags well formed and the value, the bytes between
/// `"value":` and the closing brace, a `T`. `None` for anything else, which
/// [`decode_walked`] then reads: this accepts only bytes the walk reads as
/// the same hit, so a miss and its reason are always the walk's. The one
/// exception reads here and not there: a value nested exactly 127 deep,
/// which the writer writes and serde_json's recursion limit refuses one
/// level inside the envelope's object.
fn read_as_written<T: DeserializeOwned>(
    bytes: &[u8],
    expected: &Expected<'_>,
) -> Option<Decoded<T>> {
    let mut at = Fields { bytes, at: 0 };
    at.literal(b"{\"v\":")?;
    (at.number()? == u64::from(VERSION)).then_some(())?;
    at.literal(b",\"schema\":")?;
    (at.number()? == u64::from(expected.schema)).then_some(())?;
    at.literal(b",\"type\":")?;
    let id = expected.value_id.as_bytes();
    id.iter().all(|&byte| is_plain(byte)).then_some(())?;
    at.quoted(id)?;
    at.literal(b",\"query\":")?;
    // Hex digits: plain.
    at.quoted(&expected.query)?;
    at.literal(b",\"fresh\":")?;
    let fresh = at.number()?;
    if at.literal(b",\"qtags\":").is_some() {
        at.strings()?;
    }
    let (mut tags, mut since) = (None, None);
    if at.literal(b",\"tags\":").is_some() {
        tags = Some(at.strings()?);
        at.literal(b",\"since\":[")?;
        let tenant = at.number()?;
        at.literal(b",")?;
        since = Some([tenant, at.number()?]);
        at.literal(b"]")?;
    }
    at.literal(b",\"value\":")?;
    let value = bytes.get(at.at..bytes.len().checked_sub(1)?)?;
    (bytes.last() == Some(&b'}')).then_some(())?;
    let tags = stamp(tags, since).ok()?;
    Some(Decoded {
        value: serde_json::from_slice(value).ok()?,
        fresh_until: UNIX_EPOCH + Duration::from_millis(fresh),
        tags,
    })
}

/// The envelope's bytes from `at`, read as [`encode`] writes its fields.
struct Fields<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Fields<'a> {
    /// Steps over `text`, if it is next.
    fn literal(&mut self, text: &[u8]) -> Option<()> {
        let end = self.at.checked_add(text.len())?;
        (self.bytes.get(self.at..end)? == text).then(|| self.at = end)
    }

    /// An unsigned integer as JSON writes it (no leading zero, no sign, no
    /// fraction or exponent: the next byte is checked by the caller's
    /// literal), if it fits in a `u64`.
    fn number(&mut self) -> Option<u64> {
        let digits = self.bytes[self.at..]
            .iter()
            .take_while(|byte| byte.is_ascii_digit())
            .count();
        let text = &self.bytes[self.at..self.at + digits];
        if digits == 0 || (digits > 1 && text[0] == b'0') {
            return None;
        }
        let mut value = 0u64;
        for &digit in text {
            value = value
                .checked_mul(10)?
                .checked_add(u64::from(digit - b'0'))?;
        }
        self.at += digits;
        Some(value)
    }

    /// Steps over the string `text`, if it is next; `text` must be
    /// [plain](is_plain), so that JSON writes it as its bytes between quotes.
    fn quoted(&mut self, text: &[u8]) -> Option<()> {
        self.literal(b"\"")?;
        self.literal(text)?;
        self.literal(b"\"")
    }

    /// A string without escapes or control characters, its bytes between
    /// the quotes: what it decodes to (UTF-8 is checked by whoever keeps it).
    fn string(&mut self) -> Option<&'a [u8]> {
        self.literal(b"\"")?;
        let rest = &self.bytes[self.at..];
        let len = rest.iter().position(|&byte| !is_plain(byte))?;
        (rest[len] == b'"').then_some(())?;
        self.at += len + 1;
        Some(&rest[..len])
    }

    /// An array of such strings, each valid UTF-8.
    fn strings(&mut self) -> Option<Vec<Cow<'a, str>>> {
        self.literal(b"[")?;
        let mut strings = Vec::new();
        if self.literal(b"]").is_some() {
            return Some(strings);
        }
        loop {
            strings.push(Cow::Borrowed(std::str::from_utf8(self.string()?).ok()?));
            if self.literal(b"]").is_some() {
                return Some(strings);
            }
            self.literal(b",")?;
        }
    }
}

/// Whether JSON writes `byte` inside a string as itself: not a quote, a
/// backslash or a control character.
fn is_plain(byte: u8) -> bool {
    byte != b'"' && byte != b'\\' && byte >= 0x20
}

/// An entry's tags, as a sweep reads them from its first bytes.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct EntryTags {
    /// The query's tags (`qtags`): counters its key's generation holds.
    pub(crate) query: Option<Tags>,
    /// The value's tags, and since when (`tags`, `since`).
    pub(crate) value: Option<TagStamp>,
}

/// What an entry's first bytes say of its tags, for the sweep.
#[derive(Debug)]
pub(crate) enum HeaderTags {
    /// An envelope of this version: its tags, if it has any.
    Found(EntryTags),
    /// The header runs past the bytes read: read the whole entry.
    Truncated,
    /// Not an envelope of this version, or one whose header does not read.
    Foreign,
}

/// The tags of the entry whose first bytes are `prefix` (`whole` when they
/// are all of it), read from the fields before `value`, where this crate and
/// the ports write them; tags written after the value read as none here (a
/// sweep leaves such an entry to its TTL; a read still checks it).
pub(crate) fn header_tags(prefix: &[u8], whole: bool) -> HeaderTags {
    #[derive(Deserialize)]
    struct TagsHeader<'a> {
        v: u32,
        #[serde(borrow, default)]
        qtags: Option<Vec<Cow<'a, str>>>,
        #[serde(borrow, default)]
        tags: Option<Vec<Cow<'a, str>>>,
        #[serde(default)]
        since: Option<[u64; 2]>,
    }
    // A quote inside a JSON string is escaped, so `,"value":` is a field.
    const VALUE: &[u8] = b",\"value\":";
    let Some(at) = prefix
        .windows(VALUE.len())
        .position(|window| window == VALUE)
    else {
        return if whole {
            HeaderTags::Foreign
        } else {
            HeaderTags::Truncated
        };
    };
    let mut header = Vec::with_capacity(at + 1);
    header.extend_from_slice(&prefix[..at]);
    header.push(b'}');
    let Ok(header) = serde_json::from_slice::<TagsHeader<'_>>(&header) else {
        return HeaderTags::Foreign;
    };
    if header.v != VERSION {
        return HeaderTags::Foreign;
    }
    let query = match header.qtags {
        None => None,
        Some(lines) => match tags_of(&lines) {
            Some(tags) => Some(tags),
            None => return HeaderTags::Foreign,
        },
    };
    match stamp(header.tags, header.since) {
        Ok(value) => HeaderTags::Found(EntryTags { query, value }),
        Err(_) => HeaderTags::Foreign,
    }
}

/// `lines` as [`Tags`], if each reads as one.
fn tags_of(lines: &[Cow<'_, str>]) -> Option<Tags> {
    let mut text = String::with_capacity(lines.iter().map(|tag| tag.len() + 1).sum());
    for tag in lines {
        if tag.contains('\n') {
            return None;
        }
        text.push_str(tag);
        text.push('\n');
    }
    Tags::parse(&text)
}

/// An envelope's `tags` and `since`: both or neither, the tags as [`Tags`]
/// writes them (one each, with its scope's mark).
fn stamp(
    tags: Option<Vec<Cow<'_, str>>>,
    since: Option<[u64; 2]>,
) -> Result<Option<TagStamp>, RejectReason> {
    let (tags, [tenant, global]) = match (tags, since) {
        (None, None) => return Ok(None),
        (Some(tags), Some(since)) => (tags, since),
        _ => return Err(RejectReason::Undecodable),
    };
    let tags = tags_of(&tags).ok_or(RejectReason::Undecodable)?;
    Ok(Some(TagStamp {
        tags,
        since: TagClock { tenant, global },
    }))
}

/// Why a header does not match `expected`, checked in this order: the
/// version first (another version's header may differ in anything else).
fn check(
    v: u32,
    schema: Option<u32>,
    value_id: Option<&str>,
    query: Option<&str>,
    expected: &Expected<'_>,
) -> Result<(), RejectReason> {
    if v != VERSION {
        return Err(RejectReason::Version);
    }
    let (Some(schema), Some(value_id), Some(query)) = (schema, value_id, query) else {
        return Err(RejectReason::Undecodable);
    };
    if schema != expected.schema {
        return Err(RejectReason::Schema);
    }
    if value_id != expected.value_id {
        return Err(RejectReason::ValueType);
    }
    if query != expected.query_digest() {
        return Err(RejectReason::Query);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use sha2::{Digest, Sha256};

    const QUERY: &str = "library:s1:g1:t1:count";

    fn expected() -> Expected<'static> {
        Expected::new(1, "u64", QUERY)
    }

    /// A time a test's entries are fresh until, whole milliseconds.
    const FRESH: Duration = Duration::from_millis(1_796_212_800_000);

    fn encode<T: Serialize>(expected: &Expected<'_>, value: &T) -> Result<Vec<u8>, EncodeError> {
        super::encode(expected, value, UNIX_EPOCH + FRESH, None)
    }

    fn decode<T: DeserializeOwned>(
        bytes: &[u8],
        expected: &Expected<'_>,
    ) -> Result<T, RejectReason> {
        let decoded = super::decode(bytes, expected)?;
        assert_eq!(decoded.fresh_until, UNIX_EPOCH + FRESH);
        Ok(decoded.value)
    }

    #[test]
    fn a_value_round_trips_and_every_mismatch_has_its_reason() {
        let bytes = encode(&expected(), &7u64).unwrap();
        assert_eq!(decode::<u64>(&bytes, &expected()), Ok(7));
        let cases = [
            (Expected::new(2, "u64", QUERY), RejectReason::Schema),
            (Expected::new(1, "u32", QUERY), RejectReason::ValueType),
            (
                Expected::new(1, "u64", "library:s1:g2:t1:count"),
                RejectReason::Query,
            ),
        ];
        for (expected, reason) in cases {
            assert_eq!(decode::<u64>(&bytes, &expected), Err(reason));
        }
        assert_eq!(
            decode::<String>(&bytes, &expected()),
            Err(RejectReason::Undecodable)
        );
        assert_eq!(
            decode::<u64>(b"\xff{", &expected()),
            Err(RejectReason::Undecodable)
        );
        assert_eq!(
            decode::<u64>(br#"{"v":5}"#, &expected()),
            Err(RejectReason::Version)
        );
        assert_eq!(
            decode::<u64>(br#"{"v":4}"#, &expected()),
            Err(RejectReason::Undecodable)
        );
    }

    #[test]
    fn the_envelope_holds_the_digest_of_the_readable_key_never_its_text() {
        let readable = "crm:s1:g7:t7:lookup:contact=jane.doe%40example.com&text=Jane%20Doe";
        let expected = Expected::new(1, "u64", readable);
        let text = String::from_utf8(encode(&expected, &7u64).unwrap()).unwrap();
        assert!(!text.contains("jane"), "{text}");
        let digest: String = Sha256::digest(readable.as_bytes())
            .iter()
            .map(|byte| format!("{byte:02x}"))
            .collect();
        assert_eq!(expected.query_digest(), digest);
        assert_eq!(
            text,
            format!(
                r#"{{"v":4,"schema":1,"type":"u64","query":"{digest}","fresh":1796212800000,"value":7}}"#
            )
        );
    }

    #[test]
    fn a_version_1_entry_is_another_version() {
        let version_1 = format!(r#"{{"v":1,"schema":1,"type":"u64","query":"{QUERY}","value":7}}"#);
        assert_eq!(
            decode::<u64>(version_1.as_bytes(), &expected()),
            Err(RejectReason::Version)
        );
    }

    #[test]
    fn a_version_2_entry_is_another_version_even_with_this_value_id() {
        // Version 2 wrote `type_name` in `type`; an entry whose `type` happens
        // to equal the id, and whose every other field matches, still misses.
        let digest = expected().query_digest().to_owned();
        for value_type in ["u64", "alloc::vec::Vec<u64>"] {
            let version_2 = format!(
                r#"{{"v":2,"schema":1,"type":"{value_type}","query":"{digest}","fresh":1796212800000,"value":7}}"#
            );
            assert_eq!(
                decode::<u64>(version_2.as_bytes(), &expected()),
                Err(RejectReason::Version)
            );
        }
    }

    #[test]
    fn a_header_mismatch_is_reported_also_around_a_value_that_does_not_decode() {
        let other_schema = Expected::new(2, "u64", QUERY);
        let bytes = encode(&other_schema, &7u64).unwrap();
        assert_eq!(
            decode::<String>(&bytes, &expected()),
            Err(RejectReason::Schema)
        );
        let version_5 = br#"{"v":5,"schema":1,"type":"u64","query":"q","value":7}"#;
        assert_eq!(
            decode::<u64>(version_5, &expected()),
            Err(RejectReason::Version)
        );
        // Fields in any order, unknown fields ignored, as serde_json reads.
        let digest = expected().query_digest().to_owned();
        let reordered = format!(
            r#"{{"value":7,"query":"{digest}","fresh":1796212800000,"x":0,"type":"u64","schema":1,"v":4}}"#
        );
        assert_eq!(decode::<u64>(reordered.as_bytes(), &expected()), Ok(7));
    }

    /// `#book=42` and `@author=j%20l`.
    fn two_tags() -> Tags {
        let mut tags = Tags::new();
        tags.push(crate::TagScope::Tenant, "book", "id", &42u64)
            .unwrap();
        tags.push(crate::TagScope::Global, "author", "a", &"j l")
            .unwrap();
        tags
    }

    #[test]
    fn tags_round_trip_and_tags_that_do_not_read_back_are_undecodable() {
        let stamp = TagStamp {
            tags: two_tags(),
            since: TagClock {
                tenant: 218_937_600_000_000,
                global: 218_937_600_000_001,
            },
        };
        let bytes = super::encode(&expected(), &7u64, UNIX_EPOCH + FRESH, Some(&stamp)).unwrap();
        let text = std::str::from_utf8(&bytes).unwrap();
        let written =
            r##""tags":["#book=42","@author=j%20l"],"since":[218937600000000,218937600000001]"##;
        assert!(text.contains(written), "{text}");
        let decoded = super::decode::<u64>(&bytes, &expected()).unwrap();
        assert_eq!(decoded.tags, Some(stamp.clone()));

        let digest = expected().query_digest().to_owned();
        let with = |fields: &str| {
            format!(
                r#"{{"v":4,"schema":1,"type":"u64","query":"{digest}","fresh":1,{fields}"value":7}}"#
            )
        };
        for broken in [
            r##""tags":["#book=42"],"##,
            r##""since":[1,2],"##,
            r##""tags":["book=42"],"since":[1,2],"##,
            r##""tags":["#book=4\n#x=1"],"since":[1,2],"##,
            r##""tags":["#bo ok=42"],"since":[1,2],"##,
            r##""tags":"#book=42","since":[1,2],"##,
            r##""tags":["#book=42"],"since":[1],"##,
        ] {
            assert_eq!(
                super::decode::<u64>(with(broken).as_bytes(), &expected()).map(|d| d.value),
                Err(RejectReason::Undecodable),
                "{broken}"
            );
        }
        let untagged = super::decode::<u64>(with("").as_bytes(), &expected()).unwrap();
        assert_eq!(untagged.tags, None);
    }

    #[test]
    fn the_header_gives_the_tags_from_the_first_bytes_or_asks_for_more() {
        let mut tags = Tags::new();
        tags.push(crate::TagScope::Tenant, "book", "id", &42u64)
            .unwrap();
        let stamp = TagStamp {
            tags,
            since: TagClock {
                tenant: 5,
                global: 6,
            },
        };
        let value = vec!["Dune \",\"value\":"; 50];
        let bytes = super::encode(&expected(), &value, UNIX_EPOCH + FRESH, Some(&stamp)).unwrap();
        let header_end = bytes.windows(9).position(|w| w == b",\"value\":").unwrap();
        let found = |prefix: &[u8], whole| match header_tags(prefix, whole) {
            HeaderTags::Found(tags) => Some(tags.value),
            _ => None,
        };
        assert_eq!(found(&bytes, true), Some(Some(stamp.clone())));
        assert_eq!(found(&bytes[..header_end + 9], false), Some(Some(stamp)));
        assert!(matches!(
            header_tags(&bytes[..header_end], false),
            HeaderTags::Truncated
        ));
        let untagged = super::encode(&expected(), &value, UNIX_EPOCH + FRESH, None).unwrap();
        assert_eq!(found(&untagged[..200], false), Some(None));

        // A query's own tags are recorded for the sweep; a read ignores them.
        let mut query_tags = Tags::new();
        query_tags
            .push(crate::TagScope::Global, "shop", "s", &7u64)
            .unwrap();
        let tagged_query = expected().with_query_tags(&query_tags);
        let bytes = super::encode(&tagged_query, &1u8, UNIX_EPOCH + FRESH, None).unwrap();
        let text = std::str::from_utf8(&bytes).unwrap();
        assert!(text.contains(r#","qtags":["@shop=7"],"value":1"#), "{text}");
        match header_tags(&bytes, true) {
            HeaderTags::Found(tags) => assert_eq!(
                tags,
                EntryTags {
                    query: Some(query_tags.clone()),
                    value: None
                }
            ),
            other => panic!("{other:?}"),
        }
        assert_eq!(super::decode::<u8>(&bytes, &expected()).unwrap().value, 1);
        let empty = Tags::new();
        assert_eq!(expected().with_query_tags(&empty), expected());
        for foreign in [
            &br##"{"v":5,"tags":["#x=1"],"since":[1,2],"value":1}"##[..],
            br##"{"v":4,"tags":["#x=1"],"value":1}"##,
            br#"[1,2,3]"#,
            b"\xff\xfe",
            b"",
        ] {
            assert!(
                matches!(header_tags(foreign, true), HeaderTags::Foreign),
                "{:?}",
                String::from_utf8_lossy(foreign)
            );
        }
    }

    #[test]
    fn what_encode_writes_is_read_without_the_walk_and_as_the_walk_reads_it() {
        let tags = two_tags();
        let stamp = TagStamp {
            tags: tags.clone(),
            since: TagClock {
                tenant: 218_937_600_000_000,
                global: 7,
            },
        };
        let expected = Expected::new(3, "Vec<String>", QUERY);
        let value = vec!["Dune".to_owned(), "\"quoted\",\"value\":}".to_owned()];
        for (expected, stamp) in [
            (expected, None),
            (expected, Some(&stamp)),
            (expected.with_query_tags(&tags), None),
            (expected.with_query_tags(&tags), Some(&stamp)),
        ] {
            let bytes = super::encode(&expected, &value, UNIX_EPOCH + FRESH, stamp).unwrap();
            let text = String::from_utf8_lossy(&bytes);
            let fast = read_as_written::<Vec<String>>(&bytes, &expected).expect(&text);
            assert_eq!(fast.tags.as_ref(), stamp, "{text}");
            assert_eq!(Ok(fast), decode_walked(&bytes, &expected), "{text}");
        }
        // An id JSON escapes is left to the walk, which reads it.
        let escaped = Expected::new(1, "Map<\"k\\\t\", u64>", QUERY);
        let bytes = encode(&escaped, &7u64).unwrap();
        assert!(read_as_written::<u64>(&bytes, &escaped).is_none());
        assert_eq!(decode::<u64>(&bytes, &escaped), Ok(7));
        // The one value the walk refuses and this reads: nested at serde_json's
        // recursion limit, which counts the envelope's own level too.
        let deep = |depth| {
            let value = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
            let value: serde_json::Value = serde_json::from_str(&value).unwrap();
            let bytes = encode(&expected, &value).unwrap();
            let fast = read_as_written::<serde_json::Value>(&bytes, &expected).is_some();
            (
                fast,
                decode_walked::<serde_json::Value>(&bytes, &expected).is_ok(),
            )
        };
        assert_eq!(deep(126), (true, true));
        assert_eq!(deep(127), (true, false));
    }

    /// An envelope's fields as text, in the writer's order, which
    /// [`varied`] changes.
    fn fields(digest: &str) -> Vec<(String, String)> {
        [
            ("v", "4".to_owned()),
            ("schema", "1".to_owned()),
            ("type", r#""u64""#.to_owned()),
            ("query", format!(r#""{digest}""#)),
            ("fresh", "1796212800000".to_owned()),
            ("value", "7".to_owned()),
        ]
        .into_iter()
        .map(|(name, value)| (name.to_owned(), value))
        .collect()
    }

    /// An envelope from the writer's own, changed at random in ways a port, a
    /// bad write or another version may change it, some of which the walk
    /// still reads as the same hit.
    fn varied(digest: &str, random: &mut impl FnMut(usize) -> usize) -> Vec<u8> {
        let mut fields = fields(digest);
        let pick = |options: &[&str], random: &mut dyn FnMut(usize) -> usize| {
            options[random(options.len())].to_owned()
        };
        let replace = |fields: &mut Vec<(String, String)>, name: &str, value: String| {
            let field = fields.iter_mut().find(|(n, _)| n == name).unwrap();
            field.1 = value;
        };
        // Each change in about one envelope out of five: many stay whole.
        if random(5) == 0 {
            let v = pick(
                &["3", "5", "04", "4.0", r#""4""#, "-4", "4294967300", " 4"],
                random,
            );
            replace(&mut fields, "v", v);
        }
        if random(5) == 0 {
            let schema = pick(&["2", "01", "1e0", "4294967297", "1 ", "null"], random);
            replace(&mut fields, "schema", schema);
        }
        if random(5) == 0 {
            let id = pick(
                &[
                    r#""\u0075\u0036\u0034""#,
                    r#""u32""#,
                    r#""u6""#,
                    "\"u\t64\"",
                    r#""u64\"""#,
                ],
                random,
            );
            replace(&mut fields, "type", id);
        }
        if random(5) == 0 {
            let query = match random(3) {
                0 => format!(r#""\u00{:x}{}""#, digest.as_bytes()[0], &digest[1..]),
                1 => format!(r#""{}""#, &digest[1..]),
                _ => format!(r#""{}0""#, &digest[..63]),
            };
            replace(&mut fields, "query", query);
        }
        if random(5) == 0 {
            let fresh = pick(
                &[
                    "0",
                    "18446744073709551615",
                    "18446744073709551616",
                    "1.5",
                    "-1",
                    "01",
                ],
                random,
            );
            replace(&mut fields, "fresh", fresh);
        }
        if random(5) == 0 {
            let value = pick(
                &[
                    " 7 ",
                    r#""7""#,
                    "7.0",
                    "[7]",
                    "-7",
                    "18446744073709551616",
                    r#"{"a":"}","value":1}"#,
                    r#"[""}",{"b":[null,true]}]"#,
                    r#""7"}"#,
                    "[7",
                    "7,\"x\":1",
                    "",
                ],
                random,
            );
            replace(&mut fields, "value", value);
        }
        let at_value = fields.len() - 1;
        if random(2) == 0 {
            let tags = pick(
                &[
                    r##"["#book=42","@author=j%20l"]"##,
                    "[]",
                    r##"["#book=42"]"##,
                    r##"["book=42"]"##,
                    r##"["#bo ok=42"]"##,
                    r##"["#book=4\n#x=1"]"##,
                    r##"["\u0023book=42"]"##,
                    r##"["#book=42",]"##,
                    "null",
                ],
                random,
            );
            let since = pick(
                &["[5,6]", "[5, 6]", "[5]", "[5,6,7]", "[05,6]", "null"],
                random,
            );
            match random(4) {
                0 => fields.insert(at_value, ("tags".to_owned(), tags)),
                1 => fields.insert(at_value, ("since".to_owned(), since)),
                _ => {
                    fields.insert(at_value, ("tags".to_owned(), tags));
                    fields.insert(at_value + 1, ("since".to_owned(), since));
                }
            }
        }
        if random(5) == 0 {
            let qtags = pick(
                &[r#"["@shop=7"]"#, "[]", r#"["@sh\"op=7"]"#, "[1]", "{}"],
                random,
            );
            fields.insert(5, ("qtags".to_owned(), qtags));
        }
        if random(8) == 0 {
            // An unknown field, or a known one twice, anywhere.
            let extra = match random(2) {
                0 => ("x".to_owned(), "0".to_owned()),
                _ => fields[random(fields.len())].clone(),
            };
            fields.insert(random(fields.len() + 1), extra);
        }
        if random(8) == 0 {
            // The order another writer may use.
            for at in (1..fields.len()).rev() {
                fields.swap(at, random(at + 1));
            }
        }
        let separator = if random(8) == 0 { ", " } else { "," };
        let body: Vec<String> = fields
            .iter()
            .map(|(name, value)| format!(r#""{name}":{value}"#))
            .collect();
        let mut bytes = format!("{{{}}}", body.join(separator)).into_bytes();
        match random(12) {
            0 => bytes.truncate(random(bytes.len())),
            1 => bytes.push(b'\n'),
            2 => bytes.push(b'}'),
            3 => {
                let at = random(bytes.len());
                bytes[at] = 0xff;
            }
            _ => {}
        }
        bytes
    }

    #[test]
    fn reading_without_the_walk_agrees_with_the_walk_on_varied_envelopes() {
        let expected = expected();
        let digest = expected.query_digest().to_owned();
        let mut state = 0x2545_f491_4f6c_dd1d_u64;
        let mut random = |below: usize| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            usize::try_from(state % below as u64).unwrap()
        };
        let (mut read, mut declined, mut walked_hits) = (0, 0, 0);
        let mut any_value = 0;
        for _ in 0..20_000 {
            let bytes = varied(&digest, &mut random);
            let text = String::from_utf8_lossy(&bytes);
            let walked = decode_walked::<u64>(&bytes, &expected);
            match read_as_written::<u64>(&bytes, &expected) {
                Some(fast) => {
                    read += 1;
                    assert_eq!(Ok(fast), walked, "{text}");
                }
                None => declined += 1,
            }
            walked_hits += usize::from(walked.is_ok());
            assert_eq!(super::decode::<u64>(&bytes, &expected), walked, "{text}");
            // Any JSON value: where the value ends is the fast path's to find.
            let walked = decode_walked::<serde_json::Value>(&bytes, &expected);
            if let Some(fast) = read_as_written::<serde_json::Value>(&bytes, &expected) {
                any_value += 1;
                assert_eq!(Ok(fast), walked, "{text}");
            }
            assert_eq!(super::decode(&bytes, &expected), walked, "{text}");
        }
        assert!(any_value > read, "{any_value} values of any type read");
        // Both ways are taken, and the walk reads hits the fast path declines
        // (escapes, whitespace, another order).
        assert!(read > 800, "{read} read without the walk");
        assert!(declined > 10_000, "{declined} declined");
        assert!(
            walked_hits > read,
            "{walked_hits} hits, {read} without the walk"
        );
    }

    #[test]
    fn every_float_reads_back_as_the_very_f64_written() {
        // serde_json's fast path reads these one ulp off.
        for value in [
            41.0 * 0.01,
            632.0 / 7.0,
            -0.0,
            5e-324,
            f64::MAX,
            f64::MIN_POSITIVE,
        ] {
            let bytes = encode(&expected(), &value).unwrap();
            let read: f64 = decode(&bytes, &expected()).unwrap();
            assert_eq!(read.to_bits(), value.to_bits(), "{value:e}");
        }
        // Random bit patterns: every exponent, subnormals included.
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        let mut values = Vec::with_capacity(4096);
        while values.len() < 4096 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let value = f64::from_bits(state);
            if value.is_finite() {
                values.push(value);
            }
        }
        let bytes = encode(&expected(), &values).unwrap();
        let read: Vec<f64> = decode(&bytes, &expected()).unwrap();
        let bits = |floats: &[f64]| floats.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&read), bits(&values));
    }

    #[test]
    fn a_value_json_cannot_hold_is_refused_with_where_it_is() {
        let error = encode(&expected(), &vec![1.5, f64::NAN]).unwrap_err();
        assert_eq!(error.to_string(), "the value cannot be cached as JSON");
        assert_eq!(
            Error::source(&error).unwrap().to_string(),
            "[1] is NaN, which JSON cannot hold \
             (serde_json writes it as null, so the entry would never read back as this value)"
        );
        let keyed = std::collections::BTreeMap::from([((1, 2), 3)]);
        let error = encode(&expected(), &keyed).unwrap_err();
        let cause = Error::source(&error).unwrap().to_string();
        assert!(cause.contains("key must be a string"), "{cause}");
    }
}
