//! serde's names are the key's names when cache-key gives none: the key and
//! the request agree without names written twice, and an explicit cache-key
//! name always wins. (A serde rename therefore changes keys: entries under the
//! old names are orphaned, never mixed up.)

use cache_key::{CacheKey, Criteria, CriterionValue, KeyBuilder};
use serde::Deserialize;

#[derive(Deserialize, CriterionValue, Clone, Copy)]
#[serde(rename_all = "snake_case")]
enum Sort {
    TitleAsc,
    #[serde(rename = "newest")]
    YearDesc,
    #[serde(rename(serialize = "out", deserialize = "in"))]
    Relevance,
}

/// cache-key's own rule wins over serde's.
#[derive(Deserialize, CriterionValue)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
#[criterion(rename_all = "kebab-case")]
enum Format {
    PaperBack,
}

#[derive(Deserialize, Criteria)]
#[serde(rename_all = "camelCase")]
struct Page {
    #[criterion]
    page: u32,
    #[criterion]
    per_page: u32,
}

// serde's names next to the derive's are under test: not `fixtures::Search`.
#[derive(Deserialize, CacheKey)]
#[serde(rename_all = "camelCase")]
#[cache_key(namespace = "library", operation = "search")]
struct Search {
    #[tenant]
    #[serde(skip_serializing)]
    branch: u32,
    #[criterion]
    year_from: Option<u16>,
    #[criterion]
    #[serde(rename = "q")]
    title: String,
    #[criterion(rename = "by")]
    #[serde(rename = "author")]
    author_name: Option<String>,
    #[criterion]
    sort: Sort,
    #[criterion]
    format: Option<Format>,
    #[criterion(flatten)]
    #[serde(flatten)]
    page: Page,
}

/// `#[cache_key(rename_all)]` wins over serde's field names too.
#[derive(Deserialize, CacheKey)]
#[serde(rename_all = "camelCase")]
#[cache_key(
    namespace = "library",
    operation = "list",
    rename_all = "SCREAMING_SNAKE_CASE"
)]
struct List {
    #[tenant]
    branch: u32,
    #[criterion]
    #[serde(rename = "s")]
    shelf_code: String,
}

#[test]
fn criterion_names_follow_serde() {
    let names: Vec<&str> = Search::KEY_SCHEMA.criteria().map(|c| c.name()).collect();
    assert_eq!(names, ["by", "format", "q", "sort", "yearFrom"]);
    assert_eq!(<Page as Criteria>::NAMES, &["page", "perPage"]);

    let query = Search {
        branch: 2,
        year_from: Some(1970),
        title: "Sand".into(),
        author_name: Some("Borges".into()),
        sort: Sort::YearDesc,
        format: Some(Format::PaperBack),
        page: Page {
            page: 1,
            per_page: 20,
        },
    };
    let expected = KeyBuilder::new("library", "search")
        .tenant(2)
        .criterion("yearFrom", 1970)
        .criterion("q", "Sand")
        .criterion("by", "Borges")
        .criterion("sort", "newest")
        .criterion("format", "paper-back")
        .criterion("page", 1)
        .criterion("perPage", 20)
        .build()
        .unwrap();
    assert_eq!(query.cache_key(1).unwrap(), expected);
}

#[test]
fn enum_values_use_the_deserialize_name() {
    let key = |sort| {
        KeyBuilder::new("n", "o")
            .global()
            .criterion("s", sort)
            .build()
            .unwrap()
            .to_string()
    };
    assert_eq!(key(Sort::TitleAsc), "n:s1:g1:t:o:s=title_asc");
    assert_eq!(key(Sort::YearDesc), "n:s1:g1:t:o:s=newest");
    assert_eq!(key(Sort::Relevance), "n:s1:g1:t:o:s=in");
}

#[test]
fn cache_key_rename_all_wins_over_serde_names() {
    let names: Vec<&str> = List::KEY_SCHEMA.criteria().map(|c| c.name()).collect();
    assert_eq!(names, ["SHELF_CODE"]);
}

#[test]
fn a_query_deserialized_by_serde_keys_as_it_reads() {
    // What the wire says is what the key says: `q`, `yearFrom`, `perPage`.
    let json = r#"{"branch": 2, "q": "Sand", "yearFrom": 1970, "sort": "in",
                   "format": null, "page": 3, "perPage": 10}"#;
    let query: Search = serde_json::from_str(json).unwrap();
    assert_eq!(
        query.cache_key(1).unwrap().as_str(),
        "library:s1:g1:t2:search:page=3&perPage=10&q=Sand&sort=in&yearFrom=1970"
    );
}
