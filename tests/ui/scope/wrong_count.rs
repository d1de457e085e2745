// A compound tenant `(org, repo)`: the whole tenant takes both values as a
// tuple, its leading part has a function of its own, and a global query's
// operation scope takes `()`.
use cache_key::{CacheKey, GenerationStore, MemoryGenerations, Scopes};

#[derive(CacheKey)]
#[cache_key(namespace = "forge")]
struct Issues {
    #[tenant]
    org: String,
    #[tenant]
    repo: String,
    #[criterion]
    page: u32,
}

#[derive(CacheKey)]
#[cache_key(namespace = "forge", global = "the same for every organization")]
struct Trending {
    #[criterion]
    page: u32,
}

fn main() {
    let store = MemoryGenerations::new();
    let org = String::from("acme");
    store.invalidate(&Issues::tenant_scope(&org).unwrap()).unwrap();
    store.invalidate(&Trending::operation_scope(&org).unwrap()).unwrap();
}
