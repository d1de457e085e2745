//! The derive's output compiles warning-free in a scope that shadows the
//! prelude names it could otherwise pick up by accident.
#![deny(warnings)]
#![allow(dead_code, non_camel_case_types)]

struct Result;
struct Ok;
struct Err;
struct Option;
struct Some;
struct None;
struct String;
struct u64;
struct str;
mod core {}
mod std {}

// Every attribute, with prelude-shadowed types: the shape under test, not `fixtures::Search`.
#[derive(::cache_key::CacheKey)]
#[cache_key(
    namespace = "library",
    operation = "search",
    schema = 3,
    max_len = 250,
    hash_tag
)]
struct Search<'a> {
    #[tenant]
    branch: &'a ::core::primitive::str,
    #[criterion(rename = "q")]
    title: &'a ::core::primitive::str,
    #[skip(reason = "tracing only")]
    trace: ::core::primitive::u32,
}

#[derive(::cache_key::CacheKey)]
#[cache_key(namespace = "library", global = "the branch directory is public")]
struct Branches {
    #[criterion]
    city: &'static ::core::primitive::str,
}

fn digits(text: &&'static ::core::primitive::str) -> ::std::string::String {
    text.chars().filter(char::is_ascii_digit).collect()
}

#[derive(::cache_key::Criteria)]
struct Paging {
    #[criterion]
    page: ::core::primitive::u32,
}

#[derive(::cache_key::CriterionValue)]
#[criterion(rename_all = "snake_case")]
enum Sort {
    TitleAsc,
}

#[derive(::cache_key::CacheKey)]
#[cache_key(namespace = "library", operation = "find")]
struct Find {
    #[tenant]
    branch: ::core::primitive::u32,
    #[criterion(trim, lowercase)]
    title: &'static ::core::primitive::str,
    #[criterion(with = digits)]
    isbn: &'static ::core::primitive::str,
    #[criterion]
    sort: Sort,
    #[criterion(flatten)]
    paging: Paging,
}

#[test]
fn derives_in_a_hostile_scope() {
    use ::cache_key::CacheKey as _;
    let key = Search {
        branch: "b",
        title: "t",
        trace: 1,
    }
    .cache_key(1)
    .unwrap();
    assert_eq!(key.as_str(), "library:s3:g1:t{b}:search:q=t");
    let key = Branches { city: "Ankara" }.cache_key(1).unwrap();
    assert_eq!(key.as_str(), "library:s1:g1:t:branches:city=Ankara");
    let find = Find {
        branch: 2,
        title: " Sand ",
        isbn: "978-0",
        sort: Sort::TitleAsc,
        paging: Paging { page: 3 },
    };
    let key = find.cache_key(1).unwrap();
    assert_eq!(
        key.as_str(),
        "library:s1:g1:t2:find:isbn=9780&page=3&sort=title_asc&title=sand"
    );
}
