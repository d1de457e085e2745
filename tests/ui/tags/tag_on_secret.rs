use cache_key::CacheKey;

#[derive(CacheKey)]
#[cache_key(namespace = "shop")]
struct Search {
    #[tenant]
    shop: u32,
    #[criterion]
    #[tag = "session"]
    session_token: String,
}

fn main() {}
