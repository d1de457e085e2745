//! Redis memory kept for tag counters: `CACHE_KEY_ENTITIES` (default
//! 1,000,000) distinct entities read once each through an `AsyncRedisCache`
//! (a product page whose key carries the product's tag, entries with a 60 s
//! TTL), then the keys and memory Redis holds once the entries expired:
//! counters kept forever (the default) against counters with a 61 s
//! lifetime (`RedisGenerations::with_tag_lifetime`). One fresh redis-server
//! per case. `cargo bench -p cache-key-benches --bench tag_lifetime`;
//! figures in BENCHMARKS.md ("Tag counters' lifetime").

#[path = "../tests/common/redis_server.rs"]
#[allow(dead_code)]
mod redis_server;

use std::sync::Arc;
use std::time::{Duration, Instant};

use cache_key::CacheKey;
use cache_key::cache::AsyncQueryCache;
use cache_key::redis::{AsyncRedisCache, AsyncRedisGenerations, AsyncRedisPool};
use redis_server::Server;

#[derive(CacheKey)]
#[cache_key(namespace = "shop", operation = "product", value = u64, ttl = "60s")]
struct ProductPage {
    #[tenant]
    shop: u32,
    #[criterion]
    #[tag = "product"]
    id: u64,
}

const TASKS: u64 = 32;

/// `DBSIZE` and `used_memory`.
fn held(server: &Server) -> (u64, u64) {
    let mut connection = server.connect();
    let keys: u64 = redis::cmd("DBSIZE").query(&mut connection).unwrap();
    let info: String = redis::cmd("INFO")
        .arg("memory")
        .query(&mut connection)
        .unwrap();
    let memory = info
        .lines()
        .find_map(|line| line.strip_prefix("used_memory:"))
        .and_then(|bytes| bytes.trim().parse().ok())
        .unwrap_or(0);
    (keys, memory)
}

fn case(entities: u64, lifetime: Option<Duration>) {
    let server = Server::start(false).expect("redis-server on PATH");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let (_, empty) = held(&server);
    let started = Instant::now();
    runtime.block_on(async {
        let pool = AsyncRedisPool::connect(server.url()).await.unwrap();
        let mut generations = AsyncRedisGenerations::new(pool);
        if let Some(lifetime) = lifetime {
            generations = generations.with_tag_lifetime(lifetime);
        }
        let cache = Arc::new(AsyncRedisCache::new(generations));
        let tasks: Vec<_> = (0..TASKS)
            .map(|task| {
                let cache = cache.clone();
                tokio::spawn(async move {
                    for id in (task + 1..=entities).step_by(TASKS as usize) {
                        let page = ProductPage { shop: 1, id };
                        let value = cache
                            .get_or_load(&page, || async move { Ok::<_, std::io::Error>(id) })
                            .await
                            .unwrap();
                        assert_eq!(value, id);
                    }
                })
            })
            .collect();
        for task in tasks {
            task.await.unwrap();
        }
    });
    let (keys, memory) = held(&server);
    let read_in = started.elapsed();
    // The last entry's TTL, then until Redis expired what it will: the
    // key count stops falling.
    std::thread::sleep(Duration::from_secs(60));
    let mut last = u64::MAX;
    let (left, left_memory) = loop {
        std::thread::sleep(Duration::from_secs(5));
        let (keys, memory) = held(&server);
        if keys == last || keys == 0 {
            break (keys, memory);
        }
        last = keys;
    };
    let mib = |bytes: u64| bytes.saturating_sub(empty) as f64 / (1 << 20) as f64;
    println!(
        "{:<22} {entities} read in {:.0} s: {keys} keys, {:.1} MiB; after the entries' TTL: {left} keys, {:.1} MiB",
        match lifetime {
            None => "counters kept forever".to_owned(),
            Some(lifetime) => format!("lifetime {} s", lifetime.as_secs()),
        },
        read_in.as_secs_f64(),
        mib(memory),
        mib(left_memory),
    );
}

fn main() {
    let entities = std::env::var("CACHE_KEY_ENTITIES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1_000_000);
    case(entities, None);
    case(entities, Some(Duration::from_secs(61)));
}
