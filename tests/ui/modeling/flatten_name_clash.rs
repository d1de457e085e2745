use cache_key::{CacheKey, Criteria};

#[derive(Criteria)]
struct Page {
    #[criterion]
    page: u32,
    #[criterion]
    per_page: u32,
}

#[derive(CacheKey)]
#[cache_key(namespace = "library")]
struct Search {
    #[tenant]
    branch: u32,
    #[criterion]
    page: u32,
    #[criterion(flatten)]
    paging: Page,
}

fn main() {}
