// The key holds the trimmed, lowercased value; a tag would hold the field's
// own, so ` Mug` and `mug` would share a key but not a tag.
use cache_key::CacheKey;

#[derive(CacheKey)]
#[cache_key(namespace = "shop")]
struct Search {
    #[tenant]
    shop: u32,
    #[criterion(trim, lowercase)]
    #[tag = "sku"]
    sku: String,
}

fn main() {}
