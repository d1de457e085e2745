//! Types of the user's own, named like the features' types: the check that
//! names a missing feature must not refuse a type that is a criterion.

use cache_key::{CacheKey, CriterionValue};

#[derive(CriterionValue)]
struct Uuid(String);

#[derive(CriterionValue)]
struct Url(String);

#[derive(CacheKey)]
#[cache_key(namespace = "crawler", operation = "pages")]
struct Pages {
    #[tenant]
    site: u64,
    #[criterion]
    id: Option<Uuid>,
    #[criterion]
    start: Url,
}

fn main() {
    let query = Pages { site: 1, id: Some(Uuid("a-1".into())), start: Url("https://example.org/".into()) };
    let key = query.cache_key(0).unwrap();
    assert_eq!(key.as_str(), "crawler:s1:g0:t1:pages:id=a-1&start=https%3A%2F%2Fexample.org%2F");
}
