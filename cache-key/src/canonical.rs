//! [`CanonicalWriter`]: where a [`CriterionValue`](crate::CriterionValue) writes
//! its canonical string.
//!
//! The writer escapes as it goes, straight into its destination (the criteria
//! segment of a key, a builder's scratch buffer, or a length count), so values
//! never build an intermediate `String`. It also knows how deep inside lists the
//! current value sits, which is what keeps list encoding injective: inside a
//! list, an element's `%` and `,` are written `%25` and `%2C` before the whole
//! is escaped again.

use core::fmt;

use crate::escape;
use crate::tail::Tail;
use crate::value::CriterionValue;

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
    /// The escaped name of a criterion whose `name=` is written before the
    /// value's first byte, and not at all when the value is empty.
    pending_name: Option<&'w str>,
}

/// Where the writer's output goes.
enum Sink<'w> {
    /// Escaped text, appended.
    Escaped(&'w mut String),
    /// The canonical string itself, unescaped (for sorting set elements).
    Raw(&'w mut String),
    /// Escaped text, into a key's criteria segment.
    Tail(&'w mut Tail),
    /// Only the length of the escaped text.
    Count(&'w mut usize),
}

impl<'w> CanonicalWriter<'w> {
    fn new(sink: Sink<'w>) -> Self {
        CanonicalWriter {
            sink,
            depth: 0,
            pending_name: None,
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
    pub(crate) fn criterion(tail: &'w mut Tail, escaped_name: &'w str) -> Self {
        CanonicalWriter {
            pending_name: Some(escaped_name),
            ..Self::new(Sink::Tail(tail))
        }
    }

    /// Writes text as part of the canonical string.
    ///
    /// Any text is allowed: separators and non-ASCII characters are escaped
    /// as the key format requires.
    pub fn write_str(&mut self, text: &str) {
        if self.depth == 0 {
            self.write_top_level(text);
            return;
        }
        let mut rest = text;
        while let Some(at) = rest.find(['%', ',']) {
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
        let mut texts = String::new();
        let mut ends = Vec::new();
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
    }

    /// Writes text at the top level of the value: escaped unless raw.
    fn write_top_level(&mut self, text: &str) {
        if let Sink::Raw(out) = &mut self.sink {
            out.push_str(text);
            return;
        }
        for piece in escape::escape(text) {
            self.emit(piece);
        }
    }

    /// Writes a `%` or `,` of text nested `depth` lists deep: escaped once per
    /// enclosing list (`%` → `%25`, `,` → `%2C`), then once more by `esc`
    /// unless raw.
    fn write_list_escape(&mut self, byte: u8) {
        let raw = matches!(self.sink, Sink::Raw(_));
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
    fn emit(&mut self, text: &str) {
        match &mut self.sink {
            Sink::Escaped(out) | Sink::Raw(out) => out.push_str(text),
            Sink::Tail(tail) => {
                if let Some(name) = self.pending_name.take() {
                    tail.begin_pair([name]);
                }
                tail.push(text);
            }
            Sink::Count(count) => **count += text.len(),
        }
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
