//! [`decode`]: reading any key of format version 1 or 2 back into its parts,
//! for operators, scripts and deletion scopes.
//!
//! The parser is strict: it accepts exactly the keys the format can produce,
//! so a decoded key written out again with [`Display`](fmt::Display) gives back
//! the same text, byte for byte. Anything else is a [`DecodeError`] naming what
//! is wrong and at which byte; malformed input never panics.

use std::fmt::{self, Write as _};
use std::str::FromStr;

use cache_key_format::escape::escape;
use cache_key_format::unescape::{UnescapeErrorKind, unescape, unescape_lossy};
use cache_key_format::{
    CRITERIA_SEPARATOR, FORMAT_VERSION, FORMAT1_SUMMARY_HEX_DIGITS, GENERATION, HASH_TAG_CLOSE,
    HASH_TAG_OPEN, MAX_PLAIN_CRITERIA, NAME_VALUE_SEPARATOR, SCHEMA, SEPARATOR, SUMMARY_HEX_DIGITS,
    SUMMARY_PREFIX, TENANT, TENANT_PART_SEPARATOR, marker,
};

/// The parts of a key, read back from its text by [`decode`].
///
/// Every text part is unescaped: the namespace, the tenant parts, the
/// operation and the criteria are the strings the key was built from (for a
/// criterion, its canonical string).
///
/// ```
/// use cache_key::{DecodedCriteria, DecodedKey, DecodedTenant};
///
/// let key: DecodedKey = "library:s1:g4:tbranch-2:search:title=Sand%3A%20Borges".parse()?;
/// assert_eq!(key.namespace(), "library");
/// assert_eq!((key.schema(), key.generation()), (1, 4));
/// assert_eq!(key.tenant(), &DecodedTenant::Parts(vec!["branch-2".to_owned()]));
/// assert!(!key.hash_tag());
/// assert_eq!(key.operation(), "search");
/// assert_eq!(key.criteria().get("title"), Some("Sand: Borges"));
/// assert_eq!(key.to_string(), "library:s1:g4:tbranch-2:search:title=Sand%3A%20Borges");
/// # Ok::<(), cache_key::DecodeError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DecodedKey {
    namespace: String,
    schema: u32,
    generation: u64,
    tenant: DecodedTenant,
    hash_tag: bool,
    operation: String,
    criteria: DecodedCriteria,
}

impl DecodedKey {
    /// The namespace, unescaped.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// The schema version of the cached value's format.
    pub fn schema(&self) -> u32 {
        self.schema
    }

    /// The generation: the invalidation counter of the key's scope.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The tenant: global, or the tenant values in order, unescaped.
    pub fn tenant(&self) -> &DecodedTenant {
        &self.tenant
    }

    /// Whether the tenant segment is written as a Redis Cluster hash tag, `t{...}`.
    pub fn hash_tag(&self) -> bool {
        self.hash_tag
    }

    /// The operation, unescaped.
    pub fn operation(&self) -> &str {
        &self.operation
    }

    /// The criteria: none, the `(name, canonical value)` pairs, or the digest
    /// that replaced them.
    pub fn criteria(&self) -> &DecodedCriteria {
        &self.criteria
    }

    /// The key format version the key was written in: 1 for a summary of 16
    /// hex digits, 2 for every other key. Keys without a summary are the same
    /// bytes in both versions, and read as the current one.
    ///
    /// ```
    /// use cache_key::decode;
    ///
    /// assert_eq!(decode("library:s1:g4:tbranch-2:search:c_48ea661053f0f610")?.format_version(), 1);
    /// assert_eq!(
    ///     decode("library:s1:g4:tbranch-2:search:c_48ea661053f0f610e72e81b07a37dacc")?.format_version(),
    ///     2
    /// );
    /// assert_eq!(decode("library:s1:g4:tbranch-2:search:title=Sand")?.format_version(), 2);
    /// # Ok::<(), cache_key::DecodeError>(())
    /// ```
    pub fn format_version(&self) -> u32 {
        match &self.criteria {
            DecodedCriteria::Digest(digest) if digest.len() == FORMAT1_SUMMARY_HEX_DIGITS => 1,
            _ => FORMAT_VERSION,
        }
    }
}

