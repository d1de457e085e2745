//! [`KeyBuilder`]: keys assembled at run time, for dynamic filters and for
//! code that cannot use the derive.

use std::borrow::Cow;
use std::cmp::Ordering;
use std::mem;
use std::ops::Range;

use cache_key_format::escape::push_escaped_short;
use cache_key_format::unescape::unescaped_bytes;
use cache_key_format::{
    CRITERIA_SEPARATOR, MAX_PLAIN_CRITERIA, NAME_VALUE_SEPARATOR, TENANT_PART_SEPARATOR,
};
use sha2::{Digest, Sha256};
use smallvec::SmallVec;

use crate::cache_key::KeyPart;
use crate::canonical::{CanonicalWriter, CriterionValue, TenantValue};
use crate::criteria_segment::{READABLE, summarize};
use crate::error::KeyError;
use crate::key::{Key, ReadableKey};
use crate::key_writer::{self, Head, Text};
use crate::number::digits;

// `inline(always)` only in optimized builds: see the note in key_writer.rs.

/// Builds a [`Key`] from parts given at run time.
///
/// It produces exactly the keys a `#[derive(CacheKey)]` struct with the same
/// parts produces. Parts may come in any order and criterion names may be
/// computed at run time. They are written escaped as they come into one
/// buffer, in the format's order where they can be, with their offsets;
/// `build` finishes the key there (criteria sorted, settings changed late
/// applied), and the buffer becomes the key's: a typical key costs one
/// allocation (past eight criteria, their index in name order allocates too).
///
/// Its methods take and return `&mut KeyBuilder`, so a key is built in one
/// expression:
///
/// ```
/// use cache_key::KeyBuilder;
///
/// let key = KeyBuilder::new("library", "search")
///     .generation(4)
///     .tenant("branch-2")
///     .criterion("title", "Sand")
///     .criterion("page", Some(2u32))
///     .build()?;
/// assert_eq!(key.as_str(), "library:s1:g4:tbranch-2:search:page=2&title=Sand");
/// # Ok::<(), cache_key::KeyError>(())
/// ```
///
/// or part by part, from a builder kept in a variable:
///
/// ```
/// use cache_key::KeyBuilder;
///
/// # let (branch, author, year) = ("branch-2", Some("Borges"), None::<u16>);
/// let mut builder = KeyBuilder::new("library", "search");
/// builder.generation(4).tenant(branch);
/// if let Some(author) = author {
///     builder.criterion("author", author);
/// }
/// if let Some(year) = year {
///     builder.criterion("year", year);
/// }
/// let key = builder.build()?;
/// assert_eq!(key.as_str(), "library:s1:g4:tbranch-2:search:author=Borges");
/// # Ok::<(), cache_key::KeyError>(())
/// ```
///
/// [`build`](Self::build) hands the key over and clears the tenant (or
/// `global`) and the criteria, keeping the namespace, operation, schema,
/// generation, hash tag and maximum length: the builder is ready for the
/// next key of the same kind.
///
/// Mistakes are reported by `build`, never turned into a key:
///
/// ```
/// use cache_key::{KeyBuilder, KeyError};
///
/// let err = KeyBuilder::new("library", "list").tenant("").build().unwrap_err();
/// assert!(matches!(err, KeyError::EmptyTenant { .. }));
/// ```
#[derive(Debug, Clone)]
#[must_use = "a KeyBuilder does nothing until `build` is called"]
pub struct KeyBuilder<'a> {
    settings: Settings<'a>,
    /// The longest key allowed, in bytes (`usize::MAX` unless set).
    max_len: usize,
    /// The parts of the key being built, cleared by `build`.
    draft: Draft,
}

/// The key as far as it is written, in the format's order: its start (with
/// the first part, in the settings of then), the tenant values at `tenant`,
/// then `:operation:` (with the first criterion) and from `criteria_start`
/// the criteria, joined with `&` in the order given. `build` finishes it and
/// hands it over.
#[derive(Debug, Clone, Default)]
struct Draft {
    text: String,
    tenant: Range<usize>,
    /// 0 until the first criterion.
    criteria_start: usize,
    /// How many tenant values `text` holds.
    tenants: usize,
    /// Where each criterion is in `text` after `criteria_start`, in name order.
    criteria: SmallVec<[Criterion; 8]>,
    /// A setting changed once the start was written: `build` writes it again.
    stale_start: bool,
    /// Criteria came out of name order, or with an empty value: `build`
    /// lays them out again.
    unsorted: bool,
    /// `tenant` was called (even with a value refused), and `global`.
    tenant_given: bool,
    global: bool,
    /// The first mistake, after which no part is added: `build` reports it.
    mistake: Option<KeyError>,
}

