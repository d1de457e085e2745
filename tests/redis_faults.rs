//! Faults the cache survives, each a reproduction of a way it once broke a
//! promise, on real `redis-server` processes (and a proxy of the tests' own
//! that holds, drops or refuses connections):
//!
//! - a call dropped while the circuit is open never keeps it open: the
//!   pool probes Redis itself, and calls use it again once it answers;
//! - a bump dropped on its way, or one that failed, is sent again before
//!   the next batch, reads and bumps alike (a process that only writes
//!   too), and a replay retires only the failure it re-sent;
//! - a refused bump blocks the reads of its own scope only;
//! - a waiter never takes an answer whose check its leader skipped;
//! - a refused connection fails a call at once on both drivers, a pool
//!   whose connections are busy is no outage, and the circuit closes
//!   within a second of Redis answering again however long it was out.
//!
//! What each test counts is what the cache under test did (its `Stats`, its
//! pool's state, another cache's reads); no assertion rests on a few
//! milliseconds: a bound asserted is many times what the work takes, and
//! far below what the broken behaviour took.
//!
//! Ignored by default; run with `cargo test -- --include-ignored`.

mod common;
#[path = "common/library_search.rs"]
mod library_search;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use cache_key::Scopes;
use cache_key::cache::{AsyncQueryCache, AsyncTypedCache, QueryCache, TypedCache};
use cache_key::redis::{
    AsyncRedisCache, AsyncRedisGenerations, AsyncRedisPool, RedisCache, RedisGenerations,
    RedisPool, Timeouts,
};
use common::async_runtime::runtime;
use common::redis_server::{Proxy, Server};
use library_search::{Book, Search, dune, search};

fn messiah() -> Vec<Book> {
    vec![Book {
        title: "Dune Messiah".to_owned(),
        year: 1969,
        subtitle: None,
    }]
}

/// How long a test waits for what should take a fraction of a second; far
/// below what the reproduced faults took (forever, or tens of seconds).
const PATIENCE: Duration = Duration::from_secs(10);

fn blocking_cache(url: &str) -> RedisCache {
    RedisCache::new(RedisGenerations::new(RedisPool::open(url).unwrap()))
}

async fn async_cache(url: &str) -> AsyncRedisCache {
    AsyncRedisCache::new(AsyncRedisGenerations::new(
        AsyncRedisPool::connect(url).await.unwrap(),
    ))
}

/// Fills `query`'s entry with Dune through `cache` (a hit next).
fn fill(cache: &RedisCache, query: &Search) {
    let filled = cache.get_or_load(query, || Ok::<_, String>(dune()));
    assert_eq!(filled.unwrap(), dune());
    assert_eq!(cache.get(query).unwrap(), Some(dune()));
}

#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn a_call_dropped_while_the_circuit_is_open_never_keeps_it_open() {
    let Some(server) = Server::start(false) else {
        return;
    };
    let runtime = runtime();
    runtime.block_on(async {
        let cache = async_cache(&server.url()).await;
        let pool = cache.pool().clone();
        let query = search(1, "Dune");
        let loaded = cache.get_or_load(&query, || async { Ok::<_, String>(dune()) });
        assert_eq!(loaded.await.unwrap(), dune());

        server.pause();
        while !pool.is_skipping() {
            let _ = cache.get(&query).await;
        }
        // Calls dropped while they wait, for longer than any back-off: a
        // call that probed Redis itself would be dropped mid-probe.
        let until = Instant::now() + Duration::from_millis(1500);
        while Instant::now() < until {
            let _ = tokio::time::timeout(Duration::from_millis(20), cache.get(&query)).await;
        }
        server.resume();
        let back = Instant::now();
        loop {
            if let Ok(Some(found)) = cache.get(&query).await {
                assert_eq!(found, dune());
                break;
            }
            assert!(back.elapsed() < PATIENCE, "the circuit never closed");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
}

#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn an_invalidation_dropped_on_its_way_is_sent_again_before_the_next_read() {
    let Some(server) = Server::start(false) else {
        return;
    };
    let proxy = Proxy::to(server.port());
    let other = blocking_cache(&server.url());
    let query = search(1, "Dune");
    fill(&other, &query);
    runtime().block_on(async {
        let cache = async_cache(&proxy.url()).await;
        assert_eq!(cache.get(&query).await.unwrap(), Some(dune()));
        // The bump is written to a silent network, and its future dropped.
        proxy.freeze();
        let scope = Search::tenant_scope(&1).unwrap();
        let dropped = tokio::time::timeout(Duration::from_millis(50), cache.invalidate(&scope));
        assert!(dropped.await.is_err(), "dropped while it waited");
        assert_eq!(cache.stats().pending_invalidations, 1);
        // What the network held is lost with its connections.
        proxy.drop_connections();
        proxy.thaw();
        assert_eq!(cache.get(&query).await.unwrap(), None, "sent again first");
        assert_eq!(cache.stats().pending_invalidations, 0);
    });
    assert_eq!(other.get(&query).unwrap(), None, "it reached Redis");
}

#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn a_process_that_only_writes_sends_its_failed_bumps_again() {
    let Some(server) = Server::start(false) else {
        return;
    };
    let proxy = Proxy::to(server.port());
    let reader = blocking_cache(&server.url());
    let (first, second) = (search(1, "Dune"), search(2, "Dune"));
    fill(&reader, &first);
    let writer = blocking_cache(&proxy.url());
    proxy.refuse();
    proxy.drop_connections();
    let failed = writer.invalidate(&Search::tenant_scope(&1).unwrap());
    assert!(failed.is_err());
    assert_eq!(writer.stats().pending_invalidations, 1);
    proxy.accept();
    // Another scope's bump: the failed one goes first.
    writer
        .invalidate(&Search::tenant_scope(&2).unwrap())
        .unwrap();
    assert_eq!(writer.stats().pending_invalidations, 0);
    assert_eq!(
        reader.get(&first).unwrap(),
        None,
        "branch 1's bump reached Redis"
    );
    assert_eq!(reader.get(&second).unwrap(), None);
}

