use cache_key::CacheKey;

#[derive(CacheKey)]
#[cache_key(namespace = "library", namespace = "books")]
struct BranchList {
    #[tenant]
    branch: u32,
    #[criterion]
    page: u32,
}

fn main() {}
