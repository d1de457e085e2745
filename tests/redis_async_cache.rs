//! `AsyncRedisCache` against real servers, on the `redis` crate's async
//! connections: the sync cache's envelope in both directions and shared
//! invalidation, every kind of bad entry written directly into Redis and
//! read back as a miss with its own reason, one origin call per key under
//! 200 tasks (an origin error reaching all of them, a dropped leader taken
//! over), the load lock between two caches on connections of their own, a
//! three-primary Redis Cluster, `MemoryGenerations` as the store, and
//! `ConnectionManager`s failing closed while the server is down, then
//! reconnecting on their own after it restarts.
//!
//! Each test starts its own servers (`tests/common/redis_server.rs`) and
//! stops them by pid when done. Ignored by default; run them with
//! `cargo test -- --include-ignored`. Without `redis-server` they are skipped
//! with a message, except under CI (`CI=true`), where that is a failure.

mod common;
#[path = "common/library_search.rs"]
mod library_search;

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use cache_key::cache::{AsyncRedisCache, CacheError, LoadLock, RedisCache, Rejected};
use cache_key::generation::{AsyncGenerationStore, AsyncRedisGenerations, GenerationErrorKind};
use cache_key::{CacheKey, GenerationStore, MemoryGenerations, RedisGenerations};
use common::bad_entries::{add, bad_entries};
use common::redis_server::{Cluster, Server};
use common::stampede::{CALLERS, one_shared_error};
use library_search::{Book, Search, dune, search};
use redis::AsyncCommands;
use redis::aio::{ConnectionManagerConfig, MultiplexedConnection};
use serde_json::json;
use tokio::task::JoinSet;

async fn origin(calls: &AtomicUsize) -> Result<Vec<Book>, String> {
    calls.fetch_add(1, Ordering::SeqCst);
    Ok(dune())
}

type Cache = AsyncRedisCache<MultiplexedConnection, AsyncRedisGenerations<MultiplexedConnection>>;

