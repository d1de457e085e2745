use cache_key::CacheKey;

#[derive(CacheKey)]
#[cache_key(namespace = "library", operation = "list")]
struct BranchList {
    #[tenant]
    branch: u32,
    #[criterion]
    page: u32,
    #[criterion]
    if_none_match: String,
}

fn main() {}
