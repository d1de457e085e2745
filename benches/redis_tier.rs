//! The Redis tier against a raw `GET` of the same value through the same
//! `redis` crate, side by side in one run on one real `redis-server`
//! (loopback):
//!
//! - **hit**, one caller: `RedisCache::get` (the counters' script and the
//!   entry's `GET` in one pipeline, the envelope checked, the value decoded)
//!   against `GET` + `serde_json::from_slice` on a connection of its own;
//! - **miss**, one caller: `RedisCache::get_or_load` of a key never stored
//!   (the read, the origin, the envelope's `SET`) against `GET` (nil) then
//!   `SET ... PX` of the JSON value;
//! - **8 threads**: hits on `RedisCache` (a pool of 8) against raw `GET` +
//!   decode on a pool of 8 raw connections (one per thread);
//! - **8 tasks**: hits on `AsyncRedisCache` against raw `GET` + decode on
//!   one multiplexed connection, 8 tasks on a 2-thread tokio runtime;
//! - **two levels** (`with_local`): a strict hit in process against a
//!   `RedisCache` hit and a raw `GET`; a hit over tracked counters (blocking
//!   and async) against a raw moka `get`; 8 threads and 8 tasks of strict
//!   hits, 8 threads of tracked hits;
//!
//! with a value of about 900 bytes (a page of 6 books) and one of 64 KiB.
//! One caller: each round makes `OPS` calls of each variant, one of each in
//! turn. Threads and tasks: each round runs one variant then the other (the
//! order alternating by round). A ratio is taken within each round (the
//! thing over its raw alternative), and the report gives the median and the
//! range of each over `ROUNDS` rounds. Wall-clock time: a round trip is
//! mostly waiting, which CPU time would not count.
//!
//! Run with `cargo bench -p cache-key-benches --bench redis_tier` (`ROUNDS=7 OPS=2000` by
//! default); needs `redis-server` on `PATH`. See BENCHMARKS.md.

#[allow(dead_code)]
#[path = "../tests/common/redis_server.rs"]
mod redis_server;

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use cache_key::CacheKey;
use cache_key::cache::CachedQuery;
use cache_key::cache::{AsyncQueryCache, AsyncTypedCache, QueryCache, TypedCache};
use cache_key::redis::{
    AsyncRedisCache, AsyncRedisGenerations, AsyncRedisPool, RedisCache, RedisGenerations, RedisPool,
};
use redis::Commands;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Book {
    title: String,
    author: String,
    year: u16,
    subtitle: Option<String>,
}

fn page(books: usize, title_len: usize) -> Vec<Book> {
    (0..books)
        .map(|i| Book {
            title: format!("The Book of Sand, volume {i} {}", "x".repeat(title_len)),
            author: "Jorge Luis Borges".to_owned(),
            year: 1975,
            subtitle: (i % 2 == 0).then(|| "and other stories".to_owned()),
        })
        .collect()
}

#[derive(CacheKey)]
#[cache_key(namespace = "library", operation = "search", hash_tag)]
struct Search {
    #[tenant]
    branch: u32,
    #[criterion]
    title: String,
    #[criterion]
    page: u32,
}

impl CachedQuery for Search {
    type Value = Vec<Book>;
    const VALUE_ID: &'static str = "Vec<Book>";
    const TTL: Duration = Duration::from_secs(600);
}

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(default)
}

/// Nanoseconds per call of `thing` and of `raw`, over `ops` calls of each,
/// one of each in turn (which goes first alternating), so that the
/// machine's drift weighs on both alike.
fn per_call(ops: usize, mut thing: impl FnMut(usize), mut raw: impl FnMut(usize)) -> (f64, f64) {
    let (mut thing_ns, mut raw_ns) = (0u128, 0u128);
    let timed = |call: &mut dyn FnMut(usize), i: usize, total: &mut u128| {
        let started = Instant::now();
        call(i);
        *total += started.elapsed().as_nanos();
    };
    for i in 0..ops {
        if i % 2 == 0 {
            timed(&mut thing, i, &mut thing_ns);
            timed(&mut raw, i, &mut raw_ns);
        } else {
            timed(&mut raw, i, &mut raw_ns);
            timed(&mut thing, i, &mut thing_ns);
        }
    }
    (thing_ns as f64 / ops as f64, raw_ns as f64 / ops as f64)
}

