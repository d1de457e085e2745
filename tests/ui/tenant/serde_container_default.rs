use cache_key::CacheKey;
use serde::Deserialize;

#[derive(Deserialize, CacheKey, Default)]
#[serde(default)]
#[cache_key(namespace = "shop", operation = "search")]
struct Search {
    #[tenant]
    shop_id: u64,
    #[criterion]
    q: String,
}

fn main() {}
