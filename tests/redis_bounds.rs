//! What a Redis cache keeps in process stays bounded whatever its callers
//! do: 100,000 loads of distinct keys that never land (their origin panics,
//! their caller gives up, or Redis refuses the load lock) leave no single
//! flight behind, and 100,000 distinct counters read under tracking are
//! kept at most up to the bound set. Real `redis-server`; ignored by
//! default, run with `cargo test -- --include-ignored`.

mod common;
#[path = "common/library_search.rs"]
mod library_search;

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use cache_key::cache::{AsyncQueryCache, QueryCache};
use cache_key::redis::{
    AsyncRedisCache, AsyncRedisGenerations, AsyncRedisPool, LoadLock, RedisCache, RedisGenerations,
    RedisPool, Tracking,
};
use common::redis_server::Server;
use library_search::{Book, dune, search};

/// Loads of distinct keys whose leaders never land, of each of the three
/// kinds: 102,000 in all.
const PER_KIND: u32 = 34_000;

/// What the test's origins panic with, on purpose.
const ORIGIN_PANIC: &str = "the origin fails";

/// Silences the panics the test makes on purpose (tens of thousands), and
/// only those.
fn quiet_panics() {
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if info.payload().downcast_ref::<&str>() != Some(&ORIGIN_PANIC) {
            report(info);
        }
    }));
}

#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn loads_that_never_land_leave_no_flight_behind() {
    let Some(server) = Server::start(false) else {
        return;
    };
    quiet_panics();

    // Origins that panic, on 8 threads.
    let cache = RedisCache::new(RedisGenerations::new(
        RedisPool::open(server.url()).unwrap(),
    ));
    let next = AtomicU32::new(0);
    thread::scope(|scope| {
        for _ in 0..8 {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= PER_KIND {
                        break;
                    }
                    let query = search(1, &format!("panic {i}"));
                    let load = catch_unwind(AssertUnwindSafe(|| {
                        cache.get_or_load(&query, || -> Result<Vec<Book>, String> {
                            std::panic::panic_any(ORIGIN_PANIC)
                        })
                    }));
                    assert!(load.is_err(), "the origin panicked");
                }
            });
        }
    });
    assert_eq!(cache.__map_sizes().flights, 0, "panicking origins");

    // Callers that give up: async loads dropped while their origin runs.
    let runtime = common::async_runtime::runtime();
    let cache = Arc::new(runtime.block_on(async {
        let pool = AsyncRedisPool::connect(server.url()).await.unwrap();
        AsyncRedisCache::new(AsyncRedisGenerations::new(pool))
    }));
    runtime.block_on(async {
        for batch in 0..PER_KIND / 1_000 {
            let mut loads = tokio::task::JoinSet::new();
            for i in 0..1_000 {
                let cache = cache.clone();
                loads.spawn(async move {
                    let query = search(1, &format!("cancelled {batch} {i}"));
                    let load = cache.get_or_load(&query, std::future::pending::<Result<_, String>>);
                    let given_up = tokio::time::timeout(Duration::from_millis(50), load).await;
                    assert!(given_up.is_err(), "the origin never answers");
                });
            }
            while let Some(done) = loads.join_next().await {
                done.unwrap();
            }
        }
    });
    assert_eq!(cache.__map_sizes().flights, 0, "cancelled loads");

    // Loads whose lock Redis refuses: out of memory, so every write fails.
    let cache = RedisCache::new(RedisGenerations::new(
        RedisPool::open(server.url()).unwrap(),
    ))
    .with_lock(LoadLock::new(
        Duration::from_secs(5),
        Duration::from_secs(1),
    ));
    // The counters exist before writes fail; the keys below share them.
    cache.get(&search(1, "warm")).unwrap();
    let mut admin = server.connect();
    let () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory-policy")
        .arg("noeviction")
        .query(&mut admin)
        .unwrap();
    let () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory")
        .arg(1)
        .query(&mut admin)
        .unwrap();
    let next = AtomicU32::new(0);
    thread::scope(|scope| {
        for _ in 0..8 {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= PER_KIND {
                        break;
                    }
                    let query = search(1, &format!("refused {i}"));
                    let load = cache.get_or_load(&query, || Ok::<_, String>(dune()));
                    assert!(load.is_err(), "the lock's SET is refused: {load:?}");
                }
            });
        }
    });
    assert_eq!(cache.__map_sizes().flights, 0, "refused locks");
}

#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn tracked_counters_are_kept_up_to_their_bound() {
    let Some(server) = Server::start(false) else {
        return;
    };
    const MAX: usize = 10_000;
    const BRANCHES: u32 = 50_000;
    // The counters made first: a counter's first read writes it, and the
    // message that write sends keeps the read from keeping it.
    let plain = RedisCache::new(RedisGenerations::new(
        RedisPool::open(server.url()).unwrap(),
    ));
    for_each_branch(BRANCHES, |branch| {
        assert_eq!(plain.get(&search(branch, "Dune")).unwrap(), None);
    });
    let tracking = Tracking::default().with_max_counters(MAX);
    let generations = RedisGenerations::tracked(RedisPool::open(server.url()).unwrap(), tracking);
    let cache = RedisCache::new(generations);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !cache.store().is_tracking() {
        assert!(Instant::now() < deadline, "the subscription never came up");
        thread::sleep(Duration::from_millis(5));
    }
    // A branch's tenant and operation counters are its own: two each, with
    // the namespace's shared.
    let largest = std::sync::Mutex::new((0, 0));
    for_each_branch(BRANCHES, |branch| {
        // The second read finds the counters kept and resolves them.
        for _ in 0..2 {
            assert_eq!(cache.get(&search(branch, "Dune")).unwrap(), None);
        }
        let sizes = cache.__map_sizes();
        let mut largest = largest.lock().unwrap();
        largest.0 = largest.0.max(sizes.tracked_counters);
        largest.1 = largest.1.max(sizes.tracked_resolutions);
    });
    let (counters, resolutions) = *largest.lock().unwrap();
    eprintln!("at most {counters} counters and {resolutions} resolutions kept");
    assert!(counters <= MAX, "{counters} counters kept");
    assert!(resolutions <= MAX, "{resolutions} resolutions kept");
    // Kept, not merely dropped: the bound was reached.
    assert!(counters > MAX / 2, "{counters} counters kept");
    assert!(resolutions > MAX / 4, "{resolutions} resolutions kept");
}

/// Runs `read` for branches 1 to `branches` (0 is no tenant), on 4 threads.
fn for_each_branch(branches: u32, read: impl Fn(u32) + Sync) {
    let next = AtomicU32::new(1);
    thread::scope(|scope| {
        for _ in 0..4 {
            scope.spawn(|| {
                loop {
                    let branch = next.fetch_add(1, Ordering::Relaxed);
                    if branch > branches {
                        break;
                    }
                    read(branch);
                }
            });
        }
    });
}
