//! [`KeySchema`]: what a derived key is made of, readable by reviewers and tools.

use crate::tag::TagField;
use std::fmt;
use std::iter::FusedIterator;

/// The description of a [`CacheKey`](crate::CacheKey) type's keys: every field
/// and what it is to the key.
///
/// `#[derive(CacheKey)]` writes it as the associated constant
/// [`CacheKey::KEY_SCHEMA`](crate::CacheKey::KEY_SCHEMA); print it with `{:#?}`
/// to review a query type, or read it from tooling (a lint that lists every
/// global key and its reason, say).
#[derive(Clone, Copy)]
pub struct KeySchema {
    namespace: &'static str,
    operation: &'static str,
    schema: u32,
    scope: Scope,
    criteria: List<CriterionField>,
    skipped: List<SkippedField>,
    flattened: &'static [FlattenedField],
    hash_tag: bool,
    max_len: Option<usize>,
    tags: &'static [TagField],
}

/// Whose data a key's cached answer is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Scope {
    /// The answer belongs to one tenant, named by these fields in order.
    Tenant {
        /// The `#[tenant]` fields, in declaration order.
        fields: &'static [&'static str],
    },
    /// The answer is the same for every tenant.
    Global {
        /// Why, as declared in `#[cache_key(global = "...")]`.
        reason: &'static str,
    },
}

/// A field that is a criterion of the key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CriterionField {
    name: &'static str,
    field: &'static str,
    allow: Option<&'static str>,
}

/// A field whose criteria join the key with `#[criterion(flatten)]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlattenedField {
    field: &'static str,
    criteria: &'static [&'static str],
}

impl FlattenedField {
    /// A flattened field and the criterion names its type declares
    /// ([`Criteria::NAMES`](crate::Criteria::NAMES): empty for maps).
    pub const fn new(field: &'static str, criteria: &'static [&'static str]) -> Self {
        FlattenedField { field, criteria }
    }

    /// The struct field.
    pub const fn field(&self) -> &'static str {
        self.field
    }

    /// The criterion names known at compile time; a map's come at run time.
    pub const fn criteria(&self) -> &'static [&'static str] {
        self.criteria
    }
}

/// A field left out of the key with `#[skip]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SkippedField {
    field: &'static str,
    reason: Option<&'static str>,
}

impl KeySchema {
    /// Describes keys of `operation` in `namespace` at `schema`, with the given scope.
    pub const fn new(
        namespace: &'static str,
        operation: &'static str,
        schema: u32,
        scope: Scope,
    ) -> Self {
        KeySchema {
            namespace,
            operation,
            schema,
            scope,
            criteria: List::Slice(&[]),
            skipped: List::Slice(&[]),
            flattened: &[],
            hash_tag: false,
            max_len: None,
            tags: &[],
        }
    }

    /// Sets the criteria, sorted by name as they appear in the key.
    pub const fn with_criteria(mut self, criteria: &'static [CriterionField]) -> Self {
        self.criteria = List::Slice(criteria);
        self
    }

    /// The criteria as the derive writes them: `name\0field\0allow\0` per
    /// criterion, an empty `allow` for none.
    #[doc(hidden)]
    pub const fn with_criteria_text(mut self, criteria: &'static str) -> Self {
        self.criteria = List::Text(criteria);
        self
    }

    /// Sets the fields left out of the key.
    pub const fn with_skipped(mut self, skipped: &'static [SkippedField]) -> Self {
        self.skipped = List::Slice(skipped);
        self
    }

    /// The skipped fields as the derive writes them: `field\0reason\0` per
    /// field, an empty `reason` for none.
    #[doc(hidden)]
    pub const fn with_skipped_text(mut self, skipped: &'static str) -> Self {
        self.skipped = List::Text(skipped);
        self
    }

    /// Sets the fields flattened into the key with `#[criterion(flatten)]`.
    pub const fn with_flattened(mut self, flattened: &'static [FlattenedField]) -> Self {
        self.flattened = flattened;
        self
    }

