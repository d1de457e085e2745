use cache_key::CacheKey;

#[derive(CacheKey)]
#[cache_key(
    namespace = "library",
    operation = "search",
    value = Vec<String>,
    value_id = "library.search.titles.xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
    ttl = "5m"
)]
struct Search {
    #[tenant]
    branch: u32,
    #[criterion]
    title: String,
}

fn main() {}
