use cache_key::CacheKey;

#[derive(CacheKey)]
#[cache_key(namespace = "library")]
struct Search {
    #[tenant]
    auth_token: String,
    #[criterion]
    title: String,
}

fn main() {}
