use cache_key::CacheKey;

#[derive(CacheKey)]
#[cache_key(namespace = "shop")]
struct Search {
    #[tenant]
    shop: u32,
    #[criterion]
    #[tag(name = "brand", global = " ")]
    brand: u64,
}

fn main() {}
