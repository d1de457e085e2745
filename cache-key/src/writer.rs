//! [`KeyWriter`]: the one place that lays out the key format's segments, in
//! order, straight into the output `String`. Derived keys write through it;
//! the [`KeyBuilder`](crate::KeyBuilder), which writes parts as they arrive
//! in any order, uses its pieces ([`write_start`], [`write_operation`],
//! [`CriteriaSegment`] for values, [`end_criteria_in_order`]), so both lay out
//! the same bytes the same way.
//!
//! Room for the key's longest form is reserved first, so a fresh `String` is
//! allocated exactly once and a warm buffer not at all. The criteria are
//! written in place after the operation; once they outgrow
//! [`MAX_PLAIN_CRITERIA`] bytes, what was written moves into SHA-256 and the
//! rest streams there, so the summary never needs the criteria as a string.
//! An error (an empty tenant, a key over `max_len`), or a writer dropped
//! before [`finish`](KeyWriter::finish), removes what was written.
//!
//! The hot methods are `inline(always)` in optimized builds, so that derived
//! code copies its constant pieces with known lengths as hand-written code
//! does; in debug builds they are plain `inline`, which keeps the derive cheap
//! to compile (see BENCHMARKS.md).

use std::borrow::Cow;
use std::ops::Range;

use sha2::{Digest, Sha256};

use crate::canonical::CanonicalWriter;
use crate::error::KeyError;
use crate::escape::{MAX_ESCAPED_PER_BYTE, for_each_escaped_str, push_escaped_short};
use crate::number::Decimal;
use crate::value::{CriterionValue, TenantValue};

/// Criteria up to this many bytes are written as they are; longer ones are summarized.
pub const MAX_PLAIN_CRITERIA: usize = 48;

/// The criteria limit of a readable key: never summarized.
pub(crate) const READABLE: usize = usize::MAX;

/// The version of the key format this crate writes (KEY-FORMAT.md).
pub const FORMAT_VERSION: u32 = 2;

/// The hex digits of SHA-256 in a summarized criteria segment (after `c_`):
/// 128 bits, so that a collision costs about 2^64 hashes.
pub const SUMMARY_HEX_DIGITS: usize = 32;

/// The hex digits of a version-1 summary, which `decode` still reads.
pub const FORMAT1_SUMMARY_HEX_DIGITS: usize = 16;

