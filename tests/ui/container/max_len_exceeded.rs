use cache_key::CacheKey;

#[derive(CacheKey)]
#[cache_key(namespace = "a-rather-long-application-namespace", operation = "list_books_of_a_branch", max_len = 120)]
struct BranchList {
    #[tenant]
    organization: u64,
    #[tenant]
    branch: u32,
    #[criterion]
    page: u32,
}

fn main() {}
