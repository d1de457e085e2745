//! [`CanonicalWriter`]: where a [`CriterionValue`](crate::CriterionValue) writes
//! its canonical string.
//!
//! The writer escapes as it goes, straight into its destination (the criteria
//! segment of a key, a builder's buffer, or a length count), so values
//! never build an intermediate `String`. It also knows how deep inside lists the
//! current value sits, which is what keeps list encoding injective: inside a
//! list, an element's `%` and `,` are written `%25` and `%2C` before the whole
//! is escaped again.

use core::fmt;

use crate::escape;
use crate::number::Decimal;
use crate::value::CriterionValue;
use crate::writer::CriteriaSegment;

/// Receives the canonical string of a criterion or tenant value.
///
/// Implementations of [`CriterionValue`] write through [`write_str`](Self::write_str)
/// (or `write!`, since the writer implements [`fmt::Write`]) and, for
/// collections, [`write_list`](Self::write_list) and [`write_set`](Self::write_set).
/// Writing nothing means the empty canonical string: the criterion is dropped
/// from the key, as the key format requires for `None` and `""`.
///
/// ```
/// use cache_key::{CanonicalWriter, CriterionValue};
///
/// /// A shelf position, written `aisle.shelf`.
/// struct Shelf { aisle: u16, shelf: u8 }
///
/// impl CriterionValue for Shelf {
///     fn write_canonical(&self, out: &mut CanonicalWriter<'_>) {
///         use std::fmt::Write;
///         let _ = write!(out, "{}.{}", self.aisle, self.shelf);
///     }
/// }
/// ```
pub struct CanonicalWriter<'w> {
    sink: Sink<'w>,
    /// How many lists enclose the text being written.
    depth: u32,
    /// The escaped `name=` of a criterion, written before the value's first
    /// byte, and not at all when the value is empty.
    pending_pair: Option<&'w str>,
}

