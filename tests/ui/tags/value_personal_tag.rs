// A cached value's personal data must not become a counter name either.
use cache_key::CacheTags;

#[derive(CacheTags)]
struct Member {
    #[tag = "member"]
    id: u64,
    #[tag = "member-email"]
    email: String,
    #[tag = "secret"]
    api_key: String,
}

fn main() {}
