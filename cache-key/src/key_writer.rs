//! [`KeyWriter`]: lays out a key, segment by segment in the format's order,
//! straight into the output `String`. Derived keys write through it; the
//! [`KeyBuilder`](crate::KeyBuilder), which collects its parts first, lays
//! out its key with the same pieces ([`write_start`], [`write_operation`]).
//!
//! Room for the key's longest form is reserved first, so a fresh `String` is
//! allocated exactly once and a warm buffer not at all. A writer dropped
//! without a successful [`finish`](KeyWriter::finish) (after an empty
//! tenant or a key over `max_len`, say) removes what it wrote.
//!
//! Functions on the hot path of writing a key, here and in the modules it
//! calls, are `inline(always)` in optimized builds where instruction counts
//! show it pays (a derived key's constant pieces then fold into moves, as in
//! hand-written code), and plain `inline` in debug builds, where forcing
//! them makes derived code several times slower to compile.

use std::borrow::Cow;

use cache_key_format::escape::{MAX_ESCAPED_PER_BYTE, push_escaped_short};
use cache_key_format::{
    GENERATION, HASH_TAG_CLOSE, HASH_TAG_OPEN, MAX_PLAIN_CRITERIA, MAX_SCHEMA_LEN, SCHEMA,
    SEPARATOR, TENANT, TENANT_PART_SEPARATOR, head_len, max_key_len,
};
use sha2::Sha256;

use crate::cache_key::KeyPart;
use crate::canonical::{CanonicalWriter, CriterionValue, TenantValue};
use crate::criteria_segment::{CriteriaSegment, READABLE, summarize};
use crate::error::KeyError;
use crate::number::{digits, push_digits};

/// A namespace or operation, escaped already (derived keys escape their
/// constants at compile time) or to be escaped while writing.
#[doc(hidden)]
#[derive(Clone, Copy)]
pub enum Text<'a> {
    Escaped(&'a str),
    Raw(&'a str),
}

impl Text<'_> {
    /// The most bytes the text takes written: raw text is bounded rather
    /// than measured (escaping at most triples it), which saves a pass.
    #[inline]
    fn max_len(self) -> usize {
        match self {
            Text::Escaped(text) => text.len(),
            Text::Raw(text) => text.len() * MAX_ESCAPED_PER_BYTE,
        }
    }

    #[inline]
    fn write(self, out: &mut String) {
        match self {
            Text::Escaped(text) => out.push_str(text),
            Text::Raw(text) => push_escaped_short(out, text),
        }
    }
}

/// What comes before the generation: `esc(namespace) ":s" schema ":g"`.
#[doc(hidden)]
#[derive(Clone, Copy)]
pub enum Head<'a> {
    /// Laid out and escaped already, by the derive at compile time.
    Escaped(&'a str),
    /// Laid out while writing.
    Parts { namespace: Text<'a>, schema: u32 },
}

impl Head<'_> {
    /// The most bytes the head takes written.
    fn max_len(self) -> usize {
        match self {
            Head::Escaped(text) => text.len(),
            Head::Parts { namespace, .. } => head_len(namespace.max_len(), MAX_SCHEMA_LEN, 0),
        }
    }

    #[cfg_attr(debug_assertions, inline)]
    #[cfg_attr(not(debug_assertions), inline(always))]
    fn write(self, out: &mut String) {
        match self {
            Head::Escaped(text) => out.push_str(text),
            Head::Parts { namespace, schema } => {
                namespace.write(out);
                out.push_str(SCHEMA);
                push_digits(out, digits(&mut itoa::Buffer::new(), schema));
                out.push_str(GENERATION);
            }
        }
    }
}

