use cache_key::CacheKey;

#[derive(CacheKey)]
#[cache_key(namespace = "shop")]
struct Search {
    #[tenant]
    #[tag = "shop"]
    shop: u32,
    #[criterion]
    text: String,
}

fn main() {}
