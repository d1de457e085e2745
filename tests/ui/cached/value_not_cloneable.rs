use cache_key::CacheKey;

/// Not `Clone`: a cache hands out copies of its answers.
struct Page {
    titles: Vec<String>,
}

#[derive(CacheKey)]
#[cache_key(namespace = "library", operation = "search", value = Page, ttl = "5m")]
struct Search {
    #[tenant]
    branch: u32,
    #[criterion]
    title: String,
}

fn main() {}
