use cache_key::Criteria;

#[derive(Criteria)]
struct Filters {
    #[criterion]
    #[tag = "brand"]
    brand: u64,
}

fn main() {}
