use cache_key::CacheKey;
use serde::Deserialize;

fn no_account() -> u64 {
    0
}

#[derive(Deserialize, CacheKey)]
#[cache_key(namespace = "billing", operation = "invoices")]
struct ListInvoices {
    #[tenant]
    #[serde(default = "no_account")]
    account: u64,
    #[criterion]
    status: String,
}

fn main() {}
