use cache_key::CacheKey;

#[derive(CacheKey)]
#[cache_key(operation = "list")]
struct BranchList {
    #[tenant]
    branch: u32,
    #[criterion]
    page: u32,
}

fn main() {}
