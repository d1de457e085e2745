//! [`KeyPattern`]: a scope of keys (a namespace, an operation, a tenant,
//! optionally at one schema and generation) for listing or deleting them in a
//! store such as Redis or memcached.

use std::fmt::Write as _;

use cache_key_format::escape::push_escaped;
use cache_key_format::unescape::unescape_lossy;
use cache_key_format::{
    GENERATION, HASH_TAG_CLOSE, HASH_TAG_OPEN, SCHEMA, SEPARATOR, TENANT, TENANT_PART_SEPARATOR,
    marker,
};

use crate::canonical::{CanonicalWriter, CriterionValue, TenantValue};
use crate::decode::{DecodedKey, DecodedTenant, decode};
use crate::error::KeyError;

/// A set of keys: every key of a namespace, narrowed down to an operation, a
/// tenant (or the global keys), a schema, a generation.
///
/// A pattern gives three things:
///
/// - [`glob`](Self::glob): a glob for Redis `SCAN ... MATCH` (or `KEYS`). Every
///   part taken from a value is escaped as in a key, then `*`, `?`, `[`, `]`
///   and `\` get a backslash, so a tenant named `acme*` matches only itself.
/// - [`prefix`](Self::prefix): when the scope is exactly "every key starting
///   with this text", that text (for stores that list or delete by prefix).
/// - [`matches`](Self::matches): the exact test, which decodes a key and
///   compares its parts.
///
/// **A glob is only a first filter.** A `*` standing for a segment that is
/// not fixed (a schema, a generation) also matches `:`, so the glob can match
/// keys from outside the scope. The tenant pattern for `acme*` has the glob
/// `library:s*:g*:tacme\*:*`, which also matches
/// `library:s1:g4:tfoo:tacme*:page=1`: a key of tenant `foo` whose *operation*
/// is `tacme*`. Code that deletes keys must pass every key returned by `SCAN`
/// through [`matches`](Self::matches) before deleting it:
///
/// ```
/// use cache_key::KeyPattern;
///
/// let pattern = KeyPattern::tenant("library", "acme*")?;
/// assert_eq!(pattern.glob(), r"library:s*:g*:tacme\*:*");
/// assert_eq!(pattern.prefix(), None);
///
/// // What `SCAN 0 MATCH library:s*:g*:tacme\*:*` may return:
/// let scanned = [
///     "library:s1:g4:tacme*:list:page=1",
///     "library:s2:g9:tacme*:search",
///     "library:s1:g4:tfoo:tacme*:page=1", // tenant `foo`: the glob's `*` matched `:`
/// ];
/// let to_delete: Vec<_> = scanned.into_iter().filter(|key| pattern.matches(key)).collect();
/// assert_eq!(to_delete, ["library:s1:g4:tacme*:list:page=1", "library:s2:g9:tacme*:search"]);
/// # Ok::<(), cache_key::KeyError>(())
/// ```
///
/// A tenant written as a Redis Cluster hash tag (`t{acme}`) is a different
/// text from the plain one (`tacme`): a pattern matches one form, chosen with
/// [`with_hash_tag`](Self::with_hash_tag) (plain by default), and a pattern
/// whose tenant is not fixed matches both. In a Redis Cluster, `SCAN` lists the
/// keys of one node: run it on every primary, or, with hash tags, on the node
/// owning the tenant's slot.
///
/// `SCAN` walks the whole key space whatever the pattern; it never blocks the
/// server for long, but deleting a tenant is proportional to the size of the
/// database, not of the tenant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyPattern {
    namespace: String,
    schema: Option<u32>,
    generation: Option<u64>,
    tenant: Option<TenantScope>,
    hash_tag: bool,
    operation: Option<String>,
}

/// The tenant a pattern is restricted to.
#[derive(Debug, Clone, PartialEq, Eq)]
enum TenantScope {
    /// The keys declared global (empty tenant segment).
    Global,
    /// One tenant, single or compound.
    Parts {
        /// The tenant segment as keys write it (without hash tag braces).
        escaped: String,
        /// The tenant values, unescaped.
        parts: Vec<String>,
    },
    /// Every tenant whose leading values are these (an organization with
    /// all its repositories).
    Leading {
        /// The leading values as keys write them, joined with `,`.
        escaped: String,
        /// The leading values, unescaped.
        parts: Vec<String>,
    },
}

