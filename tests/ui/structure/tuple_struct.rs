use cache_key::CacheKey;

#[derive(CacheKey)]
#[cache_key(namespace = "library")]
struct BranchList(#[tenant] u32, #[criterion] u32);

fn main() {}
