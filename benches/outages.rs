//! What a Redis outage costs a caller, on a real `redis-server`, for both
//! drivers, with and without a level in process (four caches on one server,
//! each on a pool of its own); the origin answers at once, so what a call
//! takes is what the cache adds to it.
//!
//! - sustained: once the circuit is open, the p99 and the slowest of 500
//!   `get_or_load`s, the server killed, then stopped with `SIGSTOP`;
//! - the first calls after a kill: the first 5 calls of each cache;
//! - recovery: after an outage of 10 s and of 60 s (the server killed,
//!   each cache called every 100 ms all along), the time from the server
//!   answering again to each cache's first hit.
//!
//! `cargo bench -p cache-key-benches --bench outages` (needs `redis-server`;
//! about two minutes). `OUTAGE_LONG_SECS` sets the long outage (default 60).

#[allow(dead_code)]
#[path = "../tests/common/redis_server.rs"]
mod redis_server;

use std::time::{Duration, Instant};

use cache_key::CacheKey;
use cache_key::cache::{AsyncQueryCache, CachedQuery, QueryCache};
use cache_key::redis::{
    AsyncRedisCache, AsyncRedisGenerations, AsyncRedisPool, RedisCache, RedisGenerations, RedisPool,
};
use redis_server::Server;
use tokio::runtime::Runtime;

#[derive(Clone, CacheKey)]
#[cache_key(namespace = "outage", operation = "search")]
struct Search {
    #[tenant]
    branch: u32,
    #[criterion]
    title: String,
}

impl CachedQuery for Search {
    type Value = Vec<String>;
    const VALUE_ID: &'static str = "Vec<String>";
    const TTL: Duration = Duration::from_secs(600);
}

fn query() -> Search {
    Search {
        branch: 1,
        title: "Dune".to_owned(),
    }
}

fn answer() -> Result<Vec<String>, String> {
    Ok(vec!["Dune".to_owned()])
}

enum Cache {
    Blocking(RedisCache),
    Async(AsyncRedisCache),
}

/// One of the four caches, named for the tables.
struct Case {
    name: &'static str,
    cache: Cache,
}

impl Case {
    /// One `get_or_load`, and what it took.
    fn load(&self, runtime: &Runtime) -> Duration {
        let query = query();
        let started = Instant::now();
        let loaded = match &self.cache {
            Cache::Blocking(cache) => cache.get_or_load(&query, answer),
            Cache::Async(cache) => {
                runtime.block_on(cache.get_or_load(&query, || async { answer() }))
            }
        };
        let took = started.elapsed();
        assert!(loaded.is_ok(), "{}: the origin answers", self.name);
        took
    }

    /// Whether a `get` is a hit.
    fn hits(&self, runtime: &Runtime) -> bool {
        let query = query();
        let found = match &self.cache {
            Cache::Blocking(cache) => cache.get(&query),
            Cache::Async(cache) => runtime.block_on(cache.get(&query)),
        };
        matches!(found, Ok(Some(_)))
    }

    fn skipping(&self) -> bool {
        match &self.cache {
            Cache::Blocking(cache) => cache.pool().is_skipping(),
            Cache::Async(cache) => cache.pool().is_skipping(),
        }
    }
}

fn cases(runtime: &Runtime, url: &str) -> Vec<Case> {
    let blocking = || RedisCache::new(RedisGenerations::new(RedisPool::open(url).unwrap()));
    let not_blocking = || {
        let pool = runtime.block_on(AsyncRedisPool::connect(url)).unwrap();
        AsyncRedisCache::new(AsyncRedisGenerations::new(pool))
    };
    vec![
        Case {
            name: "blocking",
            cache: Cache::Blocking(blocking()),
        },
        Case {
            name: "blocking + level in process",
            cache: Cache::Blocking(blocking().with_local(1_000)),
        },
        Case {
            name: "async",
            cache: Cache::Async(not_blocking()),
        },
        Case {
            name: "async + level in process",
            cache: Cache::Async(not_blocking().with_local(1_000)),
        },
    ]
}