/// Writes the key in the key format: the exact text it was decoded from.
impl fmt::Display for DecodedKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let namespace = escape(&self.namespace);
        let (schema, generation) = (self.schema, self.generation);
        write!(
            f,
            "{namespace}{SCHEMA}{schema}{GENERATION}{generation}{TENANT}"
        )?;
        if self.hash_tag {
            f.write_char(HASH_TAG_OPEN)?;
        }
        for (i, part) in self.tenant.parts().iter().enumerate() {
            if i > 0 {
                f.write_char(TENANT_PART_SEPARATOR)?;
            }
            write!(f, "{}", escape(part))?;
        }
        if self.hash_tag {
            f.write_char(HASH_TAG_CLOSE)?;
        }
        write!(f, "{SEPARATOR}{}", escape(&self.operation))?;
        match &self.criteria {
            DecodedCriteria::None => Ok(()),
            DecodedCriteria::Digest(digest) => write!(f, "{SEPARATOR}{SUMMARY_PREFIX}{digest}"),
            DecodedCriteria::Pairs(pairs) => {
                for (i, (name, value)) in pairs.iter().enumerate() {
                    let separator = if i == 0 {
                        SEPARATOR
                    } else {
                        CRITERIA_SEPARATOR
                    };
                    let (name, value) = (escape(name), escape(value));
                    write!(f, "{separator}{name}{NAME_VALUE_SEPARATOR}{value}")?;
                }
                Ok(())
            }
        }
    }
}

impl FromStr for DecodedKey {
    type Err = DecodeError;

    /// Same as [`decode`].
    fn from_str(key: &str) -> Result<Self, DecodeError> {
        decode(key)
    }
}

/// The tenant segment of a decoded key.
///
/// ```
/// use cache_key::{decode, DecodedTenant};
///
/// let key = decode("crm:s1:g1:tacme,admin:list")?;
/// assert_eq!(key.tenant().parts(), ["acme", "admin"]);
/// assert!(decode("crm:s1:g1:t:countries")?.tenant().is_global());
/// # Ok::<(), cache_key::DecodeError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum DecodedTenant {
    /// The empty segment of a key declared global (`...:t:operation`).
    Global,
    /// The tenant values, in order, unescaped: one for a single tenant,
    /// several for a compound one. None of them is empty.
    Parts(Vec<String>),
}

impl DecodedTenant {
    /// Whether the key is global (has no tenant).
    pub fn is_global(&self) -> bool {
        matches!(self, DecodedTenant::Global)
    }

    /// The tenant values in order; empty for a global key.
    pub fn parts(&self) -> &[String] {
        match self {
            DecodedTenant::Global => &[],
            DecodedTenant::Parts(parts) => parts,
        }
    }
}

/// The criteria of a decoded key.
///
/// ```
/// use cache_key::{decode, DecodedCriteria};
///
/// let key = decode("library:s1:g4:tbranch-2:list:page=2&tags=a%2Cb")?;
/// assert_eq!(key.criteria().pairs(), [
///     ("page".to_owned(), "2".to_owned()),
///     ("tags".to_owned(), "a,b".to_owned()),
/// ]);
/// let summarized = decode("library:s1:g4:tbranch-2:search:c_48ea661053f0f610e72e81b07a37dacc")?;
/// assert_eq!(summarized.criteria().digest(), Some("48ea661053f0f610e72e81b07a37dacc"));
/// # Ok::<(), cache_key::DecodeError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum DecodedCriteria {
    /// The key has no criteria segment: no criterion survived.
    None,
    /// The criteria as `(name, canonical value)` pairs, unescaped once,
    /// sorted by name; names are unique and values are not empty. A list's
    /// canonical string keeps its own escaping: `["a,b", "c"]` is `a%2Cb,c`.
    Pairs(Vec<(String, String)>),
    /// The criteria were longer than 48 bytes and were replaced by the first
    /// lowercase hex digits of their SHA-256 (the text after `c_`): 32 in
    /// format version 2, 16 in version 1.
    Digest(String),
}

impl DecodedCriteria {
    /// The `(name, canonical value)` pairs; empty when there are none or
    /// they were summarized.
    pub fn pairs(&self) -> &[(String, String)] {
        match self {
            DecodedCriteria::Pairs(pairs) => pairs,
            DecodedCriteria::None | DecodedCriteria::Digest(_) => &[],
        }
    }

    /// The canonical value of the criterion `name`, when the criteria are not
    /// summarized and it is present.
    pub fn get(&self, name: &str) -> Option<&str> {
        let pairs = self.pairs();
        pairs
            .binary_search_by(|(candidate, _)| candidate.as_str().cmp(name))
            .ok()
            .map(|i| pairs[i].1.as_str())
    }