impl KeyPattern {
    /// Every key of `namespace`.
    ///
    /// ```
    /// use cache_key::KeyPattern;
    ///
    /// let pattern = KeyPattern::namespace("library");
    /// assert_eq!(pattern.glob(), "library:*");
    /// assert_eq!(pattern.prefix().as_deref(), Some("library:"));
    /// ```
    pub fn namespace(namespace: &str) -> Self {
        KeyPattern {
            namespace: namespace.to_owned(),
            schema: None,
            generation: None,
            tenant: None,
            hash_tag: false,
            operation: None,
        }
    }

    /// Every key of `operation` in `namespace`, whatever its tenant, schema
    /// and generation.
    ///
    /// ```
    /// use cache_key::KeyPattern;
    ///
    /// let pattern = KeyPattern::operation("library", "search");
    /// assert_eq!(pattern.glob(), "library:s*:g*:t*:search*");
    /// assert!(pattern.matches("library:s1:g4:tbranch-2:search:title=Sand"));
    /// assert!(pattern.matches("library:s1:g4:t:search"));
    /// assert!(!pattern.matches("library:s1:g4:tbranch-2:searches"));
    /// ```
    pub fn operation(namespace: &str, operation: &str) -> Self {
        Self::namespace(namespace).with_operation(operation)
    }

    /// Every key of one tenant in `namespace`, across all schemas,
    /// generations and operations: the scope to delete a tenant's data.
    ///
    /// The tenant value is written as in a key (an integer tenant id is its
    /// decimal form). An empty value is refused with [`KeyError::EmptyTenant`]:
    /// no key has an empty tenant.
    ///
    /// ```
    /// use cache_key::KeyPattern;
    ///
    /// let pattern = KeyPattern::tenant("library", "a:b")?;
    /// assert_eq!(pattern.glob(), "library:s*:g*:ta%3Ab:*");
    /// assert!(pattern.matches("library:s3:g7:ta%3Ab:list"));
    /// assert!(!pattern.matches("library:s3:g7:ta%3Ab,admin:list"));
    /// # Ok::<(), cache_key::KeyError>(())
    /// ```
    pub fn tenant(namespace: &str, tenant: impl TenantValue) -> Result<Self, KeyError> {
        Self::compound_tenant(namespace, [tenant])
    }

    /// Every key of one compound tenant (several tenant values, in the order
    /// the keys write them) in `namespace`, across all schemas, generations
    /// and operations.
    ///
    /// An empty value is refused with [`KeyError::EmptyTenant`], and no value
    /// at all with [`KeyError::MissingTenant`].
    ///
    /// ```
    /// use cache_key::KeyPattern;
    ///
    /// let pattern = KeyPattern::compound_tenant("crm", ["acme", "admin"])?;
    /// assert_eq!(pattern.glob(), "crm:s*:g*:tacme,admin:*");
    /// assert!(pattern.matches("crm:s1:g2:tacme,admin:list"));
    /// assert!(!pattern.matches("crm:s1:g2:tacme:list"));
    /// # Ok::<(), cache_key::KeyError>(())
    /// ```
    pub fn compound_tenant<I>(namespace: &str, tenant: I) -> Result<Self, KeyError>
    where
        I: IntoIterator,
        I::Item: TenantValue,
    {
        let (escaped, parts) = tenant_parts(tenant)?;
        Ok(KeyPattern {
            tenant: Some(TenantScope::Parts { escaped, parts }),
            ..Self::namespace(namespace)
        })
    }

