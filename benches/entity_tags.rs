//! What tags cost, each case side by side with the same cache without tags,
//! in one run on one real `redis-server` (loopback):
//!
//! - **one query tag**: a strict `RedisCache` hit of a query whose criterion
//!   is `#[tag = "book"]` against the same query type without the tag; the
//!   same on a `MokaCache` over `MemoryGenerations`;
//! - **ten value tags**: a strict `RedisCache` hit of an answer holding ten
//!   books (`value_tags`) against the same answer untagged; the same with
//!   tracked counters and the entry in process;
//! - the **commands** each hit sends, from the server's `INFO
//!   commandstats`: a query tag adds none, value tags one `MGET` (one round
//!   trip, after the entry's `GET`), tracked none at all;
//! - a **bump** of a tag held by 1 entry and by 100,000 entries: its time
//!   and its commands; then the **sweep** of the tag's scope, which deletes
//!   the entries the bump ended.
//!
//! A ratio is taken within each round (tagged over untagged), and the
//! report gives its median and range over `ROUNDS` rounds. Run with `cargo
//! bench -p cache-key-benches --bench entity_tags` (`ROUNDS=7 OPS=2000 ENTRIES=100000`
//! by default); needs `redis-server` on `PATH`. See BENCHMARKS.md, "Tags".

#[allow(dead_code)]
#[path = "../tests/common/redis_server.rs"]
mod redis_server;
#[allow(dead_code)]
#[path = "redis_tier/server_stats.rs"]
mod server_stats;
#[allow(dead_code)]
#[path = "redis_tier/timing.rs"]
mod timing;

use std::hint::black_box;
use std::thread;
use std::time::{Duration, Instant};

use cache_key::cache::{MokaCache, QueryCache, TypedCache};
use cache_key::redis::{RedisCache, RedisGenerations, RedisPool, SweepOptions, Tracking};
use cache_key::{CacheKey, CacheTags, MemoryGenerations};
use serde::{Deserialize, Serialize};
use server_stats::server_run;
use timing::{Case, median, per_block, per_call};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, CacheTags)]
struct Book {
    #[tag = "book"]
    id: u64,
    title: String,
    author: String,
    year: u16,
}

/// A page of `n` books, about 70 bytes of JSON each.
fn page(first: u64, n: u64) -> Vec<Book> {
    (first..first + n)
        .map(|id| Book {
            id,
            title: format!("The Book of Sand, volume {id}"),
            author: "Jorge Luis Borges".to_owned(),
            year: 1975,
        })
        .collect()
}

// Each tagged query type and its untagged twin differ in their namespace
// alone, of one length, so that both write keys as long.

/// One book's page, its id a criterion.
#[derive(CacheKey)]
#[cache_key(namespace = "bench_u", operation = "book", value = Vec<Book>, ttl = "10m")]
struct BookPage {
    #[tenant]
    branch: u32,
    #[criterion]
    id: u64,
}

/// The same, the id also a tag.
#[derive(CacheKey)]
#[cache_key(namespace = "bench_t", operation = "book", value = Vec<Book>, ttl = "10m")]
struct TaggedBookPage {
    #[tenant]
    branch: u32,
    #[criterion]
    #[tag = "book"]
    id: u64,
}

/// A search whose answer is ten books, untagged.
#[derive(CacheKey)]
#[cache_key(namespace = "bench_u", operation = "search", value = Vec<Book>, ttl = "10m")]
struct Search {
    #[tenant]
    branch: u32,
    #[criterion]
    page: u64,
}

/// The same, its answers tagged by the books they hold.
#[derive(CacheKey)]
#[cache_key(
    namespace = "bench_t",
    operation = "search",
    value = Vec<Book>,
    ttl = "10m",
    value_tags
)]
struct TaggedSearch {
    #[tenant]
    branch: u32,
    #[criterion]
    page: u64,
}

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(default)
}