    /// The hex digits that replaced the criteria, when they were summarized
    /// (32, or 16 in a version-1 key).
    pub fn digest(&self) -> Option<&str> {
        match self {
            DecodedCriteria::Digest(digest) => Some(digest),
            DecodedCriteria::None | DecodedCriteria::Pairs(_) => None,
        }
    }
}

/// Why a text is not a key: what is wrong ([`kind`](Self::kind)) and
/// where ([`offset`](Self::offset), in bytes from the start of the key).
///
/// ```
/// use cache_key::{decode, DecodeErrorKind};
///
/// let err = decode("library:sx:g4:tbranch-2:list").unwrap_err();
/// assert_eq!(err.kind(), DecodeErrorKind::InvalidNumber);
/// assert_eq!(err.offset(), 8);
/// assert_eq!(err.to_string(), "at byte 8: schema `sx` is not a decimal number");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError {
    kind: DecodeErrorKind,
    offset: usize,
    message: String,
}

impl DecodeError {
    fn new(kind: DecodeErrorKind, offset: usize, message: impl Into<String>) -> Self {
        DecodeError {
            kind,
            offset,
            message: message.into(),
        }
    }

    /// What is wrong.
    pub fn kind(&self) -> DecodeErrorKind {
        self.kind
    }

    /// The byte offset in the key where the problem is.
    pub fn offset(&self) -> usize {
        self.offset
    }
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "at byte {}: {}", self.offset, self.message)
    }
}

impl std::error::Error for DecodeError {}

/// The kinds of [`DecodeError`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DecodeErrorKind {
    /// The key ends before a segment it must have (schema, generation, tenant
    /// or operation).
    MissingSegment,
    /// The schema, generation or tenant segment does not start with its
    /// letter (`s`, `g`, `t`).
    MissingMarker,
    /// The schema or generation is not a decimal number without leading zeros.
    InvalidNumber,
    /// The schema does not fit in a `u32`, or the generation in a `u64`.
    NumberOverflow,
    /// A `%` is not followed by two more characters in its segment.
    TruncatedEscape,
    /// A `%` is not followed by two hex digits.
    InvalidEscape,
    /// A `%` escape uses lowercase hex digits; the format writes uppercase.
    LowercaseEscape,
    /// A `%` escape encodes a byte the format writes as itself.
    NeedlessEscape,
    /// A byte the format always escapes appears as itself inside a segment.
    UnescapedByte,
    /// The escapes of a segment decode to bytes that are not UTF-8.
    InvalidUtf8,
    /// The namespace is empty.
    EmptyNamespace,
    /// The operation is empty.
    EmptyOperation,
    /// A tenant value is empty (tenant segments of tenant-scoped keys never are).
    EmptyTenantPart,
    /// The tenant's hash tag `t{` is not closed by `}` at the segment's end.
    UnclosedHashTag,
    /// The key ends with `:` but has no criteria after it.
    EmptyCriteria,
    /// A criterion is not written `name=value`.
    InvalidCriterion,
    /// A criterion's name is empty.
    EmptyCriterionName,
    /// A criterion's value is empty (such criteria are dropped from keys).
    EmptyCriterionValue,
    /// The criteria are not sorted by name.
    UnsortedCriteria,
    /// Two criteria have the same name.
    DuplicateCriterion,
    /// The criteria are longer than 48 bytes; the format would have summarized them.
    CriteriaTooLong,
    /// A summary is not `c_` and 32 (or, in version 1, 16) lowercase hex digits.
    InvalidDigest,
    /// The key has a segment after its criteria.
    TrailingSegment,
}

