//! The Redis tier against a raw `GET` of the same value through the same
//! `redis` crate, side by side in one run on one real `redis-server`
//! (loopback), for a value of 700 bytes of JSON (a page of 6 books) and
//! one of 73 KB (620 books), through both drivers (`RedisCache` on a
//! `RedisPool`, `AsyncRedisCache` on an `AsyncRedisPool`), each raw
//! alternative on connections of its own (a multiplexed one for async, as
//! the async pool's).
//!
//! The floor under a strict hit (targets 1 to 3, and 5), measured beside
//! it: the **raw strict read** (`raw_strict`, `raw_strict_async`), the
//! strict hit's four commands written by hand with the `redis` crate in one
//! pipeline on the raw alternative's own connections (`MGET` of the three
//! counters the cache's hit reads, by their real names, `CLIENT GETNAME`,
//! the connection named as the cache's are, `WAIT 0 0`, and the raw value's
//! `GET`), each reply decoded to its type but not judged, then
//! `serde_json::from_slice` of the value: what a hand-written strict read
//! costs, which only fewer commands or a cheaper client go below. Each is
//! given as a ratio to the raw `GET`'s in the same round ("floor"), and the
//! cache's strict hit as a ratio to it ("over the floor").
//!
//! Sections (`ONLY=server,tier,levels,instructions`, all by default;
//! `SIZES=small,large`):
//!
//! - **server** (targets 1 and 2): runs of `SERVER_OPS` strict hits of one
//!   variant alone, the variants (the caches, the raw `GET`s, the raw
//!   strict reads) in turn; the server's command time per hit (`INFO
//!   commandstats` after `CONFIG RESETSTAT`, `usec` summed over every
//!   command) and its process's CPU per hit (`INFO cpu`, `used_cpu_sys` +
//!   `used_cpu_user`), against a raw `GET`'s, with the floor's against the
//!   same;
//! - **tier** (targets 3 and 4): a hit, one caller (`RedisCache::get`, and
//!   `AsyncRedisCache::get` awaited by one task: the counters and the
//!   entry's `GET` in one pipeline, the envelope checked, the value
//!   decoded) against `GET` + `serde_json::from_slice`, and the raw strict
//!   read, the three interleaved one by one, then the same again timed
//!   by the process's CPU clock (`CLOCK_PROCESS_CPUTIME_ID`: the client's
//!   own time natively, the async pool's tasks included, where instruction
//!   counts miss code fetched cold); a miss (`get_or_load` of a key
//!   never stored: the read, the origin, the envelope's `SET`) against
//!   `GET` (nil) then `SET ... PX` of the JSON; 8 threads on a pool of 8
//!   against raw hits, and raw strict reads, on 8 connections; 8 tasks on a
//!   2-thread runtime against raw hits, and raw strict reads, on one
//!   multiplexed connection;
//! - **levels** (target 6, and the two levels): `with_local`'s strict hit
//!   in process against a `RedisCache` hit and a raw `GET`; a hit over
//!   tracked counters (blocking, and async polled once) against a
//!   `moka::sync::Cache` keyed by the query struct itself (its own
//!   `Clone, Hash, PartialEq, Eq`: `Search` has no skipped field), and
//!   against a moka `get` by a key string (made once, made with
//!   `cache_key`, written into a reused buffer, made with `format!`); 8
//!   threads and tasks of strict hits, 8 threads of tracked hits;
//! - **instructions** (target 5, and target 6 in instructions): this bench
//!   run alone under valgrind (cachegrind) for each variant, `IOPS` and
//!   twice as many calls (a tenth for the large value), the difference per
//!   call; `REPEAT` pairs of runs (3 by default), with the fetches that
//!   miss a simulated 32 KiB, 8-way L1 instruction cache (how much code a
//!   call runs). Target 5's floor: the raw
//!   strict read's. Target 6's floor too: a
//!   moka `get` by the key written into a reused buffer, the least a level
//!   found by the query's key costs, against moka by the query struct.
//!
//! Calls through Redis: each round makes `OPS` calls of each variant, one
//! of each in turn (the first of each turn rotating). Calls in process:
//! blocks of 64 calls, a block of each in turn, the median block. Threads
//! and tasks: each round runs one variant after another (the first
//! rotating by round). A ratio is taken within each round (the thing over
//! its raw alternative, the floor over the same, the thing over the
//! floor), and the report gives the median and the range of each over
//! `ROUNDS` rounds, then the table of the targets, with the floor
//! and the thing over it for targets 1, 2, 3 and 5. Before anything is
//! timed, every pair is checked to return the same value, and the floor's
//! counters to exist.
//!
//! One variant alone, for valgrind or the server's counts:
//! `PROFILE=<variant> SIZE=small|large OPS=n` makes `n` calls after three
//! warm-up ones and prints what the server spent on them (`cache`, `raw`,
//! `cache_async`, `raw_async`, `raw_strict`, `raw_strict_async`, `miss`,
//! `miss_async`, `raw_miss`; in process: `tracked`, `tracked_async`,
//! `moka_struct`, `moka_struct_ttl`, `moka`, `moka_key`, `moka_written`, `moka_hand`);
//! `REDIS_URL` uses that server instead of starting one. The profiled calls
//! run in `measured` (callgrind collects it alone: `benches/redis_callgrind.sh`),
//! each through a function of its own (`hit_cache`, `hit_raw`,
//! `hit_raw_strict`, `hit_moka_struct`...) that the timings call too.
//!
//! Run with `cargo bench -p cache-key-benches --bench redis_tier` (`ROUNDS=7
//! OPS=2000 SERVER_OPS=5000 IOPS=2000 REPEAT=3` by default); needs
//! `redis-server` on `PATH`, and valgrind for the instructions. See
//! BENCHMARKS.md.

#[allow(dead_code)]
#[path = "../tests/common/redis_server.rs"]
mod redis_server;

#[path = "redis_tier/instructions.rs"]
mod instructions;
#[path = "redis_tier/server_stats.rs"]
mod server_stats;
#[path = "redis_tier/timing.rs"]
mod timing;

use std::cell::RefCell;
use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use cache_key::cache::CachedQuery;
use cache_key::cache::{AsyncQueryCache, AsyncTypedCache, QueryCache, TypedCache};
use cache_key::redis::{
    AsyncRedisCache, AsyncRedisGenerations, AsyncRedisPool, RedisCache, RedisGenerations,
    RedisPool, Tracking,
};
use cache_key::{CacheKey, GenerationScope};
use redis::Commands;
use redis::aio::MultiplexedConnection;
use serde::{Deserialize, Serialize};
use tokio::runtime::Runtime;

use self::server_stats::{ServerRun, server_run};
use self::timing::{
    Case, Clock, Floored, Spread, in_turn, per_block, per_call, per_call_async, per_calls,
    per_calls_async, per_calls_async_by, per_calls_by, tasks, throughput,
};

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

/// The query. It has no skipped field, so its own `Hash` and `Eq` are
/// exactly its key's fields: what a `moka::sync::Cache<Search, _>` is
/// keyed by (target 6).
#[derive(Debug, Clone, Hash, PartialEq, Eq, CacheKey)]
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

/// The query of the misses: `Search`'s fields and value, its entries kept
/// seconds (no read names a miss's entry again, and the large value's take
/// 73 KB each), as the raw misses' `SET ... PX`.
#[derive(Debug, CacheKey)]
#[cache_key(namespace = "library", operation = "fresh", hash_tag)]
struct Fresh {
    #[tenant]
    branch: u32,
    #[criterion]
    title: String,
    #[criterion]
    page: u32,
}

impl CachedQuery for Fresh {
    type Value = Vec<Book>;
    const VALUE_ID: &'static str = "Vec<Book>";
    const TTL: Duration = Duration::from_secs(5);
}

