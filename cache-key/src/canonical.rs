//! The canonical string: [`CriterionValue`] and [`TenantValue`], the types a
//! key can be made of, and [`CanonicalWriter`], where a value writes its
//! canonical string (the table in the key format; the standard types' are in
//! `std_types.rs`).
//!
//! The writer escapes as it goes, straight into its destination (a key's
//! criteria segment, a buffer, a length count), so values never build an
//! intermediate `String`. It also knows how deep inside lists the current
//! value sits, which keeps list encoding injective: inside a list, an
//! element's `%` and `,` are written `%25` and `%2C` before the whole is
//! escaped again.

use core::fmt;

use cache_key_format::LIST_SEPARATOR;
use cache_key_format::escape::{escaped_len, for_each_escaped_str, push_escaped_short, unreserved};
use smallvec::SmallVec;

use crate::criteria_segment::CriteriaSegment;
use crate::number::{digits, push_digits};

// `inline(always)` only in optimized builds: see the note in key_writer.rs.

/// A value that can be a criterion of a cache key: it has one canonical string.
///
/// Two values that mean the same query must write the same canonical string,
/// and two that mean different queries must write different ones. Writing
/// nothing (the empty string) drops the criterion from the key, as `None` does.
///
/// Implemented for the types of the key format's table: text (`str`, `String`,
/// `Cow<str>`, `char`), every integer width and `NonZero` integer, `bool`,
/// `f32`/`f64` (in JavaScript number form), `Option<T>`, lists (`Vec<T>`,
/// `VecDeque<T>`, slices, arrays), sets (`BTreeSet<T>`, `HashSet<T>`, sorted),
/// and references, `Box`, `Rc` and `Arc` of these.
///
/// Time instants (`Instant`, `SystemTime`) are deliberately not criteria: they
/// make every key unique. Bucket them first (a date, an hour) and use that.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be part of a cache key",
    label = "`{Self}` does not implement `CriterionValue`",
    note = "accepted: text (&str, String, Cow<str>, char), integers, NonZero integers, bool, f32, f64, Option<T>, Vec<T>, slices, arrays, BTreeSet<T>, HashSet<T>, and references to these; with the crate's features, Uuid, Url and dates",
    note = "a time instant (Instant, SystemTime) would make every key unique: bucket it into a date (chrono's NaiveDate or time's Date, behind the `chrono` and `time` features), or `#[skip]` the field",
    note = "for a struct of several criteria, derive `Criteria` on it and write `#[criterion(flatten)]`; for an enum or a newtype, derive `CriterionValue`; to key on a value computed from the field, write `#[criterion(with = path::to::function)]`",
    note = "if the field does not change the response, mark it `#[skip]`"
)]
pub trait CriterionValue {
    /// Writes this value's canonical string.
    fn write_canonical(&self, out: &mut CanonicalWriter<'_>);

    /// The text this value holds when that text is its canonical string, so
    /// that sets of text sort it without copying. Not a public API, and
    /// sealed: no type outside this crate can name [`Seal`], so only this
    /// crate's text types and their wrappers answer, and what they answer is
    /// what they write.
    #[doc(hidden)]
    #[inline]
    fn __canonical_text(&self, _: Seal) -> Option<&str> {
        None
    }
}

pub(crate) use sealed::Seal;

mod sealed {
    /// The argument only this crate can give: see
    /// [`CriterionValue::__canonical_text`](super::CriterionValue::__canonical_text).
    #[derive(Debug, Clone, Copy)]
    pub struct Seal;
}

/// A value that can identify a tenant (the authorization scope of a key): text,
/// integers and `char`.
///
/// Deliberately not implemented for `Option<T>`, collections or floats: a scope
/// cannot be optional or approximate. An empty tenant value is an error when
/// the key is built, never a key.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be a tenant of a cache key",
    label = "`{Self}` does not implement `TenantValue`",
    note = "a tenant is text (&str, String, Cow<str>, char) or an integer; it cannot be optional, a collection or a float",
    note = "for your own identifier type, implement `CriterionValue` and `TenantValue`"
)]
pub trait TenantValue: CriterionValue {
    /// An upper bound of the length of this value in a key (escaped), used to
    /// size the key before it is written. It never changes the key: a bound
    /// too small only costs a second allocation. The default measures exactly.
    fn max_escaped_len(&self) -> usize {
        let mut len = 0;
        self.write_canonical(&mut CanonicalWriter::count(&mut len));
        len
    }

