//! [`KeyBuilder`]: keys assembled at run time, for dynamic filters and for
//! code that cannot use the derive.

use std::borrow::Cow;
use std::cmp::Ordering;
use std::fmt::Write as _;
use std::mem;

use percent_encoding::percent_decode;

use crate::error::KeyError;
use crate::escape;
use crate::key::Key;
use crate::number::{Decimal, StackText};
use crate::value::{CriterionValue, TenantValue};
use crate::writer::{self, CriteriaSegment, Head, Text};

/// Builds a [`Key`] from parts given at run time.
///
/// It produces exactly the keys a `#[derive(CacheKey)]` struct with the same
/// parts produces. Criteria may come in any order and their names may be
/// computed at run time; each is escaped and put in its sorted place as it is
/// added. The key is written as the parts arrive, in one buffer that becomes
/// the key's: a typical key costs one allocation.
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
/// Mistakes are reported by [`build`](Self::build), never turned into a key:
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
    /// The key written so far, or the first mistake (after which nothing is
    /// written: `build` reports it).
    draft: Result<Draft, Box<KeyError>>,
}

// A chain of by-value calls moves the builder from call to call. Up to 128
// bytes the compiler moves it with inline copies; past that, with a call to
// `memcpy` per method, which made the builder slower (see BENCHMARKS.md).
// Hence the compact fields above and in `Draft`, and a test of the size
// (a test rather than a compile-time assertion: the layout is the
// compiler's, and a new compiler must not break users' builds).

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
/// criteria of 116 bytes fit), so that it allocates once.
const BUFFER_CAPACITY: usize = 192;

