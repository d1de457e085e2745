use cache_key::CacheKey;

#[derive(CacheKey)]
#[cache_key(namespace = "library")]
struct Search {
    #[tenant]
    branch: u32,
    #[criterion]
    title: String,
    page: u32,
}

fn main() {}