async fn connect(server: &Server) -> MultiplexedConnection {
    redis::Client::open(server.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .expect("an async connection to our redis-server")
}

/// A cache on two connections of its own (entries, counters), as a process
/// of its own would have.
async fn cache(server: &Server) -> Cache {
    AsyncRedisCache::new(
        connect(server).await,
        AsyncRedisGenerations::new(connect(server).await),
    )
}

/// Waits until `misses()` reaches `misses` (every caller has missed), then
/// a little longer so the last ones reach their flight.
async fn until_misses(misses: impl Fn() -> u64, expected: u64) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while misses() < expected {
        assert!(Instant::now() < deadline, "only {} misses", misses());
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    tokio::time::sleep(Duration::from_millis(20)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server: apt-get install redis-server, then cargo test -- --include-ignored"]
async fn entries_and_invalidations_are_shared_with_the_sync_cache() {
    let Some(server) = Server::start(false) else {
        return;
    };
    let cache = cache(&server).await;
    let sync = RedisCache::new(server.connect(), RedisGenerations::new(server.connect()));
    let calls = AtomicUsize::new(0);
    let query = search(1, "Dune");

    assert_eq!(
        cache.get_or_load(&query, || origin(&calls)).await.unwrap(),
        dune()
    );
    assert_eq!(
        cache.get_or_load(&query, || origin(&calls)).await.unwrap(),
        dune()
    );
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    let stats = cache.stats();
    assert_eq!((stats.hits, stats.misses, stats.loads), (1, 1, 1));

    // The same envelope, PX and generation both ways.
    let generation = cache.store().generation_for(&query).await.unwrap();
    assert_eq!(generation, sync.store().generation_for(&query).unwrap());
    let key = query.cache_key(generation).unwrap();
    let mut admin = cache.connection();
    let stored: String = admin.get(key.as_str()).await.unwrap();
    let envelope: serde_json::Value = serde_json::from_str(&stored).unwrap();
    assert_eq!(
        envelope,
        json!({
            "v": 1,
            "schema": 1,
            "type": std::any::type_name::<Vec<Book>>(),
            "query": query.readable_key(generation).unwrap().as_str(),
            "value": [{"title": "Dune", "year": 1965, "subtitle": null}],
        })
    );
    let ttl: i64 = admin.pttl(key.as_str()).await.unwrap();
    assert!(ttl > 0 && ttl <= 60_000, "PTTL {ttl}");
    assert_eq!(sync.get(&query).unwrap(), Some(dune()));
    sync.insert(&search(2, "Dune"), &dune()).unwrap();
    assert_eq!(cache.get(&search(2, "Dune")).await.unwrap(), Some(dune()));

    // A bump by either store is seen by the other's next read.
    sync.invalidate_tenant::<Search>(&[&1u32]).unwrap();
    assert_eq!(cache.get(&query).await.unwrap(), None);
    cache.invalidate_tenant::<Search>(&[&2u32]).await.unwrap();
    assert_eq!(sync.get(&search(2, "Dune")).unwrap(), None);

    // An overridden TTL reaches the SET.
    let cache = cache.with_ttl::<Search>(Duration::from_millis(1_500));
    cache.insert(&search(3, "Dune"), &dune()).await.unwrap();
    let generation = cache.store().generation_for(&search(3, "Dune")).await;
    let key = search(3, "Dune").cache_key(generation.unwrap()).unwrap();
    let ttl: i64 = admin.pttl(key.as_str()).await.unwrap();
    assert!(ttl > 0 && ttl <= 1_500, "PTTL {ttl}");
    assert_eq!(cache.stats().errors, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server: apt-get install redis-server, then cargo test -- --include-ignored"]
async fn every_bad_entry_is_a_miss_with_its_reason() {
    let Some(server) = Server::start(false) else {
        return;
    };
    let cache = cache(&server).await;
    let mut admin = connect(&server).await;
    let query = search(1, "Dune");
    let generation = cache.store().generation_for(&query).await.unwrap();
    let key = query.cache_key(generation).unwrap();
    let good = json!({
        "v": 1,
        "schema": 1,
        "type": std::any::type_name::<Vec<Book>>(),
        "query": query.readable_key(generation).unwrap().as_str(),
        "value": [{"title": "Dune", "year": 1965, "subtitle": null}],
    });
    let other_query = search(1, "Dune Messiah").readable_key(generation).unwrap();
    let mut expected = Rejected::default();
    for bad in bad_entries(&good, other_query.as_str()) {
        let () = admin.set(key.as_str(), bad.bytes).await.unwrap();
        assert_eq!(cache.get(&query).await.unwrap(), None, "{}", bad.what);
        expected = add(expected, bad.rejected);
        assert_eq!(cache.stats().rejected, expected, "{}", bad.what);
    }
    assert_eq!(expected.total(), 8);
    // The good entry is served, and get_or_load replaces a bad one.
    let () = admin.set(key.as_str(), good.to_string()).await.unwrap();
    assert_eq!(cache.get(&query).await.unwrap(), Some(dune()));
    let () = admin.set(key.as_str(), "garbage").await.unwrap();
    let calls = AtomicUsize::new(0);
    assert_eq!(
        cache.get_or_load(&query, || origin(&calls)).await.unwrap(),
        dune()
    );
    assert_eq!(cache.get(&query).await.unwrap(), Some(dune()));
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    let stats = cache.stats();
    assert_eq!((stats.hits, stats.misses, stats.errors), (2, 9, 0));
}

/// `CALLERS` tasks calling `get_or_load(query)` at once, each origin call
/// counted in `calls` and answered by `answer` once every task has missed.
async fn stampede(
    cache: &Arc<Cache>,
    query: &Arc<Search>,
    calls: &Arc<AtomicUsize>,
    answer: Result<Vec<Book>, String>,
) -> Vec<Result<Vec<Book>, CacheError<String>>> {
    let before = cache.stats().misses;
    let mut tasks = JoinSet::new();
    for _ in 0..CALLERS {
        let (cache, query, calls, answer) =
            (cache.clone(), query.clone(), calls.clone(), answer.clone());
        tasks.spawn(async move {
            let misses = || cache.stats().misses;
            cache
                .get_or_load(&*query, || async {
                    calls.fetch_add(1, Ordering::SeqCst);
                    until_misses(misses, before + CALLERS as u64).await;
                    answer
                })
                .await
        });
    }
    tasks.join_all().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server: apt-get install redis-server, then cargo test -- --include-ignored"]
async fn concurrent_misses_in_one_process_reach_the_origin_once() {
    let Some(server) = Server::start(false) else {
        return;
    };
    let cache = Arc::new(cache(&server).await);
    let calls = Arc::new(AtomicUsize::new(0));
    let query = Arc::new(search(1, "Dune"));
    let answers = stampede(&cache, &query, &calls, Ok(dune())).await;
    assert!(
        answers
            .iter()
            .all(|a| a.as_ref().is_ok_and(|a| a == &dune()))
    );
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    let stats = cache.stats();
    assert_eq!((stats.loads, stats.coalesced), (1, CALLERS as u64 - 1));

    // An origin error reaches every caller of its flight and is not stored.
    let calls = Arc::new(AtomicUsize::new(0));
    let query = Arc::new(search(2, "Dune"));
    let answers = stampede(&cache, &query, &calls, Err("catalog down".to_owned())).await;
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    let first = one_shared_error(&answers);
    assert_eq!(*first, "catalog down");
    assert_eq!(cache.stats().errors, CALLERS as u64);
    assert_eq!(cache.get(&*query).await.unwrap(), None, "not stored");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server: apt-get install redis-server, then cargo test -- --include-ignored"]
async fn a_dropped_leader_is_taken_over_by_a_waiter() {
    let Some(server) = Server::start(false) else {
        return;
    };
    let cache = Arc::new(cache(&server).await);
    let calls = Arc::new(AtomicUsize::new(0));
    let leader = tokio::spawn({
        let (cache, calls) = (cache.clone(), calls.clone());
        async move {
            cache
                .get_or_load(&search(1, "Dune"), || async {
                    calls.fetch_add(1, Ordering::SeqCst);
                    std::future::pending::<Result<Vec<Book>, String>>().await
                })
                .await
        }
    });
    until_misses(|| cache.stats().misses, 1).await;
    let waiter = tokio::spawn({
        let (cache, calls) = (cache.clone(), calls.clone());
        async move {
            cache
                .get_or_load(&search(1, "Dune"), || origin(&calls))
                .await
        }
    });
    until_misses(|| cache.stats().misses, 2).await;
    assert_eq!(calls.load(Ordering::SeqCst), 1, "the waiter waits");
    leader.abort();
    assert!(leader.await.unwrap_err().is_cancelled());
    assert_eq!(waiter.await.unwrap().unwrap(), dune());
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    assert_eq!(cache.get(&search(1, "Dune")).await.unwrap(), Some(dune()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server: apt-get install redis-server, then cargo test -- --include-ignored"]
async fn a_load_lock_makes_two_processes_load_once() {
    let Some(server) = Server::start(false) else {
        return;
    };
    let lock = LoadLock::new(Duration::from_secs(10), Duration::from_secs(10));
    let caches = Arc::new([
        cache(&server).await.with_lock(lock),
        cache(&server).await.with_lock(lock),
    ]);
    let calls = Arc::new(AtomicUsize::new(0));
    let mut tasks = JoinSet::new();
    for i in 0..2 {
        let (caches, calls) = (caches.clone(), calls.clone());
        tasks.spawn(async move {
            let both_missed = || caches[0].stats().misses + caches[1].stats().misses;
            caches[i]
                .get_or_load(&search(1, "Dune"), || async {
                    until_misses(both_missed, 2).await;
                    origin(&calls).await
                })
                .await
                .unwrap()
        });
    }
    assert_eq!(tasks.join_all().await, [dune(), dune()]);
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    let (a, b) = (caches[0].stats(), caches[1].stats());
    assert_eq!((a.loads + b.loads, a.coalesced + b.coalesced), (1, 1));
    assert_eq!(a.errors + b.errors, 0);
    let generation = caches[0].store().generation_for(&search(1, "Dune")).await;
    let key = search(1, "Dune").cache_key(generation.unwrap()).unwrap();
    let lock_name = format!("{}#lock", key.as_str());
    let mut admin = connect(&server).await;
    assert!(!admin.exists::<_, bool>(&lock_name).await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server: apt-get install redis-server, then cargo test -- --include-ignored"]
async fn the_cache_works_on_a_redis_cluster() {
    let Some(cluster) = Cluster::start() else {
        return;
    };
    let client = cluster.client();
    let cache = AsyncRedisCache::new(
        client.get_async_connection().await.unwrap(),
        AsyncRedisGenerations::new(client.get_async_connection().await.unwrap()),
    );
    let calls = AtomicUsize::new(0);
    for branch in 1..=20 {
        let query = search(branch, "Dune");
        assert_eq!(
            cache.get_or_load(&query, || origin(&calls)).await.unwrap(),
            dune()
        );
        assert_eq!(cache.get(&query).await.unwrap(), Some(dune()));
    }
    assert_eq!(calls.load(Ordering::SeqCst), 20);
    cache.invalidate_tenant::<Search>(&[&3u32]).await.unwrap();
    assert_eq!(cache.get(&search(3, "Dune")).await.unwrap(), None);
    assert_eq!(cache.get(&search(4, "Dune")).await.unwrap(), Some(dune()));
    let generation = cache.store().generation_for(&search(4, "Dune")).await;
    let key = search(4, "Dune").cache_key(generation.unwrap()).unwrap();
    let () = cache
        .connection()
        .set(key.as_str(), "garbage")
        .await
        .unwrap();
    assert_eq!(cache.get(&search(4, "Dune")).await.unwrap(), None);
    let stats = cache.stats();
    assert_eq!(stats.rejected.undecodable, 1, "{stats:?}");
    assert_eq!(stats.errors, 0, "{stats:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server: apt-get install redis-server, then cargo test -- --include-ignored"]
async fn memory_generations_name_the_keys_in_process() {
    let Some(server) = Server::start(false) else {
        return;
    };
    // Two caches of one process sharing its store: a bump through one is
    // seen by the other.
    let store = Arc::new(MemoryGenerations::new());
    let cache = AsyncRedisCache::new(connect(&server).await, store.clone());
    let other = AsyncRedisCache::new(connect(&server).await, store);
    let calls = AtomicUsize::new(0);
    let query = search(1, "Dune");
    assert_eq!(
        cache.get_or_load(&query, || origin(&calls)).await.unwrap(),
        dune()
    );
    assert_eq!(other.get(&query).await.unwrap(), Some(dune()));
    other.invalidate_tenant::<Search>(&[&1u32]).await.unwrap();
    assert_eq!(cache.get(&query).await.unwrap(), None);
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

/// Calls `attempt` until it succeeds: a `ConnectionManager` reconnects on
/// its own after the first failed call, within a few retries.
async fn once_reconnected<F, Fut>(mut attempt: F) -> Vec<Book>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Vec<Book>, CacheError<String>>>,
{
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match attempt().await {
            Ok(value) => return value,
            Err(_) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(error) => panic!("not reconnected after 10 s: {error}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server: apt-get install redis-server, then cargo test -- --include-ignored"]
async fn connection_managers_fail_closed_while_down_and_reconnect() {
    let Some(mut server) = Server::start(false) else {
        return;
    };
    let client = redis::Client::open(server.url()).unwrap();
    let config = ConnectionManagerConfig::new()
        .set_connection_timeout(Some(Duration::from_millis(500)))
        .set_response_timeout(Some(Duration::from_millis(500)))
        .set_number_of_retries(1)
        .set_max_delay(Duration::from_millis(100));
    let manager = || client.get_connection_manager_with_config(config.clone());
    // Counters in Redis (a failed read is a generation error), and counters
    // in memory (a failed read is the backend's error).
    let cache = AsyncRedisCache::new(
        manager().await.unwrap(),
        AsyncRedisGenerations::new(manager().await.unwrap()),
    );
    let in_memory = AsyncRedisCache::new(manager().await.unwrap(), MemoryGenerations::new());
    let calls = AtomicUsize::new(0);
    let load = || origin(&calls);
    let (query, other) = (search(1, "Dune"), search(2, "Dune"));
    assert_eq!(cache.get_or_load(&query, load).await.unwrap(), dune());
    assert_eq!(in_memory.get_or_load(&other, load).await.unwrap(), dune());
    assert_eq!(calls.load(Ordering::SeqCst), 2);

    // Down: every call errs, none answers, and the origin is not asked.
    server.stop();
    for _ in 0..3 {
        let error = cache.get_or_load(&query, load).await.unwrap_err();
        let CacheError::Generation(error) = error else {
            panic!("the counters' read fails first: {error}");
        };
        assert_eq!(error.kind(), GenerationErrorKind::Store, "{error:?}");
        let error = in_memory.get_or_load(&other, load).await.unwrap_err();
        assert!(matches!(error, CacheError::Backend(_)), "{error}");
    }
    assert_eq!(calls.load(Ordering::SeqCst), 2, "the origin was asked");

    // Back, empty, on the same port: the same caches, on the same managers,
    // load again once and then hit.
    server.restart();
    assert_eq!(
        once_reconnected(|| cache.get_or_load(&query, load)).await,
        dune()
    );
    assert_eq!(
        once_reconnected(|| in_memory.get_or_load(&other, load)).await,
        dune()
    );
    assert_eq!(calls.load(Ordering::SeqCst), 4);
    assert_eq!(cache.get(&query).await.unwrap(), Some(dune()));
    assert_eq!(in_memory.get(&other).await.unwrap(), Some(dune()));
}
