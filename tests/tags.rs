//! Tags from the derive: a query's `#[tag]` criteria (`write_query_tags`,
//! `KEY_SCHEMA.tags()`, the typed `tag_scope_<name>` functions) and a
//! value's `#[derive(CacheTags)]`.

use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;

use cache_key::cache::CachedQuery;
use cache_key::generation::{Counter, CounterKind, Counters, GenerationSum};
use cache_key::tag::TagClock;
use cache_key::{
    CacheKey, CacheTags, GenerationError, GenerationStore, KeyError, MemoryGenerations, TagField,
    TagScope, Tags,
};

#[derive(CacheKey)]
#[cache_key(namespace = "shop", operation = "search")]
struct Search {
    #[tenant]
    shop: u32,
    #[criterion]
    #[tag = "product"]
    product: u64,
    #[criterion]
    text: String,
}

#[derive(CacheKey)]
#[cache_key(namespace = "shop", operation = "related")]
struct Related<'a> {
    #[tenant]
    shop: &'a str,
    #[criterion]
    #[tag = "order-line"]
    line: &'a str,
    #[criterion]
    #[tag = "product"]
    products: Vec<u64>,
    #[criterion]
    #[tag(name = "brand", global = "brands are one catalog for every shop")]
    brand: Option<String>,
}

#[derive(CacheKey)]
#[cache_key(
    namespace = "shop",
    operation = "brand_page",
    global = "brand pages are public"
)]
struct BrandPage {
    #[criterion]
    #[tag(name = "brand", global = "brands are one catalog for every shop")]
    brand: String,
}

#[derive(CacheKey)]
#[cache_key(namespace = "forge", operation = "issues")]
struct Issues {
    #[tenant]
    org: String,
    #[tenant]
    repo: String,
    #[criterion]
    #[tag = "label"]
    labels: BTreeSet<String>,
}

/// The text `write_query_tags` writes for `query`.
fn query_tags(query: &impl CacheKey) -> Result<String, KeyError> {
    let mut tags = Tags::new();
    query.write_query_tags(&mut tags)?;
    Ok(tags.as_str().to_owned())
}

#[test]
fn a_query_writes_its_tags_in_declaration_order() {
    let search = Search {
        shop: 7,
        product: 42,
        text: "mug".into(),
    };
    assert_eq!(query_tags(&search).unwrap(), "#product=42\n");

    let related = Related {
        shop: "s",
        line: "a=b\nc",
        products: vec![1, 2],
        brand: Some("acme & co".into()),
    };
    assert_eq!(
        query_tags(&related).unwrap(),
        "#order-line=a%3Db%0Ac\n#product=1\n#product=2\n@brand=acme%20%26%20co\n"
    );
    let none = Related {
        brand: None,
        products: vec![],
        ..related
    };
    assert_eq!(query_tags(&none).unwrap(), "#order-line=a%3Db%0Ac\n");

    let issues = Issues {
        org: "acme".into(),
        repo: "rocket".into(),
        labels: ["bug".to_owned(), "api".to_owned()].into(),
    };
    assert_eq!(query_tags(&issues).unwrap(), "#label=api\n#label=bug\n");
}

#[test]
fn an_empty_tag_value_is_an_error_naming_the_field() {
    let search = Search {
        shop: 7,
        product: 0,
        text: "mug".into(),
    };
    assert_eq!(
        query_tags(&search),
        Err(KeyError::EmptyTag {
            field: "product".into()
        })
    );
    let related = Related {
        shop: "s",
        line: "",
        products: vec![],
        brand: None,
    };
    assert_eq!(
        query_tags(&related),
        Err(KeyError::EmptyTag {
            field: "line".into()
        })
    );
}

#[test]
fn the_schema_lists_the_tags() {
    assert_eq!(
        Search::KEY_SCHEMA.tags(),
        [TagField::new("product", "product", None)]
    );
    assert_eq!(
        Related::KEY_SCHEMA.tags(),
        [
            TagField::new("order-line", "line", None),
            TagField::new("product", "products", None),
            TagField::new(
                "brand",
                "brand",
                Some("brands are one catalog for every shop")
            ),
        ]
    );
    let brand = BrandPage::KEY_SCHEMA.tags()[0];
    assert_eq!(
        (brand.name(), brand.field(), brand.global()),
        (
            "brand",
            "brand",
            Some("brands are one catalog for every shop")
        )
    );
    assert!(format!("{:?}", Search::KEY_SCHEMA).contains("tags: [TagField { name: \"product\""));
}

