use cache_key::CacheKey;

#[derive(CacheKey)]
#[cache_key(namespace = "library", global = "the branch directory is public")]
struct Branches {
    #[tenant]
    organization: u32,
    #[criterion]
    city: String,
}

fn main() {}
