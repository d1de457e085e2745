//! [`KeyBuilder`]: keys assembled at run time, for dynamic filters and for
//! code that cannot use the derive.

use std::borrow::Cow;
use std::cmp::Ordering;
use std::mem;
use std::ops::Range;

use percent_encoding::percent_decode;

use crate::canonical::CanonicalWriter;
use crate::error::KeyError;
use crate::escape;
use crate::key::Key;
use crate::value::{CriterionValue, TenantValue};
use crate::writer::{Head, KeyWriter, Text};

/// Builds a [`Key`] from parts given at run time.
///
/// It produces exactly the keys a `#[derive(CacheKey)]` struct with the same
/// parts produces. Criteria may come in any order and their names may be
/// computed at run time; each is escaped and put in its sorted place as it is
/// added. The builder keeps them in one buffer, which becomes the key's: a
/// typical key costs one allocation.
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
    namespace: Cow<'a, str>,
    operation: Cow<'a, str>,
    generation: u64,
    schema: u32,
    scope: Scope,
    hash_tag: bool,
    max_len: Option<usize>,
    /// The tenant and criteria segments of the key as they will be written,
    /// kept in order as values arrive (see [`Body`]).
    body: Body,
    /// The first mistake, reported by `build`.
    error: Option<Box<KeyError>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scope {
    Unset,
    Tenant { parts: u32 },
    Global,
    Both,
}

/// The capacity a builder's buffer starts with: room for a typical query's
/// body and then the longest key it can make (the key writer reserves that),
/// so that a key built from a typical query allocates once.
const BUFFER_CAPACITY: usize = 192;

/// The middle of a key, escaped, in one buffer: the tenant parts, each
/// followed by `,`, in the order given; then the criteria, each `esc(name)
/// "=" esc(value) "&"`, sorted by name as they are added.
///
/// Without the last separator of each, the two parts are the key's tenant
/// segment and its criteria (before the summary of long criteria). Building
/// writes the key's head, the tenant, the operation and the criteria after
/// the body, in order, and then removes the body: the buffer becomes the key.
///
/// `esc` escapes every `=`, `&` and `,`, so the separators read back
/// unambiguously. A criterion with an empty value is kept as `name=&` until
/// the key is built, so that a name given twice is found even then.
#[derive(Debug, Clone, Default)]
struct Body {
    text: String,
    /// The bytes of the tenant parts, at the start of `text`.
    tenant_len: usize,
    /// Whether a criterion with an empty value is in `text`.
    has_empty_values: bool,
}

impl Body {
    #[inline]
    fn reserve(&mut self) {
        if self.text.capacity() == 0 {
            self.text.reserve(BUFFER_CAPACITY);
        }
    }

    /// Moves what was written from `from` to the end of `text` to `to`.
    fn move_last(&mut self, from: usize, to: usize) {
        if to < from {
            self.text.extend_from_within(to..from);
            self.text.drain(to..from);
        }
    }

    /// Where a criterion named `name` goes among the criteria that end at
    /// `end`; `Err` when one has that name already.
    fn criterion_position(&self, name: &str, end: usize) -> Result<usize, ()> {
        let criteria = self.text.as_bytes().get(self.tenant_len..end);
        let mut rest = criteria.unwrap_or_default();
        while !rest.is_empty() {
            // Short slices: plain loops rather than calls to `memchr`.
            let name_len = rest.iter().position(|&byte| byte == b'=');
            let len = rest
                .iter()
                .position(|&byte| byte == b'&')
                .map_or(rest.len(), |amp| amp + 1);
            let other = rest.get(..name_len.unwrap_or(len)).unwrap_or_default();
            match cmp_names(name, other) {
                Ordering::Less => return Ok(end - rest.len()),
                Ordering::Equal => return Err(()),
                Ordering::Greater => rest = rest.get(len..).unwrap_or_default(),
            }
        }
        Ok(end)
    }