/// The name of the counter a query's tag entry (`#product=42` as
/// `write_query_tags` writes it) has among the query's counters (see
/// `Counter::write_name`).
fn tag_counter_name(query: &impl CacheKey, entry: &str) -> String {
    let namespace = query_namespace(query);
    match entry.as_bytes()[0] {
        b'#' => {
            let mut tenant = String::new();
            query.write_tenant(&mut tenant).unwrap();
            format!("{namespace}:g:t{{{tenant}}}:{entry}")
        }
        _ => format!("{namespace}:g:@{{{namespace}}}:{}", &entry[1..]),
    }
}

fn query_namespace<Q: CacheKey>(_: &Q) -> &'static str {
    Q::KEY_SCHEMA.namespace()
}

#[test]
fn a_typed_tag_scope_names_the_counter_of_the_querys_tag() -> Result<(), GenerationError> {
    let search = Search {
        shop: 7,
        product: 42,
        text: "mug".into(),
    };
    let scope = Search::tag_scope_product(&7, &42)?;
    assert_eq!(scope.kind(), CounterKind::Tag);
    assert_eq!(
        scope.counter().tag(),
        Some((TagScope::Tenant, "product=42"))
    );
    assert_eq!(scope.counter().name(), "shop:g:t{7}:#product=42");
    assert_eq!(
        scope.counter().name(),
        tag_counter_name(&search, "#product=42")
    );

    // Each value of a list is a tag; `-` is `_` in the function's name.
    let related = Related {
        shop: "s:1",
        line: "l 1",
        products: vec![5, 6],
        brand: Some("acme".into()),
    };
    let entries = query_tags(&related)?;
    let names: Vec<String> = entries
        .lines()
        .map(|entry| tag_counter_name(&related, entry))
        .collect();
    assert_eq!(
        [
            Related::tag_scope_order_line(&"s:1", &"l 1")?,
            Related::tag_scope_product(&"s:1", &5)?,
            Related::tag_scope_product(&"s:1", &6)?,
            Related::tag_scope_brand(&"acme".to_owned())?,
        ]
        .map(|scope| scope.counter().name()),
        names.as_slice()
    );
    assert_eq!(names[0], "shop:g:t{s%3A1}:#order-line=l%201");
    assert_eq!(names[3], "shop:g:@{shop}:brand=acme");

    // A global tag is one counter for every tenant and every query type.
    assert_eq!(
        BrandPage::tag_scope_brand(&"acme".to_owned())?.counter(),
        Related::tag_scope_brand(&"acme".to_owned())?.counter()
    );

    // A compound tenant takes its tuple, as `tenant_scope` does.
    let scope = Issues::tag_scope_label((&"acme".to_owned(), &"rocket".to_owned()), &"bug".into())?;
    assert_eq!(scope.counter().name(), "forge:g:t{acme,rocket}:#label=bug");

    let empty = Search::tag_scope_product(&7, &0).unwrap_err();
    assert_eq!(
        empty.key_error(),
        Some(&KeyError::EmptyTag {
            field: "tag".into()
        })
    );
    Ok(())
}

/// A store that keeps each counter under its name, and records the names of
/// the counters it reads.
#[derive(Default)]
struct NamedCounters {
    values: Mutex<HashMap<String, u64>>,
    read: Mutex<Vec<String>>,
}

impl GenerationStore for NamedCounters {
    fn read(&self, counters: Counters<'_>, sum: &mut GenerationSum) -> Result<(), GenerationError> {
        let values = self.values.lock().unwrap();
        let mut read = self.read.lock().unwrap();
        read.clear();
        for counter in counters {
            let name = counter.name();
            sum.add(values.get(&name).copied().unwrap_or(0));
            read.push(name);
        }
        Ok(())
    }

    fn bump(&self, counter: Counter<'_>) -> Result<(), GenerationError> {
        *self
            .values
            .lock()
            .unwrap()
            .entry(counter.name())
            .or_default() += 1;
        Ok(())
    }
}

