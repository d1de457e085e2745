//! Several mistakes in one struct: every one is reported in the same build.
use cache_key::CacheKey;

#[derive(CacheKey)]
#[cache_key(namspace = "library", schema = "1")]
struct Search {
    #[criterion]
    title: String,
    #[criterion(rename = "title")]
    subtitle: String,
    #[criterion]
    request_id: String,
    page: u32,
}

fn main() {}
