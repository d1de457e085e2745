use cache_key::CacheKey;

struct Filter {
    genre: String,
}

#[derive(CacheKey)]
#[cache_key(namespace = "library")]
struct Search {
    #[tenant]
    branch: u32,
    #[criterion]
    filter: Filter,
}

fn main() {}
