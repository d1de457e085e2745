use cache_key::CacheKey;

#[derive(CacheKey)]
#[cache_key(namespace = "library", rename_all = "camel")]
struct Search {
    #[tenant]
    branch: u32,
    #[criterion]
    year_from: u16,
}

fn main() {}
