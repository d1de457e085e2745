// A value's tag scope takes the query type whose cached answers hold the
// value, for its namespace and tenant: a query that does not check its
// answers' tags (no `value_tags`, or no cached value at all) is refused.
use cache_key::{CacheKey, CacheTags, GenerationStore, MemoryGenerations};

#[derive(Clone, CacheTags)]
struct Book {
    #[tag = "book"]
    id: u64,
}

#[derive(CacheKey)]
#[cache_key(namespace = "library", operation = "search", value = Vec<Book>, ttl = "5m")]
struct Search {
    #[tenant]
    branch: u32,
    #[criterion]
    title: String,
}

#[derive(CacheKey)]
#[cache_key(namespace = "library", operation = "count")]
struct Count {
    #[tenant]
    branch: u32,
}

fn main() {
    let store = MemoryGenerations::new();
    store.invalidate(&Book::tag_scope_book::<Search>(&7, &42).unwrap()).unwrap();
    store.invalidate(&Book::tag_scope_book::<Count>(&7, &42).unwrap()).unwrap();
}
