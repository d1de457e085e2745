use cache_key::CacheKey;

#[derive(CacheKey)]
#[cache_key(namespace = "library")]
enum Query {
    Search { title: String },
    List { page: u32 },
}

fn main() {}
