//! A tenant type of the user's own named `Uuid`: the check that names
//! cache-key's `uuid` feature must not refuse a type that is a tenant value.

use cache_key::{CacheKey, CriterionValue, TenantValue};

#[derive(CriterionValue, TenantValue)]
struct Uuid(String);

#[derive(CacheKey)]
#[cache_key(namespace = "billing", operation = "invoices")]
struct ListInvoices {
    #[tenant]
    account: Uuid,
    #[criterion]
    page: u32,
}

fn main() {
    let query = ListInvoices { account: Uuid("acct-7".into()), page: 2 };
    let key = query.cache_key(0).unwrap();
    assert_eq!(key.as_str(), "billing:s1:g0:tacct-7:invoices:page=2");
}
