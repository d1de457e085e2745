//! [`KeyBuilder`]: keys assembled at run time, for dynamic filters and for
//! code that cannot use the derive.

use std::borrow::Cow;
use std::ops::Range;

use crate::canonical::CanonicalWriter;
use crate::error::KeyError;
use crate::key::Key;
use crate::value::{CriterionValue, TenantValue};
use crate::writer::{Head, KeyWriter, Text};

/// Builds a [`Key`] from parts given at run time.
///
/// It produces exactly the keys a `#[derive(CacheKey)]` struct with the same
/// parts produces. Criteria may come in any order and their names may be
/// computed at run time; they are sorted when the key is built.
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
    schema: u32,
    generation: u64,
    scope: Scope,
    /// The escaped tenant values, joined with `,`.
    tenant: String,
    criteria: Vec<Criterion<'a>>,
    /// The escaped canonical values of `criteria`, one after another.
    values: String,
    hash_tag: bool,
    max_len: Option<usize>,
    /// The first mistake, reported by `build`.
    error: Option<KeyError>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scope {
    Unset,
    Tenant { parts: usize },
    Global,
    Both,
}

#[derive(Debug, Clone)]
struct Criterion<'a> {
    name: Cow<'a, str>,
    value: Range<usize>,
}

impl<'a> KeyBuilder<'a> {
    /// Starts a key of `operation` in `namespace`, at schema 1 and generation 1.
    pub fn new(namespace: impl Into<Cow<'a, str>>, operation: impl Into<Cow<'a, str>>) -> Self {
        KeyBuilder {
            namespace: namespace.into(),
            operation: operation.into(),
            schema: 1,
            generation: 1,
            scope: Scope::Unset,
            tenant: String::new(),
            criteria: Vec::new(),
            values: String::new(),
            hash_tag: false,
            max_len: None,
            error: None,
        }
    }

    /// Sets the schema version of the cached value's format (default 1).
    pub fn schema(mut self, schema: u32) -> Self {
        self.schema = schema;
        self
    }

    /// Sets the generation, the counter bumped to invalidate a scope (default 1).
    pub fn generation(mut self, generation: u64) -> Self {
        self.generation = generation;
        self
    }

    /// Adds a tenant value: the authorization scope the cached answer belongs to.
    ///
    /// Call it once for a single tenant, or once per part of a compound tenant
    /// (organization, then role, say) in a fixed order. An empty value makes
    /// [`build`](Self::build) fail with [`KeyError::EmptyTenant`].
    pub fn tenant(mut self, value: impl TenantValue) -> Self {
        let parts = match self.scope {
            Scope::Unset => 0,
            Scope::Tenant { parts } => parts,
            Scope::Global | Scope::Both => {
                self.scope = Scope::Both;
                return self;
            }
        };
        if parts > 0 {
            self.tenant.push(',');
        }
        if self.tenant.capacity() == 0 {
            self.tenant.reserve(32);
        }
        let start = self.tenant.len();
        value.write_canonical(&mut CanonicalWriter::escaped(&mut self.tenant));
        if self.tenant.len() == start {
            let field = if parts == 0 {
                Cow::Borrowed("tenant")
            } else {
                Cow::Owned(format!("tenant part {}", parts + 1))
            };
            self.fail(KeyError::EmptyTenant { field });
        }
        self.scope = Scope::Tenant { parts: parts + 1 };
        self
    }

    /// Declares the key global: its answer is the same for every tenant, and
    /// its tenant segment is empty. Use it only for data that truly is.
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
    pub fn criterion(mut self, name: impl Into<Cow<'a, str>>, value: impl CriterionValue) -> Self {
        let name = name.into();
        if name.is_empty() {
            let position = self.criteria.len();
            self.fail(KeyError::EmptyCriterionName { position });
        }
        if self.criteria.capacity() == 0 {
            // Room for a typical query at once, instead of growing step by step.
            self.criteria.reserve(8);
            self.values.reserve(64);
        }
        let start = self.values.len();
        value.write_canonical(&mut CanonicalWriter::escaped(&mut self.values));
        self.criteria.push(Criterion {
            name,
            value: start..self.values.len(),
        });
        self
    }

    /// Writes the tenant segment as a Redis Cluster hash tag, `t{...}`, so that
    /// all keys of one tenant map to one slot.
    pub fn hash_tag(mut self, hash_tag: bool) -> Self {
        self.hash_tag = hash_tag;
        self
    }

    /// Refuses keys longer than `max` bytes (memcached allows 250) with
    /// [`KeyError::TooLong`]; a key is never truncated.
    pub fn max_len(mut self, max: usize) -> Self {
        self.max_len = Some(max);
        self
    }

    /// Builds the key, or reports the first mistake.
    pub fn build(mut self) -> Result<Key, KeyError> {
        let mut out = String::new();
        self.write_into(&mut out)?;
        Ok(Key::from_canonical(out))
    }

    /// Appends the key to `out`, reusing its capacity; on error `out` is unchanged.
    pub fn write_into(&mut self, out: &mut String) -> Result<(), KeyError> {
        if let Some(error) = &self.error {
            return Err(error.clone());
        }
        if self.namespace.is_empty() {
            return Err(KeyError::EmptyNamespace);
        }
        if self.operation.is_empty() {
            return Err(KeyError::EmptyOperation);
        }
        let global = match self.scope {
            Scope::Unset => return Err(KeyError::MissingTenant),
            Scope::Both => return Err(KeyError::TenantAndGlobal),
            Scope::Global => true,
            Scope::Tenant { .. } => false,
        };
        // A stable sort keeps duplicates adjacent in the order they were given.
        self.criteria
            .sort_by(|a, b| a.name.as_bytes().cmp(b.name.as_bytes()));
        if let Some(pair) = self
            .criteria
            .windows(2)
            .find(|pair| pair[0].name == pair[1].name)
        {
            return Err(KeyError::DuplicateCriterion {
                name: pair[0].name.clone().into_owned(),
            });
        }
        let mut key = KeyWriter::new(
            out,
            Head::Parts {
                namespace: Text::Raw(&self.namespace),
                schema: self.schema,
            },
            self.generation,
            self.hash_tag,
            self.tenant.len(),
            Text::Raw(&self.operation),
        );
        if !global {
            // Empty parts were reported by `tenant`; the joined parts are one text.
            key.escaped_tenant(Cow::Borrowed("tenant"), &self.tenant);
        }
        key.operation();
        for criterion in &self.criteria {
            key.escaped_criterion(&criterion.name, &self.values[criterion.value.clone()]);
        }
        key.finish(self.max_len)
    }

    fn fail(&mut self, error: KeyError) {
        self.error.get_or_insert(error);
    }
}
