use cache_key::CacheKey;

#[derive(CacheKey)]
#[cache_key(namespace = "library", value_tags)]
struct Search {
    #[tenant]
    branch: u32,
    #[criterion]
    title: String,
}

fn main() {}
