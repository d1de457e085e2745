// A value's tag invalidated with a mistyped id or tenant: the typed scope
// takes the tagged field's own type (`&u64` for a `u64`, `&u32` for an
// `Option<u32>`) and the query's tenant as `tenant_scope` does, so `"42"`,
// which names no book any answer holds, does not compile.
use cache_key::{CacheKey, CacheTags, GenerationStore, MemoryGenerations};

#[derive(Clone, CacheTags)]
struct Book {
    #[tag = "book"]
    id: u64,
    #[tag = "edition"]
    edition: Option<u32>,
    #[tag(name = "author", global = "authors are shared")]
    author_id: u32,
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
    store.invalidate(&Book::tag_scope_book::<Search>(&7, &"42").unwrap()).unwrap();
    store.invalidate(&Book::tag_scope_book::<Search>(&"7", &42).unwrap()).unwrap();
    store.invalidate(&Book::tag_scope_edition::<Search>(&7, &Some(2)).unwrap()).unwrap();
    store.invalidate(&Book::tag_scope_author::<Search>(&7u64).unwrap()).unwrap();
}
