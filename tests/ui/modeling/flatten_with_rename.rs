use std::collections::BTreeMap;

use cache_key::CacheKey;

#[derive(CacheKey)]
#[cache_key(namespace = "library")]
struct Search {
    #[tenant]
    branch: u32,
    #[criterion(flatten, rename = "f")]
    filters: BTreeMap<String, String>,
}

fn main() {}