/// Decodes `key`, which must follow version 2 of the key format exactly, or
/// version 1 (whose summaries have 16 hex digits instead of 32);
/// [`DecodedKey::format_version`] says which.
///
/// ```
/// use cache_key::{decode, DecodedTenant, DecodeErrorKind};
///
/// let key = decode("crm:s2:g7:t{acme,admin}:list")?;
/// assert_eq!(key.tenant(), &DecodedTenant::Parts(vec!["acme".into(), "admin".into()]));
/// assert!(key.hash_tag());
///
/// let err = decode("crm:s2:g7:t:list:b=1&a=2").unwrap_err();
/// assert_eq!(err.kind(), DecodeErrorKind::UnsortedCriteria);
/// # Ok::<(), cache_key::DecodeError>(())
/// ```
pub fn decode(key: &str) -> Result<DecodedKey, DecodeError> {
    let mut segments = Segments { key, at: 0 };

    let (at, namespace) = segments.next("namespace")?;
    if namespace.is_empty() {
        let message = if key.is_empty() {
            "the key is empty"
        } else {
            "the namespace is empty"
        };
        return Err(DecodeError::new(
            DecodeErrorKind::EmptyNamespace,
            at,
            message,
        ));
    }
    let namespace = unescaped(key, at, namespace, "namespace")?;

    let (at, text) = segments.next("schema (`s<number>`)")?;
    let schema = number(at, text, marker(SCHEMA), "schema")?;
    let (at, text) = segments.next("generation (`g<number>`)")?;
    let generation = number(at, text, marker(GENERATION), "generation")?;

    let (at, text) = segments.next("tenant (`t<tenant>`)")?;
    let (tenant, hash_tag) = tenant(key, at, text)?;

    let (at, operation) = segments.next("operation")?;
    if operation.is_empty() {
        return Err(DecodeError::new(
            DecodeErrorKind::EmptyOperation,
            at,
            "the operation is empty",
        ));
    }
    let operation = unescaped(key, at, operation, "operation")?;

    let criteria = match segments.next("criteria") {
        Err(_) => DecodedCriteria::None,
        Ok((at, text)) => criteria(key, at, text)?,
    };
    if let Ok((at, _)) = segments.next("") {
        return Err(DecodeError::new(
            DecodeErrorKind::TrailingSegment,
            at - 1,
            "unexpected `:` after the criteria (`:` is always escaped inside a segment)",
        ));
    }

    Ok(DecodedKey {
        namespace,
        schema,
        generation,
        tenant,
        hash_tag,
        operation,
        criteria,
    })
}

/// The `:`-separated segments of a key, with their offsets.
struct Segments<'k> {
    key: &'k str,
    /// Where the next segment starts; past the end once all are taken.
    at: usize,
}

impl<'k> Segments<'k> {
    fn next(&mut self, what: &str) -> Result<(usize, &'k str), DecodeError> {
        let Some(rest) = self.key.get(self.at..) else {
            return Err(DecodeError::new(
                DecodeErrorKind::MissingSegment,
                self.key.len(),
                format!("the key ends before its {what} segment"),
            ));
        };
        let start = self.at;
        let len = rest.find(SEPARATOR).unwrap_or(rest.len());
        self.at = start + len + 1;
        Ok((start, &rest[..len]))
    }
}

/// The schema or generation segment at `at`: `marker` and a decimal number.
fn number<N: FromStr>(at: usize, text: &str, marker: char, what: &str) -> Result<N, DecodeError> {
    let Some(digits) = text.strip_prefix(marker) else {
        return Err(DecodeError::new(
            DecodeErrorKind::MissingMarker,
            at,
            format!(
                "expected the {what} segment `{marker}<number>`, found `{}`",
                snippet(text)
            ),
        ));
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(DecodeError::new(
            DecodeErrorKind::InvalidNumber,
            at,
            format!("{what} `{}` is not a decimal number", snippet(text)),
        ));
    }
    if digits.len() > 1 && digits.starts_with('0') {
        return Err(DecodeError::new(
            DecodeErrorKind::InvalidNumber,
            at,
            format!("{what} `{}` has a leading zero", snippet(text)),
        ));
    }
    digits.parse().map_err(|_| {
        DecodeError::new(
            DecodeErrorKind::NumberOverflow,
            at,
            format!(
                "{what} `{}` is too large (the maximum is {})",
                snippet(text),
                if marker == cache_key_format::marker(SCHEMA) {
                    u64::from(u32::MAX)
                } else {
                    u64::MAX
                }
            ),
        )
    })
}

/// The tenant segment at `at`: `t`, then the escaped tenant values joined with
/// `,`, possibly inside a hash tag `{...}`; nothing for a global key.
fn tenant(key: &str, at: usize, text: &str) -> Result<(DecodedTenant, bool), DecodeError> {
    let Some(body) = text.strip_prefix(marker(TENANT)) else {
        return Err(DecodeError::new(
            DecodeErrorKind::MissingMarker,
            at,
            format!(
                "expected the tenant segment `t<tenant>`, found `{}`",
                snippet(text)
            ),
        ));
    };
    let (body, body_at, hash_tag) = match body.strip_prefix(HASH_TAG_OPEN) {
        None => (body, at + 1, false),
        Some(inner) => match inner.strip_suffix(HASH_TAG_CLOSE) {
            Some(inner) => (inner, at + 2, true),
            None => {
                return Err(DecodeError::new(
                    DecodeErrorKind::UnclosedHashTag,
                    at + 1,
                    "the tenant's hash tag `{` is not closed by `}` at the end of the segment",
                ));
            }
        },
    };
    if body.is_empty() {
        return Ok((DecodedTenant::Global, hash_tag));
    }
    let mut parts = Vec::new();
    let mut part_at = body_at;
    for (i, part) in body.split(TENANT_PART_SEPARATOR).enumerate() {
        if part.is_empty() {
            return Err(DecodeError::new(
                DecodeErrorKind::EmptyTenantPart,
                part_at,
                format!("tenant value #{} is empty", i + 1),
            ));
        }
        parts.push(unescaped(key, part_at, part, "tenant")?);
        part_at += part.len() + 1;
    }
    Ok((DecodedTenant::Parts(parts), hash_tag))
}

