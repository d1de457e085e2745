// The typed scopes are the `Scopes` trait's: without it in scope the
// compiler names the import.
use cache_key::{CacheKey, GenerationStore, MemoryGenerations};

#[derive(CacheKey)]
#[cache_key(namespace = "library", operation = "search")]
struct Search {
    #[tenant]
    branch: u32,
    #[criterion]
    title: String,
}

fn main() {
    let store = MemoryGenerations::new();
    store.invalidate(&Search::tenant_scope(&2).unwrap()).unwrap();
}
