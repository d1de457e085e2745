// A `u64` tag invalidated with a string: the typed scope takes `&u64` (a
// value as the tagged field holds one), so `"42"`, which names no product
// any key is tagged with, does not compile.
use cache_key::{CacheKey, GenerationStore, MemoryGenerations};

#[derive(CacheKey)]
#[cache_key(namespace = "shop")]
struct Search {
    #[tenant]
    shop: u32,
    #[criterion]
    #[tag = "product"]
    product: Option<u64>,
}

fn main() {
    let store = MemoryGenerations::new();
    store.invalidate(&Search::tag_scope_product(&7, &"42").unwrap()).unwrap();
    store.invalidate(&Search::tag_scope_product(&"7", &42).unwrap()).unwrap();
}