#[test]
fn a_querys_counters_include_its_tags_counters() -> Result<(), GenerationError> {
    let store = NamedCounters::default();
    let search = Search {
        shop: 7,
        product: 42,
        text: "mug".into(),
    };
    store.generation_for(&search)?;
    let read = store.read.lock().unwrap().clone();
    assert!(
        read.contains(&Search::tag_scope_product(&7, &42)?.counter().name()),
        "{read:?}"
    );
    Ok(())
}

#[test]
fn bumping_a_tag_changes_the_generation_of_the_queries_tagged_with_it()
-> Result<(), GenerationError> {
    bump_product_42(&NamedCounters::default())?;
    bump_product_42(&MemoryGenerations::new())
}

/// Bumps product 42 of shop 7 in `store`: the queries tagged with it get a
/// new generation, those tagged with another product or in another shop
/// keep theirs.
fn bump_product_42(store: &impl GenerationStore) -> Result<(), GenerationError> {
    let generations = || -> Result<[u64; 3], GenerationError> {
        let query = |shop, product| Search {
            shop,
            product,
            text: "mug".into(),
        };
        Ok([
            store.generation_for(&query(7, 42))?,
            store.generation_for(&query(7, 43))?,
            store.generation_for(&query(8, 42))?,
        ])
    };
    let before = generations()?;
    store.invalidate(&Search::tag_scope_product(&7, &42)?)?;
    let after = generations()?;
    assert!(after[0] > before[0], "the tagged query");
    assert_eq!(after[1], before[1], "another product");
    assert_eq!(after[2], before[2], "the same product in another shop");
    Ok(())
}

/// Where each tag's counter is, in the process: a global tag is one counter
/// for every shop (and for the global keys), a tag inside the tenant is one
/// per tenant, compound tenants included.
#[test]
fn in_memory_a_tag_bump_reaches_exactly_its_scope() -> Result<(), GenerationError> {
    let store = MemoryGenerations::new();
    let related = |shop, products: &[u64], brand: &str| Related {
        shop,
        line: "l1",
        products: products.to_vec(),
        brand: Some(brand.to_owned()),
    };
    let issues = |repo: &str, label: &str| Issues {
        org: "acme".into(),
        repo: repo.into(),
        labels: BTreeSet::from([label.to_owned()]),
    };
    let brand = |brand: &str| BrandPage {
        brand: brand.into(),
    };
    let generations = || -> Result<Vec<u64>, GenerationError> {
        Ok(vec![
            store.generation_for(&related("a", &[1, 42], "acme"))?,
            store.generation_for(&related("b", &[42], "acme"))?,
            store.generation_for(&related("a", &[1], "zeta"))?,
            store.generation_for(&brand("acme"))?,
            store.generation_for(&brand("zeta"))?,
            store.generation_for(&issues("rocket", "bug"))?,
            store.generation_for(&issues("engine", "bug"))?,
        ])
    };
    let changed = |scope: cache_key::GenerationScope| -> Result<Vec<bool>, GenerationError> {
        let before = generations()?;
        store.invalidate(&scope)?;
        let after = generations()?;
        Ok(before.iter().zip(&after).map(|(b, a)| a != b).collect())
    };
    let (t, f) = (true, false);
    assert_eq!(
        changed(Related::tag_scope_product(&"a", &42)?)?,
        [t, f, f, f, f, f, f],
        "product 42 of shop a"
    );
    assert_eq!(
        changed(Related::tag_scope_brand(&"acme".to_owned())?)?,
        [t, t, f, t, f, f, f],
        "brand acme, in every shop and on the global brand page"
    );
    assert_eq!(
        changed(Issues::tag_scope_label(
            (&"acme".to_owned(), &"rocket".to_owned()),
            &"bug".to_owned()
        )?)?,
        [f, f, f, f, f, t, f],
        "label bug of acme/rocket"
    );
    Ok(())
}