/// The criteria segment at `at`: sorted `name=value` pairs joined with `&`, or
/// `c_` and a digest.
fn criteria(key: &str, at: usize, text: &str) -> Result<DecodedCriteria, DecodeError> {
    if text.is_empty() {
        return Err(DecodeError::new(
            DecodeErrorKind::EmptyCriteria,
            at,
            "the key ends with `:` but has no criteria",
        ));
    }
    // Plain criteria always hold a `=`; a summary never does.
    let summary = text.strip_prefix(SUMMARY_PREFIX);
    if let Some(digest) = summary.filter(|_| !text.contains(NAME_VALUE_SEPARATOR)) {
        let valid = [SUMMARY_HEX_DIGITS, FORMAT1_SUMMARY_HEX_DIGITS].contains(&digest.len())
            && digest
                .bytes()
                .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
        if !valid {
            return Err(DecodeError::new(
                DecodeErrorKind::InvalidDigest,
                at,
                format!(
                    "summary `{}` is not `c_` and {SUMMARY_HEX_DIGITS} (or, in format version 1, {FORMAT1_SUMMARY_HEX_DIGITS}) lowercase hex digits",
                    snippet(text)
                ),
            ));
        }
        return Ok(DecodedCriteria::Digest(digest.to_owned()));
    }
    if text.len() > MAX_PLAIN_CRITERIA {
        return Err(DecodeError::new(
            DecodeErrorKind::CriteriaTooLong,
            at,
            format!(
                "the criteria are {} bytes long: over {MAX_PLAIN_CRITERIA} bytes they are written `c_` and a digest",
                text.len()
            ),
        ));
    }
    let mut pairs: Vec<(String, String)> = Vec::new();
    let mut pair_at = at;
    for pair in text.split(CRITERIA_SEPARATOR) {
        let Some((name, value)) = pair.split_once(NAME_VALUE_SEPARATOR) else {
            let message = if pair.is_empty() {
                "empty criterion: `&` must separate two `name=value` pairs".to_owned()
            } else {
                format!("criterion `{}` is not `name=value`", snippet(pair))
            };
            return Err(DecodeError::new(
                DecodeErrorKind::InvalidCriterion,
                pair_at,
                message,
            ));
        };
        if name.is_empty() {
            return Err(DecodeError::new(
                DecodeErrorKind::EmptyCriterionName,
                pair_at,
                "a criterion's name is empty",
            ));
        }
        let name_text = unescaped(key, pair_at, name, "criterion name")?;
        let value_at = pair_at + name.len() + 1;
        if value.is_empty() {
            return Err(DecodeError::new(
                DecodeErrorKind::EmptyCriterionValue,
                value_at,
                format!(
                    "criterion `{}` has an empty value (empty values are dropped from keys)",
                    snippet(name)
                ),
            ));
        }
        let value_text = unescaped(key, value_at, value, "criterion value")?;
        if let Some((previous, _)) = pairs.last() {
            if *previous == name_text {
                return Err(DecodeError::new(
                    DecodeErrorKind::DuplicateCriterion,
                    pair_at,
                    format!("criterion `{}` appears more than once", snippet(name)),
                ));
            }
            if *previous > name_text {
                return Err(DecodeError::new(
                    DecodeErrorKind::UnsortedCriteria,
                    pair_at,
                    format!(
                        "criterion `{}` comes after `{}`: criteria are sorted by name",
                        snippet(name),
                        snippet(&previous_escaped(text, pair_at - at))
                    ),
                ));
            }
        }
        pairs.push((name_text, value_text));
        pair_at += pair.len() + 1;
    }
    Ok(DecodedCriteria::Pairs(pairs))
}

