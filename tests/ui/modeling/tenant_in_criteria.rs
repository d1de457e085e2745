use cache_key::Criteria;

#[derive(Criteria)]
struct Page {
    #[tenant]
    branch: u32,
    #[criterion]
    page: u32,
}

fn main() {}
