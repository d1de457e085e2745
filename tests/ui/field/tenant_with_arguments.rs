use cache_key::CacheKey;

#[derive(CacheKey)]
#[cache_key(namespace = "library")]
struct Search {
    #[tenant(rename = "b")]
    branch: u32,
    #[criterion]
    title: String,
}

fn main() {}
