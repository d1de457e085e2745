use cache_key::CacheTags;

#[derive(CacheTags)]
struct Book {
    id: u64,
    title: String,
}

fn main() {}
