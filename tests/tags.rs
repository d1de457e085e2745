//! Tags from the derive: a query's `#[tag]` criteria (`write_query_tags`,
//! `KEY_SCHEMA.tags()`, the typed `tag_scope_<name>` functions) and a
//! value's `#[derive(CacheTags)]`.

use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;

use cache_key::cache::CachedQuery;
use cache_key::generation::{Counter, CounterKind, Counters, GenerationSum};
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

    // Book 1 of branch 1, a tag of the value only: its scope is unchecked.
    let book_1 =
        GenerationScope::tag_unchecked::<Shelf>(&[&1u32], TagScope::Tenant, "book", &1u64)?;
    cache.invalidate(&book_1)?;
    assert!(
        cache.get(&shelf("a"))?.is_none(),
        "the shelf showing book 1"
    );
    assert!(cache.get(&shelf("b"))?.is_some(), "a shelf without it");

    // Author 8, a global tag of the value.
    let author_8 = GenerationScope::tag_unchecked::<Shelf>(&[], TagScope::Global, "author", &8u64)?;
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
