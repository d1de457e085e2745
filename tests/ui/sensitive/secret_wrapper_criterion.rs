use cache_key::CacheKey;

/// A password wrapper, as secrecy-style crates provide.
struct SecretString(String);

#[derive(CacheKey)]
#[cache_key(namespace = "library")]
struct Login {
    #[tenant]
    branch: u32,
    #[criterion]
    user: SecretString,
}

fn main() {}
