use cache_key::CacheKey;
use uuid::Uuid;

#[derive(CacheKey)]
#[cache_key(namespace = "billing", operation = "invoices")]
struct ListInvoices {
    #[tenant]
    account: Uuid,
    #[criterion]
    page: u32,
}

fn main() {}
