use cache_key::CacheKey;
use serde::Deserialize;

fn no_shop() -> String {
    String::new()
}

#[derive(Deserialize, CacheKey)]
#[cache_key(namespace = "shop", operation = "search")]
struct Search {
    #[tenant]
    #[serde(default = "no_shop")]
    shop: String,
    #[criterion]
    q: String,
}

fn main() {}
