use cache_key::CacheKey;

#[derive(CacheKey)]
#[cache_key(namespace = "shop")]
struct Search {
    #[tenant]
    shop: u32,
    #[criterion]
    text: String,
    #[skip(reason = "the origin reads it, the answer does not depend on it")]
    #[tag = "product"]
    product: u64,
}

fn main() {}