/// [`Fresh::TTL`] in milliseconds, for the raw misses' `PX`.
const FRESH_PX: u64 = 5_000;

fn query(branch: u32, page: u32) -> Search {
    Search {
        branch,
        title: "Sand".to_owned(),
        page,
    }
}

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(default)
}

/// The two values of the targets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Size {
    /// A page of 6 books: 700 bytes of JSON.
    Small,
    /// 620 books: 73 KB of JSON.
    Large,
}

impl Size {
    /// `SIZES` (`small,large` by default).
    fn chosen() -> Vec<Size> {
        let sizes = std::env::var("SIZES").unwrap_or_else(|_| "small,large".to_owned());
        sizes.split(',').map(Size::named).collect()
    }

    fn named(name: &str) -> Size {
        match name.trim() {
            "small" => Size::Small,
            "large" => Size::Large,
            other => panic!("SIZE(S) is small or large, not {other:?}"),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Size::Small => "small",
            Size::Large => "large",
        }
    }

    fn label(self) -> &'static str {
        match self {
            Size::Small => "700 B",
            Size::Large => "73 KB",
        }
    }

    fn value(self) -> Vec<Book> {
        match self {
            Size::Small => page(6, 12),
            Size::Large => page(620, 12),
        }
    }

    /// A tenant of each value and section of its own, so that no key of
    /// one is another's.
    fn branch(self, section: u32) -> u32 {
        section * 10
            + match self {
                Size::Small => 1,
                Size::Large => 2,
            }
    }
}

/// The server: one of this run's own, or the one `REDIS_URL` names (a
/// profile run under valgrind uses its parent's).
enum Redis {
    Own(redis_server::Server),
    Given(String),
}

impl Redis {
    fn start() -> Option<Redis> {
        match std::env::var("REDIS_URL") {
            Ok(url) => Some(Redis::Given(url)),
            Err(_) => redis_server::Server::start(false).map(Redis::Own),
        }
    }

    fn url(&self) -> String {
        match self {
            Redis::Own(server) => server.url(),
            Redis::Given(url) => url.clone(),
        }
    }

    fn connect(&self) -> redis::Connection {
        match self {
            Redis::Own(server) => server.connect(),
            Redis::Given(url) => redis::Client::open(url.as_str())
                .and_then(|client| client.get_connection())
                .expect("a connection to REDIS_URL"),
        }
    }
}

fn runtime() -> Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

// Each variant's call, in a function of its own that is never inlined:
// what callgrind's breakdown starts from, and the same code the timings
// run.

/// A hit of `cache` (strict, or in process).
#[inline(never)]
fn hit_cache(cache: &RedisCache, query: &Search) -> Option<Vec<Book>> {
    cache.get(query).unwrap()
}

/// A raw hit: `GET` and the JSON decoded.
#[inline(never)]
fn hit_raw(connection: &mut redis::Connection, key: &str) -> Vec<Book> {
    let bytes: Vec<u8> = connection.get(key).unwrap();
    serde_json::from_slice(&bytes).unwrap()
}

/// The keys a hand-written strict read of `query`'s value names: the three
/// counters a strict hit of `query` reads (its namespace's, tenant's and
/// operation's, by their real names), and the raw value's key.
#[derive(Debug, Clone)]
struct StrictKeys {
    counters: [String; 3],
    key: String,
}

impl StrictKeys {
    fn new(query: &Search, key: &str) -> StrictKeys {
        let name = |scope: GenerationScope| scope.counter().name();
        StrictKeys {
            counters: [
                name(GenerationScope::namespace::<Search>()),
                name(GenerationScope::tenant_of(query).unwrap()),
                name(GenerationScope::operation_of(query).unwrap()),
            ],
            key: key.to_owned(),
        }
    }

    /// A strict hit's four commands, written by hand: the counters' `MGET`,
    /// `CLIENT GETNAME`, `WAIT 0 0` and the value's `GET`.
    fn pipeline(&self) -> redis::Pipeline {
        let mut pipeline = redis::pipe();
        pipeline
            .cmd("MGET")
            .arg(&self.counters[..])
            .cmd("CLIENT")
            .arg("GETNAME")
            .cmd("WAIT")
            .arg(0)
            .arg(0)
            .cmd("GET")
            .arg(&self.key);
        pipeline
    }
}

/// A strict hit's replies, each decoded to its type (the counters, the
/// connection's name, the replicas `WAIT` counted, the value's JSON) and
/// not judged.
type StrictReplies = (Vec<Option<String>>, Option<String>, i64, Vec<u8>);

/// The floor under a strict hit: the same four commands in one pipeline,
/// written by hand with the `redis` crate (the pipeline made for each
/// call, as `hit_raw` makes its `GET`), then the JSON decoded.
#[inline(never)]
fn hit_raw_strict(connection: &mut redis::Connection, keys: &StrictKeys) -> Vec<Book> {
    let (_, _, _, bytes): StrictReplies = keys.pipeline().query(connection).unwrap();
    serde_json::from_slice(&bytes).unwrap()
}

async fn hit_cache_async(cache: &AsyncRedisCache, query: &Search) -> Option<Vec<Book>> {
    cache.get(query).await.unwrap()
}

/// A raw hit on a clone of `connection` (as the async pool clones its own).
async fn hit_raw_async(connection: &MultiplexedConnection, key: &str) -> Vec<Book> {
    let bytes: Vec<u8> = redis::AsyncCommands::get(&mut connection.clone(), key)
        .await
        .unwrap();
    serde_json::from_slice(&bytes).unwrap()
}

/// [`hit_raw_strict`] on a clone of `connection`, the async raw side's.
async fn hit_raw_strict_async(connection: &MultiplexedConnection, keys: &StrictKeys) -> Vec<Book> {
    let (_, _, _, bytes): StrictReplies = keys
        .pipeline()
        .query_async(&mut connection.clone())
        .await
        .unwrap();
    serde_json::from_slice(&bytes).unwrap()
}

/// A miss: `get_or_load` of a query never read, the origin answering a
/// clone of `value`.
#[inline(never)]
fn miss_cache(cache: &RedisCache, query: &Fresh, value: &[Book]) -> Vec<Book> {
    cache
        .get_or_load(query, || Ok::<_, ()>(value.to_vec()))
        .unwrap()
}

/// The async driver's miss, as [`miss_cache`].
async fn miss_cache_async(cache: &AsyncRedisCache, query: &Fresh, value: &[Book]) -> Vec<Book> {
    cache
        .get_or_load(query, || async { Ok::<_, ()>(value.to_vec()) })
        .await
        .unwrap()
}

/// A raw miss: `GET` (nil), then `SET ... PX` of a clone of `value`'s JSON.
#[inline(never)]
fn miss_raw(connection: &mut redis::Connection, key: &str, value: &[Book]) {
    let found: Option<Vec<u8>> = connection.get(key).unwrap();
    assert!(found.is_none());
    let bytes = serde_json::to_vec(&value.to_vec()).unwrap();
    let () = connection.pset_ex(key, bytes, FRESH_PX).unwrap();
}

/// A moka `get` by the query struct itself.
#[inline(never)]
fn hit_moka_struct(
    moka: &moka::sync::Cache<Search, Vec<Book>>,
    query: &Search,
) -> Option<Vec<Book>> {
    moka.get(query)
}

/// A moka `get` by a key string.
#[inline(never)]
fn hit_moka_key(moka: &moka::sync::Cache<String, Vec<Book>>, key: &str) -> Option<Vec<Book>> {
    moka.get(key)
}