/// A cache's calls as the refused-bump case makes them, on either driver.
struct Calls<'a> {
    get: &'a dyn Fn(&Search) -> Option<Vec<Book>>,
    /// Bumps branch 1: whether Redis confirmed it.
    bump: &'a dyn Fn() -> bool,
    pending: &'a dyn Fn() -> u64,
}

/// Branch 1's bump refused (Redis out of memory, writes refused, reads
/// answered): branch 2 keeps hitting, branch 1 is not served, and once
/// Redis takes writes again the bump is made before branch 1 is read.
fn a_refused_bump(driver: &str, server: &Server, calls: Calls<'_>) {
    let (first, second) = (search(1, "Dune"), search(2, "Dune"));
    let limit = |bytes: u64| {
        let mut set = redis::cmd("CONFIG");
        set.arg("SET").arg("maxmemory").arg(bytes);
        set.query::<()>(&mut server.connect()).unwrap();
    };
    assert_eq!((calls.get)(&first), Some(dune()), "{driver}");
    assert_eq!((calls.get)(&second), Some(dune()), "{driver}");
    limit(1);
    assert!(!(calls.bump)(), "{driver}: refused");
    assert_eq!((calls.pending)(), 1, "{driver}");
    assert_eq!(
        (calls.get)(&second),
        Some(dune()),
        "{driver}: another branch still hits"
    );
    assert_eq!(
        (calls.get)(&first),
        None,
        "{driver}: its own branch is not served"
    );
    assert_eq!((calls.pending)(), 1, "{driver}: refused again");
    limit(0);
    assert_eq!(
        (calls.get)(&first),
        None,
        "{driver}: bumped once Redis takes it"
    );
    assert_eq!((calls.pending)(), 0, "{driver}");
    assert_eq!((calls.get)(&second), Some(dune()), "{driver}");
}

#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn a_refused_bump_blocks_the_reads_of_its_scope_only() {
    let Some(server) = Server::start(false) else {
        return;
    };
    let scope = Search::tenant_scope(&1).unwrap();
    let refill = || {
        server.flush();
        let filler = blocking_cache(&server.url());
        fill(&filler, &search(1, "Dune"));
        fill(&filler, &search(2, "Dune"));
    };
    refill();
    let cache = blocking_cache(&server.url());
    let calls = Calls {
        get: &|query| cache.get(query).unwrap(),
        bump: &|| cache.invalidate(&scope).is_ok(),
        pending: &|| cache.stats().pending_invalidations,
    };
    a_refused_bump("blocking", &server, calls);

    refill();
    let runtime = runtime();
    let cache = runtime.block_on(async_cache(&server.url()));
    let calls = Calls {
        get: &|query| runtime.block_on(cache.get(query)).unwrap(),
        bump: &|| runtime.block_on(cache.invalidate(&scope)).is_ok(),
        pending: &|| cache.stats().pending_invalidations,
    };
    a_refused_bump("async", &server, calls);
}