    /// Declares that the tenant segment is a Redis Cluster hash tag.
    pub const fn with_hash_tag(mut self) -> Self {
        self.hash_tag = true;
        self
    }

    /// Declares the maximum key length in bytes.
    pub const fn with_max_len(mut self, max_len: usize) -> Self {
        self.max_len = Some(max_len);
        self
    }

    #[doc(hidden)]
    pub const fn with_tags(mut self, tags: &'static [TagField]) -> Self {
        self.tags = tags;
        self
    }

    /// The tags the key carries (`#[tag = "..."]` on a criterion field):
    /// each one's counter joins the generation's.
    pub const fn tags(&self) -> &'static [TagField] {
        self.tags
    }

    /// The namespace, the key's first segment.
    pub const fn namespace(&self) -> &'static str {
        self.namespace
    }

    /// The operation, the segment after the tenant.
    pub const fn operation(&self) -> &'static str {
        self.operation
    }

    /// The schema version of the cached value's format.
    pub const fn schema(&self) -> u32 {
        self.schema
    }

    /// Whose data the cached answer is.
    pub const fn scope(&self) -> Scope {
        self.scope
    }

    /// The criteria, sorted by name as they appear in the key.
    pub const fn criteria(&self) -> SchemaFields<CriterionField> {
        SchemaFields(self.criteria)
    }

    /// The fields left out of the key.
    pub const fn skipped(&self) -> SchemaFields<SkippedField> {
        SchemaFields(self.skipped)
    }

    /// The fields flattened into the key with `#[criterion(flatten)]`.
    pub const fn flattened(&self) -> &'static [FlattenedField] {
        self.flattened
    }

    /// Whether the tenant segment is written as a Redis Cluster hash tag.
    pub const fn hash_tag(&self) -> bool {
        self.hash_tag
    }

    /// The maximum key length in bytes, if one is declared.
    pub const fn max_len(&self) -> Option<usize> {
        self.max_len
    }
}

impl CriterionField {
    /// A criterion named `name` in the key, read from `field`.
    pub const fn new(name: &'static str, field: &'static str) -> Self {
        CriterionField {
            name,
            field,
            allow: None,
        }
    }

    /// Records the reviewed reason a sensitive-looking name is allowed.
    pub const fn with_allow(mut self, reason: &'static str) -> Self {
        self.allow = Some(reason);
        self
    }

    /// The name in the key.
    pub const fn name(&self) -> &'static str {
        self.name
    }

    /// The struct field it is read from.
    pub const fn field(&self) -> &'static str {
        self.field
    }

    /// The reason given with `#[criterion(allow = "...")]`, if any.
    pub const fn allow(&self) -> Option<&'static str> {
        self.allow
    }
}

impl SkippedField {
    /// A field left out of the key, with the reason given, if any.
    pub const fn new(field: &'static str, reason: Option<&'static str>) -> Self {
        SkippedField { field, reason }
    }

    /// The struct field.
    pub const fn field(&self) -> &'static str {
        self.field
    }

    /// The reason given with `#[skip(reason = "...")]`, if any.
    pub const fn reason(&self) -> Option<&'static str> {
        self.reason
    }
}

impl fmt::Debug for KeySchema {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeySchema")
            .field("namespace", &self.namespace)
            .field("operation", &self.operation)
            .field("schema", &self.schema)
            .field("scope", &self.scope)
            .field("criteria", &self.criteria())
            .field("skipped", &self.skipped())
            .field("flattened", &self.flattened)
            .field("hash_tag", &self.hash_tag)
            .field("max_len", &self.max_len)
            .field("tags", &self.tags)
            .finish()
    }
}

impl PartialEq for KeySchema {
    /// Equal when they describe the same keys, however their lists were written.
    fn eq(&self, other: &Self) -> bool {
        self.namespace == other.namespace
            && self.operation == other.operation
            && self.schema == other.schema
            && self.scope == other.scope
            && self.criteria().eq(other.criteria())
            && self.skipped().eq(other.skipped())
            && self.flattened == other.flattened
            && self.hash_tag == other.hash_tag
            && self.max_len == other.max_len
            && self.tags == other.tags
    }
}