/// A hand-written `write_query_tags` that replaces the tags it is given
/// (they follow the key being written) gets an error, never a panic or a
/// key without its tags' counters.
#[test]
fn a_write_query_tags_that_replaces_its_tags_is_an_error() {
    struct Replacing(Search);
    impl CacheKey for Replacing {
        const KEY_SCHEMA: cache_key::KeySchema = Search::KEY_SCHEMA;
        type Tenant<'a> = <Search as CacheKey>::Tenant<'a>;
        fn write_key_part(
            &self,
            generation: u64,
            out: &mut String,
            part: cache_key::KeyPart,
        ) -> Result<(), KeyError> {
            self.0.write_key_part(generation, out, part)
        }
        fn write_query_tags(&self, tags: &mut Tags) -> Result<(), KeyError> {
            let mut own = Tags::new();
            self.0.write_query_tags(&mut own)?;
            *tags = own;
            Ok(())
        }
    }
    let query = Replacing(Search {
        shop: 7,
        product: 42,
        text: "mug".into(),
    });
    let store = MemoryGenerations::new();
    let error = store.key_for(&query).unwrap_err();
    assert_eq!(
        error.kind(),
        cache_key::generation::GenerationErrorKind::Internal,
        "{error}"
    );
    let cause = std::error::Error::source(&error).unwrap().to_string();
    assert!(
        cause.contains("write_query_tags replaced the tags"),
        "{cause}"
    );
    let mut out = String::new();
    assert!(store.write_key_for(&query, &mut out).is_err());
}

#[derive(CacheTags, Clone)]
struct Author {
    #[tag(name = "author", global = "authors are one catalog for every shop")]
    id: u64,
}

#[derive(CacheTags, Clone)]
struct Book {
    #[tag = "book"]
    id: u64,
    #[tags]
    authors: Vec<Author>,
    #[tag = "edition"]
    editions: Option<u32>,
    #[allow(dead_code)]
    title: String,
}

#[derive(CacheKey)]
#[cache_key(namespace = "library", operation = "shelf", value = Vec<Book>, ttl = "5m", value_tags)]
struct Shelf {
    #[tenant]
    branch: u32,
    #[criterion]
    shelf: String,
}

#[derive(CacheKey)]
#[cache_key(namespace = "library", operation = "count", value = u64, ttl = "5m")]
struct Count {
    #[tenant]
    branch: u32,
}

fn book(id: u64, authors: &[u64], editions: Option<u32>) -> Book {
    Book {
        id,
        authors: authors.iter().map(|&id| Author { id }).collect(),
        editions,
        title: format!("book {id}"),
    }
}

#[test]
fn a_derived_value_writes_every_elements_tags() {
    let books = vec![book(1, &[7, 8], Some(2)), book(2, &[], None)];
    let mut tags = Tags::new();
    books.write_tags(&mut tags).unwrap();
    assert_eq!(
        tags.as_str(),
        "#book=1\n@author=7\n@author=8\n#edition=2\n#book=2\n"
    );
    assert_eq!(tags.len(), 5);

    // The query's `value_tags` reads them from its cached answer.
    let mut through_query = Tags::new();
    Shelf::write_value_tags(&books, &mut through_query).unwrap();
    assert_eq!(through_query, tags);

    const { assert!(<Shelf as CachedQuery>::VALUE_TAGS) };
    const { assert!(!<Count as CachedQuery>::VALUE_TAGS) };

    // Without `value_tags`, none.
    let mut none = Tags::new();
    Count::write_value_tags(&3, &mut none).unwrap();
    assert!(none.is_empty());

    let mut tags = Tags::new();
    assert_eq!(
        book(0, &[], None).write_tags(&mut tags),
        Err(KeyError::EmptyTag { field: "id".into() })
    );
    let _ = (
        Shelf {
            branch: 1,
            shelf: "a".into(),
        },
        Count { branch: 1 },
    );
}

/// A generic value: its parameters are bound by what their fields are.
#[derive(CacheTags)]
struct Page<T, Id> {
    #[tags]
    items: Vec<T>,
    #[tag = "cursor"]
    next: Option<Id>,
}

