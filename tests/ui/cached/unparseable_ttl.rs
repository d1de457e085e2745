use cache_key::CacheKey;

#[derive(CacheKey)]
#[cache_key(namespace = "library", operation = "search", value = Vec<String>, ttl = "5 minutes")]
struct Search {
    #[tenant]
    branch: u32,
    #[criterion]
    title: String,
}

fn main() {}
