// A `u32` tenant invalidated with a string: the typed scope takes `&u32`, so
// `"01"` (which the unchecked form would accept and match no key) does not
// compile.
use cache_key::{CacheKey, GenerationStore, MemoryGenerations, Scopes};

#[derive(CacheKey)]
#[cache_key(namespace = "library")]
struct Search {
    #[tenant]
    branch: u32,
    #[criterion]
    title: String,
}

fn main() {
    let store = MemoryGenerations::new();
    store.invalidate(&Search::tenant_scope(&"01").unwrap()).unwrap();
    store.invalidate(&Search::tenant_scope(&-1i64).unwrap()).unwrap();
}