#[derive(CacheTags)]
struct Pair(#[tag = "left"] u32, #[tag = "right"] u32);

#[test]
fn generic_and_tuple_values_derive_their_tags() {
    let page = Page {
        items: vec![book(3, &[], None)],
        next: Some("c-2"),
    };
    let mut tags = Tags::new();
    page.write_tags(&mut tags).unwrap();
    assert_eq!(tags.as_str(), "#book=3\n#cursor=c-2\n");
    let mut tags = Tags::new();
    Pair(1, 2).write_tags(&mut tags).unwrap();
    assert_eq!(tags.as_str(), "#left=1\n#right=2\n");
}

/// A generic query's tagged field is bound by `TagValues` as well as
/// `CriterionValue`.
#[derive(CacheKey)]
#[cache_key(namespace = "shop", operation = "by_id")]
struct ById<Id> {
    #[tenant]
    shop: u32,
    #[criterion]
    #[tag = "item"]
    id: Id,
}

#[test]
fn a_generic_query_tags_its_parameter() -> Result<(), GenerationError> {
    let query = ById { shop: 3, id: "x-1" };
    assert_eq!(query_tags(&query)?, "#item=x-1\n");
    let scope = ById::<&str>::tag_scope_item(&3, &"x-1")?;
    assert_eq!(
        scope.counter().name(),
        tag_counter_name(&query, "#item=x-1")
    );
    Ok(())
}

/// A generic query whose value is built from its parameter: `value_tags`
/// bounds it by `CacheTags`, beside `Clone + Send + Sync + 'static`.
#[derive(CacheKey)]
#[cache_key(namespace = "library", operation = "page", value = Vec<T>, ttl = "1m", value_tags)]
struct PageOf<T> {
    #[tenant]
    branch: u32,
    #[skip]
    kind: std::marker::PhantomData<T>,
}

#[test]
fn a_generic_querys_value_tags_are_its_values() {
    let mut tags = Tags::new();
    PageOf::<Book>::write_value_tags(&vec![book(5, &[], None)], &mut tags).unwrap();
    assert_eq!(tags.as_str(), "#book=5\n");
    let _ = PageOf::<Book> {
        branch: 1,
        kind: std::marker::PhantomData,
    };
}

/// End to end on moka: an answer is dropped when a tag of its query or of
/// its value is bumped, and answers without that entity keep hitting.
#[test]
fn a_cache_drops_the_answers_tagged_with_a_bumped_entity() -> Result<(), Box<dyn std::error::Error>>
{
    use cache_key::GenerationScope;
    use cache_key::cache::{MokaCache, QueryCache, TypedCache};

    let cache = MokaCache::new(MemoryGenerations::new(), 100);
    let shelf = |name: &str| Shelf {
        branch: 1,
        shelf: name.into(),
    };
    let load = |books: Vec<Book>| move || Ok::<_, std::io::Error>(books.clone());
    cache.get_or_load(
        &shelf("a"),
        load(vec![book(1, &[7], None), book(2, &[], None)]),
    )?;
    cache.get_or_load(&shelf("b"), load(vec![book(3, &[8], None)]))?;
    assert!(cache.get(&shelf("a"))?.is_some() && cache.get(&shelf("b"))?.is_some());

    // Book 1 of branch 1, a tag of the value only, through the value type's
    // typed scope: the query type gives the namespace and the tenant.
    let book_1 = Book::tag_scope_book::<Shelf>(&1, &1)?;
    assert_eq!(
        book_1,
        GenerationScope::tag_unchecked::<Shelf>(&[&1u32], TagScope::Tenant, "book", &1u64)?
    );
    cache.invalidate(&book_1)?;
    assert!(
        cache.get(&shelf("a"))?.is_none(),
        "the shelf showing book 1"
    );
    assert!(cache.get(&shelf("b"))?.is_some(), "a shelf without it");

    // Author 8, a global tag of the value (of a `#[tags]` part: its own type's
    // scope).
    let author_8 = Author::tag_scope_author::<Shelf>(&8)?;
    assert_eq!(
        author_8,
        GenerationScope::tag_unchecked::<Shelf>(&[], TagScope::Global, "author", &8u64)?
    );
    cache.invalidate(&author_8)?;
    assert!(
        cache.get(&shelf("b"))?.is_none(),
        "the shelf showing author 8"
    );

    // A query's own tag, through its typed scope.
    #[derive(CacheKey)]
    #[cache_key(namespace = "library", operation = "reviews", value = Vec<String>, ttl = "5m")]
    struct Reviews {
        #[tenant]
        branch: u32,
        #[criterion]
        #[tag = "book"]
        book: u64,
    }
    let reviews = |book| Reviews { branch: 1, book };
    cache.get_or_load(&reviews(4), || {
        Ok::<_, std::io::Error>(vec!["good".to_owned()])
    })?;
    cache.get_or_load(&reviews(5), || {
        Ok::<_, std::io::Error>(vec!["bad".to_owned()])
    })?;
    cache.invalidate(&Reviews::tag_scope_book(&1, &4)?)?;
    assert!(cache.get(&reviews(4))?.is_none(), "book 4's reviews");
    assert!(cache.get(&reviews(5))?.is_some(), "book 5's");
    Ok(())
}

/// A second query type of the `library` namespace whose answers hold books:
/// one book, for a member (a compound tenant).
#[derive(CacheKey)]
#[cache_key(namespace = "library", operation = "loan", value = Option<Book>, ttl = "5m", value_tags)]
struct Loan {
    #[tenant]
    branch: u32,
    #[criterion]
    member: u64,
}

/// Two keys per tenant, in another namespace.
#[derive(CacheKey)]
#[cache_key(namespace = "archive", operation = "boxes", value = Vec<Book>, ttl = "5m", value_tags)]
struct Boxes<'a> {
    #[tenant]
    site: &'a str,
    #[tenant]
    room: u32,
}

