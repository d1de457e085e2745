use cache_key::CacheKey;

fn normalize_isbn(isbn: &str) -> String {
    isbn.replace('-', "")
}

#[derive(CacheKey)]
#[cache_key(namespace = "library")]
struct ByIsbn {
    #[tenant]
    branch: u32,
    #[criterion(with = normalize_isbn)]
    isbn: u64,
}

fn main() {}
