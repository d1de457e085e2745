//! [`KeyBuilder`]: keys assembled at run time, for dynamic filters and for
//! code that cannot use the derive.

use std::borrow::Cow;
use std::cmp::Ordering;
use std::fmt;
use std::mem;

use percent_encoding::percent_decode;

use crate::error::KeyError;
use crate::escape;
use crate::key::{Key, ReadableKey};
use crate::number::Decimal;
use crate::value::{CriterionValue, TenantValue};
use crate::writer::{self, CriteriaSegment, Head, MAX_PLAIN_CRITERIA, Text};

/// Builds a [`Key`] from parts given at run time.
///
/// It produces exactly the keys a `#[derive(CacheKey)]` struct with the same
/// parts produces. Criteria may come in any order and their names may be
/// computed at run time. The key is written as the parts arrive, in one
/// buffer that becomes the key's: a typical key costs one allocation (past
/// eight criteria, their index in name order allocates too).
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
    /// What the key's start and middle are made of.
    settings: Settings<'a>,
    scope: Scope,
    /// The longest key allowed, in bytes (`usize::MAX` unless set).
    max_len: usize,
    /// The key written so far.
    draft: Draft,
    /// The first mistake, after which nothing more is written: `build`
    /// reports it.
    mistake: Option<KeyError>,
}

// The methods take `&mut self` rather than `self`: a chain of by-value calls
// moves the builder from call to call, which cost about a tenth of a
// two-criteria key's time (see BENCHMARKS.md).

/// Whether the key has a tenant or is global.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scope {
    Unset,
    Tenant,
    Global,
    Both,
}

/// The parts of a key besides its tenant values and criteria.
#[derive(Debug, Clone)]
struct Settings<'a> {
    namespace: Cow<'a, str>,
    operation: Cow<'a, str>,
    generation: u64,
    schema: u32,
    hash_tag: bool,
}

impl Settings<'_> {
    /// Writes the start of the key: `esc(namespace) ":s" schema ":g"
    /// generation ":t"`, and `{` with a hash tag.
    #[cfg_attr(debug_assertions, inline)]
    #[cfg_attr(not(debug_assertions), inline(always))]
    fn write_start(&self, out: &mut String) {
        if out.capacity() == 0 {
            // Allocated outright: cheaper than growing an empty `String`.
            *out = String::with_capacity(BUFFER_CAPACITY);
        }
        let head = Head::Parts {
            namespace: Text::Raw(&self.namespace),
            schema: self.schema,
        };
        let mut generation = Decimal::new();
        generation.set_u64(self.generation);
        writer::write_start(out, head, &generation, self.hash_tag);
    }

    /// Writes the middle of the key: `}` with a hash tag, then
    /// `":" esc(operation) ":"`.
    #[cfg_attr(debug_assertions, inline)]
    #[cfg_attr(not(debug_assertions), inline(always))]
    fn write_middle(&self, out: &mut String) {
        writer::write_operation(out, self.hash_tag, Text::Raw(&self.operation));
    }
}

/// The capacity a builder's buffer starts with: room for a typical key's
/// draft, whose criteria stay in full until `build` summarizes them (eight
/// criteria of 116 bytes fit), or lays out criteria given out of order (up
/// to 48 bytes more for a while), so that it allocates once.
const BUFFER_CAPACITY: usize = 192;

/// The key as far as it is known:
///
/// ```text
/// esc(namespace) ":s" schema ":g" generation ":t" ["{"]    the start
/// tenant values, joined with ","
/// ["}"] ":" esc(operation) ":"                            the middle
/// esc(name) "=" esc(value), in the order given, joined with "&"
/// ```
///
/// The start is written with the first tenant value or criterion, the middle
/// with the first criterion, so parts given in the format's order are each
/// written once, at the end. A tenant value given after a criterion is moved
/// into its place. A setting changed once writing began (the generation,
/// say) rewrites the draft.
///
/// The criteria stay in the order given; [`pairs`](Self::pairs) lists them
/// in name order, which finds a name given twice as it is added.
///
/// What is left for [`KeyBuilder::build`]: the parts not written yet, and
/// the criteria laid out in name order, those with an empty value left out
/// (kept as `name=` until then, so that a name given twice is found even
/// so), summarized past 48 bytes (any of them may still come first).
///
/// Only where the criteria start is kept: where the tenant values are is read
/// from the text when needed (rarely), since neither the start nor the middle
/// holds a `:` but their separators.
#[derive(Debug, Clone, Default)]
struct Draft {
    text: String,
    stage: Stage,
    /// Where the criteria start, once the middle is written.
    criteria_start: usize,
    /// Where each criterion is in `text`, in name order.
    pairs: Pairs,
    /// Whether the criteria in `text` are out of name order.
    shuffled: bool,
    /// Whether a criterion with an empty value is in `text`.
    has_empty_values: bool,
}

