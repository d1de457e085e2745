// A tenant-scoped query's answer sent `Cache-Control: public`: every CDN and
// proxy between the service and its users would serve one branch's books
// to every other branch. `respond_public` takes global query types only.

use cache_key::CacheKey;
use cache_key::cache::{AsyncQueryCache, CacheError};
use cache_key::http::{CacheGenerations, HttpCache};
use http::HeaderMap;

#[derive(CacheKey)]
#[cache_key(namespace = "library", operation = "search", value = Vec<u32>, ttl = "5m")]
struct Search {
    #[tenant]
    branch: u32,
    #[criterion]
    title: String,
}

async fn search<C>(http: &HttpCache<C>, headers: &HeaderMap, query: &Search)
where
    C: CacheGenerations + AsyncQueryCache<Search>,
{
    let origin = || async { Ok::<_, std::io::Error>(vec![1]) };
    let _: Result<_, CacheError<std::io::Error>> =
        http.respond_public(headers, query, origin).await;
}

fn main() {}
