use cache_key::CacheKey;

#[derive(CacheKey)]
#[cache_key(namespace = "library", operation = "list")]
struct BranchList {
    #[tenant]
    branch: Option<u32>,
    #[criterion]
    page: u32,
}

fn main() {}
