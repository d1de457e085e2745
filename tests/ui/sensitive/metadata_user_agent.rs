use cache_key::CacheKey;

#[derive(CacheKey)]
#[cache_key(namespace = "library", operation = "search")]
struct Search {
    #[tenant]
    branch: u32,
    #[criterion]
    title: String,
    #[criterion(rename = "ua")]
    user_agent: String,
}

fn main() {}