    /// Removes the criteria with an empty value: `name=&`.
    fn drop_empty_values(text: &mut String, criteria: Range<usize>) {
        let mut at = criteria.start;
        while let Some(found) = text.get(at..).and_then(|rest| rest.find("=&")) {
            let eq = at + found;
            let start = text
                .get(criteria.start..eq)
                .and_then(|before| before.rfind('&'))
                .map_or(criteria.start, |amp| criteria.start + amp + 1);
            text.drain(start..eq + "=&".len());
            at = start;
        }
    }
}

/// Each tenant part and criterion in the body ends with its separator; in the
/// key, separators only come between them.
fn without_last_separator(part: Range<usize>) -> Range<usize> {
    part.start..part.end.saturating_sub(1).max(part.start)
}

/// Orders a name against an escaped name by the names' UTF-8 bytes, as the
/// key format sorts criteria (escaped names order differently).
fn cmp_names(name: &str, escaped: &[u8]) -> Ordering {
    if escaped.contains(&b'%') {
        name.bytes().cmp(percent_decode(escaped))
    } else {
        // Names are short: a loop beats a call to `memcmp`.
        name.bytes().cmp(escaped.iter().copied())
    }
}

impl<'a> KeyBuilder<'a> {
    /// Starts a key of `operation` in `namespace`, at schema 1 and generation 1.
    #[inline]
    pub fn new(namespace: impl Into<Cow<'a, str>>, operation: impl Into<Cow<'a, str>>) -> Self {
        KeyBuilder {
            namespace: namespace.into(),
            operation: operation.into(),
            generation: 1,
            schema: 1,
            scope: Scope::Unset,
            hash_tag: false,
            max_len: None,
            body: Body::default(),
            error: None,
        }
    }

    /// Sets the schema version of the cached value's format (default 1).
    #[cfg_attr(debug_assertions, inline)]
    #[cfg_attr(not(debug_assertions), inline(always))]
    pub fn schema(mut self, schema: u32) -> Self {
        self.schema = schema;
        self
    }

    /// Sets the generation, the counter bumped to invalidate a scope (default 1).
    #[cfg_attr(debug_assertions, inline)]
    #[cfg_attr(not(debug_assertions), inline(always))]
    pub fn generation(mut self, generation: u64) -> Self {
        self.generation = generation;
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
            Scope::Tenant { .. } | Scope::Both => Scope::Both,
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
        self.hash_tag = hash_tag;
        self
    }

    /// Refuses keys longer than `max` bytes (memcached allows 250) with
    /// [`KeyError::TooLong`]; a key is never truncated.
    #[cfg_attr(debug_assertions, inline)]
    #[cfg_attr(not(debug_assertions), inline(always))]
    pub fn max_len(mut self, max: usize) -> Self {
        self.max_len = Some(max);
        self
    }

    /// Builds the key, or reports the first mistake.
    pub fn build(mut self) -> Result<Key, KeyError> {
        self.check()?;
        // The body's buffer becomes the key's.
        let mut out = mem::take(&mut self.body.text);
        self.write_after_body(&mut out, 0)?;
        Ok(Key::from_canonical(out))
    }

    /// Appends the key to `out`, reusing its capacity; on error `out` is unchanged.
    pub fn write_into(&self, out: &mut String) -> Result<(), KeyError> {
        self.check()?;
        let start = out.len();
        out.push_str(&self.body.text);
        self.write_after_body(out, start)
    }

    /// The mistakes found before the key is written.
    fn check(&self) -> Result<(), KeyError> {
        if let Some(error) = &self.error {
            return Err(KeyError::clone(error));
        }
        if self.namespace.is_empty() {
            return Err(KeyError::EmptyNamespace);
        }
        if self.operation.is_empty() {
            return Err(KeyError::EmptyOperation);
        }
        match self.scope {
            Scope::Unset => Err(KeyError::MissingTenant),
            Scope::Both => Err(KeyError::TenantAndGlobal),
            Scope::Global | Scope::Tenant { .. } => Ok(()),
        }
    }

