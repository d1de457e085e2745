// A compound tenant `(account: u64, region: String)` given in the wrong
// order: each value is refused where the other belongs.
use cache_key::{CacheKey, GenerationStore, MemoryGenerations, Scopes};

#[derive(CacheKey)]
#[cache_key(namespace = "billing")]
struct Invoices {
    #[tenant]
    account: u64,
    #[tenant]
    region: String,
    #[criterion]
    page: u32,
}

fn main() {
    let store = MemoryGenerations::new();
    let (account, region) = (7u64, String::from("eu"));
    store.invalidate(&Invoices::operation_scope((&region, &account)).unwrap()).unwrap();
}
