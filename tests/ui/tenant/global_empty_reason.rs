use cache_key::CacheKey;

#[derive(CacheKey)]
#[cache_key(namespace = "library", global = "")]
struct Branches {
    #[criterion]
    city: String,
}

fn main() {}