/// Writes one key, segment by segment, at the end of a `String`.
///
/// The calls come in the format's order: [`new`](Self::new) (namespace,
/// schema, generation), the tenant values ([`tenant`](Self::tenant), none for
/// a global key), [`operation`](Self::operation) (given to `new`, written
/// here), the criteria sorted by name
/// ([`criterion`](Self::criterion)), then [`finish`](Self::finish). Derived
/// types have one writer body for every [`KeyPart`]: for
/// [`KeyPart::Tenant`] only the tenant values are written, and `operation`
/// says to skip the criteria.
#[doc(hidden)]
pub struct KeyWriter<'o> {
    out: &'o mut String,
    operation: Text<'o>,
    /// Where this key starts in `out`: everything after it is undone on error.
    start: usize,
    hash_tag: bool,
    /// [`KeyPart::Tenant`]: the tenant values alone.
    tenant_only: bool,
    tenants: usize,
    /// Where the criteria start, once the operation is written.
    criteria_start: usize,
    /// Set once the criteria outgrew the plain form: everything so far was fed to it.
    digest: Option<Sha256>,
    /// The criteria's longest plain form: [`MAX_PLAIN_CRITERIA`], or
    /// [`READABLE`] for a readable key.
    limit: usize,
    /// The first mistake found while writing.
    error: Option<KeyError>,
    finished: bool,
}

impl<'o> KeyWriter<'o> {
    /// Reserves room for the longest key these parts can make and writes
    /// everything up to the tenant values. `tenant_room` bounds the tenant
    /// values' escaped length (see [`TenantValue::max_escaped_len`]).
    #[cfg_attr(debug_assertions, inline)]
    #[cfg_attr(not(debug_assertions), inline(always))]
    pub fn new(
        out: &'o mut String,
        head: Head<'_>,
        generation: u64,
        hash_tag: bool,
        tenant_room: usize,
        operation: Text<'o>,
        part: KeyPart,
    ) -> Self {
        let start = out.len();
        let tenant_only = part == KeyPart::Tenant;
        if tenant_only {
            out.reserve(tenant_room);
        } else {
            let mut buffer = itoa::Buffer::new();
            let generation = digits(&mut buffer, generation);
            let head_len = head.max_len() + generation.len();
            out.reserve(max_key_len(
                head_len,
                hash_tag,
                tenant_room,
                operation.max_len(),
            ));
            write_start(out, head, generation, hash_tag);
        }
        KeyWriter {
            out,
            operation,
            start,
            hash_tag,
            tenant_only,
            tenants: 0,
            criteria_start: 0,
            digest: None,
            limit: if part == KeyPart::Readable {
                READABLE
            } else {
                MAX_PLAIN_CRITERIA
            },
            error: None,
            finished: false,
        }
    }

    /// [`new`](Self::new) for a head and operation the derive laid out and
    /// escaped already: the common case, in fewer tokens per query type.
    #[cfg_attr(debug_assertions, inline)]
    #[cfg_attr(not(debug_assertions), inline(always))]
    pub fn escaped(
        out: &'o mut String,
        head: &str,
        operation: &'o str,
        generation: u64,
        hash_tag: bool,
        tenant_room: usize,
        part: KeyPart,
    ) -> Self {
        Self::new(
            out,
            Head::Escaped(head),
            generation,
            hash_tag,
            tenant_room,
            Text::Escaped(operation),
            part,
        )
    }

    /// Writes the next tenant value; an empty one is an error naming `field`.
    #[inline]
    pub fn tenant<T: TenantValue + ?Sized>(
        &mut self,
        field: &'static str,
        value: &T,
        allow_zero: bool,
    ) {
        let first = self.tenants == 0;
        self.tenants += 1;
        if let Err(error) = push_tenant_part(self.out, first, field, value, allow_zero) {
            self.fail(error);
        }
    }

    /// Records a mistake: [`finish`](Self::finish) reports the first one, and
    /// the key is not written. (Writing goes on meanwhile, so derived code has
    /// no early returns to expand.)
    #[cold]
    pub fn fail(&mut self, error: KeyError) {
        self.error.get_or_insert(error);
    }

    /// Ends the tenant segment and writes the operation; the criteria follow
    /// when it returns `true`, and are not written for [`KeyPart::Tenant`].
    #[inline]
    pub fn operation(&mut self) -> bool {
        if self.tenant_only {
            return false;
        }
        write_operation(self.out, self.hash_tag, self.operation);
        self.criteria_start = self.out.len();
        true
    }

    /// Appends the criterion `name=value`, or nothing when the value's
    /// canonical string is empty. `escaped_name_eq` is the escaped name with
    /// its `=`, as derived code has it ready. Called in name order.
    #[inline]
    pub fn criterion<V: CriterionValue + ?Sized>(&mut self, escaped_name_eq: &str, value: &V) {
        value.write_canonical(&mut self.criterion_writer(escaped_name_eq));
    }