// The methods take `&mut self` rather than `self`: a chain of by-value calls
// moves the builder from call to call, a copy each time.

/// What the key's start and middle are made of.
#[derive(Debug, Clone)]
struct Settings<'a> {
    namespace: Cow<'a, str>,
    operation: Cow<'a, str>,
    generation: u64,
    schema: u32,
    hash_tag: bool,
}

impl Settings<'_> {
    /// `esc(namespace) ":s" schema ":g" generation ":t"`, and `{` with a hash tag.
    #[cfg_attr(debug_assertions, inline)]
    #[cfg_attr(not(debug_assertions), inline(always))]
    fn write_start(&self, out: &mut String) {
        reserve(out);
        let head = Head::Parts {
            namespace: Text::Raw(&self.namespace),
            schema: self.schema,
        };
        let mut buffer = itoa::Buffer::new();
        let generation = digits(&mut buffer, self.generation);
        key_writer::write_start(out, head, generation, self.hash_tag);
    }

    /// `}` with a hash tag, then `":" esc(operation) ":"`.
    #[inline]
    fn write_middle(&self, out: &mut String) {
        key_writer::write_operation(out, self.hash_tag, Text::Raw(&self.operation));
    }
}

/// A criterion in a builder's `text`, at offsets from the criteria's start
/// (which tenant values given late move): `start..value_start` is its
/// escaped name and `=`, `value_start..end` its escaped value (empty for an
/// empty value, which the key leaves out but whose name still counts).
#[derive(Debug, Clone, Copy)]
struct Criterion {
    /// Its name's [`name_prefix`].
    prefix: u64,
    start: usize,
    value_start: usize,
    end: usize,
}

/// The capacity the buffer starts with: room for a typical key's draft
/// (eight criteria of 116 bytes fit) and for criteria laid out again after
/// it, so that it is allocated once.
const BUFFER_CAPACITY: usize = 192;

/// Allocates an empty buffer outright: cheaper than growing it.
#[inline]
fn reserve(buffer: &mut String) {
    if buffer.capacity() == 0 {
        *buffer = String::with_capacity(BUFFER_CAPACITY);
    }
}

/// The first eight bytes of a criterion name, zero-padded, as a big-endian
/// number: names whose prefixes differ order as the prefixes do, so that
/// most comparisons are one comparison of numbers.
#[inline]
fn name_prefix(name: &str) -> u64 {
    let mut prefix = [0; 8];
    let len = name.len().min(prefix.len());
    if let (Some(to), Some(from)) = (prefix.get_mut(..len), name.as_bytes().get(..len)) {
        to.copy_from_slice(from);
    }
    u64::from_be_bytes(prefix)
}

/// Orders `name` against an escaped name by the names' UTF-8 bytes, as the
/// key format sorts criteria (escaped names order differently).
#[inline]
fn cmp_names(name: &str, escaped: &[u8]) -> Ordering {
    if escaped.contains(&b'%') {
        name.bytes().cmp(unescaped_bytes(escaped))
    } else {
        name.as_bytes().cmp(escaped)
    }
}

impl<'a> KeyBuilder<'a> {
    /// Starts a key of `operation` in `namespace`, at schema 1 and generation 1.
    #[inline]
    pub fn new(namespace: impl Into<Cow<'a, str>>, operation: impl Into<Cow<'a, str>>) -> Self {
        KeyBuilder {
            settings: Settings {
                namespace: namespace.into(),
                operation: operation.into(),
                generation: 1,
                schema: 1,
                hash_tag: false,
            },
            max_len: usize::MAX,
            draft: Draft::default(),
        }
    }

    /// Sets the schema version of the cached value's format (default 1).
    #[inline]
    pub fn schema(&mut self, schema: u32) -> &mut Self {
        self.settings.schema = schema;
        self.draft.stale_start = !self.draft.text.is_empty();
        self
    }

    /// Sets the generation, the counter bumped to invalidate a scope (default 1).
    #[inline]
    pub fn generation(&mut self, generation: u64) -> &mut Self {
        self.settings.generation = generation;
        self.draft.stale_start = !self.draft.text.is_empty();
        self
    }

