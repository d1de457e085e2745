use cache_key::CacheKey;

#[derive(Clone)]
struct Book {
    id: u64,
}

#[derive(CacheKey)]
#[cache_key(namespace = "library", value = Vec<Book>, ttl = "5m", value_tags)]
struct Search {
    #[tenant]
    branch: u32,
    #[criterion]
    title: String,
}

fn main() {
    let _ = Book { id: 1 }.id;
}
