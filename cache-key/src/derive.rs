//! The derive macros, re-exported from `cache-key-derive` (feature `derive`)
//! with their reference.

/// Derives [`CacheKey`](trait@crate::CacheKey) for a query struct: every
/// field marked `#[tenant]`, `#[criterion]` or `#[skip]`, the tenant required
/// (or the data declared global), secrets, volatile inputs, request metadata
/// and personal data refused by name.
///
#[doc = include_str!("../ATTRIBUTES.md")]
pub use cache_key_derive::CacheKey;

/// Derives [`Criteria`](trait@crate::Criteria) for a criteria-only struct
/// (fields `#[criterion]` or `#[skip]`), to be flattened into queries with
/// `#[criterion(flatten)]`.
///
/// It takes `#[cache_key(rename_all = "...")]` and `#[cache_key(crate =
/// "...")]` on the struct, the field attributes of
/// [`CacheKey`](derive@crate::CacheKey)'s reference except `#[tenant]`, and
/// serde's `rename`/`rename_all`.
///
/// ```
/// use cache_key::{CacheKey, Criteria};
///
/// #[derive(Criteria)]
/// struct Page {
///     #[criterion]
///     page: u32,
///     #[criterion(rename = "perPage")]
///     per_page: u32,
/// }
///
/// #[derive(CacheKey)]
/// #[cache_key(namespace = "library", operation = "list")]
/// struct List {
///     #[tenant]
///     branch: u32,
///     #[criterion(flatten)]
///     page: Page,
/// }
///
/// let key = List { branch: 2, page: Page { page: 1, per_page: 20 } }.cache_key(1)?;
/// assert_eq!(key.as_str(), "library:s1:g1:t2:list:page=1&perPage=20");
/// # Ok::<(), cache_key::KeyError>(())
/// ```
pub use cache_key_derive::Criteria;

/// Derives [`CriterionValue`](trait@crate::CriterionValue) for a fieldless
/// enum (written as the variant's name, with `#[criterion(rename = "...")]`
/// on a variant and `#[criterion(rename_all = "snake_case")]` on the enum, or
/// serde's `rename`/`rename_all` when those are absent) or a newtype (written
/// as its inner value). `#[cache_key(crate = "...")]` names a renamed crate.
///
/// ```
/// use cache_key::{CriterionValue, KeyBuilder};
///
/// #[derive(CriterionValue)]
/// #[criterion(rename_all = "snake_case")]
/// enum Sort {
///     TitleAsc,
///     #[criterion(rename = "newest")]
///     YearDesc,
/// }
///
/// let key = KeyBuilder::new("library", "list").tenant(2).criterion("sort", Sort::YearDesc).build()?;
/// assert_eq!(key.as_str(), "library:s1:g1:t2:list:sort=newest");
/// # let _ = Sort::TitleAsc;
/// # Ok::<(), cache_key::KeyError>(())
/// ```
pub use cache_key_derive::CriterionValue;

/// Derives [`TenantValue`](trait@crate::TenantValue) for a newtype around a
/// tenant value, such as `struct BranchId(u32)` (derive
/// [`CriterionValue`](trait@crate::CriterionValue) too). Its empty value is
/// its inner value's (`BranchId(0)` is refused like `0`).
/// `#[cache_key(crate = "...")]` names a renamed crate.
///
/// ```
/// use cache_key::{CacheKey, CriterionValue, KeyError, TenantValue};
///
/// #[derive(CriterionValue, TenantValue, Default)]
/// struct BranchId(u32);
///
/// #[derive(CacheKey, Default)]
/// #[cache_key(namespace = "library", operation = "list")]
/// struct List {
///     #[tenant]
///     branch: BranchId,
///     #[criterion]
///     page: u32,
/// }
///
/// assert_eq!(List { branch: BranchId(2), page: 1 }.cache_key(1)?.as_str(), "library:s1:g1:t2:list:page=1");
/// assert!(matches!(List::default().cache_key(1), Err(KeyError::EmptyTenant { .. })));
/// # Ok::<(), cache_key::KeyError>(())
/// ```
pub use cache_key_derive::TenantValue;

/// Derives [`CacheTags`](trait@crate::CacheTags) for a cached value's struct
/// (or an element of it): each field marked `#[tag = "book"]` (or
/// `#[tag(name = "book", global = "why every tenant shares it")]`) adds one
/// tag per value it holds ([`TagValues`](crate::TagValues): an id, an
/// `Option` or a list of ids), each field marked `#[tags]` adds the tags of
/// its own value (a `CacheTags` type), in declaration order; other fields add
/// none. A query records its value's tags with `#[cache_key(value = ..,
/// ttl = "..", value_tags)]`. A field whose name (or tag) names a secret or
/// personal data is refused: a tag's value is written in clear into counter
/// names. `#[cache_key(crate = "...")]` names a renamed crate.
///
/// Each tag name of the struct's own fields also gets a typed invalidation
/// scope on the type, taking a query type declared `value_tags` (for its
/// namespace and tenant) and an id in the field's own type:
/// `Book::tag_scope_book::<Search>(&branch, &1)`, `Author::tag_scope_author::<Search>(&7)`
/// for a global tag (see the attribute reference's tags section).
///
/// ```
/// use cache_key::{CacheTags, Tags};
///
/// #[derive(CacheTags)]
/// struct Author {
///     #[tag(name = "author", global = "authors are one catalog for every shop")]
///     id: u64,
/// }
///
/// #[derive(CacheTags)]
/// struct Book {
///     #[tag = "book"]
///     id: u64,
///     #[tags]
///     author: Option<Author>,
/// }
///
/// let mut tags = Tags::new();
/// Book { id: 1, author: Some(Author { id: 7 }) }.write_tags(&mut tags)?;
/// assert_eq!(tags.as_str(), "#book=1\n@author=7\n");
/// # Ok::<(), cache_key::KeyError>(())
/// ```
pub use cache_key_derive::CacheTags;
