use cache_key::CacheKey;
use std::time::Instant;

#[derive(CacheKey)]
#[cache_key(namespace = "library")]
struct Search {
    #[tenant]
    branch: u32,
    #[criterion]
    since: Instant,
}

fn main() {}
