use cache_key::CacheKey;

#[derive(CacheKey)]
#[cache_key(namespace = "shop", operation = "stock")]
struct Stock {
    #[tenant(allow_zero = " ")]
    warehouse: u32,
    #[criterion]
    sku: String,
}

fn main() {}
