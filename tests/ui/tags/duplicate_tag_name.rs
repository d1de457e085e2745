use cache_key::CacheKey;

#[derive(CacheKey)]
#[cache_key(namespace = "shop")]
struct Compare {
    #[tenant]
    shop: u32,
    #[criterion]
    #[tag = "product"]
    left: u64,
    #[criterion]
    #[tag = "product"]
    right: u64,
    #[criterion]
    #[tag = "order-line"]
    line: u64,
    #[criterion]
    #[tag = "order_line"]
    other_line: u64,
}

fn main() {}
