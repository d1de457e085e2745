use cache_key::CacheKey;

#[derive(CacheKey)]
#[cache_key(namespace = "shop")]
struct Orders {
    #[tenant]
    shop: u32,
    #[criterion]
    #[tag = "customer"]
    customer_email: String,
}

fn main() {}