/// Sets of text up to this many elements are sorted on the stack.
const SORTED_TEXTS: usize = 16;

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

    #[cfg_attr(debug_assertions, inline)]
    #[cfg_attr(not(debug_assertions), inline(always))]
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
        /// The digits of `u32::MAX`.
        const MAX_SCHEMA_LEN: usize = 10;
        match self {
            Head::Escaped(text) => text.len(),
            Head::Parts { namespace, .. } => {
                namespace.max_len() + ":s".len() + MAX_SCHEMA_LEN + ":g".len()
            }
        }
    }

    #[cfg_attr(debug_assertions, inline)]
    #[cfg_attr(not(debug_assertions), inline(always))]
    fn write(self, out: &mut String) {
        match self {
            Head::Escaped(text) => out.push_str(text),
            Head::Parts { namespace, schema } => {
                namespace.write(out);
                out.push_str(":s");
                Decimal::new().set_u64(u64::from(schema)).push_to(out);
                out.push_str(":g");
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
/// ([`criterion`](Self::criterion)), then [`finish`](Self::finish).
#[doc(hidden)]
pub struct KeyWriter<'o> {
    out: &'o mut String,
    operation: Text<'o>,
    /// Where this key starts in `out`: everything after it is undone on error.
    start: usize,
    hash_tag: bool,
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
    ) -> Self {
        let mut digits = Decimal::new();
        let generation = digits.set_u64(generation);
        out.reserve(
            head.max_len()
                + generation.as_bytes().len()
                + ":t{}".len()
                + tenant_room
                + ":".len()
                + operation.max_len()
                + ":".len()
                + MAX_PLAIN_CRITERIA,
        );
        let start = out.len();
        write_start(out, head, generation, hash_tag);
        KeyWriter {
            out,
            operation,
            start,
            hash_tag,
            tenants: 0,
            criteria_start: 0,
            digest: None,
            limit: MAX_PLAIN_CRITERIA,
            error: None,
            finished: false,
        }
    }

    /// Writes a readable key instead: the criteria are never summarized
    /// and `max_len` is not checked. Called before any criterion.
    pub fn readable(&mut self) {
        self.limit = READABLE;
    }

    /// Writes the next tenant value; an empty one is an error naming `field`.
    #[cfg_attr(debug_assertions, inline)]
    #[cfg_attr(not(debug_assertions), inline(always))]
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

    /// Ends the tenant segment and writes the operation; the criteria follow.
    #[cfg_attr(debug_assertions, inline)]
    #[cfg_attr(not(debug_assertions), inline(always))]
    pub fn operation(&mut self) {
        write_operation(self.out, self.hash_tag, self.operation);
        self.criteria_start = self.out.len();
    }

    /// Appends the criterion `name=value`, or nothing when the value's
    /// canonical string is empty. `escaped_name_eq` is the escaped name with
    /// its `=`, as derived code has it ready. Called in name order.
    #[cfg_attr(debug_assertions, inline)]
    #[cfg_attr(not(debug_assertions), inline(always))]
    pub fn criterion<V: CriterionValue + ?Sized>(&mut self, escaped_name_eq: &str, value: &V) {
        value.__write_criterion(&mut self.criteria(), escaped_name_eq);
    }

    /// The criteria segment, where values write themselves as criteria
    /// ([`CriterionValue::__write_criterion`]), in name order.
    #[cfg_attr(debug_assertions, inline)]
    #[cfg_attr(not(debug_assertions), inline(always))]
    pub fn criteria(&mut self) -> CriteriaSegment<'_> {
        CriteriaSegment {
            out: self.out,
            start: self.criteria_start,
            digest: &mut self.digest,
            limit: self.limit,
        }
    }

    /// Ends the key: the criteria or their summary, then the `max_len` check.
    #[cfg_attr(debug_assertions, inline)]
    #[cfg_attr(not(debug_assertions), inline(always))]
    pub fn finish(mut self, max_len: Option<usize>) -> Result<(), KeyError> {
        if let Some(error) = self.error.take() {
            return Err(error);
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

/// Appends one tenant value escaped, after a `,` unless it is the `first` of
/// a compound tenant. An empty value, or its type's empty value
/// ([`TenantValue::is_empty_value`]) unless `allow_zero`, is an error naming
/// `field` (the value's bytes may stay written: callers undo the whole key or
/// segment).
#[cfg_attr(debug_assertions, inline)]
#[cfg_attr(not(debug_assertions), inline(always))]
pub fn push_tenant_part<T: TenantValue + ?Sized>(
    out: &mut String,
    first: bool,
    field: &'static str,
    value: &T,
    allow_zero: bool,
) -> Result<(), KeyError> {
    if !first {
        out.push(',');
    }
    let before = out.len();
    match value.__canonical_text() {
        // Text is its own canonical string: checked inline, copied whole.
        Some(text) => push_escaped_short(out, text),
        None => value.write_canonical(&mut CanonicalWriter::escaped(out)),
    }
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
pub(crate) fn write_start(out: &mut String, head: Head<'_>, generation: &Decimal, hash_tag: bool) {
    head.write(out);
    generation.push_to(out);
    out.push_str(if hash_tag { ":t{" } else { ":t" });
}

/// Ends the tenant segment (`}` with a hash tag) and writes `:operation:`.
#[cfg_attr(debug_assertions, inline)]
#[cfg_attr(not(debug_assertions), inline(always))]
pub(crate) fn write_operation(out: &mut String, hash_tag: bool, operation: Text<'_>) {
    if hash_tag {
        out.push('}');
    }
    out.push(':');
    operation.write(out);
    out.push(':');
}

/// Ends a key whose criteria were written in full and in name order from
/// `criteria_start`, however long (a builder's, given in that order):
/// summarizes them when they are longer than [`MAX_PLAIN_CRITERIA`], and
/// removes the `:` before them when there are none.
pub(crate) fn end_plain_criteria(out: &mut String, criteria_start: usize, limit: usize) {
    let len = out.len() - criteria_start;
    if len > limit {
        let mut digest = Sha256::new();
        digest.update(out.as_bytes().get(criteria_start..).unwrap_or_default());
        out.truncate(criteria_start);
        summarize(out, digest);
    } else if len == 0 {
        out.pop();
    }
}

/// Ends a key whose criteria are pieces of `out` after `criteria_start`
/// (`esc(name) "=" esc(value)` each, in any order there), given as ranges in
/// name order: lays them out as [`end_plain_criteria`] expects them, joined
/// with `&` and without those with an empty value, then ends the key as it
/// does. Criteria to be summarized go to SHA-256 from where they are.
pub(crate) fn end_criteria_in_order<I>(
    out: &mut String,
    criteria_start: usize,
    pairs: I,
    limit: usize,
) where
    I: Iterator<Item = Range<usize>> + Clone,
{
    let end = out.len();
    let is_kept = |out: &String, pair: &Range<usize>| {
        let last = pair
            .end
            .checked_sub(1)
            .and_then(|last| out.as_bytes().get(last));
        last.is_some_and(|&last| last != b'=')
    };
    // Criteria to be summarized go to SHA-256 from where they are, rather
    // than copied: measured first, unless what was written is short already.
    let len = if end - criteria_start <= limit {
        0
    } else {
        pairs
            .clone()
            .filter(|pair| is_kept(out, pair))
            .map(|pair| pair.len() + 1)
            .sum::<usize>()
    };
    // (`len` counts a `&` after each criterion: one more than laid out.)
    if len > limit.saturating_add(1) {
        let mut digest = Sha256::new();
        for (i, pair) in pairs.filter(|pair| is_kept(out, pair)).enumerate() {
            if i > 0 {
                digest.update(b"&");
            }
            digest.update(out.as_bytes().get(pair).unwrap_or_default());
        }
        out.truncate(criteria_start);
        summarize(out, digest);
        return;
    }
    // Copied in order after the draft (at most 48 bytes more), then moved
    // down over it: no check that the text is UTF-8, which a copy through
    // the stack needs on its way back.
    for pair in pairs {
        if is_kept(out, &pair) {
            if out.len() > end {
                out.push('&');
            }
            out.extend_from_within(pair);
        }
    }
    out.drain(criteria_start..end);
    end_plain_criteria(out, criteria_start, limit);
}

/// The `max_len` check: a key is refused, never truncated.
#[inline]
pub(crate) fn check_len(len: usize, max_len: Option<usize>) -> Result<(), KeyError> {
    match max_len {
        Some(max) if len > max => Err(KeyError::TooLong { len, max }),
        _ => Ok(()),
    }
}

#[cold]
#[inline(never)]
fn summarize(out: &mut String, digest: Sha256) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push_str("c_");
    for byte in digest.finalize().iter().take(SUMMARY_HEX_DIGITS / 2) {
        out.push(char::from(HEX[usize::from(byte >> 4)]));
        out.push(char::from(HEX[usize::from(byte & 0xf)]));
    }
}

/// The criteria segment of a key being written: the text after `start` in
/// `out`, until it outgrows the plain form (`limit` bytes) and streams into
/// `digest`. Values write themselves here as criteria
/// ([`CriterionValue::__write_criterion`]), text, integers, lists and sets
/// on the short paths below.
///
/// The [`KeyBuilder`](crate::KeyBuilder) writes each criterion through a
/// segment of its own, which starts at the criterion and has no limit: it
/// summarizes the criteria once they are all sorted.
#[doc(hidden)]
pub struct CriteriaSegment<'w> {
    pub(crate) out: &'w mut String,
    pub(crate) start: usize,
    pub(crate) digest: &'w mut Option<Sha256>,
    pub(crate) limit: usize,
}

impl CriteriaSegment<'_> {
    /// The same segment, borrowed for a shorter while.
    #[inline]
    fn reborrow(&mut self) -> CriteriaSegment<'_> {
        CriteriaSegment {
            out: self.out,
            start: self.start,
            digest: self.digest,
            limit: self.limit,
        }
    }

    /// A criterion written through its canonical string, whatever its type.
    #[inline]
    pub(crate) fn canonical_criterion<V: CriterionValue + ?Sized>(
        &mut self,
        escaped_name_eq: &str,
        value: &V,
    ) {
        value.write_canonical(&mut CanonicalWriter::criterion(
            self.reborrow(),
            escaped_name_eq,
        ));
    }

    /// A text criterion: the text escaped, or nothing when it is empty.
    #[cfg_attr(debug_assertions, inline)]
    #[cfg_attr(not(debug_assertions), inline(always))]
    pub(crate) fn text_criterion(&mut self, escaped_name_eq: &str, text: &str) {
        if text.is_empty() {
            return;
        }
        self.begin_pair(escaped_name_eq);
        self.push_text(text);
    }

    /// A list criterion. A list of text is written here directly (each
    /// element's `%` and `,` escaped once more, as the list rule requires);
    /// any other list through its canonical string.
    #[inline]
    pub(crate) fn list_criterion<T: CriterionValue>(&mut self, escaped_name_eq: &str, items: &[T]) {
        let texts = || items.iter().map(CriterionValue::__canonical_text);
        if texts().any(|text| text.is_none()) {
            return self.canonical_criterion(escaped_name_eq, items);
        }
        self.text_list(escaped_name_eq, texts().flatten());
    }

    /// A set criterion. A small set of text is sorted here by reference and
    /// written directly; any other set through its canonical string.
    #[inline]
    pub(crate) fn set_criterion<'s, T, S>(
        &mut self,
        escaped_name_eq: &str,
        set: &S,
        items: impl IntoIterator<Item = &'s T>,
    ) where
        T: CriterionValue + 's,
        S: CriterionValue + ?Sized,
    {
        let mut texts = [""; SORTED_TEXTS];
        let mut count = 0;
        for item in items {
            match item.__canonical_text() {
                Some(text) if count < SORTED_TEXTS => {
                    texts[count] = text;
                    count += 1;
                }
                _ => return self.canonical_criterion(escaped_name_eq, set),
            }
        }
        let texts = &mut texts[..count];
        texts.sort_unstable();
        let mut previous = None;
        self.text_list(
            escaped_name_eq,
            texts.iter().copied().filter(|&text| {
                let new = previous != Some(text);
                previous = Some(text);
                new
            }),
        );
    }

    /// Writes `name=` and a list of text, each element's `%` and `,` escaped
    /// once more, as the list rule requires. An empty list, or a list of one
    /// empty element, is the empty string: nothing is written.
    fn text_list<'t>(&mut self, escaped_name_eq: &str, texts: impl Iterator<Item = &'t str>) {
        let mut texts = texts.peekable();
        let mut written = 0;
        while let Some(text) = texts.next() {
            if written == 0 {
                if text.is_empty() && texts.peek().is_none() {
                    return;
                }
                self.begin_pair(escaped_name_eq);
            } else {
                self.push("%2C");
            }
            written += 1;
            for_each_escaped_str(text, |piece| match piece {
                "%25" => self.push("%2525"),
                "%2C" => self.push("%252C"),
                piece => self.push(piece),
            });
        }
    }

    /// An integer criterion: its digits need no escaping.
    #[cfg_attr(debug_assertions, inline)]
    #[cfg_attr(not(debug_assertions), inline(always))]
    pub(crate) fn decimal_criterion(&mut self, escaped_name_eq: &str, decimal: &Decimal) {
        self.begin_pair(escaped_name_eq);
        self.push_decimal(decimal);
    }

    /// Appends text, escaped.
    #[cfg_attr(debug_assertions, inline)]
    #[cfg_attr(not(debug_assertions), inline(always))]
    pub(crate) fn push_text(&mut self, text: &str) {
        if self.has_room_for(text.len() * MAX_ESCAPED_PER_BYTE) {
            // Even escaped at its longest, the text stays in the plain form.
            push_escaped_short(self.out, text);
        } else {
            for_each_escaped_str(text, |piece| self.push(piece));
        }
    }

    /// Appends an integer's digits (they need no escaping).
    #[cfg_attr(debug_assertions, inline)]
    #[cfg_attr(not(debug_assertions), inline(always))]
    pub(crate) fn push_decimal(&mut self, decimal: &Decimal) {
        if self.has_room_for(decimal.as_bytes().len()) {
            decimal.push_to(self.out);
        } else {
            decimal.for_each_piece(|piece| self.push(piece));
        }
    }

    /// Appends escaped text.
    #[cfg_attr(debug_assertions, inline)]
    #[cfg_attr(not(debug_assertions), inline(always))]
    pub(crate) fn push(&mut self, escaped: &str) {
        if let Some(digest) = self.digest {
            digest.update(escaped.as_bytes());
        } else if self.out.len() - self.start + escaped.len() <= self.limit {
            self.out.push_str(escaped);
        } else {
            self.spill(escaped);
        }
    }

    /// Appends one ASCII character: a separator.
    #[cfg_attr(debug_assertions, inline)]
    #[cfg_attr(not(debug_assertions), inline(always))]
    fn push_ascii(&mut self, ascii: char) {
        if self.digest.is_none() && self.out.len() - self.start < self.limit {
            self.out.push(ascii);
        } else {
            self.push(ascii.encode_utf8(&mut [0; 4]));
        }
    }

    /// Whether `len` more bytes keep the criteria in the plain form.
    #[cfg_attr(debug_assertions, inline)]
    #[cfg_attr(not(debug_assertions), inline(always))]
    fn has_room_for(&self, len: usize) -> bool {
        self.digest.is_none() && self.out.len() - self.start + len <= self.limit
    }

    /// The criteria outgrew the plain form: they continue in SHA-256.
    #[cold]
    #[inline(never)]
    fn spill(&mut self, escaped: &str) {
        let mut digest = Sha256::new();
        digest.update(&self.out.as_bytes()[self.start..]);
        digest.update(escaped.as_bytes());
        self.out.truncate(self.start);
        *self.digest = Some(digest);
    }

    /// The `&` before every pair but the first.
    #[cfg_attr(debug_assertions, inline)]
    #[cfg_attr(not(debug_assertions), inline(always))]
    fn separator(&mut self) {
        if self.digest.is_some() || self.out.len() > self.start {
            self.push_ascii('&');
        }
    }

    /// Starts a pair: the separator, then `name=` (escaped already; empty
    /// when the builder wrote the name itself).
    #[cfg_attr(debug_assertions, inline)]
    #[cfg_attr(not(debug_assertions), inline(always))]
    pub(crate) fn begin_pair(&mut self, escaped_name_eq: &str) {
        self.separator();
        if !escaped_name_eq.is_empty() {
            self.push(escaped_name_eq);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key_with_criteria(pairs: &[(&str, &str)]) -> String {
        let mut out = String::new();
        let mut key = KeyWriter::new(
            &mut out,
            Head::Escaped("ns:s1:g"),
            1,
            false,
            1,
            Text::Escaped("op"),
        );
        key.tenant("t", "t", false);
        key.operation();
        for (name, value) in pairs {
            key.criterion(&format!("{name}="), value);
        }
        key.finish(None).unwrap();
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
    fn an_error_or_an_unfinished_key_leaves_the_buffer_as_it_was() {
        fn writer(out: &mut String, hash_tag: bool) -> KeyWriter<'_> {
            let operation = Text::Escaped("op");
            KeyWriter::new(out, Head::Escaped("ns:s1:g"), 1, hash_tag, 0, operation)
        }
        let mut out = String::from("kept|");

        let mut key = writer(&mut out, true);
        key.tenant("org", "", false);
        key.operation();
        let empty_tenant = KeyError::EmptyTenant {
            field: "org".into(),
        };
        assert_eq!(key.finish(None), Err(empty_tenant));
        assert_eq!(out, "kept|");

        let mut key = writer(&mut out, false);
        key.tenant("org", "acme", false);
        drop(key);
        assert_eq!(out, "kept|");

        let mut key = writer(&mut out, false);
        key.tenant("org", "acme", false);
        key.operation();
        let too_long = KeyError::TooLong { len: 17, max: 5 };
        assert_eq!(key.finish(Some(5)), Err(too_long));
        assert_eq!(out, "kept|");
    }
}