/// How far a [`Draft`] is written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
enum Stage {
    /// Nothing yet.
    #[default]
    Empty,
    /// The start and the tenant values given so far.
    Tenant,
    /// The middle too, and the criteria given so far.
    Criteria,
}

/// A criterion name given twice.
struct Duplicate;

/// An empty tenant value.
struct Empty;

impl Draft {
    /// Writes the start, unless it is written already.
    #[cfg_attr(debug_assertions, inline)]
    #[cfg_attr(not(debug_assertions), inline(always))]
    fn open_tenant(&mut self, settings: &Settings<'_>) {
        if self.stage == Stage::Empty {
            settings.write_start(&mut self.text);
            self.stage = Stage::Tenant;
        }
    }

    /// Writes the start and the middle, unless they are written already.
    #[cfg_attr(debug_assertions, inline)]
    #[cfg_attr(not(debug_assertions), inline(always))]
    fn open_criteria(&mut self, settings: &Settings<'_>) {
        if self.stage != Stage::Criteria {
            if self.stage == Stage::Empty {
                self.open_tenant_out_of_line(settings);
            }
            settings.write_middle(&mut self.text);
            self.criteria_start = self.text.len();
            self.stage = Stage::Criteria;
        }
    }

    /// The start for a criterion given before any tenant value (rarely):
    /// out of line, since inlined into every `criterion` call it made eight
    /// criteria 60 ns slower.
    #[inline(never)]
    fn open_tenant_out_of_line(&mut self, settings: &Settings<'_>) {
        self.open_tenant(settings);
    }

    /// Forgets every part, keeping the buffer's room.
    fn clear(&mut self) {
        self.text.clear();
        self.stage = Stage::Empty;
        self.criteria_start = 0;
        self.pairs.clear();
        self.shuffled = false;
        self.has_empty_values = false;
    }

    /// Where the tenant values are: after the start's third `:` and its `t`
    /// (and `{`), up to the end, or to the middle once it is written.
    fn tenant_values(&self) -> (usize, usize) {
        let text = self.text.as_bytes();
        let Some(third_colon) = text
            .iter()
            .enumerate()
            .filter(|&(_, &byte)| byte == b':')
            .nth(2)
            .map(|(at, _)| at)
        else {
            return (text.len(), text.len());
        };
        let mut start = third_colon + ":t".len();
        if text.get(start) == Some(&b'{') {
            start += 1;
        }
        if self.stage != Stage::Criteria {
            return (start, text.len());
        }
        // The middle: `}` with a hash tag, then `:operation:`.
        let before_operation = text
            .get(..self.criteria_start.saturating_sub(1))
            .and_then(|before| before.iter().rposition(|&byte| byte == b':'))
            .unwrap_or(start);
        let end = before_operation
            - usize::from(text.get(before_operation.wrapping_sub(1)) == Some(&b'}'));
        (start, end.max(start))
    }

    /// How many tenant values are written.
    fn tenant_count(&self) -> usize {
        let (start, end) = self.tenant_values();
        match self.text.get(start..end) {
            Some(values) if !values.is_empty() => 1 + values.matches(',').count(),
            _ => 0,
        }
    }