/// The escaped name of the pair before the one starting at `end` in `criteria`.
fn previous_escaped(criteria: &str, end: usize) -> String {
    let before = &criteria[..end.saturating_sub(1)];
    let pair = before.rsplit(CRITERIA_SEPARATOR).next().unwrap_or(before);
    pair.split(NAME_VALUE_SEPARATOR)
        .next()
        .unwrap_or(pair)
        .to_owned()
}

/// `text`, found at byte `at` of `key`, unescaped when it is in the escaped
/// form the format writes.
fn unescaped(key: &str, at: usize, text: &str, what: &str) -> Result<String, DecodeError> {
    match unescape(text) {
        Ok(text) => Ok(text.into_owned()),
        Err(error) => Err(not_escaped(key, at + error.offset(), error.kind(), what)),
    }
}

/// The error for text that is not in escaped form, at byte `at` of `key`.
fn not_escaped(key: &str, at: usize, kind: UnescapeErrorKind, what: &str) -> DecodeError {
    // The escape at `at` as the key has it: `%` and what follows.
    let shown = key.get(at..).map_or("%", |rest| {
        let end = rest.char_indices().nth(3).map_or(rest.len(), |(i, _)| i);
        &rest[..end]
    });
    let (kind, message) = match kind {
        UnescapeErrorKind::UnescapedByte => return unescaped_byte(key, at, what),
        UnescapeErrorKind::TruncatedEscape => (
            DecodeErrorKind::TruncatedEscape,
            format!(
                "escape `{}` in the {what} is cut short: `%` takes two hex digits",
                shown.escape_debug()
            ),
        ),
        UnescapeErrorKind::InvalidEscape => (
            DecodeErrorKind::InvalidEscape,
            format!(
                "escape `{}` in the {what} is not `%` and two hex digits",
                shown.escape_debug()
            ),
        ),
        UnescapeErrorKind::LowercaseEscape => (
            DecodeErrorKind::LowercaseEscape,
            format!(
                "escape `{shown}` in the {what} uses lowercase hex: the format writes `{}`",
                shown.to_ascii_uppercase()
            ),
        ),
        UnescapeErrorKind::NeedlessEscape => (
            DecodeErrorKind::NeedlessEscape,
            format!(
                "escape `{shown}` in the {what} stands for `{}`, which the format writes as itself",
                unescape_lossy(shown)
            ),
        ),
        UnescapeErrorKind::InvalidUtf8 => (
            DecodeErrorKind::InvalidUtf8,
            format!("the {what}'s escapes do not decode to UTF-8 text"),
        ),
    };
    DecodeError::new(kind, at, message)
}

/// The error for a byte at `at` that the format always escapes.
fn unescaped_byte(key: &str, at: usize, what: &str) -> DecodeError {
    let shown = match key.get(at..).and_then(|rest| rest.chars().next()) {
        Some(c) if c.is_control() => format!("`{}`", c.escape_default()),
        Some(c) => format!("`{c}`"),
        None => format!("byte {:#04x}", key.as_bytes().get(at).copied().unwrap_or(0)),
    };
    let hint = match shown.as_str() {
        "`{`" | "`}`" => " (braces only mark a hash tag around the tenant)",
        _ => "",
    };
    DecodeError::new(
        DecodeErrorKind::UnescapedByte,
        at,
        format!("{shown} in the {what} must be escaped{hint}"),
    )
}

