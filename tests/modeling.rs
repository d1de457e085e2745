//! Real query types: shared parts flattened in, enums and newtypes as values,
//! explicit normalization, and filter maps, each with its exact key.

use std::collections::{BTreeMap, HashMap};

use cache_key::{CacheKey, Criteria, CriterionValue, FlattenedField, KeyError, TenantValue};

#[derive(Criteria)]
struct Page {
    #[criterion]
    page: u32,
    #[criterion(rename = "perPage")]
    per_page: u32,
}

#[derive(CriterionValue, Clone, Copy)]
#[criterion(rename_all = "snake_case")]
enum SortOrder {
    TitleAsc,
    TitleDesc,
    #[criterion(rename = "newest")]
    YearDesc,
}

#[derive(CriterionValue, TenantValue)]
struct BranchId(u32);

#[derive(CriterionValue)]
struct Isbn(String);

fn digits_only(isbn: &str) -> String {
    isbn.chars().filter(char::is_ascii_digit).collect()
}

// The modeling attributes (`trim`, `lowercase`, `flatten`) are under test: not `fixtures::Search`.
#[derive(CacheKey)]
#[cache_key(namespace = "library", operation = "search")]
struct Search {
    #[tenant]
    branch: BranchId,
    #[criterion(trim, lowercase)]
    title: String,
    #[criterion(trim)]
    author: Option<String>,
    #[criterion]
    sort: SortOrder,
    #[criterion(flatten)]
    page: Page,
    #[criterion(flatten)]
    filters: BTreeMap<String, String>,
}

fn search() -> Search {
    Search {
        branch: BranchId(2),
        title: "  The Book of SAND ".into(),
        author: Some(" Borges ".into()),
        sort: SortOrder::TitleAsc,
        page: Page {
            page: 1,
            per_page: 20,
        },
        filters: BTreeMap::new(),
    }
}

#[test]
fn flattened_criteria_are_sorted_with_the_query_s_own() {
    // The criteria `author=Borges&page=1&perPage=20&sort=title_asc&title=the%20book%20of%20sand`
    // (75 bytes) are summarized: sha256 of that string begins aa153f6c0d19a0e19b89d1175cbb307c.
    assert_eq!(
        search().cache_key(4).unwrap().as_str(),
        "library:s1:g4:t2:search:c_aa153f6c0d19a0e19b89d1175cbb307c"
    );
    let short = Search {
        author: None,
        title: "Sand".into(),
        ..search()
    };
    assert_eq!(
        short.cache_key(4).unwrap().as_str(),
        "library:s1:g4:t2:search:page=1&perPage=20&sort=title_asc&title=sand"
    );
}

#[test]
fn enums_are_written_as_their_variant_names() {
    let with = |sort| {
        Search {
            sort,
            author: None,
            title: "x".into(),
            ..search()
        }
        .cache_key(1)
        .unwrap()
    };
    assert!(
        with(SortOrder::TitleDesc)
            .as_str()
            .ends_with("sort=title_desc&title=x")
    );
    assert!(
        with(SortOrder::YearDesc)
            .as_str()
            .ends_with("sort=newest&title=x")
    );
}

#[test]
fn normalization_makes_equivalent_inputs_one_key() {
    let a = Search {
        title: "sand".into(),
        author: Some("Borges".into()),
        ..search()
    };
    let b = Search {
        title: "  SAND  ".into(),
        author: Some("  Borges\t".into()),
        ..search()
    };
    assert_eq!(a.cache_key(1).unwrap(), b.cache_key(1).unwrap());
    // `trim` alone keeps case: a different author spelling is a different query.
    let c = Search {
        author: Some("borges".into()),
        ..search()
    };
    assert_ne!(a.cache_key(1).unwrap(), c.cache_key(1).unwrap());
}

#[test]
fn filter_maps_add_one_criterion_per_entry() {
    let filters: BTreeMap<String, String> = [
        ("lang".into(), "es".into()),
        ("genre".into(), "fiction".into()),
    ]
    .into();
    let query = Search {
        title: "x".into(),
        author: None,
        filters,
        ..search()
    };
    // `genre=fiction&lang=es&page=1&perPage=20&sort=title_asc&title=x`: 62 bytes, summarized.
    assert_eq!(
        query.cache_key(1).unwrap().as_str(),
        "library:s1:g1:t2:search:c_755ba7491330f371a6797fab98d40f96"
    );
}

