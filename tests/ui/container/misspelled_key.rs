use cache_key::CacheKey;

#[derive(CacheKey)]
#[cache_key(namespace = "library", opertion = "list")]
struct BranchList {
    #[tenant]
    branch: u32,
    #[criterion]
    page: u32,
}

fn main() {}