    /// Adds a tenant value: the authorization scope the cached answer belongs to.
    ///
    /// Call it once for a single tenant, or once per part of a compound tenant
    /// (organization, then role, say) in a fixed order. An empty value, or
    /// its type's empty value (`0`, the nil UUID: what a tenant left at its
    /// default holds), makes [`build`](Self::build) fail with
    /// [`KeyError::EmptyTenant`]; see [`tenant_allowing_zero`](Self::tenant_allowing_zero).
    #[cfg_attr(debug_assertions, inline)]
    #[cfg_attr(not(debug_assertions), inline(always))]
    pub fn tenant(&mut self, value: impl TenantValue) -> &mut Self {
        self.add_tenant(&value, false);
        self
    }

    /// Adds a tenant value that may be its type's empty value (`0`, the nil
    /// UUID), which [`tenant`](Self::tenant) refuses because a tenant left at
    /// its default has it. Say in `reason` why that value is a real tenant in
    /// this system (it is for reviewers; the key does not hold it). An empty
    /// text is still refused.
    ///
    /// ```
    /// use cache_key::{KeyBuilder, KeyError};
    ///
    /// let err = KeyBuilder::new("crm", "list").tenant(0).build().unwrap_err();
    /// assert!(matches!(err, KeyError::EmptyTenant { .. }));
    /// let key = KeyBuilder::new("crm", "list")
    ///     .tenant_allowing_zero(0, "account 0 is the operator's own account")
    ///     .build()?;
    /// assert_eq!(key.as_str(), "crm:s1:g1:t0:list");
    /// # Ok::<(), KeyError>(())
    /// ```
    pub fn tenant_allowing_zero(&mut self, value: impl TenantValue, reason: &str) -> &mut Self {
        let _ = reason;
        self.add_tenant(&value, true);
        self
    }

    /// Declares the key global: its answer is the same for every tenant, and
    /// its tenant segment is empty. Use it only for data that truly is.
    #[inline]
    pub fn global(&mut self) -> &mut Self {
        self.draft.global = true;
        self
    }

    /// Adds a criterion: a part of the query that changes its answer.
    ///
    /// A value whose canonical string is empty (`None`, `""`, an empty list)
    /// is dropped from the key. A name given twice makes [`build`](Self::build)
    /// fail with [`KeyError::DuplicateCriterion`], and an empty name with
    /// [`KeyError::EmptyCriterionName`].
    #[cfg_attr(debug_assertions, inline)]
    #[cfg_attr(not(debug_assertions), inline(always))]
    pub fn criterion(&mut self, name: impl AsRef<str>, value: impl CriterionValue) -> &mut Self {
        self.add_criterion(name.as_ref(), &value);
        self
    }

    /// Writes the tenant segment as a Redis Cluster hash tag, `t{...}`, so that
    /// all keys of one tenant map to one slot.
    #[inline]
    pub fn hash_tag(&mut self, hash_tag: bool) -> &mut Self {
        self.settings.hash_tag = hash_tag;
        self.draft.stale_start = !self.draft.text.is_empty();
        self
    }

    /// Refuses keys longer than `max` bytes (memcached allows 250) with
    /// [`KeyError::TooLong`]; a key is never truncated.
    #[inline]
    pub fn max_len(&mut self, max: usize) -> &mut Self {
        self.max_len = max;
        self
    }

    /// Builds the key, or reports the first mistake.
    ///
    /// Either way the tenant (or [`global`](Self::global)) and the criteria
    /// are cleared, and the settings (namespace, operation, schema,
    /// generation, hash tag, maximum length) kept, for the next key: building
    /// again without a tenant reports [`KeyError::MissingTenant`], never the
    /// same key twice by accident.
    #[inline]
    pub fn build(&mut self) -> Result<Key, KeyError> {
        // The buffer is swapped into a `String` of the caller's: returned
        // inside a `Result` from a call, it would be read back with a wide
        // load waiting on the narrow stores that wrote it.
        let mut out = String::new();
        self.finish_into(&mut out)?;
        Ok(Key::from_canonical(out))
    }

    /// `build`, into `out` (empty): the text swapped in and finished there.
    fn finish_into(&mut self, out: &mut String) -> Result<(), KeyError> {
        let result = self.check().and_then(|()| {
            mem::swap(out, &mut self.draft.text);
            self.finish(out, 0, MAX_PLAIN_CRITERIA)
        });
        // The buffer's room is kept when it was not handed over.
        let mut text = mem::take(&mut self.draft.text);
        text.clear();
        self.draft = Draft {
            text,
            ..Draft::default()
        };
        result
    }