    /// Every key of every tenant in `namespace` whose leading values are
    /// `leading`: organization `rust-lang` covers the compound tenants
    /// `rust-lang,cargo` and `rust-lang,rust` (and `rust-lang` alone), never
    /// `rust-lang-x,y`. Empty values are refused as for
    /// [`compound_tenant`](Self::compound_tenant).
    ///
    /// The glob ends the leading values with `[,:]` (`[,}]` with a hash tag),
    /// a character class Redis globs support; `matches` compares values.
    ///
    /// ```
    /// use cache_key::KeyPattern;
    ///
    /// let org = KeyPattern::leading_tenant("repos", ["rust-lang"])?;
    /// assert_eq!(org.glob(), "repos:s*:g*:trust-lang[,:]*");
    /// assert!(org.matches("repos:s1:g3:trust-lang,cargo:issues"));
    /// assert!(org.matches("repos:s1:g3:trust-lang:settings"));
    /// assert!(!org.matches("repos:s1:g3:trust-lang-x,y:issues"));
    /// # Ok::<(), cache_key::KeyError>(())
    /// ```
    pub fn leading_tenant<I>(namespace: &str, leading: I) -> Result<Self, KeyError>
    where
        I: IntoIterator,
        I::Item: TenantValue,
    {
        let (escaped, parts) = tenant_parts(leading)?;
        Ok(KeyPattern {
            tenant: Some(TenantScope::Leading { escaped, parts }),
            ..Self::namespace(namespace)
        })
    }
}

/// The tenant values escaped and joined as keys write them, and unescaped.
fn tenant_parts<I>(tenant: I) -> Result<(String, Vec<String>), KeyError>
where
    I: IntoIterator,
    I::Item: TenantValue,
{
    {
        let mut escaped = String::new();
        let mut parts = Vec::new();
        for (i, value) in tenant.into_iter().enumerate() {
            if i > 0 {
                escaped.push(TENANT_PART_SEPARATOR);
            }
            let start = escaped.len();
            value.write_canonical(&mut CanonicalWriter::escaped(&mut escaped));
            let part = &escaped[start..];
            if part.is_empty() {
                return Err(KeyError::empty_tenant_value(i));
            }
            parts.push(unescape_lossy(part).into_owned());
        }
        if parts.is_empty() {
            return Err(KeyError::MissingTenant);
        }
        Ok((escaped, parts))
    }
}

impl KeyPattern {
    /// Every global key (declared the same for every tenant) of `namespace`.
    ///
    /// ```
    /// use cache_key::KeyPattern;
    ///
    /// let pattern = KeyPattern::global("library");
    /// assert_eq!(pattern.glob(), "library:s*:g*:t:*");
    /// assert!(pattern.matches("library:s1:g1:t:countries"));
    /// assert!(!pattern.matches("library:s1:g1:tacme:countries"));
    /// ```
    pub fn global(namespace: &str) -> Self {
        KeyPattern {
            tenant: Some(TenantScope::Global),
            ..Self::namespace(namespace)
        }
    }

    /// Every key of one tenant at one schema and generation: for instance
    /// the entries orphaned by bumping that tenant's generation.
    ///
    /// ```
    /// use cache_key::KeyPattern;
    ///
    /// let pattern = KeyPattern::tenant_at("library", "acme*", 1, 4)?;
    /// assert_eq!(pattern.glob(), r"library:s1:g4:tacme\*:*");
    /// assert_eq!(pattern.prefix().as_deref(), Some("library:s1:g4:tacme*:"));
    /// # Ok::<(), cache_key::KeyError>(())
    /// ```
    pub fn tenant_at(
        namespace: &str,
        tenant: impl TenantValue,
        schema: u32,
        generation: u64,
    ) -> Result<Self, KeyError> {
        Ok(Self::tenant(namespace, tenant)?
            .with_schema(schema)
            .with_generation(generation))
    }

    /// Narrows the pattern to keys of schema version `schema`.
    pub fn with_schema(mut self, schema: u32) -> Self {
        self.schema = Some(schema);
        self
    }

    /// Narrows the pattern to keys of generation `generation`.
    pub fn with_generation(mut self, generation: u64) -> Self {
        self.generation = Some(generation);
        self
    }

    /// Narrows the pattern to keys of `operation`.
    pub fn with_operation(mut self, operation: &str) -> Self {
        self.operation = Some(operation.to_owned());
        self
    }

    /// Whether the pattern's tenant is written as a Redis Cluster hash tag,
    /// `t{...}`, as by [`KeyBuilder::hash_tag`](crate::KeyBuilder::hash_tag).
    /// Only matters when the pattern has a tenant (or is global).
    ///
    /// ```
    /// use cache_key::KeyPattern;
    ///
    /// let pattern = KeyPattern::tenant("library", "acme")?.with_hash_tag(true);
    /// assert_eq!(pattern.glob(), "library:s*:g*:t{acme}:*");
    /// assert!(pattern.matches("library:s1:g4:t{acme}:list"));
    /// assert!(!pattern.matches("library:s1:g4:tacme:list"));
    /// # Ok::<(), cache_key::KeyError>(())
    /// ```
    pub fn with_hash_tag(mut self, hash_tag: bool) -> Self {
        self.hash_tag = hash_tag;
        self
    }

