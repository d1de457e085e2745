use cache_key::CacheKey;

#[derive(CacheKey)]
#[cache_key(namespace = "library")]
struct Search {
    #[tenant]
    branch: u32,
    #[criterion]
    title: String,
    #[skip(why = "tracing only")]
    trace: u64,
}

fn main() {}
