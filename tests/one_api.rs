//! One cache API: the same test bodies, written once against the traits
//! (`QueryCache` and `TypedCache`, their async twins), pass against every
//! cache: `MokaCache`, `RedisCache` and `RedisCache` with a level in
//! process; `AsyncMokaCache`, `AsyncRedisCache` and its two levels. The
//! Redis ones run on a real `redis-server` (ignored by default; `cargo test
//! -- --include-ignored`); the moka ones always.

mod common;

use std::sync::Barrier;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::Duration;

use cache_key::cache::{AsyncMokaCache, AsyncQueryCache, CacheErrorKind, MokaCache, QueryCache};
use cache_key::redis::{
    AsyncRedisCache, AsyncRedisGenerations, AsyncRedisPool, RedisCache, RedisGenerations, RedisPool,
};
use cache_key::{CacheKey, MemoryGenerations, Scopes};
use common::async_runtime::runtime;
use common::redis_server::Server;
use futures_util::future::join_all;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Product {
    id: u64,
    price: u32,
}

#[derive(Clone, CacheKey)]
#[cache_key(namespace = "shop", operation = "product", value = Product, ttl = "5m")]
struct ProductQuery {
    #[tenant]
    shop: u32,
    #[criterion]
    id: u64,
}

fn query(shop: u32, id: u64) -> ProductQuery {
    ProductQuery { shop, id }
}

fn product(id: u64, price: u32) -> Product {
    Product { id, price }
}

/// The blocking suite: what every typed cache does, whatever its backend.
fn suite<C: QueryCache<ProductQuery> + Sync>(cache: &C) {
    let (q1, q2) = (query(1, 42), query(2, 42));
    assert_eq!(cache.get(&q1).unwrap(), None, "a cold cache misses");

    // One origin call per key, whoever misses it at once.
    let calls = AtomicUsize::new(0);
    let barrier = Barrier::new(8);
    thread::scope(|scope| {
        for _ in 0..8 {
            scope.spawn(|| {
                barrier.wait();
                let loaded = cache.get_or_load(&q1, || {
                    calls.fetch_add(1, Ordering::SeqCst);
                    thread::sleep(Duration::from_millis(50));
                    Ok::<_, String>(product(42, 1999))
                });
                assert_eq!(loaded.unwrap(), product(42, 1999));
            });
        }
    });
    assert_eq!(calls.load(Ordering::SeqCst), 1, "one origin call");
    assert_eq!(cache.get(&q1).unwrap(), Some(product(42, 1999)), "a hit");

    // An origin error reaches the caller and is not cached.
    let failed = cache.get_or_load(&q2, || Err::<Product, _>("catalog down".to_owned()));
    let error = failed.unwrap_err();
    assert_eq!(error.kind(), CacheErrorKind::Origin);
    assert_eq!(cache.get(&q2).unwrap(), None, "the error was not cached");

    // Insert, then invalidate one tenant: the other keeps its entry.
    cache.insert(&q2, product(42, 2499)).unwrap();
    assert_eq!(cache.get(&q2).unwrap(), Some(product(42, 2499)));
    cache
        .invalidate(&ProductQuery::tenant_scope(&1).unwrap())
        .unwrap();
    assert_eq!(cache.get(&q1).unwrap(), None, "shop 1 invalidated");
    assert_eq!(
        cache.get(&q2).unwrap(),
        Some(product(42, 2499)),
        "shop 2 kept"
    );
    cache.invalidate_namespace::<ProductQuery>().unwrap();
    assert_eq!(cache.get(&q2).unwrap(), None, "the whole namespace");

    // A key that cannot be named is an error, never a key.
    let error = cache.get(&query(0, 42)).unwrap_err();
    assert_eq!(error.kind(), CacheErrorKind::InvalidKey);

    let stats = cache.stats();
    assert_eq!(stats, cache.stats_of::<ProductQuery>());
    assert_eq!(stats.loads, 2, "{stats:?}");
    assert_eq!(stats.coalesced, 7, "{stats:?}");
    assert_eq!((stats.errors, stats.degraded), (2, 0), "{stats:?}");
}

/// The async suite: the blocking one's twin, through the async traits.
async fn async_suite<C: AsyncQueryCache<ProductQuery>>(cache: &C) {
    let (q1, q2) = (query(1, 42), query(2, 42));
    assert_eq!(cache.get(&q1).await.unwrap(), None, "a cold cache misses");

    let calls = AtomicUsize::new(0);
    let loads = (0..8).map(|_| {
        cache.get_or_load(&q1, || async {
            calls.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(50)).await;
            Ok::<_, String>(product(42, 1999))
        })
    });
    for loaded in join_all(loads).await {
        assert_eq!(loaded.unwrap(), product(42, 1999));
    }
    assert_eq!(calls.load(Ordering::SeqCst), 1, "one origin call");
    assert_eq!(cache.get(&q1).await.unwrap(), Some(product(42, 1999)));

    let failed = cache
        .get_or_load(&q2, || async {
            Err::<Product, _>("catalog down".to_owned())
        })
        .await;
    assert_eq!(failed.unwrap_err().kind(), CacheErrorKind::Origin);
    assert_eq!(cache.get(&q2).await.unwrap(), None);

    cache.insert(&q2, product(42, 2499)).await.unwrap();
    assert_eq!(cache.get(&q2).await.unwrap(), Some(product(42, 2499)));
    let scope = ProductQuery::tenant_scope(&1).unwrap();
    cache.invalidate(&scope).await.unwrap();
    assert_eq!(cache.get(&q1).await.unwrap(), None);
    assert_eq!(cache.get(&q2).await.unwrap(), Some(product(42, 2499)));
    cache.invalidate_namespace::<ProductQuery>().await.unwrap();
    assert_eq!(cache.get(&q2).await.unwrap(), None);

    let error = cache.get(&query(0, 42)).await.unwrap_err();
    assert_eq!(error.kind(), CacheErrorKind::InvalidKey);

    let stats = cache.stats();
    assert_eq!(stats, cache.stats_of::<ProductQuery>());
    assert_eq!(stats.loads, 2, "{stats:?}");
    assert_eq!(stats.coalesced, 7, "{stats:?}");
    assert_eq!((stats.errors, stats.degraded), (2, 0), "{stats:?}");
}

#[test]
fn the_suite_passes_on_moka() {
    suite(&MokaCache::new(MemoryGenerations::new(), 1_000));
}

#[test]
fn the_async_suite_passes_on_moka() {
    runtime().block_on(async_suite(&AsyncMokaCache::new(
        MemoryGenerations::new(),
        1_000,
    )));
}

#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn the_suite_passes_on_redis_with_and_without_a_level_in_process() {
    let Some(server) = Server::start(false) else {
        return;
    };
    for local in [false, true] {
        server.flush();
        let cache = RedisCache::new(RedisGenerations::new(
            RedisPool::open(server.url()).unwrap(),
        ));
        let cache = match local {
            true => cache.with_local(1_000),
            false => cache,
        };
        suite(&cache);
    }
}

#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn the_async_suite_passes_on_redis_with_and_without_a_level_in_process() {
    let Some(server) = Server::start(false) else {
        return;
    };
    let runtime = runtime();
    for local in [false, true] {
        server.flush();
        runtime.block_on(async {
            let pool = AsyncRedisPool::connect(server.url()).await.unwrap();
            let cache = AsyncRedisCache::new(AsyncRedisGenerations::new(pool));
            let cache = match local {
                true => cache.with_local(1_000),
                false => cache,
            };
            async_suite(&cache).await;
        });
    }
}