/// The key as far as it is known, laid out as it will be:
///
/// ```text
/// esc(namespace) ":s" schema ":g" generation ":t" ["{"]    the start
/// tenant values, joined with ","
/// ["}"] ":" esc(operation) ":"                            the middle
/// esc(name) "=" esc(value), sorted by name, joined with "&"
/// ```
///
/// The start is written with the first tenant value or criterion, the middle
/// with the first criterion, so parts given in the format's order are each
/// written once, at the end. A criterion whose name sorts before another's,
/// or a tenant value given after a criterion, is moved into its place. A
/// setting changed once writing began (the generation, say) rewrites the
/// draft.
///
/// What is left for [`KeyBuilder::build`]: the parts not written yet, the
/// criteria with an empty value (kept as `name=` until then, so that a name
/// given twice is found even so), and the summary of long criteria (they stay
/// in full until then, since any of them may still come first).
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
    /// Where the criterion with the greatest name starts.
    last_criterion: usize,
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
        self.open_tenant(settings);
        if self.stage == Stage::Tenant {
            settings.write_middle(&mut self.text);
            self.criteria_start = self.text.len();
            self.last_criterion = self.text.len();
            self.stage = Stage::Criteria;
        }
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

    /// How many criteria are written.
    fn criteria_count(&self) -> usize {
        match self.text.get(self.criteria_start..) {
            Some(criteria) if self.stage == Stage::Criteria && !criteria.is_empty() => {
                1 + criteria.matches('&').count()
            }
            _ => 0,
        }
    }

    /// Writes the draft again with changed settings.
    #[cold]
    fn rewrite(&mut self, settings: &Settings<'_>) {
        if self.stage == Stage::Empty {
            return;
        }
        let old = mem::take(self);
        let (tenant_start, tenant_end) = old.tenant_values();
        self.text.reserve(old.text.capacity());
        self.open_tenant(settings);
        let tenant = old.text.get(tenant_start..tenant_end);
        self.text.push_str(tenant.unwrap_or_default());
        self.has_empty_values = old.has_empty_values;
        if old.stage == Stage::Criteria {
            self.open_criteria(settings);
            self.last_criterion += old.last_criterion - old.criteria_start;
            let criteria = old.text.get(old.criteria_start..);
            self.text.push_str(criteria.unwrap_or_default());
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
    ) -> Result<(), Empty> {
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
            self.criteria_start += len;
            self.last_criterion += len;
        }
        Ok(())
    }

    /// Adds a criterion in its sorted place; `Err` when one has its name already.
    #[cfg_attr(debug_assertions, inline)]
    #[cfg_attr(not(debug_assertions), inline(always))]
    fn add_criterion<V: CriterionValue + ?Sized>(
        &mut self,
        settings: &Settings<'_>,
        name: &str,
        value: &V,
    ) -> Result<(), Duplicate> {
        self.open_criteria(settings);
        let place = self.criterion_place(name)?;
        let start = self.text.len();
        let last = place == start;
        if last && start > self.criteria_start {
            self.text.push('&');
        }
        let pair_start = self.text.len();
        escape::push_escaped(&mut self.text, name);
        self.text.push('=');
        let value_start = self.text.len();
        push_value(&mut self.text, value);
        self.has_empty_values |= self.text.len() == value_start;
        if last {
            self.last_criterion = pair_start;
        } else {
            self.text.push('&');
            self.move_last(start, place);
            self.last_criterion += self.text.len() - start;
        }
        Ok(())
    }

    /// Finishes the key from a copy of the draft at `out[start..]`: the
    /// parts not written yet, the empty criteria dropped, long criteria
    /// summarized, then the length checked.
    fn finish(
        &self,
        settings: &Settings<'_>,
        out: &mut String,
        start: usize,
        max_len: usize,
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
        if self.has_empty_values {
            drop_empty_values(out, criteria_start);
        }
        writer::end_plain_criteria(out, criteria_start);
        writer::check_len(out.len() - start, Some(max_len))
    }

    /// Moves what was written from `from` to the end of `text` to `to`.
    fn move_last(&mut self, from: usize, to: usize) {
        if to >= from {
            return;
        }
        // A short piece is moved through the stack, so that the buffer never
        // holds more than the draft (a long one through the buffer's end).
        let mut moved = StackText::<64>::new();
        if let Some(last) = self.text.get(from..)
            && moved.write_str(last).is_ok()
        {
            self.text.truncate(from);
            self.text.insert_str(to, moved.as_str());
        } else {
            self.text.extend_from_within(to..from);
            self.text.drain(to..from);
        }
    }

    /// Where a criterion named `name` goes: before the first criterion whose
    /// name sorts after it, or at the end. `Err` when one has that name already.
    fn criterion_place(&self, name: &str) -> Result<usize, Duplicate> {
        let text = self.text.as_bytes();
        let end = text.len();
        if end == self.criteria_start {
            return Ok(end);
        }
        // Criteria given in order go last: one comparison.
        match cmp_names(name, text.get(self.last_criterion..).unwrap_or_default()) {
            Ordering::Greater => return Ok(end),
            Ordering::Equal => return Err(Duplicate),
            Ordering::Less => {}
        }
        let mut at = self.criteria_start;
        while at < self.last_criterion {
            let criterion = text.get(at..).unwrap_or_default();
            match cmp_names(name, criterion) {
                Ordering::Less => return Ok(at),
                Ordering::Equal => return Err(Duplicate),
                // Short values: a plain loop rather than a call to `memchr`.
                Ordering::Greater => match criterion.iter().position(|&byte| byte == b'&') {
                    Some(amp) => at += amp + 1,
                    None => break,
                },
            }
        }
        Ok(self.last_criterion)
    }
}

/// Appends a value's canonical string, escaped, to `text`: through the short
/// paths derived keys take for their criteria (text, integers, lists, sets),
/// in a segment without a limit, since the builder summarizes the criteria
/// only once they are all sorted.
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

