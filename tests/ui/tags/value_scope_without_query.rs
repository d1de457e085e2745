// A value's tag scope without its query type: the namespace and tenant of
// the counter come from the query, named with a turbofish.
use cache_key::{CacheKey, CacheTags, GenerationStore, MemoryGenerations};

#[derive(Clone, CacheTags)]
struct Book {
    #[tag = "book"]
    id: u64,
}

#[derive(CacheKey)]
#[cache_key(namespace = "library", value = Vec<Book>, ttl = "5m", value_tags)]
struct Search {
    #[tenant]
    branch: u32,
    #[criterion]
    title: String,
}

fn main() {
    let store = MemoryGenerations::new();
    store.invalidate(&Book::tag_scope_book(&7, &42).unwrap()).unwrap();
}