#[test]
fn a_map_entry_named_like_a_fixed_criterion_is_an_error() {
    let filters: BTreeMap<String, String> = [("sort".into(), "title_desc".into())].into();
    let query = Search {
        filters,
        ..search()
    };
    assert_eq!(
        query.cache_key(1),
        Err(KeyError::DuplicateCriterion {
            name: "sort".into()
        })
    );
    let filters: BTreeMap<String, String> = [(String::new(), "x".into())].into();
    assert!(matches!(
        Search {
            filters,
            ..search()
        }
        .cache_key(1),
        Err(KeyError::EmptyCriterionName { .. })
    ));
}

#[derive(CacheKey)]
#[cache_key(namespace = "shop", operation = "products")]
struct Products {
    #[tenant]
    store: u32,
    #[criterion(with = digits_only)]
    isbn: String,
    #[criterion(flatten)]
    filters: HashMap<&'static str, Vec<&'static str>>,
    #[criterion]
    exact: Option<Isbn>,
}

#[test]
fn hash_map_filters_do_not_depend_on_iteration_order() {
    let entries = [
        ("color", vec!["red", "blue"]),
        ("size", vec!["m"]),
        ("brand", vec!["a,b"]),
    ];
    let expected = "shop:s1:g1:t7:products:brand=a%252Cb&color=red%2Cblue&isbn=9780&size=m";
    for rotation in 0..entries.len() {
        let mut filters = HashMap::new();
        for i in 0..entries.len() {
            let (name, values) = &entries[(i + rotation) % entries.len()];
            filters.insert(*name, values.clone());
        }
        let query = Products {
            store: 7,
            isbn: "978-0".into(),
            filters,
            exact: None,
        };
        assert_eq!(query.cache_key(1).unwrap().as_str(), expected);
    }
}

#[test]
fn newtypes_are_written_as_their_inner_value() {
    let query = Products {
        store: 7,
        isbn: String::new(),
        filters: HashMap::new(),
        exact: Some(Isbn("978-0-14".into())),
    };
    assert_eq!(
        query.cache_key(1).unwrap().as_str(),
        "shop:s1:g1:t7:products:exact=978-0-14"
    );
}

#[test]
fn the_key_schema_lists_flattened_fields() {
    assert_eq!(
        Search::KEY_SCHEMA.flattened(),
        &[
            FlattenedField::new("page", &["page", "perPage"]),
            FlattenedField::new("filters", &[])
        ]
    );
    assert_eq!(<Page as Criteria>::NAMES, &["page", "perPage"]);
}

/// A shared part may normalize its own criteria; the computed values live as
/// long as the key is being built.
#[derive(Criteria)]
#[cache_key(rename_all = "camelCase")]
struct TextFilter {
    #[criterion(trim, lowercase)]
    full_text: String,
    #[criterion(with = digits_only)]
    isbn_prefix: String,
    #[skip(reason = "display only")]
    #[allow(dead_code)]
    label: String,
}

#[derive(CacheKey)]
#[cache_key(namespace = "library", operation = "find")]
struct Find {
    #[tenant]
    branch: u32,
    #[criterion(flatten)]
    text: TextFilter,
}

#[test]
fn flattened_parts_apply_their_own_normalization() {
    let find = Find {
        branch: 1,
        text: TextFilter {
            full_text: "  Book of SAND ".into(),
            isbn_prefix: "978-0".into(),
            label: "ignored".into(),
        },
    };
    assert_eq!(
        find.cache_key(1).unwrap().as_str(),
        "library:s1:g1:t1:find:fullText=book%20of%20sand&isbnPrefix=9780"
    );
    assert_eq!(<TextFilter as Criteria>::NAMES, &["fullText", "isbnPrefix"]);
}

#[test]
fn query_types_have_key_spaces_of_their_own() {
    cache_key::registry::check().unwrap();
}
