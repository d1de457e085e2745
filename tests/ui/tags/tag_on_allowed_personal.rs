// `allow` lets personal data into a key after review; a tag would also
// write it in clear into counter names: still refused.
use cache_key::CacheKey;

#[derive(CacheKey)]
#[cache_key(namespace = "shop")]
struct Orders {
    #[tenant]
    shop: u32,
    #[criterion(allow = "support looks orders up by email; keys stay in the private cache")]
    #[tag = "customer"]
    customer_email: String,
}

fn main() {}