/// The counters a cache's value-tag check reads: a `MemoryGenerations` that
/// records, for each answer it checks, the names of its tags' counters (as
/// `Counter::write_name` writes them, from the answer's namespace and tenant).
#[derive(Default)]
struct TagReads {
    inner: MemoryGenerations,
    checked: Mutex<Vec<String>>,
}

impl GenerationStore for TagReads {
    fn read(&self, counters: Counters<'_>, sum: &mut GenerationSum) -> Result<(), GenerationError> {
        self.inner.read(counters, sum)
    }

    fn bump(&self, counter: Counter<'_>) -> Result<(), GenerationError> {
        self.inner.bump(counter)
    }

    fn tag_clock(&self, counters: Counters<'_>) -> Result<TagClock, GenerationError> {
        self.inner.tag_clock(counters)
    }

    fn tags_unchanged(
        &self,
        counters: Counters<'_>,
        tags: &Tags,
        since: TagClock,
    ) -> Result<bool, GenerationError> {
        let namespace = counters.namespace();
        let tenant = counters.tenant().unwrap_or_default();
        self.checked
            .lock()
            .unwrap()
            .extend(tags.iter().map(|(scope, tag)| match scope {
                TagScope::Tenant => format!("{namespace}:g:t{{{tenant}}}:#{tag}"),
                TagScope::Global => format!("{namespace}:g:@{{{namespace}}}:{tag}"),
            }));
        self.inner.tags_unchanged(counters, tags, since)
    }
}

#[test]
fn a_values_typed_tag_scope_names_the_counter_its_tags_name()
-> Result<(), Box<dyn std::error::Error>> {
    use cache_key::GenerationScope;
    use cache_key::cache::{MokaCache, QueryCache};

    let query = Shelf {
        branch: 1,
        shelf: "a".into(),
    };
    let books = vec![book(42, &[7], Some(2))];
    let mut tags = Tags::new();
    Shelf::write_value_tags(&books, &mut tags)?;
    assert_eq!(tags.as_str(), "#book=42\n@author=7\n#edition=2\n");
    let named: Vec<String> = tags
        .as_str()
        .lines()
        .map(|entry| tag_counter_name(&query, entry))
        .collect();

    // Each tag's typed scope, in the field's own type (`u32` for the
    // `Option<u32>` field), names the counter the value's tag names, as the
    // unchecked escape hatch does with the right values.
    let typed = [
        Book::tag_scope_book::<Shelf>(&1, &42)?,
        Author::tag_scope_author::<Shelf>(&7)?,
        Book::tag_scope_edition::<Shelf>(&1, &2)?,
    ];
    assert_eq!(
        typed.clone().map(|scope| scope.counter().name()),
        named.as_slice()
    );
    assert_eq!(named[0], "library:g:t{1}:#book=42");
    assert_eq!(named[1], "library:g:@{library}:author=7");
    assert_eq!(
        typed[0],
        GenerationScope::tag_unchecked::<Shelf>(&[&1u32], TagScope::Tenant, "book", &42u64)?
    );
    assert_eq!(
        typed[2],
        GenerationScope::tag_unchecked::<Shelf>(&[&1u32], TagScope::Tenant, "edition", &2u32)?
    );
    for scope in &typed {
        assert_eq!(scope.kind(), CounterKind::Tag);
    }

    // And the counters a cache reads for that answer are those.
    let cache = MokaCache::new(TagReads::default(), 100);
    cache.get_or_load(&query, || Ok::<_, std::io::Error>(books.clone()))?;
    assert!(cache.get(&query)?.is_some());
    let checked = cache.store().checked.lock().unwrap().clone();
    assert!(!checked.is_empty());
    for name in &checked {
        assert!(named.contains(name), "{name} among {named:?}");
    }
    for name in &named {
        assert!(checked.contains(name), "{name} checked: {checked:?}");
    }

    // The counter is the namespace's: every query type of `library` with
    // the same tenant names it, and another namespace or tenant another.
    assert_eq!(Book::tag_scope_book::<Loan>(&1, &42)?, typed[0]);
    assert_eq!(Author::tag_scope_author::<Loan>(&7)?, typed[1]);
    assert_ne!(Book::tag_scope_book::<Shelf>(&2, &42)?, typed[0]);
    // A compound tenant takes its tuple, as `tenant_scope` does.
    let archived = Book::tag_scope_book::<Boxes>((&"north", &3), &42)?;
    assert_eq!(archived.counter().name(), "archive:g:t{north,3}:#book=42");
    assert_eq!(
        Author::tag_scope_author::<Boxes>(&7)?.counter().name(),
        "archive:g:@{archive}:author=7"
    );

    // An empty id is an error, as in the value's own tags.
    assert_eq!(
        Book::tag_scope_book::<Shelf>(&1, &0)
            .unwrap_err()
            .key_error(),
        Some(&KeyError::EmptyTag {
            field: "tag".into()
        })
    );
    let _ = (
        Loan {
            branch: 1,
            member: 2,
        },
        Boxes {
            site: "north",
            room: 3,
        },
    );
    Ok(())
}