impl Eq for KeySchema {}

/// A list of a schema's fields: a slice, as written by hand, or text, as the
/// derive writes it (one string literal costs rustc far less than a constant
/// array of structs): each entry's parts in order, each ended by `\0`.
#[derive(Clone, Copy)]
enum List<T: 'static> {
    Slice(&'static [T]),
    Text(&'static str),
}

/// The criteria ([`KeySchema::criteria`]) or skipped fields
/// ([`KeySchema::skipped`]) of a schema, in order.
#[derive(Clone)]
pub struct SchemaFields<T: 'static>(List<T>);

impl<T: Copy> SchemaFields<T> {
    /// The next entry: from the slice, or read off the text by `read`.
    fn next_with(&mut self, read: fn(&mut &'static str) -> T) -> Option<T> {
        match &mut self.0 {
            List::Slice(slice) => {
                let (first, rest) = slice.split_first()?;
                *slice = rest;
                Some(*first)
            }
            List::Text("") => None,
            List::Text(text) => Some(read(text)),
        }
    }

    /// How many entries are left, each of `parts` parts in the text.
    fn len_with(&self, parts: usize) -> usize {
        match self.0 {
            List::Slice(slice) => slice.len(),
            List::Text(text) => text.bytes().filter(|&b| b == 0).count() / parts,
        }
    }
}

/// The next part of an entry's text, up to its `\0`.
fn next_part(text: &mut &'static str) -> &'static str {
    let (part, rest) = text.split_once('\0').unwrap_or((text, ""));
    *text = rest;
    part
}

/// An empty part is no value.
fn optional(part: &'static str) -> Option<&'static str> {
    (!part.is_empty()).then_some(part)
}

impl Iterator for SchemaFields<CriterionField> {
    type Item = CriterionField;

    fn next(&mut self) -> Option<CriterionField> {
        self.next_with(|text| CriterionField {
            name: next_part(text),
            field: next_part(text),
            allow: optional(next_part(text)),
        })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let len = self.len_with(3);
        (len, Some(len))
    }
}

impl Iterator for SchemaFields<SkippedField> {
    type Item = SkippedField;

    fn next(&mut self) -> Option<SkippedField> {
        self.next_with(|text| SkippedField {
            field: next_part(text),
            reason: optional(next_part(text)),
        })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let len = self.len_with(2);
        (len, Some(len))
    }
}

impl ExactSizeIterator for SchemaFields<CriterionField> {}
impl ExactSizeIterator for SchemaFields<SkippedField> {}
impl FusedIterator for SchemaFields<CriterionField> {}
impl FusedIterator for SchemaFields<SkippedField> {}

impl<T: fmt::Debug + Copy> fmt::Debug for SchemaFields<T>
where
    Self: Iterator<Item = T>,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.clone()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_lists_read_as_the_slices_they_stand_for() {
        const SCOPE: Scope = Scope::Tenant { fields: &["org"] };
        const TYPED: KeySchema = KeySchema::new("ns", "op", 1, SCOPE)
            .with_criteria(&[
                CriterionField::new("a", "a_field"),
                CriterionField::new("pin", "pin").with_allow("not a secret"),
            ])
            .with_skipped(&[
                SkippedField::new("trace", None),
                SkippedField::new("x", Some("why")),
            ]);
        let typed = TYPED;
        let text = KeySchema::new("ns", "op", 1, SCOPE)
            .with_criteria_text("a\0a_field\0\0pin\0pin\0not a secret\0")
            .with_skipped_text("trace\0\0x\0why\0");
        assert_eq!(text, typed);
        assert_eq!(format!("{text:?}"), format!("{typed:?}"));
        assert_eq!(text.criteria().len(), 2);
        assert_eq!(text.skipped().len(), 2);
        let mut criteria = text.criteria();
        criteria.next();
        assert_eq!(criteria.len(), 1);
        assert_eq!(
            criteria.next().and_then(|c| c.allow()),
            Some("not a secret")
        );
        assert_eq!(criteria.next(), None);
        assert_ne!(text, text.with_criteria(&[]));
    }
}
