use cache_key::CacheKey;

#[derive(CacheKey)]
#[cache_key(namespace = "library")]
struct Search {
    #[tenant]
    branch: u32,
    #[criterion(renmae = "yearFrom")]
    year_from: u16,
}

fn main() {}