    /// Writes the draft again with changed settings.
    #[cold]
    fn rewrite(&mut self, settings: &Settings<'_>) {
        if self.stage == Stage::Empty {
            return;
        }
        let mut old = mem::take(self);
        let (tenant_start, tenant_end) = old.tenant_values();
        self.text.reserve(old.text.capacity());
        self.open_tenant(settings);
        let tenant = old.text.get(tenant_start..tenant_end);
        self.text.push_str(tenant.unwrap_or_default());
        if old.stage == Stage::Criteria {
            self.open_criteria(settings);
            let criteria = old.text.get(old.criteria_start..);
            self.text.push_str(criteria.unwrap_or_default());
            old.pairs.rebase(old.criteria_start, self.criteria_start);
            self.pairs = old.pairs;
            self.shuffled = old.shuffled;
            self.has_empty_values = old.has_empty_values;
        }
    }

    /// Adds a tenant value after the others; `Err` when it is empty.
    #[cfg_attr(debug_assertions, inline)]
    #[cfg_attr(not(debug_assertions), inline(always))]
    fn add_tenant<T: TenantValue + ?Sized>(
        &mut self,
        settings: &Settings<'_>,
        value: &T,
        first: bool,
        allow_zero: bool,
    ) -> Result<(), Empty> {
        if !allow_zero && value.is_empty_value() {
            return Err(Empty);
        }
        self.open_tenant(settings);
        // After the other tenant values: at the end, or before the middle
        // when criteria were given first (rarely).
        let place = if self.stage == Stage::Criteria {
            self.tenant_values().1
        } else {
            self.text.len()
        };
        let start = self.text.len();
        if !first {
            self.text.push(',');
        }
        let value_start = self.text.len();
        push_value(&mut self.text, value);
        if self.text.len() == value_start {
            self.text.truncate(start);
            return Err(Empty);
        }
        if place < start {
            let len = self.text.len() - start;
            self.move_last(start, place);
            self.pairs
                .rebase(self.criteria_start, self.criteria_start + len);
            self.criteria_start += len;
        }
        Ok(())
    }

    /// Adds a criterion after the others; `Err` when one has its name already.
    #[cfg_attr(debug_assertions, inline)]
    #[cfg_attr(not(debug_assertions), inline(always))]
    fn add_criterion<V: CriterionValue + ?Sized>(
        &mut self,
        settings: &Settings<'_>,
        name: &str,
        value: &V,
    ) -> Result<(), Duplicate> {
        self.open_criteria(settings);
        let prefix = name_prefix(name);
        let place = self.pair_place(name, prefix)?;
        if self.text.len() > self.criteria_start {
            self.text.push('&');
        }
        let start = self.text.len();
        escape::push_escaped_short(&mut self.text, name);
        self.text.push('=');
        let value_start = self.text.len();
        push_value(&mut self.text, value);
        let end = self.text.len();
        // Set only when needed: a read-modify-write of the flag each time
        // stalled the next criterion (the flags are rarely set).
        if end == value_start {
            self.has_empty_values = true;
        }
        if place < self.pairs.len() {
            self.shuffled = true;
        }
        self.pairs.insert(place, Pair { prefix, start, end });
        Ok(())
    }

    /// Where in name order a criterion named `name` goes; `Err` when one
    /// has that name already.
    #[cfg_attr(debug_assertions, inline)]
    #[cfg_attr(not(debug_assertions), inline(always))]
    fn pair_place(&self, name: &str, prefix: u64) -> Result<usize, Duplicate> {
        let text = self.text.as_bytes();
        let cmp = |pair: &Pair| {
            prefix.cmp(&pair.prefix).then_with(|| {
                let criterion = text.get(pair.start..).unwrap_or_default();
                cmp_names(name, criterion)
            })
        };
        let pairs = self.pairs.as_slice();
        // Criteria given in name order go last: one comparison.
        match pairs.last().map(cmp) {
            None | Some(Ordering::Greater) => Ok(pairs.len()),
            Some(Ordering::Equal) => Err(Duplicate),
            Some(Ordering::Less) => pairs
                .binary_search_by(|pair| cmp(pair).reverse())
                .map_or_else(Ok, |_| Err(Duplicate)),
        }
    }

