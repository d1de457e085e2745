use cache_key::CacheKey;

#[derive(Clone)]
struct Bücher;

// The value id defaults to the type as written, which must be printable
// ASCII like any value id.
#[derive(CacheKey)]
#[cache_key(namespace = "library", operation = "search", value = Vec<Bücher>, ttl = "5m")]
struct Search {
    #[tenant]
    branch: u32,
    #[criterion]
    title: String,
}

fn main() {}