    /// A glob for Redis `SCAN cursor MATCH glob` or `KEYS glob`.
    ///
    /// It matches every key of the scope, and possibly others: filter what it
    /// returns with [`matches`](Self::matches) (see the type's documentation).
    pub fn glob(&self) -> String {
        let mut out = String::new();
        push_glob_escaped(&mut out, &escaped(&self.namespace));
        out.push(SEPARATOR);
        let fixed = [
            self.schema.is_some(),
            self.generation.is_some(),
            self.tenant.is_some(),
            self.operation.is_some(),
        ];
        let Some(last_fixed) = fixed.iter().rposition(|&fixed| fixed) else {
            out.push('*');
            return out;
        };
        self.push_schema_to_tenant(&mut out, last_fixed.min(2) + 1, true);
        match &self.operation {
            // After the operation come nothing or `:` and the criteria.
            Some(operation) => {
                push_glob_escaped(&mut out, &escaped(operation));
                out.push('*');
            }
            // Leading tenant values end their glob with `*` already.
            None if matches!(self.tenant, Some(TenantScope::Leading { .. })) => {}
            None => out.push('*'),
        }
        out
    }

    /// The text every key of the scope starts with, when starting with it is
    /// exactly what being in the scope means: the pattern has no operation,
    /// and fixes a leading run of schema, generation and tenant (in that
    /// order). Use it with stores that list or delete by prefix; it is the
    /// glob without its final `*` and backslashes.
    ///
    /// ```
    /// use cache_key::KeyPattern;
    ///
    /// assert_eq!(
    ///     KeyPattern::namespace("library").with_schema(1).prefix().as_deref(),
    ///     Some("library:s1:"),
    /// );
    /// // A generation without a schema leaves a wildcard before it.
    /// assert_eq!(KeyPattern::namespace("library").with_generation(4).prefix(), None);
    /// ```
    pub fn prefix(&self) -> Option<String> {
        if self.operation.is_some() {
            return None;
        }
        let fixed = [
            self.schema.is_some(),
            self.generation.is_some(),
            self.tenant.is_some(),
        ];
        let run = fixed.iter().take_while(|&&fixed| fixed).count();
        // Leading tenant values are followed by `,` or the segment's end:
        // no one prefix says both.
        if fixed[run..].contains(&true) || matches!(self.tenant, Some(TenantScope::Leading { .. }))
        {
            return None;
        }
        let mut out = escaped(&self.namespace);
        out.push(SEPARATOR);
        self.push_schema_to_tenant(&mut out, run, false);
        Some(out)
    }

    /// Whether `key` is a valid key in the scope. Text that is not a key (see
    /// [`decode`](crate::decode)) never matches.
    pub fn matches(&self, key: &str) -> bool {
        decode(key).is_ok_and(|key| self.matches_decoded(&key))
    }

    /// Whether the decoded `key` is in the scope.
    pub fn matches_decoded(&self, key: &DecodedKey) -> bool {
        key.namespace() == self.namespace
            && self.schema.is_none_or(|schema| key.schema() == schema)
            && self
                .generation
                .is_none_or(|generation| key.generation() == generation)
            && self
                .operation
                .as_ref()
                .is_none_or(|operation| key.operation() == operation)
            && match &self.tenant {
                None => true,
                Some(TenantScope::Global) => {
                    key.tenant() == &DecodedTenant::Global && key.hash_tag() == self.hash_tag
                }
                Some(TenantScope::Parts { parts, .. }) => {
                    key.tenant().parts() == parts.as_slice() && key.hash_tag() == self.hash_tag
                }
                Some(TenantScope::Leading { parts, .. }) => {
                    key.tenant().parts().starts_with(parts) && key.hash_tag() == self.hash_tag
                }
            }
    }