/// A moka `get` by `query`'s key written into `buffer`, reused: the least a
/// level found by the key costs (target 6's floor while the key is written).
#[inline(never)]
fn hit_moka_written(
    moka: &moka::sync::Cache<String, Vec<Book>>,
    query: &Search,
    buffer: &RefCell<String>,
) -> Option<Vec<Book>> {
    let mut key = buffer.borrow_mut();
    key.clear();
    query.write_key(1, &mut key).unwrap();
    moka.get(key.as_str())
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

/// The targets as measured: one row per comparison.
#[derive(Default)]
struct Summary {
    rows: Vec<Row>,
}

struct Row {
    target: u8,
    what: String,
    size: &'static str,
    driver: &'static str,
    ratio: Spread,
    /// The target, and whether the ratio must be at least it (throughput)
    /// rather than at most.
    limit: f64,
    at_least: bool,
    /// The floor under the thing, as a ratio to the same raw alternative,
    /// and the thing over the floor.
    floor: Option<(Spread, Spread)>,
}

impl Row {
    /// Gives the row its floor: `floor` over the raw alternative, and the
    /// thing over `floor`, each per round.
    fn floor(&mut self, floor: Spread, over: Spread) {
        self.floor = Some((floor, over));
    }
}

impl Summary {
    #[allow(clippy::too_many_arguments)]
    fn add(
        &mut self,
        target: u8,
        what: impl Into<String>,
        size: Size,
        driver: &'static str,
        ratio: Spread,
        limit: f64,
        at_least: bool,
    ) -> &mut Row {
        self.rows.push(Row {
            target,
            what: what.into(),
            size: size.label(),
            driver,
            ratio,
            limit,
            at_least,
            floor: None,
        });
        self.rows.last_mut().unwrap()
    }

    fn print(&self) {
        if self.rows.is_empty() {
            return;
        }
        println!("\n## The issue's targets: each ratio to its raw alternative, median (range)\n");
        println!(
            "Floor: the same strict hit's four commands (`MGET` of its three counters, \
             `CLIENT GETNAME`, `WAIT 0 0`, `GET`) written by hand with the `redis` crate in one \
             pipeline on the raw side's connections, then the JSON decoded, over the raw \
             alternative; over floor: the thing over that floor. Each per round, as the ratio.\n"
        );
        println!("| # | comparison | value | driver | ratio | target | met | floor | over floor |");
        println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- |");
        let mut rows: Vec<&Row> = self.rows.iter().collect();
        rows.sort_by_key(|row| row.target);
        for row in rows {
            let met = match row.at_least {
                true => row.ratio.median >= row.limit,
                false => row.ratio.median <= row.limit,
            };
            let spread = |s: &Spread| format!("{:.2} ({:.2}-{:.2})", s.median, s.lo, s.hi);
            let (floor, over) = match &row.floor {
                Some((floor, over)) => (spread(floor), spread(over)),
                None => ("-".to_owned(), "-".to_owned()),
            };
            println!(
                "| {} | {} | {} | {} | {} | {} {:.2} | {} | {floor} | {over} |",
                row.target,
                row.what,
                row.size,
                row.driver,
                spread(&row.ratio),
                if row.at_least { ">=" } else { "<=" },
                row.limit,
                if met { "yes" } else { "**no**" },
            );
        }
    }
}

fn main() {
    // `cargo bench` passes `--bench`; nothing else is taken.
    let rounds = env("ROUNDS", 7);
    let ops = env("OPS", 2000);
    let Some(redis) = Redis::start() else {
        println!("redis-server not on PATH: nothing measured");
        return;
    };
    if let Ok(variant) = std::env::var("PROFILE") {
        let size = Size::named(&std::env::var("SIZE").unwrap_or_else(|_| "small".to_owned()));
        profile(&redis, &variant, size, ops);
        return;
    }
    let only = std::env::var("ONLY").ok();
    let wanted = |section: &str| {
        only.as_deref()
            .is_none_or(|only| only.split(',').any(|s| s.trim() == section))
    };
    let sizes = Size::chosen();
    let runtime = runtime();
    let mut summary = Summary::default();
    println!(
        "{rounds} rounds; medians (ranges over the rounds); values: {}",
        sizes
            .iter()
            .map(|size| format!(
                "{} = {} bytes of JSON",
                size.label(),
                serde_json::to_vec(&size.value()).unwrap().len()
            ))
            .collect::<Vec<_>>()
            .join(", ")
    );
    // First, while no tracked cache's listener sends its heartbeats.
    if wanted("server") {
        let calls = env("SERVER_OPS", 5000);
        println!(
            "\n## Server (targets 1, 2): runs of {calls} strict hits of one variant alone, \
             the variants in turn; per hit"
        );
        for &size in &sizes {
            measure_server(&redis, &runtime, size, rounds, calls, &mut summary);
        }
    }
    if wanted("tier") {
        println!(
            "\n## Tier (targets 3, 4): {ops} calls per variant and round, interleaved one by one"
        );
        for &size in &sizes {
            measure_tier(&redis, &runtime, size, rounds, ops, &mut summary);
        }
    }
    if wanted("levels") {
        println!(
            "\n## Two levels (target 6): through Redis {ops} calls interleaved one by one; \
             in process {} blocks of 64 calls, the median block",
            ops * 20 / 64
        );
        for &size in &sizes {
            measure_levels(&redis, &runtime, size, rounds, ops, &mut summary);
        }
    }
    if wanted("instructions") {
        measure_instructions(&redis, &sizes, &mut summary);
    }
    summary.print();
}

/// One value's strict caches (both drivers) and its raw alternatives, each
/// on connections of its own.
struct Tier {
    value: Vec<Book>,
    hit: Search,
    raw_key: String,
    cache: RedisCache,
    async_cache: Arc<AsyncRedisCache>,
    raw: RefCell<redis::Connection>,
    raw_async: MultiplexedConnection,
    /// The raw strict read's keys (the floor under a strict hit).
    strict: StrictKeys,
    /// The name the cache's connections gave themselves, which the raw
    /// side's take too (`CLIENT GETNAME` answers the floor as many bytes).
    name: String,
}

impl Tier {
    /// Stores `size`'s value under tenant `branch` and checks that every
    /// variant reads it back the same.
    fn new(redis: &Redis, runtime: &Runtime, size: Size, branch: u32) -> Tier {
        let url = redis.url();
        let value = size.value();
        let pool = RedisPool::builder().max_size(8).open(url.as_str()).unwrap();
        let cache = RedisCache::new(RedisGenerations::new(pool));
        let hit = query(branch, 0);
        cache.insert(&hit, value.clone()).unwrap();
        let raw_key = format!("raw:hit:{branch}");
        let mut raw = redis.connect();
        let () = raw
            .set(&raw_key, serde_json::to_vec(&value).unwrap())
            .unwrap();
        let name = cache_connection_name(&mut raw);
        set_name(&mut raw, &name);
        let (async_cache, raw_async) = runtime.block_on(async {
            let pool = AsyncRedisPool::connect(url.as_str()).await.unwrap();
            let client = redis::Client::open(url.as_str()).unwrap();
            let mut raw = client.get_multiplexed_async_connection().await.unwrap();
            let () = redis::cmd("CLIENT")
                .arg("SETNAME")
                .arg(&name)
                .query_async(&mut raw)
                .await
                .unwrap();
            (AsyncRedisCache::new(AsyncRedisGenerations::new(pool)), raw)
        });
        let strict = StrictKeys::new(&hit, &raw_key);
        let tier = Tier {
            value,
            hit,
            raw_key,
            cache,
            async_cache: Arc::new(async_cache),
            raw: RefCell::new(raw),
            raw_async,
            strict,
            name,
        };
        tier.check(runtime);
        tier
    }

    /// A connection of the raw side's own, named as the cache's are.
    fn connect(&self, redis: &Redis) -> redis::Connection {
        let mut connection = redis.connect();
        set_name(&mut connection, &self.name);
        connection
    }

    /// Every variant returns the value stored.
    fn check(&self, runtime: &Runtime) {
        assert_eq!(
            hit_cache(&self.cache, &self.hit).as_ref(),
            Some(&self.value)
        );
        assert_eq!(self.raw_hit(), self.value);
        assert_eq!(self.raw_strict_hit(), self.value);
        runtime.block_on(async {
            let found = hit_cache_async(&self.async_cache, &self.hit).await;
            assert_eq!(found.as_ref(), Some(&self.value));
            assert_eq!(
                hit_raw_async(&self.raw_async, &self.raw_key).await,
                self.value
            );
            assert_eq!(
                hit_raw_strict_async(&self.raw_async, &self.strict).await,
                self.value
            );
        });
        // The floor reads the counters the cache's hits read, which exist,
        // and its connections answer `CLIENT GETNAME` with the cache's name.
        let (counters, name, replicas, _): StrictReplies = (self.strict.pipeline())
            .query(&mut *self.raw.borrow_mut())
            .unwrap();
        assert!(
            counters.iter().all(Option::is_some),
            "{:?}: {counters:?}",
            self.strict.counters
        );
        assert_eq!(name.as_deref(), Some(self.name.as_str()));
        assert_eq!(replicas, 0);
    }

    fn raw_hit(&self) -> Vec<Book> {
        hit_raw(&mut self.raw.borrow_mut(), &self.raw_key)
    }

    fn raw_strict_hit(&self) -> Vec<Book> {
        hit_raw_strict(&mut self.raw.borrow_mut(), &self.strict)
    }
}

/// The name a connection of the cache's pools gave itself (`CLIENT
/// SETNAME`, when it learned its server), from `CLIENT LIST`.
fn cache_connection_name(connection: &mut redis::Connection) -> String {
    let clients: String = redis::cmd("CLIENT").arg("LIST").query(connection).unwrap();
    clients
        .lines()
        .flat_map(|client| client.split(' '))
        .filter_map(|field| field.strip_prefix("name="))
        .find(|name| name.starts_with("cache-key:"))
        .unwrap_or_else(|| panic!("no connection of the cache's in CLIENT LIST:\n{clients}"))
        .to_owned()
}

/// `CLIENT SETNAME name` on `connection`.
fn set_name(connection: &mut redis::Connection, name: &str) {
    let () = redis::cmd("CLIENT")
        .arg("SETNAME")
        .arg(name)
        .query(connection)
        .unwrap();
}

/// Targets 1 and 2: what the server spends per strict hit, against a raw
/// `GET`, each variant's run alone.
fn measure_server(
    redis: &Redis,
    runtime: &Runtime,
    size: Size,
    rounds: usize,
    calls: usize,
    summary: &mut Summary,
) {
    let tier = Tier::new(redis, runtime, size, size.branch(1));
    let mut admin = redis.connect();
    // Idle, for scale: what the server's cron costs a second.
    let idle = {
        let before = server_stats::cpu_seconds(&mut admin);
        thread::sleep(Duration::from_millis(500));
        (server_stats::cpu_seconds(&mut admin) - before) * 2e6
    };
    let names = [
        "RedisCache::get",
        "raw GET + JSON",
        "AsyncRedisCache::get",
        "raw async GET + JSON",
        "raw strict pipeline",
        "raw async strict pipeline",
    ];
    let mut runs: [Vec<ServerRun>; 6] = Default::default();
    for round in 0..rounds {
        let mut order = [0, 1, 2, 3, 4, 5];
        if round % 2 == 1 {
            order.reverse();
        }
        for variant in order {
            let run = server_run(&mut admin, calls, || match variant {
                0 => (0..calls).for_each(|_| drop(black_box(hit_cache(&tier.cache, &tier.hit)))),
                1 => (0..calls).for_each(|_| drop(black_box(tier.raw_hit()))),
                2 => runtime.block_on(async {
                    for _ in 0..calls {
                        drop(black_box(
                            hit_cache_async(&tier.async_cache, &tier.hit).await,
                        ));
                    }
                }),
                3 => runtime.block_on(async {
                    for _ in 0..calls {
                        drop(black_box(
                            hit_raw_async(&tier.raw_async, &tier.raw_key).await,
                        ));
                    }
                }),
                4 => (0..calls).for_each(|_| drop(black_box(tier.raw_strict_hit()))),
                _ => runtime.block_on(async {
                    for _ in 0..calls {
                        drop(black_box(
                            hit_raw_strict_async(&tier.raw_async, &tier.strict).await,
                        ));
                    }
                }),
            });
            runs[variant].push(run);
        }
    }
    println!(
        "\nvalue {} (server idle: {idle:.0} us of CPU a second)",
        size.label()
    );
    for (variant, name) in names.iter().enumerate() {
        let of = |pick: fn(&ServerRun) -> f64| {
            Spread::of(&runs[variant].iter().map(pick).collect::<Vec<_>>())
        };
        let (usec, cpu) = (of(|run| run.usec), of(|run| run.cpu_us));
        let wall = of(|run| run.wall_us).median;
        println!(
            "  {name:<25} commands {:>6.2} us ({:.2}-{:.2})  CPU {:>6.2} us ({:.2}-{:.2}; \
             idle's share {:.2})  wall {wall:.0} us  [{}]",
            usec.median,
            usec.lo,
            usec.hi,
            cpu.median,
            cpu.lo,
            cpu.hi,
            idle * wall / 1e6,
            ServerRun::breakdown(&runs[variant].iter().collect::<Vec<_>>()),
        );
    }
    for (driver, thing, raw, floor) in [("blocking", 0, 1, 4), ("async", 2, 3, 5)] {
        // Each round's `of` run over its `to` run.
        let ratio = |of: usize, to: usize, pick: fn(&ServerRun) -> f64| {
            let ratios: Vec<f64> = (runs[of].iter().zip(&runs[to]))
                .map(|(of, to)| pick(of) / pick(to))
                .collect();
            Spread::of(&ratios)
        };
        let usec = |of, to| ratio(of, to, |run| run.usec);
        let cpu = |of, to| ratio(of, to, |run| run.cpu_us);
        for (what, of, to) in [
            ("strict hit / raw GET", thing, raw),
            ("floor (targets 1, 2): raw strict / GET", floor, raw),
            ("strict hit over the floor", thing, floor),
        ] {
            let (usec, cpu) = (usec(of, to), cpu(of, to));
            println!(
                "  {driver:<9} {what:<38} commands {:.2} ({:.2}-{:.2}), CPU {:.2} ({:.2}-{:.2})",
                usec.median, usec.lo, usec.hi, cpu.median, cpu.lo, cpu.hi
            );
        }
        summary
            .add(
                1,
                "server command time per strict hit / raw GET's",
                size,
                driver,
                usec(thing, raw),
                2.0,
                false,
            )
            .floor(usec(floor, raw), usec(thing, floor));
        summary
            .add(
                2,
                "server process CPU per strict hit / raw GET's",
                size,
                driver,
                cpu(thing, raw),
                1.10,
                false,
            )
            .floor(cpu(floor, raw), cpu(thing, floor));
    }
}

/// Targets 3 and 4: a hit's latency and a miss's, one caller, both
/// drivers; 8 threads' and 8 tasks' throughput of hits.
fn measure_tier(
    redis: &Redis,
    runtime: &Runtime,
    size: Size,
    rounds: usize,
    ops: usize,
    summary: &mut Summary,
) {
    let branch = size.branch(2);
    let tier = Tier::new(redis, runtime, size, branch);
    let (value, hit) = (&tier.value, &tier.hit);
    // Raw connections for 8 threads, one each, as a pool of 8 gives.
    let raw_pool: Vec<std::sync::Mutex<redis::Connection>> = (0..8)
        .map(|_| std::sync::Mutex::new(tier.connect(redis)))
        .collect();
    let misses = AtomicU64::new(0);
    // The first read of `Fresh` makes its operation's counter: not timed.
    let warm = Fresh {
        branch,
        title: "warm".to_owned(),
        page: 0,
    };
    let _ = miss_cache(&tier.cache, &warm, value);
    let _ = runtime.block_on(tier.async_cache.get(&warm));
    let hit_shared = Arc::new(hit.clone());
    let strict_shared = Arc::new(tier.strict.clone());
    // Each hit against the raw GET and the floor, the raw strict read.
    let mut hits = [
        ("hit, 1 thread", "raw strict pipeline, 1 thread", "ns"),
        ("hit, 1 task (async)", "raw strict pipeline, 1 task", "ns"),
        ("hit, 8 threads (pool of 8)", "raw strict, 8 threads", "k/s"),
        ("hit, 8 tasks (async)", "raw strict, 8 tasks", "k/s"),
    ]
    .map(|(name, floor, unit)| Floored::new(name, floor, unit, unit == "k/s"));
    // The one-caller hits again, by the process's CPU clock.
    let mut cpus = [
        ("client CPU per hit, 1 thread", "raw strict, 1 thread"),
        ("client CPU per hit, 1 task", "raw strict, 1 task"),
    ]
    .map(|(name, floor)| Floored::new(name, floor, "ns", false));
    let mut misses_cases = [
        Case::new("miss (read + SET), 1 thread", "ns", false),
        Case::new("miss (read + SET), 1 task (async)", "ns", false),
    ];
    // A query, or a raw key, never read before.
    let fresh = || {
        let n = misses.fetch_add(1, Ordering::Relaxed);
        let page = u32::try_from(n + 1).unwrap();
        let query = Fresh {
            branch,
            title: "Sand".to_owned(),
            page,
        };
        (query, format!("raw:miss:{branch}:{n}"))
    };
    for round in 0..rounds {
        let [hit_case, async_hit, threads_case, tasks_case] = &mut hits;
        let [hit_cpu, async_cpu] = &mut cpus;
        let [miss_case, async_miss] = &mut misses_cases;
        // The hit, the raw GET and the floor, one of each in turn: timed,
        // then again by the process's CPU clock (a system call a read,
        // kept out of the timed calls).
        let mut blocking = |variant, _| match variant {
            0 => drop(black_box(hit_cache(&tier.cache, hit))),
            1 => drop(black_box(tier.raw_hit())),
            _ => drop(black_box(tier.raw_strict_hit())),
        };
        let ns = per_calls(ops, 3, &mut blocking);
        hit_case.push([ns[0], ns[1], ns[2]]);
        let ns = per_calls_by(Clock::ProcessCpu, ops, 3, &mut blocking);
        hit_cpu.push([ns[0], ns[1], ns[2]]);
        let mut async_hits = async |variant, _| match variant {
            0 => drop(black_box(hit_cache_async(&tier.async_cache, hit).await)),
            1 => drop(black_box(
                hit_raw_async(&tier.raw_async, &tier.raw_key).await,
            )),
            _ => drop(black_box(
                hit_raw_strict_async(&tier.raw_async, &tier.strict).await,
            )),
        };
        let ns = runtime.block_on(per_calls_async(ops, 3, &mut async_hits));
        async_hit.push([ns[0], ns[1], ns[2]]);
        let ns = runtime.block_on(per_calls_async_by(
            Clock::ProcessCpu,
            ops,
            3,
            &mut async_hits,
        ));
        async_cpu.push([ns[0], ns[1], ns[2]]);
        miss_case.push(per_call(
            ops,
            |_| drop(black_box(miss_cache(&tier.cache, &fresh().0, value))),
            |_| miss_raw(&mut tier.raw.borrow_mut(), &fresh().1, value),
        ));
        async_miss.push(runtime.block_on(per_call_async(
            ops,
            async |_| {
                let (query, _) = fresh();
                let loaded = (tier.async_cache)
                    .get_or_load(&query, || async { Ok::<_, ()>(value.clone()) })
                    .await;
                black_box(loaded.unwrap());
            },
            async |_| {
                let (_, key) = fresh();
                let mut raw = tier.raw_async.clone();
                let found: Option<Vec<u8>> =
                    redis::AsyncCommands::get(&mut raw, &key).await.unwrap();
                assert!(found.is_none());
                let bytes = serde_json::to_vec(&value.clone()).unwrap();
                let () = redis::AsyncCommands::pset_ex(&mut raw, &key, bytes, FRESH_PX)
                    .await
                    .unwrap();
            },
        )));
        let per_thread = ops / 2;
        let ks = in_turn(
            round,
            &mut [
                &mut || {
                    throughput(8, per_thread, |_, _| {
                        drop(black_box(hit_cache(&tier.cache, hit)))
                    }) / 1000.0
                },
                &mut || {
                    throughput(8, per_thread, |t, _| {
                        drop(black_box(hit_raw(
                            &mut raw_pool[t].lock().unwrap(),
                            &tier.raw_key,
                        )))
                    }) / 1000.0
                },
                &mut || {
                    throughput(8, per_thread, |t, _| {
                        drop(black_box(hit_raw_strict(
                            &mut raw_pool[t].lock().unwrap(),
                            &tier.strict,
                        )))
                    }) / 1000.0
                },
            ],
        );
        threads_case.push([ks[0], ks[1], ks[2]]);
        let ks = in_turn(
            round,
            &mut [
                &mut || cache_tasks(runtime, &tier.async_cache, &hit_shared, per_thread),
                &mut || raw_tasks(runtime, &tier.raw_async, &tier.raw_key, per_thread),
                &mut || raw_strict_tasks(runtime, &tier.raw_async, &strict_shared, per_thread),
            ],
        );
        tasks_case.push([ks[0], ks[1], ks[2]]);
    }
    println!("\nvalue {}", size.label());
    let [hit_case, async_hit, threads_case, tasks_case] = &hits;
    let [miss_case, async_miss] = &misses_cases;
    for floored in [hit_case, async_hit].into_iter().chain(&cpus) {
        floored.report();
    }
    for case in [miss_case, async_miss] {
        case.report();
    }
    for floored in [threads_case, tasks_case] {
        floored.report();
    }
    let latency = "hit latency / raw GET + JSON decode";
    for (driver, floored) in [("blocking", hit_case), ("async", async_hit)] {
        summary
            .add(3, latency, size, driver, floored.thing.ratio(), 1.10, false)
            .floor(floored.floor.ratio(), floored.over.ratio());
    }
    let parallel = "hit throughput / raw's";
    for (driver, floored) in [("8 threads", threads_case), ("8 tasks", tasks_case)] {
        summary
            .add(3, parallel, size, driver, floored.thing.ratio(), 0.90, true)
            .floor(floored.floor.ratio(), floored.over.ratio());
    }
    let miss = "miss / raw GET + SET";
    summary.add(4, miss, size, "blocking", miss_case.ratio(), 1.20, false);
    summary.add(4, miss, size, "async", async_miss.ratio(), 1.20, false);
    assert_eq!(tier.cache.stats().errors, 0, "{:?}", tier.cache.stats());
    assert_eq!(tier.async_cache.stats().errors, 0);
}

/// Two levels over tracked counters, once its subscription is up.
fn tracked_cache(pool: RedisPool, tracking: Tracking) -> RedisCache {
    let tracked = RedisCache::new(RedisGenerations::tracked(pool, tracking)).with_local(100);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !tracked.store().is_tracking() {
        assert!(Instant::now() < deadline, "tracking never started");
        thread::sleep(Duration::from_millis(5));
    }
    tracked
}

/// The async twin of [`tracked_cache`], on `runtime`.
fn async_tracked_cache(runtime: &Runtime, url: &str, tracking: Tracking) -> AsyncRedisCache {
    runtime.block_on(async {
        let pool = AsyncRedisPool::connect(url).await.unwrap();
        let tracked =
            AsyncRedisCache::new(AsyncRedisGenerations::tracked(pool, tracking)).with_local(100);
        let deadline = Instant::now() + Duration::from_secs(10);
        while !tracked.store().is_tracking() {
            assert!(Instant::now() < deadline, "tracking never started");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        tracked
    })
}

/// Reads `query` three times 50 ms apart through `get`, so that the
/// counters' first raise has come back as a message and been read again:
/// the hits after are in process.
fn settle(value: &Vec<Book>, mut get: impl FnMut() -> Option<Vec<Book>>) {
    for _ in 0..3 {
        assert_eq!(get().as_ref(), Some(value));
        thread::sleep(Duration::from_millis(50));
    }
}

/// A moka cache keyed by the query struct, holding `value` under `query`;
/// with `ttl`, built with that time to live (as the level in process is).
fn moka_by_struct(
    query: &Search,
    value: &[Book],
    ttl: Option<Duration>,
) -> moka::sync::Cache<Search, Vec<Book>> {
    let mut builder = moka::sync::Cache::builder().max_capacity(100);
    if let Some(ttl) = ttl {
        builder = builder.time_to_live(ttl);
    }
    let moka = builder.build();
    moka.insert(query.clone(), value.to_vec());
    moka
}

/// The two levels (`with_local`) against one level and raw reads: a strict
/// hit in process (the counters' round trip, no value), a tracked hit (no
/// round trip, target 6) against a moka `get` by the query struct (and by a
/// key string made once, with `cache_key`, with `format!`), the async
/// cache's tracked hit, and 8 threads or tasks of strict hits and 8
/// threads of tracked hits.
fn measure_levels(
    redis: &Redis,
    runtime: &Runtime,
    size: Size,
    rounds: usize,
    ops: usize,
    summary: &mut Summary,
) {
    let url = redis.url();
    let value = &size.value();
    let pool = || RedisPool::builder().max_size(8).open(url.as_str()).unwrap();
    let one_level = RedisCache::new(RedisGenerations::new(pool()));
    let two_levels = RedisCache::new(RedisGenerations::new(pool())).with_local(100);
    let tracked = tracked_cache(pool(), Tracking::default());
    let async_tracked = async_tracked_cache(runtime, &url, Tracking::default());
    let branch = size.branch(3);
    let hit = query(branch, 0);
    one_level.insert(&hit, value.clone()).unwrap();
    assert_eq!(hit_cache(&two_levels, &hit).as_ref(), Some(value));
    settle(value, || hit_cache(&tracked, &hit));
    settle(value, || {
        runtime.block_on(hit_cache_async(&async_tracked, &hit))
    });
    let mut raw = redis.connect();
    let raw_key = format!("raw:levels:{branch}");
    let () = raw
        .set(&raw_key, serde_json::to_vec(value).unwrap())
        .unwrap();
    let moka: moka::sync::Cache<String, Vec<Book>> = moka::sync::Cache::new(100);
    let moka_key = hit.cache_key(1).unwrap().into_string();
    moka.insert(moka_key.clone(), value.clone());
    moka.insert(hand_key(&hit), value.clone());
    let by_struct = moka_by_struct(&hit, value, None);
    let by_struct_ttl = moka_by_struct(&hit, value, Some(Search::TTL));
    // Every variant gives the value stored.
    assert_eq!(hit_cache(&one_level, &hit).as_ref(), Some(value));
    assert_eq!(hit_cache(&tracked, &hit).as_ref(), Some(value));
    assert_eq!(
        ready(hit_cache_async(&async_tracked, &hit)).as_ref(),
        Some(value)
    );
    assert_eq!(hit_moka_struct(&by_struct, &hit).as_ref(), Some(value));
    assert_eq!(hit_moka_struct(&by_struct_ttl, &hit).as_ref(), Some(value));
    assert_eq!(hit_moka_key(&moka, &moka_key).as_ref(), Some(value));
    assert_eq!(hit_moka_key(&moka, &hand_key(&hit)).as_ref(), Some(value));
    let buffer = RefCell::new(String::new());
    assert_eq!(hit_moka_written(&moka, &hit, &buffer).as_ref(), Some(value));
    assert_eq!(&hit_raw(&mut raw, &raw_key), value);
    let raw_pool: Vec<std::sync::Mutex<redis::Connection>> = (0..8)
        .map(|_| std::sync::Mutex::new(redis.connect()))
        .collect();
    let (async_levels, raw_async) = runtime.block_on(async {
        let pool = AsyncRedisPool::connect(url.as_str()).await.unwrap();
        let levels = AsyncRedisCache::new(AsyncRedisGenerations::new(pool)).with_local(100);
        assert_eq!(levels.get(&hit).await.unwrap().as_ref(), Some(value));
        let client = redis::Client::open(url.as_str()).unwrap();
        let raw = client.get_multiplexed_async_connection().await.unwrap();
        (Arc::new(levels), raw)
    });
    let hit_shared = Arc::new(hit.clone());

    let mut cases = [
        "tracked, hit in process: vs moka by query struct",
        "tracked async, hit: vs moka by query struct",
        "tracked, hit in process: vs moka by struct + TTL",
        "tracked, hit in process: vs moka get by key",
        "tracked, hit in process: vs moka + cache_key",
        "tracked, hit in process: vs moka + key in a reused buffer",
        "tracked, hit in process: vs moka + format!",
        "tracked async, hit: vs moka get by key",
        "two levels, hit: vs RedisCache hit",
        "two levels, hit: vs raw GET",
        "two levels, 8 threads: vs raw pool",
        "two levels, 8 tasks: vs raw async",
        "tracked, 8 threads: vs moka by query struct",
    ]
    .map(|name| {
        Case::new(
            name,
            if name.contains(" 8 ") { "k/s" } else { "ns" },
            name.contains(" 8 "),
        )
    });
    // In process: blocks of 64 calls, as many calls as 20 round-trip rounds.
    let (blocks, block) = ((ops * 20 / 64).max(1), 64);
    for round in 0..rounds {
        let [
            vs_struct,
            async_vs_struct,
            vs_struct_ttl,
            vs_moka,
            vs_moka_key,
            vs_moka_written,
            vs_moka_hand,
            async_vs_moka,
            vs_one,
            vs_raw,
            threads,
            tasks_case,
            tracked_threads,
        ] = &mut cases;
        let tracked_hit = || drop(black_box(hit_cache(&tracked, &hit)));
        let async_tracked_hit = || drop(black_box(ready(hit_cache_async(&async_tracked, &hit))));
        let struct_get = || drop(black_box(hit_moka_struct(&by_struct, &hit)));
        vs_struct.push(per_block(blocks, block, tracked_hit, struct_get));
        async_vs_struct.push(per_block(blocks, block, async_tracked_hit, struct_get));
        vs_struct_ttl.push(per_block(blocks, block, tracked_hit, || {
            drop(black_box(hit_moka_struct(&by_struct_ttl, &hit)))
        }));
        let key_get = || drop(black_box(hit_moka_key(&moka, &moka_key)));
        vs_moka.push(per_block(blocks, block, tracked_hit, key_get));
        // The raw side making its key for each `get`, as a cache by key must.
        vs_moka_key.push(per_block(blocks, block, tracked_hit, || {
            let key = hit.cache_key(1).unwrap();
            drop(black_box(hit_moka_key(&moka, key.as_str())));
        }));
        vs_moka_written.push(per_block(blocks, block, tracked_hit, || {
            drop(black_box(hit_moka_written(&moka, &hit, &buffer)))
        }));
        vs_moka_hand.push(per_block(blocks, block, tracked_hit, || {
            drop(black_box(hit_moka_key(&moka, &hand_key(&hit))))
        }));
        async_vs_moka.push(per_block(blocks, block, async_tracked_hit, key_get));
        let get = |cache: &RedisCache| drop(black_box(hit_cache(cache, &hit)));
        vs_one.push(per_call(ops, |_| get(&two_levels), |_| get(&one_level)));
        vs_raw.push(per_call(
            ops,
            |_| get(&two_levels),
            |_| drop(black_box(hit_raw(&mut raw, &raw_key))),
        ));
        let swap = round % 2 == 1;
        let per_thread = ops / 2;
        threads.pair(
            swap,
            &mut || throughput(8, per_thread, |_, _| get(&two_levels)) / 1000.0,
            &mut || {
                throughput(8, per_thread, |t, _| {
                    drop(black_box(hit_raw(
                        &mut raw_pool[t].lock().unwrap(),
                        &raw_key,
                    )))
                }) / 1000.0
            },
        );
        tasks_case.pair(
            swap,
            &mut || cache_tasks(runtime, &async_levels, &hit_shared, per_thread),
            &mut || raw_tasks(runtime, &raw_async, &raw_key, per_thread),
        );
        // In process only: as many calls per thread as one caller makes.
        tracked_threads.pair(
            swap,
            &mut || throughput(8, ops * 20 / 8, |_, _| get(&tracked)) / 1000.0,
            &mut || {
                throughput(8, ops * 20 / 8, |_, _| {
                    drop(black_box(hit_moka_struct(&by_struct, &hit)))
                }) / 1000.0
            },
        );
    }
    println!("\nvalue {}", size.label());
    for case in &cases {
        case.report();
    }
    let what = "tracked local hit / moka get by query struct (time)";
    summary.add(6, what, size, "blocking", cases[0].ratio(), 1.10, false);
    summary.add(6, what, size, "async", cases[1].ratio(), 1.10, false);
    for cache in [&one_level, &two_levels, &tracked] {
        assert_eq!(cache.stats().errors, 0);
    }
    for cache in [&*async_levels, &async_tracked] {
        assert_eq!(cache.stats().errors, 0);
    }
    assert!(tracked.store().is_tracking(), "tracking stayed up");
    assert!(async_tracked.store().is_tracking(), "tracking stayed up");
}

/// The key code without this crate would write for `query`: no tenant
/// scope, no escaping (two queries may share it), no generation.
fn hand_key(query: &Search) -> String {
    format!("search:{}:{}:{}", query.branch, query.title, query.page)
}

/// Thousands of `cache.get(hit)` a second, 8 tasks making `ops` each.
fn cache_tasks(
    runtime: &Runtime,
    cache: &Arc<AsyncRedisCache>,
    hit: &Arc<Search>,
    ops: usize,
) -> f64 {
    let (cache, hit) = (cache.clone(), hit.clone());
    runtime.block_on(tasks(8, ops, move |_| {
        let (cache, hit) = (cache.clone(), hit.clone());
        async move { drop(black_box(hit_cache_async(&cache, &hit).await)) }
    })) / 1000.0
}

/// Thousands of raw `GET`s of `key` + decodes a second on `connection`, 8
/// tasks making `ops` each.
fn raw_tasks(runtime: &Runtime, connection: &MultiplexedConnection, key: &str, ops: usize) -> f64 {
    let (connection, key): (_, Arc<str>) = (connection.clone(), key.into());
    runtime.block_on(tasks(8, ops, move |_| {
        let (connection, key) = (connection.clone(), key.clone());
        async move { drop(black_box(hit_raw_async(&connection, &key).await)) }
    })) / 1000.0
}

/// Thousands of raw strict reads (the floor) a second on `connection`, 8
/// tasks making `ops` each.
fn raw_strict_tasks(
    runtime: &Runtime,
    connection: &MultiplexedConnection,
    keys: &Arc<StrictKeys>,
    ops: usize,
) -> f64 {
    let (connection, keys) = (connection.clone(), keys.clone());
    runtime.block_on(tasks(8, ops, move |_| {
        let (connection, keys) = (connection.clone(), keys.clone());
        async move { drop(black_box(hit_raw_strict_async(&connection, &keys).await)) }
    })) / 1000.0
}

/// Target 5, and target 6 in instructions: each variant counted alone
/// under valgrind, against this run's server.
fn measure_instructions(redis: &Redis, sizes: &[Size], summary: &mut Summary) {
    if !instructions::valgrind_installed() {
        println!("\nvalgrind not on PATH: no instructions counted");
        return;
    }
    let (ops, repeat) = (env("IOPS", 2000), env("REPEAT", 3));
    println!(
        "\n## Instructions (targets 5, 6): the client's, per call, counted by cachegrind \
         (IOPS={ops} and twice as many calls, a tenth for 73 KB, the difference; \
         {repeat} pair(s) of runs, median (range)), and the fetches of them that miss \
         a simulated 32 KiB, 8-way L1 instruction cache"
    );
    let url = redis.url();
    // Each pair, with the floor under row 5's: the raw strict read.
    let pairs = [
        (
            5,
            "client instructions per hit / raw GET + JSON",
            "blocking",
            "cache",
            "raw",
            Some("raw_strict"),
        ),
        (
            5,
            "client instructions per hit / raw GET + JSON",
            "async",
            "cache_async",
            "raw_async",
            Some("raw_strict_async"),
        ),
        (
            6,
            "tracked local hit / moka get by query struct (instructions)",
            "blocking",
            "tracked",
            "moka_struct",
            None,
        ),
        (
            6,
            "tracked local hit / moka get by query struct (instructions)",
            "async",
            "tracked_async",
            "moka_struct",
            None,
        ),
        (
            6,
            "floor: moka get by the key in a reused buffer / moka by query struct (instructions)",
            "-",
            "moka_written",
            "moka_struct",
            None,
        ),
    ];
    for &size in sizes {
        let ops = match size {
            Size::Small => ops,
            Size::Large => (ops / 10).max(1),
        };
        let mut counted: Vec<(&str, Vec<f64>)> = Vec::new();
        let mut count = |profile: &'static str| -> Vec<f64> {
            if let Some((_, counts)) = counted.iter().find(|(name, _)| *name == profile) {
                return counts.clone();
            }
            let runs: Vec<instructions::PerCall> = (0..repeat.max(1))
                .map(|_| instructions::per_call(&url, profile, size.name(), ops, 1))
                .collect();
            let counts: Vec<f64> = runs.iter().map(|run| run.instructions).collect();
            let misses: Vec<f64> = runs.iter().map(|run| run.i1_misses).collect();
            let (spread, misses) = (Spread::of(&counts), Spread::of(&misses));
            println!(
                "  {} {profile:<16} {:>10.0} instructions per call ({:.0}-{:.0}), \
                 {:.0} L1i misses ({:.0}-{:.0})",
                size.label(),
                spread.median,
                spread.lo,
                spread.hi,
                misses.median,
                misses.lo,
                misses.hi
            );
            counted.push((profile, counts.clone()));
            counts
        };
        // Each pair of runs' `of` count over its `to` count.
        let ratio = |of: &[f64], to: &[f64]| {
            let ratios: Vec<f64> = of.iter().zip(to).map(|(of, to)| of / to).collect();
            Spread::of(&ratios)
        };
        for (target, what, driver, thing, raw, floor) in pairs {
            let (thing, raw) = (count(thing), count(raw));
            let row = summary.add(
                target,
                what,
                size,
                driver,
                ratio(&thing, &raw),
                if target == 5 { 1.5 } else { 1.10 },
                false,
            );
            if let Some(floor) = floor {
                let floor = count(floor);
                row.floor(ratio(&floor, &raw), ratio(&thing, &floor));
            }
        }
    }
    // The readable key's digest, natively (valgrind hides the CPU's SHA
    // extensions, so sha2 counts its software path there).
    let mut readable = String::new();
    query(1, 0)
        .write_readable_key(655_754_081_806_794, &mut readable)
        .unwrap();
    let calls = 200_000;
    let started = Instant::now();
    for _ in 0..calls {
        black_box(<sha2::Sha256 as sha2::Digest>::digest(black_box(
            readable.as_bytes(),
        )));
    }
    println!(
        "  SHA-256 of the readable key ({} bytes), natively: {:.0} ns",
        readable.len(),
        started.elapsed().as_nanos() as f64 / calls as f64
    );
}

/// `ops` calls of `variant` alone at `size`, after three warm-up calls:
/// for valgrind (`benches/redis_instructions.sh`, `benches/redis_callgrind.sh`)
/// and for the server's counts, printed after the calls.
fn profile(redis: &Redis, variant: &str, size: Size, ops: usize) {
    match variant {
        "cache" | "raw" | "cache_async" | "raw_async" | "raw_strict" | "raw_strict_async"
        | "miss" | "miss_async" | "raw_miss" => profile_tier(redis, variant, size, ops),
        "tracked" | "tracked_async" | "moka_struct" | "moka_struct_ttl" | "moka" | "moka_key"
        | "moka_written" | "moka_hand" => profile_in_process(redis, variant, size, ops),
        other => panic!("no PROFILE {other:?}"),
    }
}

/// `ops` calls of `call`: the profiled calls, apart from the warm-up ones
/// (`benches/redis_callgrind.sh` counts this function's instructions alone).
#[inline(never)]
fn measured(ops: usize, call: &dyn Fn()) {
    for _ in 0..ops {
        call();
    }
}

fn profile_tier(redis: &Redis, variant: &str, size: Size, ops: usize) {
    let runtime = runtime();
    let branch = size.branch(4);
    let tier = Tier::new(redis, &runtime, size, branch);
    let mut admin = redis.connect();
    // Misses: each of a query, or a raw key, never read before, kept 5 s.
    let misses = std::cell::Cell::new(0u32);
    let fresh = || {
        misses.set(misses.get() + 1);
        let n = misses.get();
        // Unique to this process too: profile runs may share a server.
        let pid = std::process::id();
        let query = Fresh {
            branch,
            title: format!("miss {pid}"),
            page: n,
        };
        (query, format!("raw:miss:{branch}:{pid}:{n}"))
    };
    let run: Box<dyn Fn()> = match variant {
        "cache" => Box::new(|| drop(black_box(hit_cache(&tier.cache, &tier.hit)))),
        "raw" => Box::new(|| drop(black_box(tier.raw_hit()))),
        "raw_strict" => Box::new(|| drop(black_box(tier.raw_strict_hit()))),
        "miss" => Box::new(|| drop(black_box(miss_cache(&tier.cache, &fresh().0, &tier.value)))),
        "raw_miss" => Box::new(|| miss_raw(&mut tier.raw.borrow_mut(), &fresh().1, &tier.value)),
        "cache_async" => Box::new(|| {
            runtime.block_on(async {
                drop(black_box(
                    hit_cache_async(&tier.async_cache, &tier.hit).await,
                ))
            })
        }),
        "miss_async" => Box::new(|| {
            runtime.block_on(async {
                drop(black_box(
                    miss_cache_async(&tier.async_cache, &fresh().0, &tier.value).await,
                ))
            })
        }),
        "raw_strict_async" => Box::new(|| {
            runtime.block_on(async {
                drop(black_box(
                    hit_raw_strict_async(&tier.raw_async, &tier.strict).await,
                ))
            })
        }),
        _ => Box::new(|| {
            runtime.block_on(async {
                drop(black_box(
                    hit_raw_async(&tier.raw_async, &tier.raw_key).await,
                ))
            })
        }),
    };
    (0..3).for_each(|_| run());
    let stats = server_run(&mut admin, ops, || {
        if variant.ends_with("_async") {
            // One task awaiting every call, as a service's handler would.
            measured(1, &|| {
                runtime.block_on(async {
                    for _ in 0..ops {
                        match variant {
                            "cache_async" => drop(black_box(
                                hit_cache_async(&tier.async_cache, &tier.hit).await,
                            )),
                            "miss_async" => drop(black_box(
                                miss_cache_async(&tier.async_cache, &fresh().0, &tier.value).await,
                            )),
                            "raw_strict_async" => drop(black_box(
                                hit_raw_strict_async(&tier.raw_async, &tier.strict).await,
                            )),
                            _ => drop(black_box(
                                hit_raw_async(&tier.raw_async, &tier.raw_key).await,
                            )),
                        }
                    }
                })
            });
        } else {
            measured(ops, &run);
        }
    });
    println!(
        "PROFILE={variant} SIZE={}: {ops} calls; server per call: commands {:.2} us [{}], CPU {:.2} us",
        size.name(),
        stats.usec,
        ServerRun::breakdown(&[&stats]),
        stats.cpu_us
    );
}

fn profile_in_process(redis: &Redis, variant: &str, size: Size, ops: usize) {
    let runtime = runtime();
    let value = &size.value();
    let url = redis.url();
    let hit = query(size.branch(5), 0);
    // Only the variant's own cache, so that no other listener runs beside
    // it, whose heartbeat is longer than the run: the listener's work, which
    // grows with the run's time, does not count among the calls'.
    let tracking = Tracking::default().with_heartbeat(Duration::from_secs(60));
    let tracked = (variant == "tracked")
        .then(|| tracked_cache(RedisPool::open(url.as_str()).unwrap(), tracking));
    let async_tracked =
        (variant == "tracked_async").then(|| async_tracked_cache(&runtime, &url, tracking));
    if let Some(tracked) = &tracked {
        tracked.insert(&hit, value.clone()).unwrap();
        settle(value, || hit_cache(tracked, &hit));
    }
    if let Some(tracked) = &async_tracked {
        runtime
            .block_on(tracked.insert(&hit, value.clone()))
            .unwrap();
        settle(value, || runtime.block_on(hit_cache_async(tracked, &hit)));
    }
    let moka: moka::sync::Cache<String, Vec<Book>> = moka::sync::Cache::new(100);
    let key = hit.cache_key(1).unwrap().into_string();
    moka.insert(key.clone(), value.clone());
    moka.insert(hand_key(&hit), value.clone());
    let by_struct = moka_by_struct(&hit, value, None);
    let by_struct_ttl = moka_by_struct(&hit, value, Some(Search::TTL));
    let buffer = RefCell::new(String::new());
    let call: Box<dyn Fn() -> Option<Vec<Book>>> = match variant {
        "tracked" => Box::new(|| hit_cache(tracked.as_ref().unwrap(), &hit)),
        "tracked_async" => {
            Box::new(|| ready(hit_cache_async(async_tracked.as_ref().unwrap(), &hit)))
        }
        "moka_struct" => Box::new(|| hit_moka_struct(&by_struct, &hit)),
        "moka_struct_ttl" => Box::new(|| hit_moka_struct(&by_struct_ttl, &hit)),
        "moka" => Box::new(|| hit_moka_key(&moka, &key)),
        "moka_hand" => Box::new(|| hit_moka_key(&moka, &hand_key(&hit))),
        "moka_written" => Box::new(|| hit_moka_written(&moka, &hit, &buffer)),
        _ => Box::new(|| hit_moka_key(&moka, hit.cache_key(1).unwrap().as_str())),
    };
    for _ in 0..3 {
        assert_eq!(call().as_ref(), Some(value));
    }
    let local_hits = || {
        let blocking = tracked.as_ref().map_or(0, |cache| cache.stats().local_hits);
        blocking
            + async_tracked
                .as_ref()
                .map_or(0, |cache| cache.stats().local_hits)
    };
    let before = local_hits();
    measured(ops, &|| drop(black_box(call())));
    if variant.starts_with("tracked") {
        // Every call was a hit in process, none a round trip.
        assert_eq!(local_hits() - before, ops as u64, "hits in process");
    }
    println!("PROFILE={variant} SIZE={}: {ops} calls", size.name());
}
