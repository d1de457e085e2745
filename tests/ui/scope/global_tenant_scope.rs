// A global query has no tenant: its tenant scope does not build (its
// operation scope takes `()`).
use cache_key::{CacheKey, GenerationStore, MemoryGenerations, Scopes};

#[derive(CacheKey)]
#[cache_key(namespace = "forge", global = "the same for every organization")]
struct Trending {
    #[criterion]
    page: u32,
}

fn main() {
    let store = MemoryGenerations::new();
    store.invalidate(&Trending::tenant_scope(()).unwrap()).unwrap();
}