    /// Writes the first `count` of the schema, generation and tenant
    /// segments, each followed by `:`, with `*` for those not fixed; values
    /// are glob-escaped when `glob` is set.
    fn push_schema_to_tenant(&self, out: &mut String, count: usize, glob: bool) {
        let star = |out: &mut String| out.push('*');
        if count >= 1 {
            out.push(marker(SCHEMA));
            match self.schema {
                Some(schema) => write_number(out, u64::from(schema)),
                None => star(out),
            }
            out.push(SEPARATOR);
        }
        if count >= 2 {
            out.push(marker(GENERATION));
            match self.generation {
                Some(generation) => write_number(out, generation),
                None => star(out),
            }
            out.push(SEPARATOR);
        }
        if count >= 3 {
            out.push(marker(TENANT));
            match &self.tenant {
                Some(tenant) => {
                    let segment = match tenant {
                        TenantScope::Global => "",
                        TenantScope::Parts { escaped, .. } => escaped,
                        // Only in globs (`prefix` has none for leading values):
                        // the values, then `,` or the segment's end.
                        TenantScope::Leading { escaped, .. } => {
                            if self.hash_tag {
                                out.push(HASH_TAG_OPEN);
                            }
                            push_glob_escaped(out, escaped);
                            out.push_str(if self.hash_tag { "[,}]*" } else { "[,:]*" });
                            return;
                        }
                    };
                    if self.hash_tag {
                        out.push(HASH_TAG_OPEN);
                    }
                    if glob {
                        push_glob_escaped(out, segment);
                    } else {
                        out.push_str(segment);
                    }
                    if self.hash_tag {
                        out.push(HASH_TAG_CLOSE);
                    }
                }
                None => star(out),
            }
            out.push(SEPARATOR);
        }
    }
}

fn write_number(out: &mut String, number: u64) {
    let _ = write!(out, "{number}");
}

/// `text` escaped as the key format escapes values.
fn escaped(text: &str) -> String {
    let mut out = String::new();
    push_escaped(&mut out, text);
    out
}

