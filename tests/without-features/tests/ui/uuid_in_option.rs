use cache_key::CacheKey;
use uuid::Uuid;

#[derive(CacheKey)]
#[cache_key(namespace = "billing", operation = "invoices")]
struct ListInvoices {
    #[tenant]
    account: u64,
    #[criterion]
    customer: Option<Uuid>,
}

fn main() {}