    /// Finishes the key from a copy of the draft at `out[start..]`: the
    /// parts not written yet, the criteria laid out, then the length checked.
    fn finish(
        &self,
        settings: &Settings<'_>,
        out: &mut String,
        start: usize,
        max_len: usize,
        limit: usize,
    ) -> Result<(), KeyError> {
        if self.stage == Stage::Empty {
            settings.write_start(out);
        }
        let criteria_start = if self.stage == Stage::Criteria {
            start + self.criteria_start
        } else {
            settings.write_middle(out);
            out.len()
        };
        if self.shuffled || self.has_empty_values {
            let pairs = self.pairs.as_slice().iter();
            let in_order = pairs.map(|pair| start + pair.start..start + pair.end);
            writer::end_criteria_in_order(out, criteria_start, in_order, limit);
        } else {
            writer::end_plain_criteria(out, criteria_start, limit);
        }
        if limit == writer::READABLE {
            return Ok(());
        }
        writer::check_len(out.len() - start, Some(max_len))
    }

    /// Moves what was written from `from` to the end of `text` to `to`: what
    /// lies between is copied after it and removed from before it, as
    /// `build` lays out criteria.
    fn move_last(&mut self, from: usize, to: usize) {
        if to < from {
            self.text.extend_from_within(to..from);
            self.text.drain(to..from);
        }
    }
}

/// How many criteria [`Pairs`] holds without allocating.
const INLINE_PAIRS: usize = 8;

/// A criterion in a draft's text.
#[derive(Debug, Clone, Copy, Default)]
struct Pair {
    /// Its name's [`name_prefix`].
    prefix: u64,
    /// Where it is in the text: `start..end`.
    start: usize,
    end: usize,
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

/// Where the criteria are in a draft's text, in name order: in the builder
/// up to [`INLINE_PAIRS`] of them, on the heap past that.
#[derive(Clone, Default)]
struct Pairs {
    inline: [Pair; INLINE_PAIRS],
    len: usize,
    /// All of them, once there are more than `INLINE_PAIRS`.
    spilled: Vec<Pair>,
}

impl fmt::Debug for Pairs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.as_slice()).finish()
    }
}

impl Pairs {
    #[inline]
    fn as_slice(&self) -> &[Pair] {
        if self.spilled.is_empty() {
            self.inline.get(..self.len).unwrap_or_default()
        } else {
            &self.spilled
        }
    }

    #[inline]
    fn as_mut_slice(&mut self) -> &mut [Pair] {
        if self.spilled.is_empty() {
            self.inline.get_mut(..self.len).unwrap_or_default()
        } else {
            &mut self.spilled
        }
    }

    #[inline]
    fn len(&self) -> usize {
        self.len
    }

    /// Inserts `pair` at `at`, `at <= len`.
    #[inline]
    fn insert(&mut self, at: usize, pair: Pair) {
        if self.len < INLINE_PAIRS && self.spilled.is_empty() {
            let mut i = self.len;
            while i > at {
                self.inline[i] = self.inline[i - 1];
                i -= 1;
            }
            // Field by field: the pair as a whole is read back from the stack
            // in one wide load, which waits for the narrow stores that wrote
            // it (about 3 ns a criterion).
            let slot = &mut self.inline[i];
            slot.prefix = pair.prefix;
            slot.start = pair.start;
            slot.end = pair.end;
        } else {
            self.spill(at, pair);
        }
        self.len += 1;
    }

    #[cold]
    fn spill(&mut self, at: usize, pair: Pair) {
        if self.spilled.is_empty() {
            let inline = self.inline.get(..self.len).unwrap_or_default();
            self.spilled.reserve(2 * INLINE_PAIRS);
            self.spilled.extend_from_slice(inline);
        }
        self.spilled.insert(at.min(self.spilled.len()), pair);
    }

    /// Moves every pair from after `from` to after `to`.
    fn rebase(&mut self, from: usize, to: usize) {
        for pair in self.as_mut_slice() {
            pair.start = pair.start - from + to;
            pair.end = pair.end - from + to;
        }
    }

    fn clear(&mut self) {
        self.len = 0;
        self.spilled.clear();
    }
}

