//! Query types that stress the derive's expansion rather than the key format:
//! parts flattened inside parts, const generics, attribute values arriving
//! from `macro_rules!`, and `with` functions whose names the expansion uses
//! for its own locals. Each compiles, and its key is the `KeyBuilder`'s.

use std::collections::BTreeMap;

use cache_key::{CacheKey, Criteria, Key, KeyBuilder};

#[derive(Criteria)]
struct Page {
    #[criterion]
    page: u32,
}

/// A part that itself flattens a part and a map.
#[derive(Criteria)]
struct Listing {
    #[criterion]
    sort: &'static str,
    #[criterion(flatten)]
    page: Page,
    #[criterion(flatten)]
    filters: BTreeMap<String, String>,
}

#[derive(CacheKey)]
#[cache_key(namespace = "library", operation = "list")]
struct List {
    #[tenant]
    branch: u32,
    #[criterion(flatten)]
    listing: Listing,
}

fn builder(operation: &str) -> KeyBuilder<'_> {
    let mut builder = KeyBuilder::new("library", operation);
    builder.generation(3).tenant(2);
    builder
}

#[test]
fn a_part_that_flattens_a_part_and_a_map() {
    let query = List {
        branch: 2,
        listing: Listing {
            sort: "title",
            page: Page { page: 4 },
            filters: [("lang".to_owned(), "tr".to_owned())].into(),
        },
    };
    let expected = builder("list")
        .criterion("sort", "title")
        .criterion("page", 4)
        .criterion("lang", "tr")
        .build()
        .unwrap();
    assert_eq!(query.cache_key(3).unwrap(), expected);
    assert_eq!(
        expected.as_str(),
        "library:s1:g3:t2:list:lang=tr&page=4&sort=title"
    );
}

#[derive(Criteria)]
struct Window<const N: usize> {
    #[criterion]
    days: [u16; N],
}

#[derive(CacheKey)]
#[cache_key(namespace = "library", operation = "loans")]
struct Loans<const N: usize> {
    #[tenant]
    branch: u32,
    #[criterion(flatten)]
    window: Window<N>,
}

#[test]
fn a_flattened_part_using_a_const_generic() {
    let query = Loans::<2> {
        branch: 2,
        window: Window { days: [7, 30] },
    };
    let expected = builder("loans")
        .criterion("days", [7u16, 30])
        .build()
        .unwrap();
    assert_eq!(query.cache_key(3).unwrap(), expected);
}

macro_rules! query_type {
    ($name:ident, $op:literal, $rename:literal) => {
        #[derive(CacheKey)]
        #[cache_key(namespace = "library", operation = $op)]
        struct $name {
            #[tenant]
            branch: u32,
            #[criterion(rename = $rename)]
            title: &'static str,
        }
    };
}

query_type!(ByTitle, "by-title", "t");

#[test]
fn operation_and_rename_from_macro_rules_literals() {
    let query = ByTitle {
        branch: 2,
        title: "Sand",
    };
    let expected = builder("by-title").criterion("t", "Sand").build().unwrap();
    assert_eq!(query.cache_key(3).unwrap(), expected);
}

// Functions named like the expansion's own locals and parameters.
fn out(title: &&'static str) -> String {
    title.to_uppercase()
}
fn generation(year: &u16) -> u16 {
    year / 10 * 10
}
fn list(tags: &[&'static str]) -> usize {
    tags.len()
}
fn key(code: &&'static str) -> &'static str {
    code.trim()
}

#[derive(Criteria)]
struct Tags {
    #[criterion(with = list)]
    tags: Vec<&'static str>,
}

#[derive(CacheKey)]
#[cache_key(namespace = "library", operation = "shadowed")]
struct Shadowed {
    #[tenant]
    branch: u32,
    #[criterion(with = out)]
    title: &'static str,
    #[criterion(with = generation)]
    decade: u16,
    #[criterion(with = key)]
    code: &'static str,
}

#[derive(CacheKey)]
#[cache_key(namespace = "library", operation = "shadowed")]
struct ShadowedWithPart {
    #[tenant]
    branch: u32,
    #[criterion(with = out)]
    title: &'static str,
    #[criterion(flatten)]
    tags: Tags,
}

#[test]
fn with_functions_named_like_the_expansions_locals() {
    let query = Shadowed {
        branch: 2,
        title: "Sand",
        decade: 1974,
        code: " x ",
    };
    let expected = builder("shadowed")
        .criterion("title", "SAND")
        .criterion("decade", 1970)
        .criterion("code", "x")
        .build()
        .unwrap();
    assert_eq!(query.cache_key(3).unwrap(), expected);

    let query = ShadowedWithPart {
        branch: 2,
        title: "Sand",
        tags: Tags {
            tags: vec!["a", "b"],
        },
    };
    let expected: Key = builder("shadowed")
        .criterion("title", "SAND")
        .criterion("tags", 2)
        .build()
        .unwrap();
    assert_eq!(query.cache_key(3).unwrap(), expected);
}
