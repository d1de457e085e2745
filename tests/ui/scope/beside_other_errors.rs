// A struct with a mistake still has its scope functions: the invalidation
// written against it adds no second wave of errors, only the mistake is shown.
use cache_key::{CacheKey, GenerationStore, MemoryGenerations, Scopes};

#[derive(CacheKey)]
#[cache_key(namespace = "library")]
struct Search {
    #[tenant]
    branch: u32,
    page: u32,
}

fn main() {
    let store = MemoryGenerations::new();
    store.invalidate(&Search::tenant_scope(&2).unwrap()).unwrap();
    store.invalidate(&Search::operation_scope(&2).unwrap()).unwrap();
}