    /// Appends the key to `out`, reusing its capacity; on error `out` is
    /// unchanged. The builder is left as it was.
    pub fn write_into(&self, out: &mut String) -> Result<(), KeyError> {
        self.write_with_limit(out, MAX_PLAIN_CRITERIA)
    }

    /// Appends `part` of the key to `out`, as
    /// [`CacheKey::write_key_part`](crate::CacheKey::write_key_part) asks:
    /// the key, its readable form, or its tenant values alone. Every mistake
    /// `build` reports is reported for each part (`max_len` only for the
    /// key); on error `out` is unchanged. The builder is left as it was.
    ///
    /// ```
    /// use cache_key::{CacheKey, KeyBuilder, KeyError, KeyPart, KeySchema, Scope};
    ///
    /// struct Invoices {
    ///     org: String,
    /// }
    ///
    /// impl CacheKey for Invoices {
    ///     const KEY_SCHEMA: KeySchema =
    ///         KeySchema::new("billing", "invoices", 1, Scope::Tenant { fields: &["org"] });
    ///     type Tenant<'a> = &'a String;
    ///
    ///     fn write_key_part(&self, generation: u64, out: &mut String, part: KeyPart) -> Result<(), KeyError> {
    ///         KeyBuilder::new("billing", "invoices")
    ///             .generation(generation)
    ///             .tenant(self.org.as_str())
    ///             .write_part_into(out, part)
    ///     }
    /// }
    ///
    /// let query = Invoices { org: "acme".into() };
    /// assert_eq!(query.cache_key(3)?.as_str(), "billing:s1:g3:tacme:invoices");
    /// let mut tenant = String::new();
    /// query.write_tenant(&mut tenant)?;
    /// assert_eq!(tenant, "acme");
    /// # Ok::<(), KeyError>(())
    /// ```
    pub fn write_part_into(&self, out: &mut String, part: KeyPart) -> Result<(), KeyError> {
        match part {
            KeyPart::Key => self.write_with_limit(out, MAX_PLAIN_CRITERIA),
            KeyPart::Readable => self.write_with_limit(out, READABLE),
            KeyPart::Tenant => {
                self.check()?;
                out.push_str(&self.draft.text[self.draft.tenant.clone()]);
                Ok(())
            }
        }
    }

    /// This builder's key with its criteria never summarized, for logs and
    /// debugging: see [`ReadableKey`]. Every mistake `build` reports is
    /// reported too, except `max_len`. The builder is left as it was.
    ///
    /// ```
    /// use cache_key::KeyBuilder;
    ///
    /// let mut builder = KeyBuilder::new("library", "search");
    /// builder.tenant(2).criterion("title", "Tutunamayanlar II").criterion("author", "Oğuz Atay");
    /// assert_eq!(
    ///     builder.readable_key()?.as_str(),
    ///     "library:s1:g1:t2:search:author=O%C4%9Fuz%20Atay&title=Tutunamayanlar%20II"
    /// );
    /// assert!(builder.build()?.as_str().starts_with("library:s1:g1:t2:search:c_"));
    /// # Ok::<(), cache_key::KeyError>(())
    /// ```
    pub fn readable_key(&self) -> Result<ReadableKey, KeyError> {
        let mut out = String::new();
        self.write_with_limit(&mut out, READABLE)?;
        Ok(ReadableKey::new(out))
    }

    fn write_with_limit(&self, out: &mut String, limit: usize) -> Result<(), KeyError> {
        self.check()?;
        let start = out.len();
        out.push_str(&self.draft.text);
        let result = self.finish(out, start, limit);
        if result.is_err() {
            out.truncate(start);
        }
        result
    }