#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn a_waiter_does_not_take_an_answer_whose_check_its_leader_skipped() {
    let Some(server) = Server::start(false) else {
        return;
    };
    let proxy = Proxy::to(server.port());
    // One thread: a task spawned runs until it waits before this one goes
    // on, so what the test sees of it is where it stands.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let cache = Arc::new(async_cache(&proxy.url()).await);
        let query = search(1, "Dune");
        proxy.refuse();
        proxy.drop_connections();

        // The leader's origin call begins while Redis is out: its answer
        // is keyed at generation 0, with no counter read.
        let (release, released) = tokio::sync::oneshot::channel::<()>();
        let began = Arc::new(AtomicBool::new(false));
        let leader = tokio::spawn({
            let (cache, query, began) = (cache.clone(), query.clone(), began.clone());
            async move {
                let origin = || async move {
                    began.store(true, Ordering::SeqCst);
                    released.await.unwrap();
                    Ok::<_, String>(dune())
                };
                cache.get_or_load(&query, origin).await
            }
        });
        while !began.load(Ordering::SeqCst) {
            tokio::task::yield_now().await;
        }
        // Dune changed and was invalidated (Redis out: an error, pending)
        // before the next caller asked.
        let scope = Search::tenant_scope(&1).unwrap();
        assert!(cache.invalidate(&scope).await.is_err());
        let waiter = tokio::spawn({
            let (cache, query) = (cache.clone(), query.clone());
            async move {
                let origin = || async { Ok::<_, String>(messiah()) };
                cache.get_or_load(&query, origin).await
            }
        });
        // Both degraded: the second now waits on the first's flight.
        while cache.stats().degraded < 2 {
            tokio::task::yield_now().await;
        }
        release.send(()).unwrap();
        assert_eq!(
            leader.await.unwrap().unwrap(),
            dune(),
            "began before the bump"
        );
        assert_eq!(
            waiter.await.unwrap().unwrap(),
            messiah(),
            "asked after the bump returned"
        );
    });
}

#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn a_refused_connection_fails_a_call_at_once_on_both_drivers() {
    let Some(mut server) = Server::start(false) else {
        return;
    };
    // Bounds far longer than a call answered at once takes.
    let timeouts = Timeouts::default()
        .with_call(Duration::from_secs(5))
        .with_connect(Duration::from_secs(5));
    let pool = RedisPool::builder()
        .timeouts(timeouts)
        .open(server.url())
        .unwrap();
    let cache = RedisCache::new(RedisGenerations::new(pool));
    let query = search(1, "Dune");
    fill(&cache, &query);
    let runtime = runtime();
    let async_cache = runtime.block_on(async {
        let pool = AsyncRedisPool::builder()
            .timeouts(timeouts)
            .connect(server.url())
            .await
            .unwrap();
        let cache = AsyncRedisCache::new(AsyncRedisGenerations::new(pool));
        assert_eq!(cache.get(&query).await.unwrap(), Some(dune()));
        cache
    });
    server.stop();
    let started = Instant::now();
    let answer = cache.get_or_load(&query, || Ok::<_, String>(messiah()));
    assert_eq!(answer.unwrap(), messiah());
    let blocking = started.elapsed();
    let started = Instant::now();
    let answer =
        runtime.block_on(async_cache.get_or_load(&query, || async { Ok::<_, String>(messiah()) }));
    assert_eq!(answer.unwrap(), messiah());
    let not_blocking = started.elapsed();
    for (driver, took) in [("blocking", blocking), ("async", not_blocking)] {
        assert!(
            took < Duration::from_secs(2),
            "{driver}: {took:?} for a refused connection"
        );
    }
}

#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn a_pool_whose_connections_are_busy_is_no_outage() {
    let Some(server) = Server::start(false) else {
        return;
    };
    let pool = RedisPool::builder()
        .max_size(1)
        .timeouts(Timeouts::default().with_call(Duration::from_millis(100)))
        .open(server.url())
        .unwrap();
    let cache = RedisCache::new(RedisGenerations::new(pool.clone()));
    let query = search(1, "Dune");
    fill(&cache, &query);
    let held = pool.get().unwrap();
    for _ in 0..10 {
        let answer = cache.get_or_load(&query, || Ok::<_, String>(dune()));
        assert_eq!(answer.unwrap(), dune(), "answered by the origin");
    }
    assert!(!pool.is_skipping(), "Redis answered all along");
    drop(held);
    assert_eq!(cache.get(&query).unwrap(), Some(dune()));
}

#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn the_circuit_closes_soon_after_redis_returns_however_long_it_was_out() {
    let Some(mut server) = Server::start(false) else {
        return;
    };
    let query = search(1, "Dune");
    let runtime = runtime();
    let blocking = blocking_cache(&server.url());
    let not_blocking = runtime.block_on(async_cache(&server.url()));
    let asked = |driver: &str| -> Option<Vec<Book>> {
        match driver {
            "blocking" => blocking.get(&query).ok().flatten(),
            _ => runtime.block_on(not_blocking.get(&query)).ok().flatten(),
        }
    };
    fill(&blocking, &query);
    server.stop();
    // An outage long enough for a doubling back-off to reach 8 s, with
    // calls coming in all along (which, probing, would each double it).
    let outage = Instant::now() + Duration::from_secs(12);
    while Instant::now() < outage {
        assert_eq!(asked("blocking"), None);
        assert_eq!(asked("async"), None);
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(blocking.pool().is_skipping());
    assert!(not_blocking.pool().is_skipping());
    server.restart();
    fill(
        &RedisCache::new(RedisGenerations::new(
            RedisPool::open(server.url()).unwrap(),
        )),
        &query,
    );
    let back = Instant::now();
    for driver in ["blocking", "async"] {
        while asked(driver).is_none() {
            assert!(
                back.elapsed() < Duration::from_secs(3),
                "{driver}: no hit yet"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}