/// Removes the criteria with an empty value (`name=`) from the criteria at
/// `out[criteria_start..]`, with one `&` each.
fn drop_empty_values(out: &mut String, criteria_start: usize) {
    let mut at = criteria_start;
    while at < out.len() {
        let rest = out.get(at..).unwrap_or_default();
        let end = rest.find('&').map_or(out.len(), |amp| at + amp);
        if !rest
            .as_bytes()
            .get(..end - at)
            .unwrap_or_default()
            .ends_with(b"=")
        {
            at = end + 1;
        } else if end < out.len() {
            out.drain(at..=end);
        } else {
            // The last criterion: the `&` before it goes, if there is one.
            out.truncate(at.saturating_sub(1).max(criteria_start));
        }
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
            draft: Ok(Draft::default()),
        }
    }

    /// Sets the schema version of the cached value's format (default 1).
    #[cfg_attr(debug_assertions, inline)]
    #[cfg_attr(not(debug_assertions), inline(always))]
    pub fn schema(mut self, schema: u32) -> Self {
        self.settings.schema = schema;
        self.rewrite();
        self
    }

    /// Sets the generation, the counter bumped to invalidate a scope (default 1).
    #[cfg_attr(debug_assertions, inline)]
    #[cfg_attr(not(debug_assertions), inline(always))]
    pub fn generation(mut self, generation: u64) -> Self {
        self.settings.generation = generation;
        self.rewrite();
        self
    }

    /// Adds a tenant value: the authorization scope the cached answer belongs to.
    ///
    /// Call it once for a single tenant, or once per part of a compound tenant
    /// (organization, then role, say) in a fixed order. An empty value makes
    /// [`build`](Self::build) fail with [`KeyError::EmptyTenant`].
    #[cfg_attr(debug_assertions, inline)]
    #[cfg_attr(not(debug_assertions), inline(always))]
    pub fn tenant(mut self, value: impl TenantValue) -> Self {
        self.add_tenant(&value);
        self
    }

    /// Declares the key global: its answer is the same for every tenant, and
    /// its tenant segment is empty. Use it only for data that truly is.
    #[cfg_attr(debug_assertions, inline)]
    #[cfg_attr(not(debug_assertions), inline(always))]
    pub fn global(mut self) -> Self {
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
    pub fn criterion(mut self, name: impl Into<Cow<'a, str>>, value: impl CriterionValue) -> Self {
        self.add_criterion(&name.into(), &value);
        self
    }

    /// Writes the tenant segment as a Redis Cluster hash tag, `t{...}`, so that
    /// all keys of one tenant map to one slot.
    #[cfg_attr(debug_assertions, inline)]
    #[cfg_attr(not(debug_assertions), inline(always))]
    pub fn hash_tag(mut self, hash_tag: bool) -> Self {
        self.settings.hash_tag = hash_tag;
        self.rewrite();
        self
    }

    /// Refuses keys longer than `max` bytes (memcached allows 250) with
    /// [`KeyError::TooLong`]; a key is never truncated.
    #[cfg_attr(debug_assertions, inline)]
    #[cfg_attr(not(debug_assertions), inline(always))]
    pub fn max_len(mut self, max: usize) -> Self {
        self.max_len = max;
        self
    }

    /// Builds the key, or reports the first mistake.
    pub fn build(mut self) -> Result<Key, KeyError> {
        let draft = self
            .draft
            .as_mut()
            .map_err(|error| KeyError::clone(error))?;
        check_settings(&self.settings, self.scope)?;
        // The draft's buffer becomes the key's.
        let mut out = mem::take(&mut draft.text);
        draft.finish(&self.settings, &mut out, 0, self.max_len)?;
        Ok(Key::from_canonical(out))
    }

    /// Appends the key to `out`, reusing its capacity; on error `out` is unchanged.
    pub fn write_into(&self, out: &mut String) -> Result<(), KeyError> {
        let draft = self.check()?;
        let start = out.len();
        out.push_str(&draft.text);
        let result = draft.finish(&self.settings, out, start, self.max_len);
        if result.is_err() {
            out.truncate(start);
        }
        result
    }

    /// The first mistake, found while adding parts or now.
    fn check(&self) -> Result<&Draft, KeyError> {
        let draft = self
            .draft
            .as_ref()
            .map_err(|error| KeyError::clone(error))?;
        check_settings(&self.settings, self.scope)?;
        Ok(draft)
    }

    // The chained methods above take and return the builder by value and only
    // call the methods below, which work in place.

    /// Writes the draft again after a setting changed, if it was begun.
    #[cfg_attr(debug_assertions, inline)]
    #[cfg_attr(not(debug_assertions), inline(always))]
    fn rewrite(&mut self) {
        if let Ok(draft) = &mut self.draft
            && draft.stage != Stage::Empty
        {
            draft.rewrite(&self.settings);
        }
    }

    #[cfg_attr(debug_assertions, inline)]
    #[cfg_attr(not(debug_assertions), inline(always))]
    fn add_tenant<T: TenantValue + ?Sized>(&mut self, value: &T) {
        let first = match self.scope {
            Scope::Unset => true,
            Scope::Tenant => false,
            Scope::Global | Scope::Both => {
                self.scope = Scope::Both;
                return;
            }
        };
        self.scope = Scope::Tenant;
        if let Ok(draft) = &mut self.draft
            && let Err(Empty) = draft.add_tenant(&self.settings, value, first)
        {
            let error = empty_tenant(draft.tenant_count());
            fail(&mut self.draft, error);
        }
    }

    #[cfg_attr(debug_assertions, inline)]
    #[cfg_attr(not(debug_assertions), inline(always))]
    fn add_criterion<V: CriterionValue + ?Sized>(&mut self, name: &str, value: &V) {
        let Ok(draft) = &mut self.draft else {
            return;
        };
        if name.is_empty() {
            let position = draft.criteria_count();
            fail(&mut self.draft, KeyError::EmptyCriterionName { position });
        } else if let Err(Duplicate) = draft.add_criterion(&self.settings, name, value) {
            let name = name.to_owned();
            fail(&mut self.draft, KeyError::DuplicateCriterion { name });
        }
    }
}