/// Loads `query` until it is a hit (a value's tags' counters start at the
/// server's clock, so their first fill is stored and not served).
fn warm<C, Q>(cache: &C, query: &Q, value: &[Book])
where
    C: QueryCache<Q>,
    Q: cache_key::cache::CachedQuery<Value = Vec<Book>>,
{
    for _ in 0..3 {
        cache
            .get_or_load(query, || Ok::<_, std::io::Error>(value.to_vec()))
            .unwrap();
    }
    assert!(cache.get(query).unwrap().is_some(), "warm");
}

fn main() {
    let Some(server) = redis_server::Server::start(false) else {
        eprintln!("redis-server is not installed: nothing measured");
        return;
    };
    let (rounds, ops, entries) = (env("ROUNDS", 7), env("OPS", 2000), env("ENTRIES", 100_000));
    let pool = || RedisPool::open(server.url()).unwrap();
    let strict = RedisCache::new(RedisGenerations::new(pool()));
    let tracked =
        RedisCache::new(RedisGenerations::tracked(pool(), Tracking::default())).with_local(1_000);
    // A cache each, so that each finds its query type's entries first.
    let sweeper = RedisGenerations::new(pool());
    let moka = MokaCache::new(MemoryGenerations::new(), 1_000);
    let tagged_moka = MokaCache::new(MemoryGenerations::new(), 1_000);

    let one = page(42, 1);
    let ten = page(100, 10);
    let (book, tagged_book) = (
        BookPage { branch: 1, id: 42 },
        TaggedBookPage { branch: 1, id: 42 },
    );
    let (search, tagged_search) = (
        Search { branch: 1, page: 1 },
        TaggedSearch { branch: 1, page: 1 },
    );
    warm(&strict, &book, &one);
    warm(&strict, &tagged_book, &one);
    warm(&strict, &search, &ten);
    warm(&strict, &tagged_search, &ten);
    warm(&moka, &book, &one);
    warm(&tagged_moka, &tagged_book, &one);
    // One variant alone, for callgrind: `PROFILE=moka_tagged`,
    // `moka_untagged`, `redis_tagged` or `redis_untagged`, `OPS` hits.
    if let Ok(profile) = std::env::var("PROFILE") {
        for _ in 0..ops {
            match profile.as_str() {
                "moka_tagged" => drop(black_box(tagged_moka.get(&tagged_book).unwrap())),
                "moka_untagged" => drop(black_box(moka.get(&book).unwrap())),
                "redis_tagged" => drop(black_box(strict.get(&tagged_book).unwrap())),
                "redis_untagged" => drop(black_box(strict.get(&book).unwrap())),
                other => panic!("PROFILE={other}: no such variant"),
            }
        }
        return;
    }
    // Tracked: the counters kept once read, the entries kept in process.
    thread::sleep(Duration::from_millis(200));
    warm(&tracked, &search, &ten);
    warm(&tracked, &tagged_search, &ten);

    let hit = |cache: &RedisCache, query: &dyn Fn(&RedisCache) -> Option<Vec<Book>>| {
        black_box(query(cache)).expect("a hit");
    };
    let get_book = |cache: &RedisCache| cache.get(&book).unwrap();
    let get_tagged_book = |cache: &RedisCache| cache.get(&tagged_book).unwrap();
    let get_search = |cache: &RedisCache| cache.get(&search).unwrap();
    let get_tagged_search = |cache: &RedisCache| cache.get(&tagged_search).unwrap();

    let mut query_tag = Case::new("redis hit, one query tag (us)", "us", false);
    let mut moka_tag = Case::new("moka hit, one query tag (ns)", "ns", false);
    let mut value_tags = Case::new("redis hit, ten value tags (us)", "us", false);
    let mut tracked_tags = Case::new("tracked hit in process, ten value tags (ns)", "ns", false);
    for _ in 0..rounds {
        let (thing, raw) = per_call(
            ops,
            |_| hit(&strict, &get_tagged_book),
            |_| hit(&strict, &get_book),
        );
        query_tag.push((thing / 1e3, raw / 1e3));
        moka_tag.push(per_block(
            ops / 10,
            200,
            || {
                drop(black_box(
                    tagged_moka.get(&tagged_book).unwrap().expect("a hit"),
                ))
            },
            || drop(black_box(moka.get(&book).unwrap().expect("a hit"))),
        ));
        let (thing, raw) = per_call(
            ops,
            |_| hit(&strict, &get_tagged_search),
            |_| hit(&strict, &get_search),
        );
        value_tags.push((thing / 1e3, raw / 1e3));
        tracked_tags.push(per_block(
            ops / 10,
            200,
            || hit(&tracked, &get_tagged_search),
            || hit(&tracked, &get_search),
        ));
    }
    println!("Tags: the tagged hit against the same hit untagged, {rounds} rounds");
    for case in [&query_tag, &moka_tag, &value_tags, &tracked_tags] {
        case.report();
    }

    // The commands a hit sends.
    let mut admin = server.connect();
    println!("\nCommands per hit, {ops} hits each (server's INFO commandstats):");
    for (name, cache, get) in [
        (
            "strict, untagged",
            &strict,
            &get_book as &dyn Fn(&RedisCache) -> _,
        ),
        ("strict, one query tag", &strict, &get_tagged_book),
        ("strict, ten books untagged", &strict, &get_search),
        ("strict, ten value tags", &strict, &get_tagged_search),
        (
            "tracked in process, ten value tags",
            &tracked,
            &get_tagged_search,
        ),
    ] {
        let run = server_run(&mut admin, ops, || {
            for _ in 0..ops {
                hit(cache, get);
            }
        });
        println!(
            "  {name:<36} {}",
            server_stats::ServerRun::breakdown(&[&run])
        );
    }

    // A bump, with the tag held by one entry, then by `entries`.
    println!("\nA bump of a tag held by 1 entry and by {entries} entries:");
    for held in [1, entries] {
        let book = 7_000_000 + held as u64;
        // Each entry holds three books, `book` among them.
        let holding = |_: usize| {
            let mut books = page(1, 3);
            books[1].id = book;
            books
        };
        // A tag's counter starts at the server's clock when first read, so a
        // value filled before it existed is not served: bump each once first.
        for id in [1, book, 3] {
            let scope = Book::tag_scope_book::<TaggedSearch>(&1, &id).unwrap();
            strict.invalidate(&scope).unwrap();
        }
        let scope = Book::tag_scope_book::<TaggedSearch>(&1, &book).unwrap();
        thread::sleep(Duration::from_millis(2));
        let filled = Instant::now();
        thread::scope(|scope| {
            let threads = 8;
            for t in 0..threads {
                let (strict, holding) = (&strict, &holding);
                scope.spawn(move || {
                    for i in (t..held).step_by(threads) {
                        let query = TaggedSearch {
                            branch: 1,
                            page: 1_000 + i as u64,
                        };
                        strict.insert(&query, holding(i)).unwrap();
                    }
                });
            }
        });
        let filled = filled.elapsed();
        let query = TaggedSearch {
            branch: 1,
            page: 1_000,
        };
        assert!(
            strict.get(&query).unwrap().is_some(),
            "filled after the tag's counter"
        );
        let bumps = 200;
        let mut times = Vec::with_capacity(bumps);
        let run = server_run(&mut admin, bumps, || {
            for _ in 0..bumps {
                let started = Instant::now();
                strict.invalidate(&scope).unwrap();
                times.push(started.elapsed().as_secs_f64() * 1e6);
            }
        });
        assert!(strict.get(&query).unwrap().is_none(), "the bump ended it");
        println!(
            "  {held:>7} entries (filled in {:.1} s): {:.1} us per bump (median of {bumps}), {}",
            filled.as_secs_f64(),
            median(&times),
            server_stats::ServerRun::breakdown(&[&run])
        );
        // The sweep of the tag's scope deletes the entries the bumps ended.
        let started = Instant::now();
        let report = sweeper.sweep(&scope, SweepOptions::default()).unwrap();
        let swept = started.elapsed().as_secs_f64();
        assert_eq!(report.by_tag, held as u64, "{report:?}");
        println!(
            "           its sweep: {} of {} keys in scope deleted in {swept:.2} s ({:.1} us per key in scope)",
            report.deleted,
            report.in_scope,
            swept * 1e6 / report.in_scope as f64
        );
    }
}
