use cache_key::CacheKey;

#[derive(CacheKey)]
#[cache_key(namespace = "library", rename_all = "camelCase")]
struct Search {
    #[tenant]
    branch: u32,
    #[criterion]
    x_trace_id: String,
}

fn main() {}