/// Calls per second of `threads` threads each calling `call` `ops` times:
/// from the first thread's start to the last one's end, as each thread
/// clocks them (a clock read outside the threads would also count the time
/// until it is scheduled again, which in-process calls do not swamp).
fn throughput(threads: usize, ops: usize, call: impl Fn(usize, usize) + Sync) -> f64 {
    let start = Barrier::new(threads);
    let spans: Vec<(Instant, Instant)> = thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|t| {
                let (start, call) = (&start, &call);
                scope.spawn(move || {
                    start.wait();
                    let started = Instant::now();
                    for i in 0..ops {
                        call(t, i);
                    }
                    (started, Instant::now())
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    let first = spans.iter().map(|span| span.0).min().unwrap();
    let last = spans.iter().map(|span| span.1).max().unwrap();
    (threads * ops) as f64 / (last - first).as_secs_f64()
}

/// One case's measurements over the rounds: per variant, per round.
struct Case {
    name: &'static str,
    unit: &'static str,
    thing: Vec<f64>,
    raw: Vec<f64>,
    /// Whether a larger number is better (throughput) or worse (time).
    higher_is_better: bool,
}

fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted[sorted.len() / 2]
}

fn range(values: &[f64]) -> (f64, f64) {
    let min = values.iter().copied().fold(f64::INFINITY, f64::min);
    let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    (min, max)
}

impl Case {
    /// One round's measurement of each variant, one after the other:
    /// `raw` first when `swap` (every other round), so that neither always
    /// runs on a machine the other warmed.
    fn pair(&mut self, swap: bool, thing: &mut dyn FnMut() -> f64, raw: &mut dyn FnMut() -> f64) {
        if swap {
            let raw = raw();
            self.raw.push(raw);
            self.thing.push(thing());
        } else {
            self.thing.push(thing());
            self.raw.push(raw());
        }
    }

    fn report(&self) {
        let ratios: Vec<f64> = self
            .thing
            .iter()
            .zip(&self.raw)
            .map(|(thing, raw)| thing / raw)
            .collect();
        let (lo, hi) = range(&ratios);
        let (tlo, thi) = range(&self.thing);
        let (rlo, rhi) = range(&self.raw);
        println!(
            "{:<34} {:>9.1} {} ({:.1}-{:.1})  raw {:>9.1} ({:.1}-{:.1})  ratio {:.2} ({:.2}-{:.2}){}",
            self.name,
            median(&self.thing),
            self.unit,
            tlo,
            thi,
            median(&self.raw),
            rlo,
            rhi,
            median(&ratios),
            lo,
            hi,
            if self.higher_is_better {
                "  (of raw throughput)"
            } else {
                "  (of raw time)"
            },
        );
    }
}

fn main() {
    // `cargo bench` passes `--bench`; nothing else is taken.
    let rounds = env("ROUNDS", 7);
    let ops = env("OPS", 2000);
    let Some(server) = redis_server::Server::start(false) else {
        println!("redis-server not on PATH: nothing measured");
        return;
    };
    // `PROFILE=cache|raw`: only `OPS` hits of one variant (for valgrind),
    // then the server's time per command.
    if let Ok(variant) = std::env::var("PROFILE") {
        profile(&server, &variant, ops);
        return;
    }
    println!("{rounds} rounds of {ops} calls per variant, interleaved; medians (ranges)");
    for (label, value) in [("~900 B", page(6, 12)), ("64 KiB", page(620, 12))] {
        let bytes = serde_json::to_vec(&value).unwrap().len();
        println!("\nvalue {label}: {bytes} bytes of JSON");
        measure(&server, &value, rounds, ops);
        measure_levels(&server, &value, rounds, ops);
    }
}

/// `ops` hits of `variant` alone, for an instruction count of the client:
/// `cache` (`RedisCache::get`) or `raw` (`GET` + JSON), then the server's
/// time per command; `cache_async` (`AsyncRedisCache::get`); `tracked` (an in-process hit over tracked counters),
/// `tracked_async` (the same on `AsyncRedisCache`, polled once),
/// `moka` (a raw moka `get` of a key made once), `moka_key` (the key made
/// with `cache_key` for each `get`, as a cache must) or `moka_hand` (the key
/// made by hand with `format!`, as code without this crate would).
fn profile(server: &redis_server::Server, variant: &str, ops: usize) {
    let value = page(6, 12);
    if matches!(
        variant,
        "tracked" | "tracked_async" | "moka" | "moka_key" | "moka_hand"
    ) {
        return profile_in_process(server, variant, ops, &value);
    }
    let pool = RedisPool::builder()
        .max_size(8)
        .open(server.url().as_str())
        .unwrap();
    let cache = RedisCache::new(RedisGenerations::new(pool));
    let hit = Search {
        branch: 1,
        title: "Sand".to_owned(),
        page: 0,
    };
    cache.insert(&hit, value.clone()).unwrap();
    let mut raw = server.connect();
    let () = raw
        .set("raw:hit", serde_json::to_vec(&value).unwrap())
        .unwrap();
    let () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query(&mut raw)
        .unwrap();
    if variant == "cache_async" {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let pool = AsyncRedisPool::connect(server.url().as_str())
                .await
                .unwrap();
            let cache = AsyncRedisCache::new(AsyncRedisGenerations::new(pool));
            for _ in 0..ops {
                drop(black_box(cache.get(&hit).await.unwrap()));
            }
        });
        return;
    }
    for _ in 0..ops {
        match variant {
            "cache" => drop(black_box(cache.get(&hit).unwrap())),
            _ => {
                let bytes: Vec<u8> = raw.get("raw:hit").unwrap();
                let books: Vec<Book> = serde_json::from_slice(&bytes).unwrap();
                black_box(books);
            }
        }
    }
    // The server's side of the same calls: each command's count and time.
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut raw)
        .unwrap();
    for line in info.lines().filter(|line| line.starts_with("cmdstat_")) {
        if !line.starts_with("cmdstat_info") {
            println!("{line}");
        }
    }
}

