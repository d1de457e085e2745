use cache_key::CacheTags;

#[derive(CacheTags)]
struct Book {
    #[tag = "author"]
    author: u64,
    #[tag(name = "author", global = "authors are one catalog")]
    coauthor: u64,
    #[tags]
    #[tag = "book"]
    id: u64,
}

fn main() {}
