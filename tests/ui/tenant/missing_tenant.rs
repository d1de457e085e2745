// The one error is the missing tenant: the invalidations written for the
// tenant it asks for add none of their own (none saying the query is global).
use cache_key::{CacheKey, GenerationStore, MemoryGenerations, Scopes};

#[derive(CacheKey)]
#[cache_key(namespace = "library", operation = "list")]
struct BranchList {
    #[criterion]
    page: u32,
}

fn main() {
    let store = MemoryGenerations::new();
    let branch: u32 = 7;
    store.invalidate(&BranchList::tenant_scope(&branch).unwrap()).unwrap();
    store.invalidate(&BranchList::operation_scope(&branch).unwrap()).unwrap();
}
