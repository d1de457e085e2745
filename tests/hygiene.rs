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
}