    /// Where the next criterion's value writes itself, as
    /// [`criterion`](Self::criterion) does: derived code calls the value's
    /// `write_canonical` with it, its type spelled out.
    #[inline]
    pub fn criterion_writer<'s>(&'s mut self, escaped_name_eq: &'s str) -> CanonicalWriter<'s> {
        let segment = CriteriaSegment {
            out: self.out,
            start: self.criteria_start,
            digest: &mut self.digest,
            limit: self.limit,
        };
        CanonicalWriter::criterion(segment, escaped_name_eq)
    }

    /// Ends a key without a `max_len`: see [`finish_within`](Self::finish_within).
    #[inline]
    pub fn finish(&mut self) -> Result<(), KeyError> {
        self.finish_within(None)
    }

    /// Ends the key: the criteria or their summary, then the `max_len`
    /// check. On error, the key is removed when the writer is dropped.
    /// (By reference: moving the writer would copy it.)
    #[inline]
    pub fn finish_within(&mut self, max_len: Option<usize>) -> Result<(), KeyError> {
        if let Some(error) = self.error.take() {
            return Err(error);
        }
        if self.tenant_only {
            self.finished = true;
            return Ok(());
        }
        if let Some(digest) = self.digest.take() {
            summarize(self.out, digest);
        } else if self.out.len() == self.criteria_start {
            // No criteria: no `:` before them.
            self.out.pop();
        }
        if self.limit != READABLE {
            check_len(self.out.len() - self.start, max_len)?;
        }
        self.finished = true;
        Ok(())
    }
}

impl Drop for KeyWriter<'_> {
    /// A key that was not finished, after an error, leaves nothing behind.
    fn drop(&mut self) {
        if !self.finished {
            self.out.truncate(self.start);
        }
    }
}

/// Appends a tenant segment as a key writes it: each `(field, value,
/// allow_zero)` escaped, joined with `,`. On an error `out` is left as it was.
#[inline]
pub(crate) fn write_tenant<'v>(
    out: &mut String,
    parts: impl IntoIterator<Item = (&'static str, &'v dyn TenantValue, bool)>,
) -> Result<(), KeyError> {
    let start = out.len();
    for (i, (field, value, allow_zero)) in parts.into_iter().enumerate() {
        if let Err(error) = push_tenant_part(out, i == 0, field, value, allow_zero) {
            out.truncate(start);
            return Err(error);
        }
    }
    Ok(())
}

/// Appends one tenant value escaped, after a `,` unless it is the `first` of
/// a compound tenant. An empty value, or its type's empty value
/// ([`TenantValue::is_empty_value`]) unless `allow_zero`, is an error naming
/// `field` (the value's bytes may stay written: callers undo the whole key or
/// segment).
#[inline]
fn push_tenant_part<T: TenantValue + ?Sized>(
    out: &mut String,
    first: bool,
    field: &'static str,
    value: &T,
    allow_zero: bool,
) -> Result<(), KeyError> {
    if !first {
        out.push(TENANT_PART_SEPARATOR);
    }
    let before = out.len();
    value.write_canonical(&mut CanonicalWriter::escaped(out));
    if out.len() == before || (!allow_zero && value.is_empty_value()) {
        return Err(KeyError::EmptyTenant {
            field: Cow::Borrowed(field),
        });
    }
    Ok(())
}

/// Writes the start of a key, up to its tenant values: the head, the
/// generation, then `:t` (`:t{` with a hash tag).
#[cfg_attr(debug_assertions, inline)]
#[cfg_attr(not(debug_assertions), inline(always))]
pub(crate) fn write_start(out: &mut String, head: Head<'_>, generation: &str, hash_tag: bool) {
    head.write(out);
    push_digits(out, generation);
    out.push_str(TENANT);
    if hash_tag {
        out.push(HASH_TAG_OPEN);
    }
}

/// Ends the tenant segment (`}` with a hash tag) and writes `:operation:`.
#[cfg_attr(debug_assertions, inline)]
#[cfg_attr(not(debug_assertions), inline(always))]
pub(crate) fn write_operation(out: &mut String, hash_tag: bool, operation: Text<'_>) {
    if hash_tag {
        out.push(HASH_TAG_CLOSE);
    }
    out.push(SEPARATOR);
    operation.write(out);
    out.push(SEPARATOR);
}