/// End to end on moka: a value tag's typed scope ends the cached answers
/// holding that entity, in that tenant only (a global tag: in every
/// tenant), whatever the query type, and keeps the others.
#[test]
fn bumping_a_values_typed_tag_scope_ends_the_answers_holding_it()
-> Result<(), Box<dyn std::error::Error>> {
    use cache_key::cache::{MokaCache, QueryCache, TypedCache};

    let cache = MokaCache::new(MemoryGenerations::new(), 100);
    let shelf = |branch, name: &str| Shelf {
        branch,
        shelf: name.into(),
    };
    let load = |books: Vec<Book>| move || Ok::<_, std::io::Error>(books.clone());
    let fill = |query: &Shelf, books: Vec<Book>| cache.get_or_load(query, load(books)).map(drop);
    fill(
        &shelf(1, "a"),
        vec![book(42, &[7], None), book(43, &[], None)],
    )?;
    fill(&shelf(1, "b"), vec![book(44, &[8], Some(2))])?;
    fill(&shelf(2, "a"), vec![book(42, &[8], None)])?;
    let loan = Loan {
        branch: 1,
        member: 9,
    };
    cache.get_or_load(&loan, || Ok::<_, std::io::Error>(Some(book(42, &[], None))))?;
    let cached = |query: &Shelf| cache.get(query).map(|value| value.is_some());

    // Book 42 of branch 1: the answers holding it in branch 1, of either
    // query type; branch 2's shelf holds another branch's book 42.
    cache.invalidate(&Book::tag_scope_book::<Shelf>(&1, &42)?)?;
    assert!(!cached(&shelf(1, "a"))?, "branch 1's shelf showing book 42");
    assert!(cache.get(&loan)?.is_none(), "branch 1's loan of book 42");
    assert!(cached(&shelf(1, "b"))?, "a shelf without it");
    assert!(cached(&shelf(2, "a"))?, "book 42 of branch 2");

    // Edition 2, the `Option<u32>` field's tag, taken as a `u32`.
    fill(&shelf(1, "a"), vec![book(42, &[7], None)])?;
    cache.invalidate(&Book::tag_scope_edition::<Shelf>(&1, &2)?)?;
    assert!(!cached(&shelf(1, "b"))?, "the shelf showing edition 2");
    assert!(cached(&shelf(1, "a"))?, "a shelf without it");

    // Author 8, a global tag: the answers holding it in every branch.
    fill(&shelf(1, "b"), vec![book(44, &[8], None)])?;
    cache.invalidate(&Author::tag_scope_author::<Shelf>(&8)?)?;
    assert!(
        !cached(&shelf(1, "b"))?,
        "branch 1's shelf showing author 8"
    );
    assert!(
        !cached(&shelf(2, "a"))?,
        "branch 2's shelf showing author 8"
    );
    assert!(cached(&shelf(1, "a"))?, "a shelf without author 8");
    Ok(())
}
