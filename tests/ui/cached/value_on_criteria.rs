use cache_key::Criteria;

#[derive(Criteria)]
#[cache_key(value = Vec<String>, value_id = "pages", ttl = "5m")]
struct Page {
    #[criterion]
    page: u32,
}

fn main() {}