/// The `max_len` check: a key is refused, never truncated.
#[inline]
pub(crate) fn check_len(len: usize, max_len: Option<usize>) -> Result<(), KeyError> {
    match max_len {
        Some(max) if len > max => Err(KeyError::TooLong { len, max }),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sha2::Digest;

    fn key_with_criteria(pairs: &[(&str, &str)]) -> String {
        let mut out = String::new();
        let mut key = KeyWriter::new(
            &mut out,
            Head::Escaped("ns:s1:g"),
            1,
            false,
            1,
            Text::Escaped("op"),
            KeyPart::Key,
        );
        key.tenant("t", "t", false);
        key.operation();
        for (name, value) in pairs {
            key.criterion(&format!("{name}="), value);
        }
        key.finish().unwrap();
        drop(key);
        out
    }

    #[test]
    fn forty_eight_bytes_stay_plain_and_forty_nine_are_summarized() {
        let plain = "x".repeat(46);
        assert_eq!(
            key_with_criteria(&[("q", &plain)]),
            format!("ns:s1:g1:tt:op:q={plain}")
        );
        let long = "x".repeat(47);
        assert_eq!(
            key_with_criteria(&[("q", &long)]),
            "ns:s1:g1:tt:op:c_48ea661053f0f610e72e81b07a37dacc"
        );
    }

    #[test]
    fn no_criteria_means_no_trailing_colon() {
        assert_eq!(key_with_criteria(&[]), "ns:s1:g1:tt:op");
        assert_eq!(key_with_criteria(&[("q", "")]), "ns:s1:g1:tt:op");
    }

    #[test]
    fn the_summary_does_not_depend_on_where_the_criteria_overflow() {
        // The same criteria string, overflowing in the first or the second value.
        for split in 1..60 {
            let text = "y".repeat(60);
            let (a, b) = text.split_at(split);
            let two = key_with_criteria(&[("a", a), ("b", b)]);
            let mut direct = Sha256::new();
            direct.update(format!("a={a}&b={b}").as_bytes());
            let hex: String = direct.finalize()[..16]
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect();
            assert_eq!(two, format!("ns:s1:g1:tt:op:c_{hex}"), "split {split}");
        }
    }

    #[test]
    fn digits_that_overflow_the_plain_form_are_summarized_as_written() {
        // 44 bytes of text, then 20 digits that cross the 48-byte limit.
        let text = "x".repeat(42);
        let mut out = String::new();
        let operation = Text::Escaped("op");
        let mut key = KeyWriter::new(
            &mut out,
            Head::Escaped("ns:s1:g"),
            1,
            false,
            1,
            operation,
            KeyPart::Key,
        );
        key.tenant("t", "t", false);
        key.operation();
        key.criterion("a=", text.as_str());
        key.criterion("b=", &u64::MAX);
        key.criterion("c=", &-7i8);
        key.finish().unwrap();
        drop(key);
        let mut direct = Sha256::new();
        direct.update(format!("a={text}&b={}&c=-7", u64::MAX).as_bytes());
        let hex: String = direct.finalize()[..16]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(out, format!("ns:s1:g1:tt:op:c_{hex}"));
    }

    #[test]
    fn an_error_or_an_unfinished_key_leaves_the_buffer_as_it_was() {
        fn writer(out: &mut String, hash_tag: bool) -> KeyWriter<'_> {
            let operation = Text::Escaped("op");
            KeyWriter::new(
                out,
                Head::Escaped("ns:s1:g"),
                1,
                hash_tag,
                0,
                operation,
                KeyPart::Key,
            )
        }
        let mut out = String::from("kept|");

        let mut key = writer(&mut out, true);
        key.tenant("org", "", false);
        key.operation();
        let empty_tenant = KeyError::EmptyTenant {
            field: "org".into(),
        };
        assert_eq!(key.finish(), Err(empty_tenant));
        drop(key);
        assert_eq!(out, "kept|");

        let mut key = writer(&mut out, false);
        key.tenant("org", "acme", false);
        drop(key);
        assert_eq!(out, "kept|");

        let mut key = writer(&mut out, false);
        key.tenant("org", "acme", false);
        key.operation();
        let too_long = KeyError::TooLong { len: 17, max: 5 };
        assert_eq!(key.finish_within(Some(5)), Err(too_long));
        drop(key);
        assert_eq!(out, "kept|");
    }
}