    /// Finishes the key from a copy of the text at `out[at..]`: the start
    /// and middle written, or written again after a setting changed, the
    /// criteria laid out in name order and summarized past `limit` bytes,
    /// then the length checked.
    fn finish(&self, out: &mut String, at: usize, limit: usize) -> Result<(), KeyError> {
        let mut criteria_start = at + self.draft.criteria_start;
        if out.len() == at || self.draft.stale_start {
            // Written after the text, from its parts, which are then removed.
            let end = out.len();
            self.settings.write_start(out);
            out.extend_from_within(at + self.draft.tenant.start..at + self.draft.tenant.end);
            if self.draft.criteria_start > 0 {
                self.settings.write_middle(out);
                let start = out.len();
                out.extend_from_within(criteria_start..end);
                criteria_start = start - (end - at);
            }
            out.drain(at..end);
        }
        if self.draft.criteria_start == 0 {
            self.settings.write_middle(out);
            criteria_start = out.len();
        }
        if self.draft.unsorted && self.sort_criteria(out, criteria_start, limit) {
            return key_writer::check_len(out.len() - at, Some(self.max_len));
        }
        let len = out.len() - criteria_start;
        if len > limit {
            let mut digest = Sha256::new();
            digest.update(out.as_bytes().get(criteria_start..).unwrap_or_default());
            out.truncate(criteria_start);
            summarize(out, digest);
        } else if len == 0 {
            // No criteria: no `:` before them.
            out.pop();
        }
        if limit == READABLE {
            return Ok(());
        }
        key_writer::check_len(out.len() - at, Some(self.max_len))
    }

    /// Lays out the criteria after `criteria_start` in name order, without
    /// those with an empty value: copied after them, then moved over them;
    /// or, when they are longer than `limit`, hashed from where they are
    /// and summarized (then it returns `true`).
    fn sort_criteria(&self, out: &mut String, criteria_start: usize, limit: usize) -> bool {
        let end = out.len();
        let kept = (self.draft.criteria.iter())
            .filter(|criterion| criterion.value_start < criterion.end)
            .map(|criterion| criteria_start + criterion.start..criteria_start + criterion.end);
        // Counts a `&` after each criterion: one more than laid out.
        let len = kept.clone().map(|range| range.len() + 1).sum::<usize>();
        if len > limit.saturating_add(1) {
            let mut digest = Sha256::new();
            for (i, range) in kept.enumerate() {
                if i > 0 {
                    digest.update([CRITERIA_SEPARATOR as u8]);
                }
                digest.update(out.as_bytes().get(range).unwrap_or_default());
            }
            out.truncate(criteria_start);
            summarize(out, digest);
            return true;
        }
        for (i, range) in kept.enumerate() {
            if i > 0 {
                out.push(CRITERIA_SEPARATOR);
            }
            out.extend_from_within(range);
        }
        out.drain(criteria_start..end);
        false
    }

    /// The first mistake made while adding parts, or else one in the
    /// settings and scope, found now.
    fn check(&self) -> Result<(), KeyError> {
        if let Some(mistake) = &self.draft.mistake {
            return Err(mistake.clone());
        }
        if self.settings.namespace.is_empty() {
            return Err(KeyError::EmptyNamespace);
        }
        if self.settings.operation.is_empty() {
            return Err(KeyError::EmptyOperation);
        }
        match (self.draft.tenant_given, self.draft.global) {
            (false, false) => Err(KeyError::MissingTenant),
            (true, true) => Err(KeyError::TenantAndGlobal),
            _ => Ok(()),
        }
    }

    #[cfg_attr(debug_assertions, inline)]
    #[cfg_attr(not(debug_assertions), inline(always))]
    fn add_tenant<T: TenantValue + ?Sized>(&mut self, value: &T, allow_zero: bool) {
        self.draft.tenant_given = true;
        if self.draft.global || self.draft.mistake.is_some() {
            return;
        }
        if !allow_zero && value.is_empty_value() {
            return self.fail(KeyError::empty_tenant_value(self.draft.tenants));
        }
        if self.draft.text.is_empty() {
            self.start();
        }
        let start = self.draft.text.len();
        if self.draft.tenants > 0 {
            self.draft.text.push(TENANT_PART_SEPARATOR);
        }
        let value_start = self.draft.text.len();
        value.write_canonical(&mut CanonicalWriter::escaped(&mut self.draft.text));
        if self.draft.text.len() == value_start {
            self.draft.text.truncate(start);
            return self.fail(KeyError::empty_tenant_value(self.draft.tenants));
        }
        let len = self.draft.text.len() - start;
        if self.draft.tenant.end < start {
            // Given after criteria: moved before the middle, which moves
            // with the criteria.
            self.draft
                .text
                .extend_from_within(self.draft.tenant.end..start);
            self.draft.text.drain(self.draft.tenant.end..start);
            self.draft.criteria_start += len;
        }
        self.draft.tenant.end += len;
        self.draft.tenants += 1;
    }

