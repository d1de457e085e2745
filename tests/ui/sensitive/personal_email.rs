use cache_key::CacheKey;

#[derive(CacheKey)]
#[cache_key(namespace = "crm", operation = "orders")]
struct OrdersOf {
    #[tenant]
    account: u32,
    #[criterion]
    customer_email: String,
}

fn main() {}