/// Appends `text` with the bytes special to Redis globs (`*`, `?`, `[`, `]`,
/// `\`) preceded by a backslash.
fn push_glob_escaped(out: &mut String, text: &str) {
    for c in text.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builder::KeyBuilder;

    /// Redis's glob matching for the subset patterns use: `*`, `?`, `\x`,
    /// and classes of plain characters (`[,:]`).
    fn glob_matches(glob: &[u8], text: &[u8]) -> bool {
        match glob.split_first() {
            None => text.is_empty(),
            Some((b'*', rest)) => (0..=text.len()).any(|skip| glob_matches(rest, &text[skip..])),
            Some((b'?', rest)) => !text.is_empty() && glob_matches(rest, &text[1..]),
            Some((b'[', rest)) => {
                let end = rest
                    .iter()
                    .position(|&b| b == b']')
                    .expect("a closed class");
                text.first().is_some_and(|c| rest[..end].contains(c))
                    && glob_matches(&rest[end + 1..], &text[1..])
            }
            Some((b'\\', rest)) if !rest.is_empty() => {
                text.first() == Some(&rest[0]) && glob_matches(&rest[1..], &text[1..])
            }
            Some((c, rest)) => text.first() == Some(c) && glob_matches(rest, &text[1..]),
        }
    }

    fn key(tenant: Option<&str>, schema: u32, generation: u64, operation: &str) -> String {
        let mut builder = KeyBuilder::new("library", operation);
        builder
            .schema(schema)
            .generation(generation)
            .criterion("page", 1);
        match tenant {
            Some(tenant) => builder.tenant(tenant),
            None => builder.global(),
        }
        .build()
        .unwrap()
        .into_string()
    }

    /// Keys of tenants that a careless glob would confuse, plus the trap: a
    /// key of tenant `foo` whose operation is `tacme*`.
    fn keys() -> Vec<String> {
        let mut keys = Vec::new();
        for tenant in [
            Some("acme"),
            Some("acme*"),
            Some("acme-corp"),
            Some("a:b"),
            Some("foo"),
            None,
        ] {
            for (schema, generation) in [(1, 4), (1, 5), (2, 5)] {
                for operation in ["list", "tacme*"] {
                    keys.push(key(tenant, schema, generation, operation));
                }
            }
        }
        keys.push(
            KeyBuilder::new("library", "list")
                .tenant("acme*")
                .hash_tag(true)
                .build()
                .unwrap()
                .into_string(),
        );
        keys.push(
            KeyBuilder::new("library", "list")
                .tenant("acme*")
                .tenant("admin")
                .build()
                .unwrap()
                .into_string(),
        );
        for (org, repo) in [("acme*", "cargo"), ("acme*", "rust"), ("acme*-x", "y")] {
            for hash_tag in [false, true] {
                keys.push(
                    KeyBuilder::new("library", "issues")
                        .tenant(org)
                        .tenant(repo)
                        .hash_tag(hash_tag)
                        .build()
                        .unwrap()
                        .into_string(),
                );
            }
        }
        keys.push(
            KeyBuilder::new("other", "list")
                .tenant("acme*")
                .build()
                .unwrap()
                .into_string(),
        );
        keys
    }

    /// Every key the pattern matches is found by its glob (and prefix), and
    /// returns the keys it matches.
    fn check(pattern: &KeyPattern) -> Vec<String> {
        let glob = pattern.glob();
        let mut matched = Vec::new();
        for key in keys() {
            let by_glob = glob_matches(glob.as_bytes(), key.as_bytes());
            if pattern.matches(&key) {
                assert!(by_glob, "{glob} misses {key}");
                matched.push(key.clone());
            }
            if let Some(prefix) = pattern.prefix() {
                assert_eq!(
                    key.starts_with(&prefix),
                    pattern.matches(&key),
                    "{prefix} {key}"
                );
                assert_eq!(by_glob, pattern.matches(&key), "{glob} {key}");
            }
        }
        if let Some(prefix) = pattern.prefix() {
            let mut from_prefix = String::new();
            push_glob_escaped(&mut from_prefix, &prefix);
            from_prefix.push('*');
            assert_eq!(from_prefix, glob);
        }
        matched
    }

    #[test]
    fn the_tacme_star_operation_matches_the_glob_but_not_the_pattern() {
        let pattern = KeyPattern::tenant("library", "acme*").unwrap();
        let glob = pattern.glob();
        assert_eq!(glob, r"library:s*:g*:tacme\*:*");
        let trap = "library:s1:g4:tfoo:tacme*:page=1";
        assert!(glob_matches(glob.as_bytes(), trap.as_bytes()));
        assert!(!pattern.matches(trap));
        assert!(keys().contains(&trap.to_owned()));

        let matched = check(&pattern);
        assert_eq!(matched.len(), 6);
        for key in &matched {
            assert!(key.contains(":tacme*:"), "{key}");
        }
        let by_glob = keys()
            .into_iter()
            .filter(|key| glob_matches(glob.as_bytes(), key.as_bytes()))
            .count();
        assert!(by_glob > matched.len(), "the glob alone over-matches");
    }

    #[test]
    fn leading_tenant_values_cover_every_tenant_they_start() {
        for hash_tag in [false, true] {
            let pattern = KeyPattern::leading_tenant("library", ["acme*"])
                .unwrap()
                .with_hash_tag(hash_tag);
            let matched = check(&pattern);
            let expected = if hash_tag { 3 } else { 9 };
            assert_eq!(matched.len(), expected, "{matched:?}");
            for key in &matched {
                let decoded = decode(key).unwrap();
                assert_eq!(decoded.tenant().parts()[0], "acme*", "{key}");
                assert_eq!(decoded.hash_tag(), hash_tag, "{key}");
            }
            assert_eq!(pattern.prefix(), None);
        }
        let glob = KeyPattern::leading_tenant("library", ["acme*"])
            .unwrap()
            .with_operation("issues")
            .glob();
        assert_eq!(glob, r"library:s*:g*:tacme\*[,:]*issues*");
        assert!(
            check(
                &KeyPattern::leading_tenant("library", ["acme*"])
                    .unwrap()
                    .with_operation("issues")
            )
            .len()
                == 2
        );
        assert_eq!(
            KeyPattern::leading_tenant("library", [""]),
            Err(KeyError::EmptyTenant {
                field: "tenant".into()
            })
        );
    }

    #[test]
    fn similar_tenants_are_kept_apart() {
        for tenant in ["acme", "acme*", "acme-corp", "a:b", "foo"] {
            let pattern = KeyPattern::tenant("library", tenant).unwrap();
            let matched = check(&pattern);
            assert_eq!(matched.len(), 6, "{tenant}: {matched:?}");
            for key in matched {
                let decoded = decode(&key).unwrap();
                assert_eq!(decoded.tenant().parts(), [tenant]);
                assert!(!decoded.hash_tag());
            }
        }
        assert_eq!(
            KeyPattern::tenant("library", "a:b").unwrap().glob(),
            "library:s*:g*:ta%3Ab:*"
        );
        assert_eq!(
            KeyPattern::tenant("library", "acme-corp").unwrap().glob(),
            "library:s*:g*:tacme-corp:*"
        );
    }

    #[test]
    fn one_tenant_at_one_schema_and_generation_is_a_prefix() {
        let pattern = KeyPattern::tenant_at("library", "acme*", 1, 5).unwrap();
        assert_eq!(pattern.prefix().as_deref(), Some("library:s1:g5:tacme*:"));
        assert_eq!(pattern.glob(), r"library:s1:g5:tacme\*:*");
        assert_eq!(check(&pattern).len(), 2);
        let hashed = pattern.clone().with_hash_tag(true);
        assert_eq!(hashed.prefix().as_deref(), Some("library:s1:g5:t{acme*}:"));
        assert!(check(&hashed).is_empty());
        let hashed = KeyPattern::tenant_at("library", "acme*", 1, 1)
            .unwrap()
            .with_hash_tag(true);
        assert_eq!(check(&hashed).len(), 1);
    }

    #[test]
    fn compound_and_global_tenants() {
        let compound = KeyPattern::compound_tenant("library", ["acme*", "admin"]).unwrap();
        assert_eq!(compound.glob(), r"library:s*:g*:tacme\*,admin:*");
        assert_eq!(check(&compound).len(), 1);
        let global = KeyPattern::global("library");
        assert_eq!(global.glob(), "library:s*:g*:t:*");
        let matched = check(&global);
        assert_eq!(matched.len(), 6);
        assert!(matched.iter().all(|key| key.contains(":t:")));
        assert_eq!(
            KeyPattern::global("library").with_hash_tag(true).glob(),
            "library:s*:g*:t{}:*"
        );
        assert!(
            KeyPattern::global("ns")
                .with_hash_tag(true)
                .matches("ns:s1:g1:t{}:op")
        );
    }

    #[test]
    fn operation_and_namespace_scopes() {
        let operation = KeyPattern::operation("library", "tacme*");
        assert_eq!(operation.glob(), r"library:s*:g*:t*:tacme\**");
        assert_eq!(operation.prefix(), None);
        assert_eq!(check(&operation).len(), 18);
        let namespace = KeyPattern::namespace("library");
        assert_eq!(namespace.glob(), "library:*");
        assert_eq!(check(&namespace).len(), keys().len() - 1);
        let generation = KeyPattern::namespace("library").with_generation(5);
        assert_eq!(generation.glob(), "library:s*:g5:*");
        assert_eq!(check(&generation).len(), 24);
        let narrow = KeyPattern::tenant("library", "acme")
            .unwrap()
            .with_schema(2)
            .with_operation("list");
        assert_eq!(narrow.glob(), "library:s2:g*:tacme:list*");
        assert_eq!(check(&narrow).len(), 1);
    }

    #[test]
    fn values_are_escaped_then_glob_escaped() {
        let pattern = KeyPattern::tenant("li[b]?", r"a\b*").unwrap();
        assert_eq!(pattern.glob(), r"li%5Bb%5D%3F:s*:g*:ta%5Cb\*:*");
        assert!(pattern.matches("li%5Bb%5D%3F:s1:g1:ta%5Cb*:x"));
        assert!(!pattern.matches("not a key"));
    }

    #[test]
    fn empty_tenants_are_refused() {
        assert!(matches!(
            KeyPattern::tenant("library", ""),
            Err(KeyError::EmptyTenant { .. })
        ));
        assert!(matches!(
            KeyPattern::compound_tenant("library", ["acme", ""]),
            Err(KeyError::EmptyTenant { .. })
        ));
        assert!(matches!(
            KeyPattern::compound_tenant("library", Vec::<&str>::new()),
            Err(KeyError::MissingTenant)
        ));
    }
}
