use cache_key::CacheKey;

#[derive(CacheKey)]
#[cache_key(namespace = "library", operation = "list")]
struct BranchList {
    #[criterion]
    page: u32,
}

fn main() {}