/// `text` shortened for an error message, with control characters escaped.
fn snippet(text: &str) -> String {
    const MAX_CHARS: usize = 40;
    let mut shown: String = text.chars().take(MAX_CHARS).collect();
    if shown.len() < text.len() {
        shown.push('…');
    }
    shown.escape_debug().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builder::KeyBuilder;

    fn kind(key: &str) -> DecodeErrorKind {
        match decode(key) {
            Ok(decoded) => panic!("{key:?} decoded to {decoded:?}"),
            Err(err) => err.kind(),
        }
    }

    #[test]
    fn decodes_every_part() {
        let key = decode("lib%20x:s0:g18446744073709551615:t{a%3Ab,%E4%B8%AD}:op%2F1:a=1&b=x%2Cy")
            .unwrap();
        assert_eq!(key.namespace(), "lib x");
        assert_eq!(key.schema(), 0);
        assert_eq!(key.generation(), u64::MAX);
        assert_eq!(key.tenant().parts(), ["a:b", "中"]);
        assert!(key.hash_tag());
        assert_eq!(key.operation(), "op/1");
        assert_eq!(key.criteria().get("b"), Some("x,y"));
        assert_eq!(key.criteria().get("c"), None);
    }

    #[test]
    fn global_keys_with_and_without_hash_tag() {
        let plain = decode("ns:s1:g1:t:op").unwrap();
        assert_eq!(plain.tenant(), &DecodedTenant::Global);
        assert!(!plain.hash_tag());
        assert_eq!(plain.criteria(), &DecodedCriteria::None);
        let tagged = decode("ns:s1:g1:t{}:op").unwrap();
        assert_eq!(tagged.tenant(), &DecodedTenant::Global);
        assert!(tagged.hash_tag());
    }

    #[test]
    fn builder_keys_round_trip() {
        let key = KeyBuilder::new("crm", "list")
            .schema(3)
            .generation(9)
            .tenant("acme")
            .tenant(42u32)
            .criterion("tags", vec!["a,b", "c%"])
            .criterion("q", "x: y")
            .hash_tag(true)
            .build()
            .unwrap();
        let decoded = decode(key.as_str()).unwrap();
        assert_eq!(decoded.tenant().parts(), ["acme", "42"]);
        assert_eq!(
            decoded.criteria().pairs(),
            [
                ("q".to_owned(), "x: y".to_owned()),
                ("tags".to_owned(), "a%2Cb,c%25".to_owned())
            ]
        );
        assert_eq!(decoded.to_string(), key.as_str());
    }

    #[test]
    fn a_digest_is_kept_and_forty_eight_bytes_are_the_most_a_plain_tail_has() {
        let digest = decode("ns:s1:g1:tx:op:c_0123456789abcdef0123456789abcdef").unwrap();
        assert_eq!(
            digest.criteria().digest(),
            Some("0123456789abcdef0123456789abcdef")
        );
        assert_eq!(digest.format_version(), 2);
        let version1 = decode("ns:s1:g1:tx:op:c_0123456789abcdef").unwrap();
        assert_eq!(version1.criteria().digest(), Some("0123456789abcdef"));
        assert_eq!(version1.format_version(), 1);
        let plain = format!("ns:s1:g1:tx:op:q={}", "x".repeat(46));
        assert!(decode(&plain).is_ok());
        let long = format!("ns:s1:g1:tx:op:q={}", "x".repeat(47));
        assert_eq!(kind(&long), DecodeErrorKind::CriteriaTooLong);
    }

    #[test]
    fn messages_say_what_and_where() {
        let err = decode("library:s1:g4:tacme:list:page=1&Page=2").unwrap_err();
        assert_eq!(
            err.to_string(),
            "at byte 32: criterion `Page` comes after `page`: criteria are sorted by name"
        );
        let err = decode("library:s1:g4:ta%3ab:list").unwrap_err();
        assert_eq!(
            err.to_string(),
            "at byte 16: escape `%3a` in the tenant uses lowercase hex: the format writes `%3A`"
        );
        let err = decode("library:s1:g4:tacme").unwrap_err();
        assert_eq!(
            err.to_string(),
            "at byte 19: the key ends before its operation segment"
        );
        let err = decode("library:s1:g99999999999999999999:tacme:list").unwrap_err();
        assert_eq!(err.kind(), DecodeErrorKind::NumberOverflow);
        assert_eq!(err.offset(), 11);
        let err = decode("li brary:s1:g1:tacme:list").unwrap_err();
        assert_eq!(
            err.to_string(),
            "at byte 2: ` ` in the namespace must be escaped"
        );
    }

    #[test]
    fn malformed_keys() {
        use DecodeErrorKind::*;
        let cases: &[(&str, DecodeErrorKind)] = &[
            ("", EmptyNamespace),
            ("ns", MissingSegment),
            ("ns:", MissingMarker),
            ("ns:s1", MissingSegment),
            ("ns:s1:g1", MissingSegment),
            ("ns:s1:g1:t", MissingSegment),
            ("ns:s1:g1:tx", MissingSegment),
            (":s1:g1:tx:op", EmptyNamespace),
            ("ns:s1:g1:tx:", EmptyOperation),
            ("ns:1:g1:tx:op", MissingMarker),
            ("ns:s1:1:tx:op", MissingMarker),
            ("ns:s1:g1:x:op", MissingMarker),
            ("ns:s:g1:tx:op", InvalidNumber),
            ("ns:sx:g1:tx:op", InvalidNumber),
            ("ns:s+1:g1:tx:op", InvalidNumber),
            ("ns:s-1:g1:tx:op", InvalidNumber),
            ("ns:s01:g1:tx:op", InvalidNumber),
            ("ns:s1:g1.5:tx:op", InvalidNumber),
            ("ns:s4294967296:g1:tx:op", NumberOverflow),
            ("ns:s1:g18446744073709551616:tx:op", NumberOverflow),
            ("ns:s1:g1:tx%:op", TruncatedEscape),
            ("ns:s1:g1:tx%4:op", TruncatedEscape),
            ("ns:s1:g1:tx:op%", TruncatedEscape),
            ("ns:s1:g1:tx%G1:op", InvalidEscape),
            ("ns:s1:g1:tx%%41:op", InvalidEscape),
            ("ns:s1:g1:tx%3a:op", LowercaseEscape),
            ("ns:s1:g1:tx%41:op", NeedlessEscape),
            ("ns:s1:g1:tx%2A:op", NeedlessEscape),
            ("n s:s1:g1:tx:op", UnescapedByte),
            ("ns:s1:g1:tx/y:op", UnescapedByte),
            ("ns:s1:g1:tx:o&p", UnescapedByte),
            ("ns:s1:g1:tx:o=p", UnescapedByte),
            ("ns:s1:g1:tx}:op", UnescapedByte),
            ("ns:s1:g1:t{x}y:op", UnclosedHashTag),
            ("ns:s1:g1:t{x:op", UnclosedHashTag),
            ("ns:s1:g1:t{x{y}:op", UnescapedByte),
            ("ns:s1:g1:tx:op:a=b=c", UnescapedByte),
            ("ns:s1:g1:tx:op:a=b,c", UnescapedByte),
            ("ns:s1:g1:tx:op:a=ç", UnescapedByte),
            ("ns:s1:g1:tx%FF:op", InvalidUtf8),
            ("ns:s1:g1:tx:op:a=%C3", InvalidUtf8),
            ("ns:s1:g1:tx%ED%A0%80:op", InvalidUtf8),
            ("ns:s1:g1:t,:op", EmptyTenantPart),
            ("ns:s1:g1:tx,:op", EmptyTenantPart),
            ("ns:s1:g1:t,x:op", EmptyTenantPart),
            ("ns:s1:g1:tx,,y:op", EmptyTenantPart),
            ("ns:s1:g1:t{,}:op", EmptyTenantPart),
            ("ns:s1:g1:tx:op:", EmptyCriteria),
            ("ns:s1:g1:tx:op:abc", InvalidCriterion),
            ("ns:s1:g1:tx:op:a=1&", InvalidCriterion),
            ("ns:s1:g1:tx:op:a=1&&b=2", InvalidCriterion),
            ("ns:s1:g1:tx:op:=1", EmptyCriterionName),
            ("ns:s1:g1:tx:op:a=", EmptyCriterionValue),
            ("ns:s1:g1:tx:op:a=1&b=", EmptyCriterionValue),
            ("ns:s1:g1:tx:op:b=1&a=2", UnsortedCriteria),
            ("ns:s1:g1:tx:op:a=1&a=2", DuplicateCriterion),
            ("ns:s1:g1:tx:op:%C3%A9=1&z=2", UnsortedCriteria),
            ("ns:s1:g1:tx:op:c_0123", InvalidDigest),
            ("ns:s1:g1:tx:op:c_0123456789ABCDEF", InvalidDigest),
            ("ns:s1:g1:tx:op:c_0123456789abcdeg", InvalidDigest),
            ("ns:s1:g1:tx:op:c_0123456789abcdef0", InvalidDigest),
            (
                "ns:s1:g1:tx:op:c_0123456789abcdef0123456789abcde",
                InvalidDigest,
            ),
            (
                "ns:s1:g1:tx:op:c_0123456789abcdef0123456789abcdef0",
                InvalidDigest,
            ),
            (
                "ns:s1:g1:tx:op:c_0123456789abcdef0123456789abcdeF",
                InvalidDigest,
            ),
            ("ns:s1:g1:tx:op:c_", InvalidDigest),
            ("ns:s1:g1:tx:op:a=1:b=2", TrailingSegment),
            ("ns:s1:g1:tx:op:c_0123456789abcdef:", TrailingSegment),
        ];
        for &(key, expected) in cases {
            assert_eq!(kind(key), expected, "{key:?}");
        }
    }

    #[test]
    fn errors_point_into_the_key() {
        let key = "ns:s1:g1:t{a,b}:op:a=%C3&b=1";
        for end in 0..=key.len() {
            let Some(prefix) = key.get(..end) else {
                continue;
            };
            if let Err(err) = decode(prefix) {
                assert!(err.offset() <= prefix.len(), "{prefix:?}: {err}");
            }
        }
    }
}
