use cache_key::CacheKey;

#[derive(CacheKey)]
#[cache_key(namespace = "shop")]
struct Search {
    #[tenant]
    shop: u32,
    #[criterion]
    #[tag = "order line"]
    line: u64,
    #[criterion]
    #[tag(name = "prod:uct")]
    product: u64,
    #[criterion]
    #[tag]
    brand: u64,
    #[criterion]
    #[tag(nmae = "author")]
    author: u64,
}

fn main() {}