    #[cfg_attr(debug_assertions, inline)]
    #[cfg_attr(not(debug_assertions), inline(always))]
    fn add_criterion<V: CriterionValue + ?Sized>(&mut self, name: &str, value: &V) {
        if self.draft.mistake.is_some() {
            return;
        }
        if name.is_empty() {
            let position = self.draft.criteria.len();
            return self.fail(KeyError::EmptyCriterionName { position });
        }
        if self.draft.text.is_empty() {
            self.start_before_tenant();
        }
        if self.draft.criteria_start == 0 {
            self.settings.write_middle(&mut self.draft.text);
            self.draft.criteria_start = self.draft.text.len();
        }
        let prefix = name_prefix(name);
        let Ok(place) = self.place(name, prefix) else {
            let name = name.to_owned();
            return self.fail(KeyError::DuplicateCriterion { name });
        };
        if !self.draft.criteria.is_empty() {
            self.draft.text.push(CRITERIA_SEPARATOR);
        }
        let start = self.draft.text.len() - self.draft.criteria_start;
        push_escaped_short(&mut self.draft.text, name);
        self.draft.text.push(NAME_VALUE_SEPARATOR);
        let value_start = self.draft.text.len() - self.draft.criteria_start;
        value.write_canonical(&mut CanonicalWriter::escaped(&mut self.draft.text));
        let end = self.draft.text.len() - self.draft.criteria_start;
        if place < self.draft.criteria.len() || value_start == end {
            self.draft.unsorted = true;
        }
        let criterion = Criterion {
            prefix,
            start,
            value_start,
            end,
        };
        self.draft.criteria.insert(place, criterion);
    }

    /// Writes the start, with the first part: inlined where a tenant value
    /// is added, so that a constant namespace's escaping and copy fold.
    #[inline]
    fn start(&mut self) {
        self.settings.write_start(&mut self.draft.text);
        self.draft.tenant = self.draft.text.len()..self.draft.text.len();
    }

    /// [`start`](Self::start) for a criterion given before any tenant value:
    /// out of line, as it is rarely needed there.
    #[inline(never)]
    fn start_before_tenant(&mut self) {
        self.start();
    }

    /// Where in name order a criterion named `name` goes; `Err` when one
    /// has that name already.
    #[cfg_attr(debug_assertions, inline)]
    #[cfg_attr(not(debug_assertions), inline(always))]
    fn place(&self, name: &str, prefix: u64) -> Result<usize, ()> {
        let criteria_at = self.draft.criteria_start;
        let cmp = |criterion: &Criterion| {
            prefix.cmp(&criterion.prefix).then_with(|| {
                let escaped =
                    criteria_at + criterion.start..criteria_at + criterion.value_start - 1;
                cmp_names(
                    name,
                    self.draft.text.as_bytes().get(escaped).unwrap_or_default(),
                )
            })
        };
        // From the last: criteria given in name order take one comparison,
        // and inserting moves the criteria after `place` anyway.
        let mut place = self.draft.criteria.len();
        for (i, criterion) in self.draft.criteria.iter().enumerate().rev() {
            match cmp(criterion) {
                Ordering::Greater => break,
                Ordering::Equal => return Err(()),
                Ordering::Less => place = i,
            }
        }
        Ok(place)
    }