    /// Whether this is its type's empty value: `0` for an integer, `""` for
    /// text, the nil UUID. A tenant left at its default
    /// (`..Default::default()`, a `#[derive(Default)]`, serde's `default`)
    /// has it, so a key refuses it as [`KeyError::EmptyTenant`] unless the
    /// tenant declares the value real (`#[tenant(allow_zero = "why")]`,
    /// [`KeyBuilder::tenant_allowing_zero`]). The default: `false`.
    ///
    /// [`KeyError::EmptyTenant`]: crate::KeyError::EmptyTenant
    /// [`KeyBuilder::tenant_allowing_zero`]: crate::KeyBuilder::tenant_allowing_zero
    fn is_empty_value(&self) -> bool {
        false
    }
}

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
    /// Escaped text, into a key's criteria segment.
    Criteria(CriteriaSegment<'w>),
    /// Only the length of the escaped text.
    Count(&'w mut usize),
    /// The canonical string itself, unescaped, as an element of a set.
    Set(&'w mut SetElements),
}

impl<'w> CanonicalWriter<'w> {
    #[inline]
    fn new(sink: Sink<'w>) -> Self {
        CanonicalWriter {
            sink,
            depth: 0,
            pending_pair: None,
        }
    }

    /// A writer appending the escaped canonical string to `out`.
    #[inline]
    pub(crate) fn escaped(out: &'w mut String) -> Self {
        Self::new(Sink::Escaped(out))
    }

    /// A writer adding the length of the escaped canonical string to `count`.
    pub(crate) fn count(count: &'w mut usize) -> Self {
        Self::new(Sink::Count(count))
    }

    /// A writer for one criterion of a key's criteria segment: `name=` is
    /// written before the value's first byte, and nothing at all for an empty value.
    #[inline]
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
    #[cfg_attr(debug_assertions, inline)]
    #[cfg_attr(not(debug_assertions), inline(always))]
    pub fn write_str(&mut self, text: &str) {
        if self.depth == 0 {
            self.write_top_level(text);
        } else if let Sink::Set(_) = self.sink {
            let mut rest = text;
            while let Some(at) = rest.bytes().position(|b| b == b'%' || b == b',') {
                self.emit(&rest[..at]);
                self.write_list_escape(rest.as_bytes()[at]);
                rest = &rest[at + 1..];
            }
            self.emit(rest);
        } else {
            for_each_escaped_str(text, |piece| match piece {
                "%25" => self.write_list_escape(b'%'),
                "%2C" => self.write_list_escape(b','),
                piece => self.emit(piece),
            });
        }
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
                self.write_list_escape(LIST_SEPARATOR as u8);
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
        let mut elements = SetElements::default();
        for item in items {
            elements.push(&item);
        }
        self.write_sorted(&mut SmallVec::new(), &elements);
    }

    /// [`write_set`](Self::write_set) for borrowed items: those that hold
    /// their canonical string as text are sorted without copying it.
    pub(crate) fn write_set_of<'s, T: CriterionValue + 's>(
        &mut self,
        items: impl IntoIterator<Item = &'s T>,
    ) {
        let mut elements = SetElements::default();
        let mut texts = SmallVec::new();
        for item in items {
            match item.__canonical_text(Seal) {
                Some(text) => texts.push(text),
                None => elements.push(item),
            }
        }
        self.write_sorted(&mut texts, &elements);
    }

    /// Writes a set's elements, `texts` and those of `elements`, sorted by
    /// their bytes and without duplicates, as a list: the one ordering of sets.
    fn write_sorted<'t>(
        &mut self,
        texts: &mut SmallVec<[&'t str; SET_ITEMS]>,
        elements: &'t SetElements,
    ) {
        if !elements.ends.is_empty() {
            // Only whole `&str`s were appended.
            let text = core::str::from_utf8(&elements.bytes).unwrap_or_default();
            let mut start = 0;
            texts.extend(elements.ends.iter().map(|&end| {
                let element = text.get(start..end).unwrap_or_default();
                start = end;
                element
            }));
        }
        texts.sort_unstable();
        let mut previous = None;
        self.write_texts(texts.iter().copied().filter(move |&text| {
            let new = previous != Some(text);
            previous = Some(text);
            new
        }));
    }

    /// [`write_list`](Self::write_list) for a slice: of text, see
    /// [`write_texts`](Self::write_texts).
    #[inline(always)]
    pub(crate) fn write_slice<T: CriterionValue>(&mut self, items: &[T]) {
        let texts = items.iter().map(|item| item.__canonical_text(Seal));
        if texts.clone().all(|text| text.is_some()) {
            self.write_texts(texts.flatten());
        } else {
            self.write_list(items);
        }
    }

    /// [`write_list`](Self::write_list) for text. A list written escaped at
    /// the top level (a key's criterion, a builder's value) goes straight to
    /// its output: the same bytes, without the general writer's per-piece
    /// dispatch.
    #[inline(always)]
    fn write_texts<'t>(&mut self, texts: impl Iterator<Item = &'t str> + Clone) {
        let mut first_two = texts.clone().take(2);
        // An empty list, or one empty element, writes nothing.
        if matches!(
            (first_two.next(), first_two.next()),
            (None | Some(""), None)
        ) {
            return;
        }
        match &mut self.sink {
            Sink::Criteria(segment) if self.depth == 0 => {
                if let Some(name_eq) = self.pending_pair.take() {
                    segment.begin_pair(name_eq);
                }
                write_text_list(texts, segment);
            }
            Sink::Escaped(out) if self.depth == 0 => write_text_list(texts, *out),
            _ => self.write_list(texts),
        }
    }

    /// Writes text at the top level of the value: escaped unless raw.
    #[cfg_attr(debug_assertions, inline)]
    #[cfg_attr(not(debug_assertions), inline(always))]
    fn write_top_level(&mut self, text: &str) {
        if text.is_empty() {
            return;
        }
        match &mut self.sink {
            Sink::Escaped(out) => push_escaped_short(out, text),
            Sink::Criteria(segment) => {
                if let Some(name_eq) = self.pending_pair.take() {
                    segment.begin_pair(name_eq);
                }
                segment.push_text(text);
            }
            Sink::Count(count) => **count += escaped_len(text),
            Sink::Set(elements) => elements.bytes.extend_from_slice(text.as_bytes()),
        }
    }

    /// Writes an integer in exact decimal: its digits and `-` never need
    /// escaping, at any depth.
    #[cfg_attr(debug_assertions, inline)]
    #[cfg_attr(not(debug_assertions), inline(always))]
    pub(crate) fn write_integer<I: itoa::Integer + TryInto<u8>>(&mut self, n: I) {
        let mut buffer = itoa::Buffer::new();
        let digits = digits(&mut buffer, n);
        match &mut self.sink {
            Sink::Escaped(out) => push_digits(out, digits),
            Sink::Criteria(segment) => {
                if let Some(name_eq) = self.pending_pair.take() {
                    segment.begin_pair(name_eq);
                }
                segment.push_digits(digits);
            }
            _ => self.emit(digits),
        }
    }

    /// Writes text made only of unreserved bytes other than `%` and `,` (the
    /// digits and `-` of an integer, `true`, `false`): it is the same escaped
    /// or not, at any depth, so it is copied as it is.
    #[inline]
    pub(crate) fn write_unreserved(&mut self, text: &str) {
        debug_assert!(text.bytes().all(unreserved));
        self.emit(text);
    }

    /// Writes a `%` or `,` of text nested `depth` lists deep: escaped once per
    /// enclosing list (`%` → `%25`, `,` → `%2C`), then once more by `esc`
    /// unless raw. (A `,` at the top level is a list's own separator.)
    #[cfg_attr(debug_assertions, inline)]
    #[cfg_attr(not(debug_assertions), inline(always))]
    fn write_list_escape(&mut self, byte: u8) {
        let raw = matches!(self.sink, Sink::Set(_));
        let levels = self.depth + u32::from(!raw);
        match (byte, levels) {
            (b'%', 0) => return self.emit("%"),
            (_, 0) => return self.emit(","),
            (b'%', 1) => return self.emit("%25"),
            (_, 1) => return self.emit("%2C"),
            _ => {}
        }
        self.emit("%");
        let twenty_fives = if byte == b'%' { levels } else { levels - 1 };
        for _ in 0..twenty_fives {
            self.emit("25");
        }
        if byte != b'%' {
            self.emit("2C");
        }
    }

    /// Sends final bytes to the sink.
    #[cfg_attr(debug_assertions, inline)]
    #[cfg_attr(not(debug_assertions), inline(always))]
    fn emit(&mut self, text: &str) {
        match &mut self.sink {
            Sink::Escaped(out) => out.push_str(text),
            Sink::Criteria(segment) => {
                if let Some(name_eq) = self.pending_pair.take() {
                    segment.begin_pair(name_eq);
                }
                segment.push(text);
            }
            Sink::Count(count) => **count += text.len(),
            Sink::Set(elements) => elements.bytes.extend_from_slice(text.as_bytes()),
        }
    }
}

/// Writes a list of text escaped, piece by piece: elements joined with an
/// escaped `,`, and inside each `%` and `,` escaped once for the list and
/// once by `esc`, as `write_list_escape` does at that depth.
#[inline(always)]
fn write_text_list<'t>(texts: impl Iterator<Item = &'t str>, out: &mut impl PushEscaped) {
    for (i, text) in texts.enumerate() {
        if i > 0 {
            out.push_escaped("%2C");
        }
        for_each_escaped_str(text, |piece| {
            out.push_escaped(match piece {
                "%25" => "%2525",
                "%2C" => "%252C",
                piece => piece,
            })
        });
    }
}

/// Where [`write_text_list`] writes: a method rather than a closure, so that
/// each call is inlined (a constant piece is then copied without a call).
trait PushEscaped {
    fn push_escaped(&mut self, escaped: &str);
}

impl PushEscaped for String {
    #[inline(always)]
    fn push_escaped(&mut self, escaped: &str) {
        self.push_str(escaped);
    }
}

impl PushEscaped for CriteriaSegment<'_> {
    #[inline(always)]
    fn push_escaped(&mut self, escaped: &str) {
        self.push(escaped);
    }
}

/// How many set elements, of how many bytes in all, are sorted without
/// allocating: a set of a few short strings or numbers.
const SET_ITEMS: usize = 16;
const SET_BYTES: usize = 192;

/// The canonical strings of a set's elements, one after the other, and
/// where each ends.
#[derive(Default)]
struct SetElements {
    bytes: SmallVec<[u8; SET_BYTES]>,
    ends: SmallVec<[usize; SET_ITEMS]>,
}

impl SetElements {
    fn push<V: CriterionValue + ?Sized>(&mut self, value: &V) {
        value.write_canonical(&mut CanonicalWriter::new(Sink::Set(self)));
        self.ends.push(self.bytes.len());
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
