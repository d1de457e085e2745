// A struct with a mistake still has its tag scopes, and its value type its
// `CacheTags` and its own tag scopes: code written against them adds no
// second wave of errors.
use cache_key::{CacheKey, CacheTags, GenerationStore, MemoryGenerations, Tags};

#[derive(CacheTags, Clone)]
struct Product {
    #[tag = "product"]
    id: u64,
    #[tag = "vendor-email"]
    vendor_email: String,
}

#[derive(CacheKey)]
#[cache_key(namespace = "shop", value = Vec<Product>, ttl = "5m", value_tags)]
struct Search {
    #[tenant]
    shop: u32,
    #[criterion]
    #[tag = "product"]
    product: u64,
    #[criterion]
    #[tag(name = "brand", global = "brands are one catalog")]
    brand: String,
    page: u32,
}

fn main() {
    let store = MemoryGenerations::new();
    store.invalidate(&Search::tag_scope_product(&7, &42).unwrap()).unwrap();
    store.invalidate(&Search::tag_scope_brand(&"acme".to_owned()).unwrap()).unwrap();
    store.invalidate(&Product::tag_scope_product::<Search>(&7, &42).unwrap()).unwrap();
    store.invalidate(&Product::tag_scope_vendor_email::<Search>(&7, &"a").unwrap()).unwrap();
    let mut tags = Tags::new();
    vec![Product { id: 1, vendor_email: String::new() }].write_tags(&mut tags).unwrap();
}