    /// Records the first mistake.
    #[cold]
    fn fail(&mut self, error: KeyError) {
        self.draft.mistake.get_or_insert(error);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key_writer::{Head, KeyWriter, Text};

    #[test]
    fn each_part_is_the_one_the_key_holds() {
        let mut builder = KeyBuilder::new("ns", "op");
        builder
            .criterion("q", "x".repeat(60))
            .tenant("a,b")
            .tenant(7)
            .hash_tag(true);
        let mut parts = Vec::new();
        for part in [KeyPart::Key, KeyPart::Readable, KeyPart::Tenant] {
            let mut out = String::from("kept|");
            builder.write_part_into(&mut out, part).unwrap();
            parts.push(out);
        }
        // The readable key first: `build` hands the builder's key over.
        assert_eq!(
            parts[1],
            format!("kept|{}", builder.readable_key().unwrap().as_str())
        );
        assert_eq!(
            parts[0],
            format!("kept|{}", builder.build().unwrap().as_str())
        );
        assert_eq!(parts[2], "kept|a%2Cb,7");

        let mut out = String::from("kept|");
        let err = KeyBuilder::new("ns", "op").write_part_into(&mut out, KeyPart::Tenant);
        assert_eq!(err, Err(KeyError::MissingTenant));
        assert_eq!(out, "kept|");
        let mut global = KeyBuilder::new("ns", "op");
        global.global();
        global.write_part_into(&mut out, KeyPart::Tenant).unwrap();
        assert_eq!(out, "kept|");
    }

    #[test]
    fn many_criteria_given_in_reverse_are_sorted() {
        let names: Vec<String> = (0..20).map(|i| format!("n{i:02}")).collect();
        let mut builder = KeyBuilder::new("ns", "op");
        builder.tenant("t");
        for name in names.iter().rev() {
            builder.criterion(name.as_str(), 1u8);
        }
        let key = builder.clone().build().unwrap();
        // The same parts written in order by the writer derived keys use (the
        // criteria are summarized: they are longer than 48 bytes).
        let mut out = String::new();
        let mut writer = KeyWriter::new(
            &mut out,
            Head::Parts {
                namespace: Text::Raw("ns"),
                schema: 1,
            },
            1,
            false,
            1,
            Text::Raw("op"),
            KeyPart::Key,
        );
        writer.tenant("tenant", "t", false);
        writer.operation();
        for name in &names {
            writer.criterion(&format!("{name}="), &1u8);
        }
        writer.finish().unwrap();
        drop(writer);
        assert_eq!(key.as_str(), out);
        assert!(out.starts_with("ns:s1:g1:tt:op:c_"), "{out}");

        let err = builder.criterion("n07", 2u8).build().unwrap_err();
        assert_eq!(err, KeyError::DuplicateCriterion { name: "n07".into() });
        // Given in order, past the pairs kept in the builder itself.
        let mut builder = KeyBuilder::new("ns", "op");
        builder.tenant("t");
        for name in &names {
            builder.criterion(name.as_str(), 1u8);
        }
        assert_eq!(builder.build().unwrap().as_str(), out);
        // The tenant and a setting given after them: every pair moves.
        let mut builder = KeyBuilder::new("ns", "op");
        for name in names.iter().rev() {
            builder.criterion(name.as_str(), 1u8);
        }
        builder.tenant("t").generation(1000);
        let expected = out.replace(":g1:", ":g1000:");
        assert_eq!(builder.build().unwrap().as_str(), expected);
        let err = KeyBuilder::new("ns", "op")
            .tenant("t")
            .criterion("n19", 1u8)
            .criterion("n00", 1u8)
            .criterion("n19", 2u8)
            .build()
            .unwrap_err();
        assert_eq!(err, KeyError::DuplicateCriterion { name: "n19".into() });
    }

    #[test]
    fn empty_values_are_dropped_but_their_names_still_count() {
        let key = KeyBuilder::new("ns", "op")
            .tenant("t")
            .criterion("d", None::<&str>)
            .criterion("b", "")
            .criterion("c", "3")
            .criterion("a", Vec::<u8>::new())
            .build()
            .unwrap();
        assert_eq!(key.as_str(), "ns:s1:g1:tt:op:c=3");
        // Longer than 48 bytes with the empty one, not without it: in full.
        let long = "n".repeat(60);
        for names in [["b", long.as_str()], [long.as_str(), "b"]] {
            let mut builder = KeyBuilder::new("ns", "op");
            builder.tenant("t");
            for name in names {
                builder.criterion(name, (name == "b").then_some(1u8));
            }
            assert_eq!(builder.build().unwrap().as_str(), "ns:s1:g1:tt:op:b=1");
        }
        let key = KeyBuilder::new("ns", "op")
            .tenant("t")
            .criterion("a", None::<&str>)
            .build()
            .unwrap();
        assert_eq!(key.as_str(), "ns:s1:g1:tt:op");
        let err = KeyBuilder::new("ns", "op")
            .tenant("t")
            .criterion("a", None::<&str>)
            .criterion("a", "x")
            .build()
            .unwrap_err();
        assert_eq!(err, KeyError::DuplicateCriterion { name: "a".into() });
    }

    #[test]
    fn build_clears_the_parts_and_keeps_the_settings() {
        let mut builder = KeyBuilder::new("ns", "op");
        builder.generation(4).schema(2).hash_tag(true).max_len(40);
        builder.tenant("t").criterion("b", 2u8).criterion("a", 1u8);
        assert_eq!(
            builder.build().unwrap().as_str(),
            "ns:s2:g4:t{t}:op:a=1&b=2"
        );
        assert_eq!(builder.build(), Err(KeyError::MissingTenant));
        builder.tenant("u").criterion("a", 3u8);
        assert_eq!(builder.build().unwrap().as_str(), "ns:s2:g4:t{u}:op:a=3");
        // After a mistake too.
        builder.tenant("v").criterion("a", 1u8).criterion("a", 2u8);
        let err = KeyError::DuplicateCriterion { name: "a".into() };
        assert_eq!(builder.build(), Err(err));
        builder.global().criterion("x", "y".repeat(40));
        let err = KeyError::TooLong { len: 58, max: 40 };
        assert_eq!(builder.build(), Err(err));
        builder.global().criterion("a", 1u8);
        assert_eq!(builder.build().unwrap().as_str(), "ns:s2:g4:t{}:op:a=1");
        assert_eq!(builder.build(), Err(KeyError::MissingTenant));
    }

    #[test]
    fn name_prefixes_order_as_the_names() {
        let names = [
            "",
            "a",
            "a\0",
            "a\0\0",
            "ab",
            "abcdefgh",
            "abcdefghi",
            "b",
            "\u{ff}",
        ];
        for (i, a) in names.iter().enumerate() {
            for b in &names[i + 1..] {
                assert!(a < b);
                assert!(name_prefix(a) <= name_prefix(b), "{a:?} {b:?}");
            }
        }
        // Equal prefixes leave the order to the names themselves.
        assert_eq!(name_prefix("a"), name_prefix("a\0"));
        assert_eq!(name_prefix("abcdefgh"), name_prefix("abcdefghi"));
    }

    #[test]
    fn a_name_that_extends_another_with_a_separator_sorts_after_it() {
        // "a" < "a&" < "a=" < "a=b": a raw `&` or `=` in a name is escaped in
        // the draft, where `=` also ends every name.
        let names = ["a&", "a=b", "a", "a="];
        for first in 0..names.len() {
            let mut builder = KeyBuilder::new("ns", "op");
            builder.tenant("t");
            for i in 0..names.len() {
                let name = names[(first + i) % names.len()];
                builder.criterion(name, name.len());
            }
            assert_eq!(
                builder.build().unwrap().as_str(),
                "ns:s1:g1:tt:op:a=1&a%26=2&a%3D=2&a%3Db=3",
                "starting with {:?}",
                names[first]
            );
        }
    }

    #[test]
    fn names_sort_by_their_bytes_not_their_escaped_form() {
        // " " (0x20) sorts before "!" (0x21), though its escaped form "%20" does not.
        let key = KeyBuilder::new("ns", "op")
            .tenant("t")
            .criterion("!", 2u8)
            .criterion(" ", 1u8)
            .build()
            .unwrap();
        assert_eq!(key.as_str(), "ns:s1:g1:tt:op:%20=1&!=2");
    }

    #[test]
    fn tenant_parts_keep_their_order_wherever_they_are_given() {
        let key = KeyBuilder::new("ns", "op")
            .criterion("b", "2")
            .tenant("org")
            .criterion("a", "1")
            .tenant("role")
            .build()
            .unwrap();
        assert_eq!(key.as_str(), "ns:s1:g1:torg,role:op:a=1&b=2");
    }

    #[test]
    fn write_into_appends_and_leaves_the_buffer_as_it_was_on_error() {
        let mut out = String::from("before");
        let err = KeyBuilder::new("ns", "op")
            .tenant("t")
            .criterion("a", "1")
            .criterion("a", "2")
            .write_into(&mut out)
            .unwrap_err();
        assert!(matches!(err, KeyError::DuplicateCriterion { .. }));
        assert_eq!(out, "before");
        let err = KeyBuilder::new("ns", "op")
            .tenant("t")
            .criterion("a", "x".repeat(40))
            .max_len(20)
            .write_into(&mut out)
            .unwrap_err();
        assert!(matches!(err, KeyError::TooLong { .. }));
        assert_eq!(out, "before");
        KeyBuilder::new("ns", "op")
            .criterion("b", "2")
            .criterion("a", None::<u8>)
            .tenant("t")
            .write_into(&mut out)
            .unwrap();
        assert_eq!(out, "beforens:s1:g1:tt:op:b=2");
    }
}