/// Until every case hits: each loads (storing once Redis is back), then
/// reads. The time each took to its first hit.
fn until_hits(cases: &[Case], runtime: &Runtime, since: Instant) -> Vec<Duration> {
    let mut back = vec![None; cases.len()];
    while back.iter().any(Option::is_none) {
        assert!(
            since.elapsed() < Duration::from_secs(120),
            "Redis never used again"
        );
        for (case, back) in cases.iter().zip(&mut back) {
            if back.is_none() {
                case.load(runtime);
                if case.hits(runtime) {
                    *back = Some(since.elapsed());
                }
            }
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    back.into_iter().map(Option::unwrap).collect()
}

fn p99(mut times: Vec<Duration>) -> (Duration, Duration) {
    times.sort();
    let at = (times.len() * 99 / 100).min(times.len() - 1);
    (times[at], times[times.len() - 1])
}

fn ms(duration: Duration) -> String {
    format!("{:.2} ms", duration.as_secs_f64() * 1e3)
}

fn main() {
    if !redis_server::redis_installed() {
        return;
    }
    let long = std::env::var("OUTAGE_LONG_SECS")
        .ok()
        .and_then(|secs| secs.parse().ok())
        .unwrap_or(60);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mut server = Server::start(false).expect("redis-server");
    let cases = cases(&runtime, &server.url());
    until_hits(&cases, &runtime, Instant::now());

    println!("## First calls after a kill, then a sustained outage (circuit open)\n");
    println!(
        "| cache | first 5 calls after the kill | killed: p99 / slowest of 500 | stopped: p99 / slowest of 500 |"
    );
    println!("| --- | --- | --- | --- |");
    server.stop();
    let first: Vec<Vec<Duration>> = (cases.iter())
        .map(|case| (0..5).map(|_| case.load(&runtime)).collect())
        .collect();
    let killed: Vec<_> = (cases.iter())
        .map(|case| sustained(case, &runtime))
        .collect();
    server.restart();
    until_hits(&cases, &runtime, Instant::now());
    server.pause();
    let stopped: Vec<_> = (cases.iter())
        .map(|case| sustained(case, &runtime))
        .collect();
    server.resume();
    until_hits(&cases, &runtime, Instant::now());
    for (i, case) in cases.iter().enumerate() {
        let first = first[i].iter().map(|took| ms(*took)).collect::<Vec<_>>();
        let (killed, stopped) = (killed[i], stopped[i]);
        println!(
            "| {} | {} | {} / {} | {} / {} |",
            case.name,
            first.join(", "),
            ms(killed.0),
            ms(killed.1),
            ms(stopped.0),
            ms(stopped.1)
        );
    }

    println!("\n## From Redis answering again to each cache's first hit\n");
    println!(
        "| outage | {} |",
        cases
            .iter()
            .map(|case| case.name)
            .collect::<Vec<_>>()
            .join(" | ")
    );
    println!("| --- |{}", " --- |".repeat(cases.len()));
    for secs in [10, long] {
        server.stop();
        let until = Instant::now() + Duration::from_secs(secs);
        while Instant::now() < until {
            for case in &cases {
                case.load(&runtime);
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        server.restart();
        let back = until_hits(&cases, &runtime, Instant::now());
        let back = back.iter().map(|took| ms(*took)).collect::<Vec<_>>();
        println!("| {secs} s, killed | {} |", back.join(" | "));
    }
}

/// Calls `case` until its circuit is open, then 500 times: the p99 and the
/// slowest of those.
fn sustained(case: &Case, runtime: &Runtime) -> (Duration, Duration) {
    while !case.skipping() {
        case.load(runtime);
    }
    p99((0..500).map(|_| case.load(runtime)).collect())
}
