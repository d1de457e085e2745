// Only the shape is reported: the invalidation written against the struct
// adds no error of its own.
use cache_key::{CacheKey, GenerationStore, MemoryGenerations, Scopes};

#[derive(CacheKey)]
#[cache_key(namespace = "library")]
struct BranchList(#[tenant] u32, #[criterion] u32);

fn main() {
    let store = MemoryGenerations::new();
    store.invalidate(&BranchList::tenant_scope(&7).unwrap()).unwrap();
}
