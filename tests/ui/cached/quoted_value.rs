use cache_key::CacheKey;

#[derive(Clone)]
struct Book;

#[derive(CacheKey)]
#[cache_key(namespace = "library", value = "Vec<Book>", ttl = "5m")]
struct Search {
    #[tenant]
    branch: u32,
    #[criterion]
    page: u32,
}

fn main() {
    // The quoted type is still read: the fallback implements `CachedQuery`,
    // and using the query with a cache adds no second error.
    fn cached<Q: cache_key::cache::CachedQuery<Value = Vec<Book>>>() {}
    cached::<Search>();
}
