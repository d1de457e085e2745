use cache_key::CacheKey;

#[derive(CacheKey)]
#[cache_key(namespace = "library", operation = "search", value = Vec<String>)]
struct Search {
    #[tenant]
    branch: u32,
    #[criterion]
    title: String,
}

fn main() {
    // The derive's fallback implements `CachedQuery` beside the error: using
    // the query with a cache adds no second error.
    fn cached<Q: cache_key::cache::CachedQuery>() {}
    cached::<Search>();
}
