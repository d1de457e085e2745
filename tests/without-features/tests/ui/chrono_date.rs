use cache_key::CacheKey;

#[derive(CacheKey)]
#[cache_key(namespace = "billing", operation = "invoices")]
struct ListInvoices {
    #[tenant]
    account: u64,
    #[criterion]
    due_before: chrono::NaiveDate,
}

fn main() {}