/// The mistakes in a builder's settings and scope, found when it builds.
fn check_settings(settings: &Settings<'_>, scope: Scope) -> Result<(), KeyError> {
    if settings.namespace.is_empty() {
        return Err(KeyError::EmptyNamespace);
    }
    if settings.operation.is_empty() {
        return Err(KeyError::EmptyOperation);
    }
    match scope {
        Scope::Unset => Err(KeyError::MissingTenant),
        Scope::Both => Err(KeyError::TenantAndGlobal),
        Scope::Global | Scope::Tenant => Ok(()),
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

/// Ends the draft with its first mistake.
#[cold]
fn fail(draft: &mut Result<Draft, Box<KeyError>>, error: KeyError) {
    if draft.is_ok() {
        *draft = Err(Box::new(error));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::writer::KeyWriter;

    #[test]
    fn many_criteria_given_in_reverse_are_sorted() {
        let names: Vec<String> = (0..20).map(|i| format!("n{i:02}")).collect();
        let mut builder = KeyBuilder::new("ns", "op").tenant("t");
        for name in names.iter().rev() {
            builder = builder.criterion(name.as_str(), 1u8);
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
        writer.tenant("tenant", "t");
        writer.operation();
        for name in &names {
            writer.criterion(&format!("{name}="), &1u8);
        }
        writer.finish(None).unwrap();
        assert_eq!(key.as_str(), out);
        assert!(out.starts_with("ns:s1:g1:tt:op:c_"), "{out}");

        let err = builder.criterion("n07", 2u8).build().unwrap_err();
        assert_eq!(err, KeyError::DuplicateCriterion { name: "n07".into() });
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
    fn the_builder_is_moved_by_inline_copies() {
        // See the comment after `KeyBuilder`.
        assert!(
            mem::size_of::<KeyBuilder<'_>>() <= 128,
            "KeyBuilder grew to {} bytes",
            mem::size_of::<KeyBuilder<'_>>()
        );
    }

    #[test]
    fn a_name_that_extends_another_with_a_separator_sorts_after_it() {
        // "a" < "a&" < "a=" < "a=b": a raw `&` or `=` in a name is escaped in
        // the draft, where `=` also ends every name.
        let names = ["a&", "a=b", "a", "a="];
        for first in 0..names.len() {
            let mut builder = KeyBuilder::new("ns", "op").tenant("t");
            for i in 0..names.len() {
                let name = names[(first + i) % names.len()];
                builder = builder.criterion(name, name.len());
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
