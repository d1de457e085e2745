use cache_key::CacheKey;

#[derive(CacheKey)]
#[cache_key(namespace = "library")]
union Id {
    number: u32,
    bytes: [u8; 4],
}

fn main() {}