    /// Writes the key after a copy of the body at `out[start..]`, then
    /// removes the copy, whether the key was written or not.
    fn write_after_body(&self, out: &mut String, start: usize) -> Result<(), KeyError> {
        let criteria = start + self.body.tenant_len..out.len();
        if self.body.has_empty_values {
            Body::drop_empty_values(out, criteria.clone());
        }
        let body_end = out.len();
        let tenant = without_last_separator(start..criteria.start);
        let criteria = without_last_separator(criteria.start..body_end);
        let mut key = KeyWriter::new(
            out,
            Head::Parts {
                namespace: Text::Raw(&self.namespace),
                schema: self.schema,
            },
            self.generation,
            self.hash_tag,
            tenant.len(),
            Text::Raw(&self.operation),
        );
        if !tenant.is_empty() {
            key.tenant_within(tenant);
        }
        key.operation();
        key.criteria_within(criteria);
        let result = key.finish(self.max_len);
        out.drain(start..body_end);
        result
    }

    // The chained methods above take and return the builder by value and only
    // call these, which work in place.

    #[cfg_attr(debug_assertions, inline)]
    #[cfg_attr(not(debug_assertions), inline(always))]
    fn add_tenant<T: TenantValue + ?Sized>(&mut self, value: &T) {
        let parts = match self.scope {
            Scope::Unset => 0,
            Scope::Tenant { parts } => parts,
            Scope::Global | Scope::Both => {
                self.scope = Scope::Both;
                return;
            }
        };
        // Saturates rather than overflows: only the number in an error message
        // ("tenant part N") could be off, after four billion parts.
        self.scope = Scope::Tenant {
            parts: parts.saturating_add(1),
        };
        let body = &mut self.body;
        body.reserve();
        let start = body.text.len();
        value.write_canonical(&mut CanonicalWriter::escaped(&mut body.text));
        if body.text.len() == start {
            self.empty_tenant(parts);
            return;
        }
        body.text.push(',');
        body.move_last(start, body.tenant_len);
        body.tenant_len += body.text.len() - start;
    }

    #[cfg_attr(debug_assertions, inline)]
    #[cfg_attr(not(debug_assertions), inline(always))]
    fn add_criterion<V: CriterionValue + ?Sized>(&mut self, name: &str, value: &V) {
        if name.is_empty() {
            self.empty_criterion_name();
            return;
        }
        let body = &mut self.body;
        body.reserve();
        let start = body.text.len();
        escape::push_escaped(&mut body.text, name);
        body.text.push('=');
        let value_start = body.text.len();
        value.write_canonical(&mut CanonicalWriter::escaped(&mut body.text));
        body.has_empty_values |= body.text.len() == value_start;
        body.text.push('&');
        match body.criterion_position(name, start) {
            Ok(position) => body.move_last(start, position),
            Err(()) => {
                body.text.truncate(start);
                self.fail(KeyError::DuplicateCriterion {
                    name: name.to_owned(),
                });
            }
        }
    }

    #[cold]
    fn empty_tenant(&mut self, parts: u32) {
        let field = if parts == 0 {
            Cow::Borrowed("tenant")
        } else {
            Cow::Owned(format!("tenant part {}", u64::from(parts) + 1))
        };
        self.fail(KeyError::EmptyTenant { field });
    }

    #[cold]
    fn empty_criterion_name(&mut self) {
        let criteria = self
            .body
            .text
            .get(self.body.tenant_len..)
            .unwrap_or_default();
        let position = criteria.bytes().filter(|&byte| byte == b'&').count();
        self.fail(KeyError::EmptyCriterionName { position });
    }

    #[cold]
    fn fail(&mut self, error: KeyError) {
        if self.error.is_none() {
            self.error = Some(Box::new(error));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