/// Two levels over tracked counters, once its subscription is up.
fn tracked_cache(pool: RedisPool) -> RedisCache {
    let tracked = RedisCache::new(RedisGenerations::tracked(
        pool,
        cache_key::redis::Tracking::default(),
    ))
    .with_local(100);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !tracked.store().is_tracking() {
        assert!(Instant::now() < deadline, "tracking never started");
        thread::sleep(Duration::from_millis(5));
    }
    tracked
}

fn profile_in_process(server: &redis_server::Server, variant: &str, ops: usize, value: &Vec<Book>) {
    let tracked = tracked_cache(RedisPool::open(server.url().as_str()).unwrap());
    let hit = Search {
        branch: 1,
        title: "Sand".to_owned(),
        page: 0,
    };
    tracked.insert(&hit, value.clone()).unwrap();
    // A counter's first raise comes back as a message and is read once more.
    for _ in 0..3 {
        assert_eq!(tracked.get(&hit).unwrap().as_ref(), Some(value));
        thread::sleep(Duration::from_millis(50));
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let async_tracked = runtime.block_on(async {
        let pool = AsyncRedisPool::connect(server.url().as_str())
            .await
            .unwrap();
        let tracked = AsyncRedisCache::new(AsyncRedisGenerations::tracked(
            pool,
            cache_key::redis::Tracking::default(),
        ))
        .with_local(100);
        while !tracked.store().is_tracking() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        for _ in 0..3 {
            assert_eq!(tracked.get(&hit).await.unwrap().as_ref(), Some(value));
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        tracked
    });
    let moka: moka::sync::Cache<String, Vec<Book>> = moka::sync::Cache::new(100);
    let key = hit.cache_key(1).unwrap().into_string();
    moka.insert(key.clone(), value.clone());
    moka.insert(hand_key(&hit), value.clone());
    for _ in 0..ops {
        match variant {
            "tracked" => drop(black_box(tracked.get(&hit).unwrap())),
            "tracked_async" => drop(black_box(ready(async_tracked.get(&hit)).unwrap())),
            "moka" => drop(black_box(moka.get(key.as_str()).unwrap())),
            "moka_hand" => drop(black_box(moka.get(&hand_key(&hit)).unwrap())),
            _ => {
                let key = hit.cache_key(1).unwrap();
                drop(black_box(moka.get(key.as_str()).unwrap()));
            }
        }
    }
}

/// The key code without this crate would write for `query`: no tenant
/// scope, no escaping (two queries may share it), no generation.
fn hand_key(query: &Search) -> String {
    format!("search:{}:{}:{}", query.branch, query.title, query.page)
}

fn measure(server: &redis_server::Server, value: &Vec<Book>, rounds: usize, ops: usize) {
    let url = server.url();
    let pool = RedisPool::builder().max_size(8).open(url.as_str()).unwrap();
    let cache = RedisCache::new(RedisGenerations::new(pool));
    let mut raw = server.connect();
    let json = serde_json::to_vec(value).unwrap();
    let raw_key = "raw:hit";
    let () = raw.set(raw_key, &json).unwrap();
    // A tenant of each value's own, so that no key of one is the other's.
    let branch = u32::try_from(value.len()).unwrap();
    let hit = Search {
        branch,
        title: "Sand".to_owned(),
        page: 0,
    };
    cache.insert(&hit, value.clone()).unwrap();
    assert_eq!(cache.get(&hit).unwrap().as_ref(), Some(value));
    let raw_get = |connection: &mut redis::Connection| {
        let bytes: Vec<u8> = connection.get(raw_key).unwrap();
        let books: Vec<Book> = serde_json::from_slice(&bytes).unwrap();
        black_box(books);
    };

    // Raw connections for 8 threads, one each, as a pool of 8 gives.
    let raw_pool: Vec<std::sync::Mutex<redis::Connection>> = (0..8)
        .map(|_| std::sync::Mutex::new(server.connect()))
        .collect();
    let misses = AtomicU64::new(0);

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (async_cache, raw_async) = runtime.block_on(async {
        let pool = AsyncRedisPool::connect(url.as_str()).await.unwrap();
        let client = redis::Client::open(url.as_str()).unwrap();
        let raw = client.get_multiplexed_async_connection().await.unwrap();
        (AsyncRedisCache::new(AsyncRedisGenerations::new(pool)), raw)
    });
    let async_cache = Arc::new(async_cache);
    let hit_shared = Arc::new(Search {
        branch,
        title: "Sand".to_owned(),
        page: 0,
    });
    runtime.block_on(async {
        assert_eq!(async_cache.get(&hit).await.unwrap().as_ref(), Some(value));
    });

    let mut cases = [
        ("hit, 1 thread", "ns", false),
        ("miss (read + SET), 1 thread", "ns", false),
        ("hit, 8 threads (pool of 8)", "k/s", true),
        ("hit, 8 tasks (async)", "k/s", true),
    ]
    .map(|(name, unit, higher_is_better)| Case {
        name,
        unit,
        thing: Vec::new(),
        raw: Vec::new(),
        higher_is_better,
    });
    for round in 0..rounds {
        let swap = round % 2 == 1;
        let [hit_case, miss_case, threads_case, tasks_case] = &mut cases;
        let raw = std::cell::RefCell::new(&mut raw);
        let (thing, raw_time) = per_call(
            ops,
            |_| drop(black_box(cache.get(&hit).unwrap())),
            |_| raw_get(&mut raw.borrow_mut()),
        );
        hit_case.thing.push(thing);
        hit_case.raw.push(raw_time);
        let (thing, raw_time) = per_call(
            ops,
            |_| {
                let n = misses.fetch_add(1, Ordering::Relaxed);
                let query = Search {
                    branch,
                    title: "Sand".to_owned(),
                    page: u32::try_from(n + 1).unwrap(),
                };
                let loaded = cache.get_or_load(&query, || Ok::<_, ()>(value.clone()));
                black_box(loaded.unwrap());
            },
            |_| {
                let n = misses.fetch_add(1, Ordering::Relaxed);
                let key = format!("raw:miss:{}:{n}", value.len());
                let mut raw = raw.borrow_mut();
                let found: Option<Vec<u8>> = raw.get(&key).unwrap();
                assert!(found.is_none());
                let bytes = serde_json::to_vec(&value.clone()).unwrap();
                let () = raw.pset_ex(&key, bytes, 600_000).unwrap();
            },
        );
        miss_case.thing.push(thing);
        miss_case.raw.push(raw_time);
        let per_thread = ops / 2;
        threads_case.pair(
            swap,
            &mut || {
                throughput(8, per_thread, |_, _| {
                    drop(black_box(cache.get(&hit).unwrap()))
                }) / 1000.0
            },
            &mut || {
                throughput(8, per_thread, |t, _| {
                    raw_get(&mut raw_pool[t].lock().unwrap())
                }) / 1000.0
            },
        );
        tasks_case.pair(
            swap,
            &mut || cache_tasks(&runtime, &async_cache, &hit_shared, per_thread),
            &mut || raw_tasks(&runtime, &raw_async, raw_key, per_thread),
        );
    }
    for case in &cases {
        case.report();
    }
    let stats = cache.stats();
    assert_eq!(stats.errors, 0, "{stats:?}");
}

/// The two levels (`with_local`) against one level and raw reads: a strict
/// hit in process (the counters' round trip, no value), a tracked hit (no
/// round trip) against a raw moka `get` (of a key made once, of a key made
/// with `cache_key` for each `get`, and of one made by hand), the async
/// cache's tracked hit, and 8 threads or tasks of strict hits and 8 threads
/// of tracked hits.
fn measure_levels(server: &redis_server::Server, value: &Vec<Book>, rounds: usize, ops: usize) {
    let url = server.url();
    let pool = || RedisPool::builder().max_size(8).open(url.as_str()).unwrap();
    let one_level = RedisCache::new(RedisGenerations::new(pool()));
    let two_levels = RedisCache::new(RedisGenerations::new(pool())).with_local(100);
    let tracked = tracked_cache(pool());
    let branch = u32::try_from(value.len()).unwrap() + 1_000;
    let hit = Search {
        branch,
        title: "Sand".to_owned(),
        page: 0,
    };
    one_level.insert(&hit, value.clone()).unwrap();
    for cache in [&two_levels, &tracked] {
        assert_eq!(cache.get(&hit).unwrap().as_ref(), Some(value));
    }
    assert_eq!(tracked.get(&hit).unwrap().as_ref(), Some(value));
    let mut raw = server.connect();
    let raw_key = format!("raw:levels:{branch}");
    let () = raw
        .set(&raw_key, serde_json::to_vec(value).unwrap())
        .unwrap();
    let moka: moka::sync::Cache<String, Vec<Book>> = moka::sync::Cache::new(100);
    let moka_key = hit.cache_key(1).unwrap().into_string();
    moka.insert(moka_key.clone(), value.clone());
    moka.insert(hand_key(&hit), value.clone());
    let raw_pool: Vec<std::sync::Mutex<redis::Connection>> = (0..8)
        .map(|_| std::sync::Mutex::new(server.connect()))
        .collect();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (async_levels, async_tracked, raw_async) = runtime.block_on(async {
        let pool = || async { AsyncRedisPool::connect(url.as_str()).await.unwrap() };
        let levels = AsyncRedisCache::new(AsyncRedisGenerations::new(pool().await)).with_local(100);
        let tracked = AsyncRedisCache::new(AsyncRedisGenerations::tracked(
            pool().await,
            cache_key::redis::Tracking::default(),
        ))
        .with_local(100);
        let deadline = Instant::now() + Duration::from_secs(10);
        while !tracked.store().is_tracking() {
            assert!(Instant::now() < deadline, "tracking never started");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        for _ in 0..3 {
            assert_eq!(levels.get(&hit).await.unwrap().as_ref(), Some(value));
            assert_eq!(tracked.get(&hit).await.unwrap().as_ref(), Some(value));
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let client = redis::Client::open(url.as_str()).unwrap();
        let raw = client.get_multiplexed_async_connection().await.unwrap();
        (Arc::new(levels), tracked, raw)
    });
    let hit_shared = Arc::new(Search {
        branch,
        title: "Sand".to_owned(),
        page: 0,
    });

    let mut cases = [
        ("two levels, hit: vs RedisCache hit", "ns", false),
        ("two levels, hit: vs raw GET", "ns", false),
        ("tracked, hit in process: vs moka get", "ns", false),
        ("tracked, hit in process: vs moka + key", "ns", false),
        ("tracked, hit in process: vs moka + format!", "ns", false),
        ("tracked async, hit: vs moka get", "ns", false),
        ("two levels, 8 threads: vs raw pool", "k/s", true),
        ("two levels, 8 tasks: vs raw async", "k/s", true),
        ("tracked, 8 threads: vs moka get", "k/s", true),
    ]
    .map(|(name, unit, higher_is_better)| Case {
        name,
        unit,
        thing: Vec::new(),
        raw: Vec::new(),
        higher_is_better,
    });
    let raw = std::cell::RefCell::new(&mut raw);
    for round in 0..rounds {
        let [
            vs_one,
            vs_raw,
            vs_moka,
            vs_moka_key,
            vs_moka_hand,
            async_vs_moka,
            threads,
            tasks_case,
            tracked_threads,
        ] = &mut cases;
        let get = |cache: &RedisCache| drop(black_box(cache.get(&hit).unwrap()));
        let (thing, other) = per_call(ops, |_| get(&two_levels), |_| get(&one_level));
        vs_one.thing.push(thing);
        vs_one.raw.push(other);
        let (thing, other) = per_call(
            ops,
            |_| get(&two_levels),
            |_| {
                let bytes: Vec<u8> = raw.borrow_mut().get(&raw_key).unwrap();
                black_box(serde_json::from_slice::<Vec<Book>>(&bytes).unwrap());
            },
        );
        vs_raw.thing.push(thing);
        vs_raw.raw.push(other);
        // In process only: many more calls, or the clock's grain shows.
        let (thing, other) = per_call(
            ops * 20,
            |_| get(&tracked),
            |_| drop(black_box(moka.get(moka_key.as_str()).unwrap())),
        );
        vs_moka.thing.push(thing);
        vs_moka.raw.push(other);
        // The raw side making its key for each `get`, as a cache must.
        let (thing, other) = per_call(
            ops * 20,
            |_| get(&tracked),
            |_| {
                let key = hit.cache_key(1).unwrap();
                drop(black_box(moka.get(key.as_str()).unwrap()));
            },
        );
        vs_moka_key.thing.push(thing);
        vs_moka_key.raw.push(other);
        let (thing, other) = per_call(
            ops * 20,
            |_| get(&tracked),
            |_| drop(black_box(moka.get(&hand_key(&hit)).unwrap())),
        );
        vs_moka_hand.thing.push(thing);
        vs_moka_hand.raw.push(other);
        let (thing, other) = per_call(
            ops * 20,
            |_| drop(black_box(ready(async_tracked.get(&hit)).unwrap())),
            |_| drop(black_box(moka.get(moka_key.as_str()).unwrap())),
        );
        async_vs_moka.thing.push(thing);
        async_vs_moka.raw.push(other);
        let swap = round % 2 == 1;
        let per_thread = ops / 2;
        threads.pair(
            swap,
            &mut || throughput(8, per_thread, |_, _| get(&two_levels)) / 1000.0,
            &mut || {
                throughput(8, per_thread, |t, _| {
                    let bytes: Vec<u8> = raw_pool[t].lock().unwrap().get(&raw_key).unwrap();
                    black_box(serde_json::from_slice::<Vec<Book>>(&bytes).unwrap());
                }) / 1000.0
            },
        );
        tasks_case.pair(
            swap,
            &mut || cache_tasks(&runtime, &async_levels, &hit_shared, per_thread),
            &mut || raw_tasks(&runtime, &raw_async, &raw_key, per_thread),
        );
        // In process only: as many calls per thread as one caller makes.
        tracked_threads.pair(
            swap,
            &mut || throughput(8, ops * 20 / 8, |_, _| get(&tracked)) / 1000.0,
            &mut || {
                throughput(8, ops * 20 / 8, |_, _| {
                    drop(black_box(moka.get(moka_key.as_str()).unwrap()))
                }) / 1000.0
            },
        );
    }
    for case in &cases {
        case.report();
    }
    for cache in [&one_level, &two_levels, &tracked] {
        assert_eq!(cache.stats().errors, 0);
    }
    for cache in [&*async_levels, &async_tracked] {
        assert_eq!(cache.stats().errors, 0);
    }
    assert!(tracked.store().is_tracking(), "tracking stayed up");
    assert!(async_tracked.store().is_tracking(), "tracking stayed up");
}

/// The output of `future`, which must be ready when first polled: a tracked
/// hit in process awaits nothing, so it is timed without an executor.
fn ready<F: std::future::Future>(future: F) -> F::Output {
    let mut future = std::pin::pin!(future);
    let mut context = std::task::Context::from_waker(std::task::Waker::noop());
    match future.as_mut().poll(&mut context) {
        std::task::Poll::Ready(output) => output,
        std::task::Poll::Pending => panic!("a tracked hit in process awaited"),
    }
}

/// Thousands of `cache.get(hit)` a second, 8 tasks making `ops` each.
fn cache_tasks(
    runtime: &tokio::runtime::Runtime,
    cache: &Arc<AsyncRedisCache>,
    hit: &Arc<Search>,
    ops: usize,
) -> f64 {
    let (cache, hit) = (cache.clone(), hit.clone());
    runtime.block_on(tasks(8, ops, move |_| {
        let (cache, hit) = (cache.clone(), hit.clone());
        async move { drop(black_box(cache.get(&*hit).await.unwrap())) }
    })) / 1000.0
}

/// Thousands of raw `GET`s of `key` + decodes a second on `connection`, 8
/// tasks making `ops` each.
fn raw_tasks(
    runtime: &tokio::runtime::Runtime,
    connection: &redis::aio::MultiplexedConnection,
    key: &str,
    ops: usize,
) -> f64 {
    let (connection, key): (_, Arc<str>) = (connection.clone(), key.into());
    runtime.block_on(tasks(8, ops, move |_| {
        let (mut connection, key) = (connection.clone(), key.clone());
        async move {
            let bytes: Vec<u8> = redis::AsyncCommands::get(&mut connection, &*key)
                .await
                .unwrap();
            black_box(serde_json::from_slice::<Vec<Book>>(&bytes).unwrap());
        }
    })) / 1000.0
}

/// Calls per second of `tasks` tasks, each awaiting `call` `ops` times.
async fn tasks<F, Fut>(tasks: usize, ops: usize, call: F) -> f64
where
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let call = Arc::new(call);
    let started = Instant::now();
    let handles: Vec<_> = (0..tasks)
        .map(|t| {
            let call = call.clone();
            tokio::spawn(async move {
                for _ in 0..ops {
                    call(t).await;
                }
            })
        })
        .collect();
    for handle in handles {
        handle.await.unwrap();
    }
    (tasks * ops) as f64 / started.elapsed().as_secs_f64()
}
