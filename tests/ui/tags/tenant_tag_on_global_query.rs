use cache_key::CacheKey;

#[derive(CacheKey)]
#[cache_key(namespace = "shop", global = "brand pages are public")]
struct BrandPage {
    #[criterion]
    #[tag = "brand"]
    brand: u64,
}

fn main() {}