/// Appends a value's canonical string, escaped, to `text`: through the short
/// paths derived keys take for their criteria (text, integers, lists, sets),
/// in a segment without a limit, since the builder summarizes the criteria
/// only once they are all given.
#[cfg_attr(debug_assertions, inline)]
#[cfg_attr(not(debug_assertions), inline(always))]
fn push_value<V: CriterionValue + ?Sized>(text: &mut String, value: &V) {
    let start = text.len();
    let mut segment = CriteriaSegment {
        out: text,
        start,
        digest: &mut None,
        limit: usize::MAX,
    };
    value.__write_criterion(&mut segment, "");
}

/// Orders `name` against the escaped name at the start of `criterion`
/// (`esc(name) "=" ...`) by the names' UTF-8 bytes, as the key format sorts
/// criteria (escaped names order differently).
///
/// Up to its first `%`, the escaped name is the name itself, so the bytes
/// are compared as they are; from there the escaped one is decoded. Its `=`
/// ends it (a `=` in a name is escaped), even where `name` has a `=`.
#[inline]
fn cmp_names(name: &str, criterion: &[u8]) -> Ordering {
    let name = name.as_bytes();
    let same = name
        .iter()
        .zip(criterion)
        .take_while(|&(ours, theirs)| ours == theirs && !matches!(theirs, b'%' | b'='))
        .count();
    match (name.get(same), criterion.get(same)) {
        (_, Some(b'%')) => {
            let rest = criterion.get(same..).unwrap_or_default();
            let escaped = rest.split(|&byte| byte == b'=').next().unwrap_or_default();
            let ours = name.get(same..).unwrap_or_default();
            ours.iter().copied().cmp(percent_decode(escaped))
        }
        // Names hold no `=` unescaped: the other name ends here.
        (None, Some(b'=') | None) => Ordering::Equal,
        (Some(_), Some(b'=') | None) => Ordering::Greater,
        (None, Some(_)) => Ordering::Less,
        (Some(ours), Some(theirs)) => ours.cmp(theirs),
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
            scope: Scope::Unset,
            max_len: usize::MAX,
            draft: Draft::default(),
            mistake: None,
        }
    }

    /// Sets the schema version of the cached value's format (default 1).
    #[cfg_attr(debug_assertions, inline)]
    #[cfg_attr(not(debug_assertions), inline(always))]
    pub fn schema(&mut self, schema: u32) -> &mut Self {
        self.settings.schema = schema;
        self.rewrite();
        self
    }

    /// Sets the generation, the counter bumped to invalidate a scope (default 1).
    #[cfg_attr(debug_assertions, inline)]
    #[cfg_attr(not(debug_assertions), inline(always))]
    pub fn generation(&mut self, generation: u64) -> &mut Self {
        self.settings.generation = generation;
        self.rewrite();
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
    #[cfg_attr(debug_assertions, inline)]
    #[cfg_attr(not(debug_assertions), inline(always))]
    pub fn global(&mut self) -> &mut Self {
        self.scope = match self.scope {
            Scope::Unset | Scope::Global => Scope::Global,
            Scope::Tenant | Scope::Both => Scope::Both,
        };
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
    #[cfg_attr(debug_assertions, inline)]
    #[cfg_attr(not(debug_assertions), inline(always))]
    pub fn hash_tag(&mut self, hash_tag: bool) -> &mut Self {
        self.settings.hash_tag = hash_tag;
        self.rewrite();
        self
    }

    /// Refuses keys longer than `max` bytes (memcached allows 250) with
    /// [`KeyError::TooLong`]; a key is never truncated.
    #[cfg_attr(debug_assertions, inline)]
    #[cfg_attr(not(debug_assertions), inline(always))]
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
        // The draft's buffer becomes the key's, moved in the caller's code:
        // returned from a call inside a `Result`, it was read back with a
        // wide load that waited for the narrow stores that wrote it.
        let mut out = String::new();
        self.finish_into(&mut out)?;
        Ok(Key::from_canonical(out))
    }

    /// `build`, into `out` (empty): the draft's buffer swapped in.
    fn finish_into(&mut self, out: &mut String) -> Result<(), KeyError> {
        let checked = self.check();
        self.scope = Scope::Unset;
        self.mistake = None;
        let result = checked.and_then(|()| {
            mem::swap(out, &mut self.draft.text);
            self.draft
                .finish(&self.settings, out, 0, self.max_len, MAX_PLAIN_CRITERIA)
        });
        self.draft.clear();
        result
    }

    /// Appends the key to `out`, reusing its capacity; on error `out` is
    /// unchanged. The builder is left as it was.
    pub fn write_into(&self, out: &mut String) -> Result<(), KeyError> {
        self.write_with_limit(out, MAX_PLAIN_CRITERIA)
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
        self.write_with_limit(&mut out, writer::READABLE)?;
        Ok(ReadableKey::new(out))
    }

    fn write_with_limit(&self, out: &mut String, limit: usize) -> Result<(), KeyError> {
        self.check()?;
        let start = out.len();
        out.push_str(&self.draft.text);
        let result = self
            .draft
            .finish(&self.settings, out, start, self.max_len, limit);
        if result.is_err() {
            out.truncate(start);
        }
        result
    }

    /// The first mistake made while adding parts, or else one in the
    /// settings and scope, found now.
    fn check(&self) -> Result<(), KeyError> {
        if let Some(mistake) = &self.mistake {
            return Err(mistake.clone());
        }
        if self.settings.namespace.is_empty() {
            return Err(KeyError::EmptyNamespace);
        }
        if self.settings.operation.is_empty() {
            return Err(KeyError::EmptyOperation);
        }
        match self.scope {
            Scope::Unset => Err(KeyError::MissingTenant),
            Scope::Both => Err(KeyError::TenantAndGlobal),
            Scope::Global | Scope::Tenant => Ok(()),
        }
    }

    /// Writes the draft again after a setting changed, if it was begun.
    #[cfg_attr(debug_assertions, inline)]
    #[cfg_attr(not(debug_assertions), inline(always))]
    fn rewrite(&mut self) {
        if self.draft.stage != Stage::Empty {
            self.draft.rewrite(&self.settings);
        }
    }

    #[cfg_attr(debug_assertions, inline)]
    #[cfg_attr(not(debug_assertions), inline(always))]
    fn add_tenant<T: TenantValue + ?Sized>(&mut self, value: &T, allow_zero: bool) {
        let first = match self.scope {
            Scope::Unset => true,
            Scope::Tenant => false,
            Scope::Global | Scope::Both => {
                self.scope = Scope::Both;
                return;
            }
        };
        self.scope = Scope::Tenant;
        if self.mistake.is_none()
            && let Err(Empty) = self
                .draft
                .add_tenant(&self.settings, value, first, allow_zero)
        {
            let error = empty_tenant(self.draft.tenant_count());
            self.fail(error);
        }
    }

    #[cfg_attr(debug_assertions, inline)]
    #[cfg_attr(not(debug_assertions), inline(always))]
    fn add_criterion<V: CriterionValue + ?Sized>(&mut self, name: &str, value: &V) {
        if self.mistake.is_some() {
            return;
        }
        if name.is_empty() {
            let position = self.draft.pairs.len();
            self.fail(KeyError::EmptyCriterionName { position });
        } else if let Err(Duplicate) = self.draft.add_criterion(&self.settings, name, value) {
            let name = name.to_owned();
            self.fail(KeyError::DuplicateCriterion { name });
        }
    }

    /// Records the first mistake.
    #[cold]
    fn fail(&mut self, error: KeyError) {
        if self.mistake.is_none() {
            self.mistake = Some(error);
        }
    }
}

/// The error for an empty tenant value after `before` others.
#[cold]
fn empty_tenant(before: usize) -> KeyError {
    let field = if before == 0 {
        Cow::Borrowed("tenant")
    } else {
        Cow::Owned(format!("tenant part {}", before + 1))
    };
    KeyError::EmptyTenant { field }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::writer::KeyWriter;

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
        );
        writer.tenant("tenant", "t", false);
        writer.operation();
        for name in &names {
            writer.criterion(&format!("{name}="), &1u8);
        }
        writer.finish(None).unwrap();
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
