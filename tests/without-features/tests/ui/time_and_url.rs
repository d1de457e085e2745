use cache_key::CacheKey;

#[derive(CacheKey)]
#[cache_key(namespace = "crawler", operation = "pages")]
struct Pages<'a> {
    #[tenant]
    site: u64,
    #[criterion]
    since: time::OffsetDateTime,
    #[criterion]
    start: &'a url::Url,
}

fn main() {}
