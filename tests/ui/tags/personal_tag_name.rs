// The field's name is harmless, the tag's says what its values are.
use cache_key::CacheKey;

#[derive(CacheKey)]
#[cache_key(namespace = "shop")]
struct Orders {
    #[tenant]
    shop: u32,
    #[criterion]
    #[tag = "email"]
    contact: String,
}

fn main() {}
