use cache_key::CacheKey;
use serde::Deserialize;

#[derive(Deserialize, CacheKey)]
#[cache_key(namespace = "shop", operation = "search")]
struct Search {
    #[tenant]
    #[serde(skip_deserializing)]
    shop_id: u64,
    #[criterion]
    q: String,
}

fn main() {}
