//! [`KeySchema`]: what a derived key is made of, readable by reviewers and tools.

/// The description of a [`CacheKey`](crate::CacheKey) type's keys: every field
/// and what it is to the key.
///
/// `#[derive(CacheKey)]` writes it as the associated constant
/// [`CacheKey::KEY_SCHEMA`](crate::CacheKey::KEY_SCHEMA); print it with `{:#?}`
/// to review a query type, or read it from tooling (a lint that lists every
/// global key and its reason, say).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeySchema {
    namespace: &'static str,
    operation: &'static str,
    schema: u32,
    scope: Scope,
    criteria: &'static [CriterionField],
    skipped: &'static [SkippedField],
    flattened: &'static [FlattenedField],
    hash_tag: bool,
    max_len: Option<usize>,
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
            criteria: &[],
            skipped: &[],
            flattened: &[],
            hash_tag: false,
            max_len: None,
        }
    }

    /// Sets the criteria, sorted by name as they appear in the key.
    pub const fn with_criteria(mut self, criteria: &'static [CriterionField]) -> Self {
        self.criteria = criteria;
        self
    }

    /// Sets the fields left out of the key.
    pub const fn with_skipped(mut self, skipped: &'static [SkippedField]) -> Self {
        self.skipped = skipped;
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
    pub const fn criteria(&self) -> &'static [CriterionField] {
        self.criteria
    }

    /// The fields left out of the key.
    pub const fn skipped(&self) -> &'static [SkippedField] {
        self.skipped
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
