// A tag names an entity by its id: a float is no id.
use cache_key::CacheKey;

#[derive(CacheKey)]
#[cache_key(namespace = "shop")]
struct Search {
    #[tenant]
    shop: u32,
    #[criterion]
    #[tag = "price"]
    price: f64,
}

fn main() {}
