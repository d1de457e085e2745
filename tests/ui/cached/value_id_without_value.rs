use cache_key::CacheKey;

#[derive(CacheKey)]
#[cache_key(namespace = "library", operation = "search", value_id = "titles")]
struct Search {
    #[tenant]
    branch: u32,
    #[criterion]
    title: String,
}

fn main() {}