/// Where the writer's output goes.
enum Sink<'w> {
    /// Escaped text, appended.
    Escaped(&'w mut String),
    /// The canonical string itself, unescaped (for sorting set elements).
    Raw(&'w mut String),
    /// The same, into a stack buffer (for sorting the elements of small sets).
    RawStack(&'w mut SetElements),
    /// Escaped text, into a key's criteria segment.
    Criteria(CriteriaSegment<'w>),
    /// Only the length of the escaped text.
    Count(&'w mut usize),
}

impl<'w> CanonicalWriter<'w> {
    fn new(sink: Sink<'w>) -> Self {
        CanonicalWriter {
            sink,
            depth: 0,
            pending_pair: None,
        }
    }

    /// A writer appending the escaped canonical string to `out`.
    pub(crate) fn escaped(out: &'w mut String) -> Self {
        Self::new(Sink::Escaped(out))
    }

    /// A writer adding the length of the escaped canonical string to `count`.
    pub(crate) fn count(count: &'w mut usize) -> Self {
        Self::new(Sink::Count(count))
    }

    /// A writer for one criterion of a key's criteria segment: `name=` is
    /// written before the value's first byte, and nothing at all for an empty value.
    pub(crate) fn criterion(segment: CriteriaSegment<'w>, escaped_name_eq: &'w str) -> Self {
        CanonicalWriter {
            pending_pair: Some(escaped_name_eq),
            ..Self::new(Sink::Criteria(segment))
        }
    }

    /// Writes text as part of the canonical string.
    ///
    /// Any text is allowed: separators and non-ASCII characters are escaped
    /// as the key format requires.
    #[inline]
    pub fn write_str(&mut self, text: &str) {
        if self.depth == 0 {
            self.write_top_level(text);
            return;
        }
        let mut rest = text;
        while let Some(at) = rest.bytes().position(|b| b == b'%' || b == b',') {
            self.write_top_level(&rest[..at]);
            self.write_list_escape(rest.as_bytes()[at]);
            rest = &rest[at + 1..];
        }
        self.write_top_level(rest);
    }

    /// Writes the canonical string of another value, as a part of this one.
    pub fn write_value<V: CriterionValue + ?Sized>(&mut self, value: &V) {
        value.write_canonical(self);
    }

    /// Writes a list: each item's canonical string, joined with `,`, in order.
    ///
    /// Inside an item, `%` and `,` are written `%25` and `%2C`, so `["a,b"]`
    /// and `["a", "b"]` stay different. An item that writes nothing (such as
    /// `None`) is an empty element.
    pub fn write_list<I>(&mut self, items: I)
    where
        I: IntoIterator,
        I::Item: CriterionValue,
    {
        for (i, item) in items.into_iter().enumerate() {
            if i > 0 {
                self.write_str(",");
            }
            self.depth += 1;
            item.write_canonical(self);
            self.depth -= 1;
        }
    }

    /// Writes a set: like [`write_list`](Self::write_list), after sorting the
    /// items' canonical strings by their UTF-8 bytes and removing duplicates,
    /// so the iteration order of a `HashSet` never reaches a key.
    pub fn write_set<I>(&mut self, items: I)
    where
        I: IntoIterator,
        I::Item: CriterionValue,
    {
        let mut elements = SetElements::new();
        let mut items = items.into_iter();
        for item in items.by_ref() {
            let start = elements.len;
            item.write_canonical(&mut CanonicalWriter::new(Sink::RawStack(&mut elements)));
            if !elements.end_item() {
                // Too large for the stack: the rest is sorted on the heap.
                let mut texts = String::from(elements.text(start));
                let mut ends = elements.ends();
                item.write_canonical(&mut CanonicalWriter::new(Sink::Raw(&mut texts)));
                ends.push(texts.len());
                for item in items {
                    item.write_canonical(&mut CanonicalWriter::new(Sink::Raw(&mut texts)));
                    ends.push(texts.len());
                }
                let mut start = 0;
                let mut elements: Vec<&str> = ends
                    .iter()
                    .map(|&end| {
                        let element = &texts[start..end];
                        start = end;
                        element
                    })
                    .collect();
                elements.sort_unstable();
                elements.dedup();
                self.write_list(elements);
                return;
            }
        }
        elements.write_sorted(self);
    }

    /// Writes text at the top level of the value: escaped unless raw.
    #[inline]
    fn write_top_level(&mut self, text: &str) {
        if text.is_empty() {
            return;
        }
        match &mut self.sink {
            Sink::Raw(out) => out.push_str(text),
            Sink::RawStack(out) => out.push(text),
            Sink::Escaped(out) => escape::push_escaped(out, text),
            Sink::Criteria(segment) => {
                if let Some(name_eq) = self.pending_pair.take() {
                    segment.begin_pair(name_eq);
                }
                segment.push_text(text);
            }
            Sink::Count(count) => **count += escape::escaped_len(text),
        }
    }

    /// Writes an integer: its digits and `-` never need escaping, at any depth.
    #[inline]
    pub(crate) fn write_decimal(&mut self, decimal: &Decimal) {
        match &mut self.sink {
            Sink::Criteria(segment) => {
                if let Some(name_eq) = self.pending_pair.take() {
                    segment.begin_pair(name_eq);
                }
                segment.push_decimal(decimal);
            }
            Sink::Count(count) => **count += decimal.as_bytes().len(),
            Sink::Escaped(out) | Sink::Raw(out) => decimal.push_to(out),
            Sink::RawStack(out) => out.push_bytes(decimal.as_bytes()),
        }
    }

    /// Writes text made only of unreserved bytes other than `%` and `,` (the
    /// digits and `-` of an integer, `true`, `false`): it is the same escaped
    /// or not, at any depth, so it is copied as it is.
    #[inline]
    pub(crate) fn write_unreserved(&mut self, text: &str) {
        debug_assert!(text.bytes().all(escape::unreserved));
        self.emit(text);
    }

    /// Writes a `%` or `,` of text nested `depth` lists deep: escaped once per
    /// enclosing list (`%` → `%25`, `,` → `%2C`), then once more by `esc`
    /// unless raw.
    fn write_list_escape(&mut self, byte: u8) {
        let raw = matches!(self.sink, Sink::Raw(_) | Sink::RawStack(_));
        self.emit(if raw { "%" } else { "%25" });
        let extra_levels = if byte == b'%' {
            self.depth
        } else {
            self.depth - 1
        };
        for _ in 0..extra_levels {
            self.emit("25");
        }
        if byte == b',' {
            self.emit("2C");
        }
    }

    /// Sends final bytes to the sink.
    #[inline]
    fn emit(&mut self, text: &str) {
        match &mut self.sink {
            Sink::Escaped(out) | Sink::Raw(out) => out.push_str(text),
            Sink::RawStack(out) => out.push(text),
            Sink::Criteria(segment) => {
                if let Some(name_eq) = self.pending_pair.take() {
                    segment.begin_pair(name_eq);
                }
                segment.push(text);
            }
            Sink::Count(count) => **count += text.len(),
        }
    }
}

/// The canonical strings of a set's elements, on the stack: sets of up to
/// [`SET_ITEMS`] elements and [`SET_BYTES`] bytes are sorted without
/// allocating. Kept small: it is initialized for every set written.
pub(crate) struct SetElements {
    bytes: [u8; SET_BYTES],
    len: usize,
    /// Where each element ends in `bytes`.
    ends: [u8; SET_ITEMS],
    count: usize,
    /// Set when the element being written did not fit.
    overflow: bool,
}

const SET_BYTES: usize = 192;
const SET_ITEMS: usize = 16;

impl SetElements {
    #[inline]
    fn new() -> Self {
        SetElements {
            bytes: [0; SET_BYTES],
            len: 0,
            ends: [0; SET_ITEMS],
            count: 0,
            overflow: false,
        }
    }

    #[inline]
    fn push(&mut self, text: &str) {
        self.push_bytes(text.as_bytes());
    }

    /// Appends whole UTF-8 text, as bytes.
    #[inline]
    fn push_bytes(&mut self, bytes: &[u8]) {
        let end = self.len + bytes.len();
        match self.bytes.get_mut(self.len..end) {
            Some(dest) if !self.overflow => {
                dest.copy_from_slice(bytes);
                self.len = end;
            }
            _ => self.overflow = true,
        }
    }

    /// Ends the element being written; false when it did not fit.
    #[inline]
    fn end_item(&mut self) -> bool {
        if self.overflow || self.count == SET_ITEMS {
            return false;
        }
        // `len` is at most SET_BYTES, which fits a `u8`.
        self.ends[self.count] = self.len as u8;
        self.count += 1;
        true
    }

    /// The complete elements' text, up to `end`.
    fn text(&self, end: usize) -> &str {
        // Only whole `&str`s were appended.
        core::str::from_utf8(&self.bytes[..end]).unwrap_or_default()
    }

    fn ends(&self) -> Vec<usize> {
        self.ends[..self.count]
            .iter()
            .map(|&end| usize::from(end))
            .collect()
    }

    /// Element `i`.
    fn element<'t>(&self, text: &'t str, i: u8) -> &'t str {
        let i = usize::from(i);
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        text.get(usize::from(start)..usize::from(self.ends[i]))
            .unwrap_or_default()
    }

    /// Writes the elements sorted by their bytes, without duplicates, as a list.
    fn write_sorted(&self, out: &mut CanonicalWriter<'_>) {
        let text = self.text(self.len);
        let mut order = [0u8; SET_ITEMS];
        for (i, slot) in order.iter_mut().enumerate() {
            *slot = i as u8;
        }
        let order = &mut order[..self.count];
        order.sort_unstable_by(|&a, &b| self.element(text, a).cmp(self.element(text, b)));
        let mut previous = None;
        let unique = order.iter().filter_map(|&i| {
            let element = self.element(text, i);
            (previous != Some(element)).then(|| {
                previous = Some(element);
                element
            })
        });
        out.write_list(unique);
    }
}

impl fmt::Write for CanonicalWriter<'_> {
    fn write_str(&mut self, text: &str) -> fmt::Result {
        CanonicalWriter::write_str(self, text);
        Ok(())
    }
}

impl fmt::Debug for CanonicalWriter<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CanonicalWriter")
            .field("depth", &self.depth)
            .finish_non_exhaustive()
    }
}
