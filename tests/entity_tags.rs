//! Invalidation by entity, strictly: a writer changes book P in the origin
//! and bumps its tag while readers read several query types (searches whose
//! answers contain P, searches whose answers do not), on every cache. Once
//! a bump returns, no read returns P older than that change, fills that
//! overlapped the bump included; answers without P keep hitting.
//!
//! The Redis runs need `redis-server` (ignored by default; `cargo test --
//! --include-ignored`).

mod common;

use std::collections::HashMap;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use cache_key::cache::{
    AsyncMokaCache, AsyncQueryCache, AsyncTypedCache, CacheError, MokaCache, QueryCache, TypedCache,
};
use cache_key::redis::{
    AsyncRedisCache, AsyncRedisGenerations, AsyncRedisPool, FailSafe, RedisCache, RedisGenerations,
    RedisPool, Tracking,
};
use cache_key::{CacheKey, CacheTags, GenerationScope, MemoryGenerations};
use common::async_runtime::runtime;
use common::reader_report::ReaderReport;
use common::redis_server::{Cluster, Server};
use serde::{Deserialize, Serialize};

/// The entity the writer changes.
const P: u64 = 42;

/// A book as answers show it: its tag is its id, inside the branch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, CacheTags)]
struct Book {
    #[tag = "book"]
    id: u64,
    version: u64,
}

/// Answers tagged by the query: the books it asks for.
#[derive(Clone, CacheKey)]
#[cache_key(namespace = "tags", operation = "by_ids", value = Vec<Book>, ttl = "5m")]
struct ByIds {
    #[tenant]
    branch: u32,
    #[criterion]
    #[tag = "book"]
    ids: Vec<u64>,
}

/// Answers tagged by their value: the books a search found.
#[derive(Clone, CacheKey)]
#[cache_key(
    namespace = "tags",
    operation = "search",
    value = Vec<Book>,
    ttl = "5m",
    value_tags
)]
struct Search {
    #[tenant]
    branch: u32,
    #[criterion]
    term: &'static str,
}

/// Another query type tagged by its value.
#[derive(Clone, CacheKey)]
#[cache_key(
    namespace = "tags",
    operation = "shelf",
    value = Vec<Book>,
    ttl = "5m",
    value_tags
)]
struct Shelf {
    #[tenant]
    branch: u32,
    #[criterion]
    term: &'static str,
}

/// The negative control: the same answers, declared without tags.
#[derive(Clone, CacheKey)]
#[cache_key(namespace = "tags", operation = "untagged", value = Vec<Book>, ttl = "5m")]
struct Untagged {
    #[tenant]
    branch: u32,
    #[criterion]
    term: &'static str,
}

/// The books each term finds: `with*` terms find P, the others do not.
fn books_for(term: &str) -> &'static [u64] {
    match term {
        "with-a" => &[1, P, 2],
        "with-b" => &[P],
        "without-a" => &[3, 4],
        _ => &[5],
    }
}

const TERMS: [&str; 4] = ["with-a", "with-b", "without-a", "without-b"];

/// Where the books are and what the writer has published: in this process
/// ([`Library`]) or in Redis, for a reader in another process
/// ([`RedisLibrary`]).
trait Origin: Sync {
    /// The books of `term` at their versions now.
    fn books(&self, term: &str) -> Vec<Book>;
    /// Changes P: its next version.
    fn change(&self) -> u64;
    /// P's version whose bump has returned: no read that starts after may
    /// return P older than it.
    fn floor(&self) -> u64;
    fn publish(&self, version: u64);
}

/// The origin in this process.
#[derive(Default)]
struct Library {
    versions: Mutex<HashMap<u64, u64>>,
    bumped: AtomicU64,
}

impl Origin for Library {
    fn books(&self, term: &str) -> Vec<Book> {
        let versions = self.versions.lock().unwrap();
        books_for(term)
            .iter()
            .map(|&id| Book {
                id,
                version: versions.get(&id).copied().unwrap_or(0),
            })
            .collect()
    }

    fn change(&self) -> u64 {
        let mut versions = self.versions.lock().unwrap();
        let version = versions.entry(P).or_default();
        *version += 1;
        *version
    }

    fn floor(&self) -> u64 {
        self.bumped.load(Ordering::SeqCst)
    }

    fn publish(&self, version: u64) {
        self.bumped.store(version, Ordering::SeqCst);
    }
}

/// The origin in Redis, beside the cache (keys `db:*`, never a cache key):
/// shared by the writer's process and the readers'.
struct RedisLibrary {
    client: redis::Client,
}

impl RedisLibrary {
    fn new(url: &str) -> Self {
        RedisLibrary {
            client: redis::Client::open(url).unwrap(),
        }
    }

    fn connection(&self) -> redis::Connection {
        self.client.get_connection().unwrap()
    }
}

impl Origin for RedisLibrary {
    fn books(&self, term: &str) -> Vec<Book> {
        let ids = books_for(term);
        let names: Vec<String> = ids.iter().map(|id| format!("db:book:{id}")).collect();
        let versions: Vec<Option<u64>> = redis::cmd("MGET")
            .arg(&names)
            .query(&mut self.connection())
            .unwrap();
        ids.iter()
            .zip(versions)
            .map(|(&id, version)| Book {
                id,
                version: version.unwrap_or(0),
            })
            .collect()
    }

    fn change(&self) -> u64 {
        redis::cmd("INCR")
            .arg(format!("db:book:{P}"))
            .query(&mut self.connection())
            .unwrap()
    }

    fn floor(&self) -> u64 {
        let floor: Option<u64> = redis::cmd("GET")
            .arg("db:bumped")
            .query(&mut self.connection())
            .unwrap();
        floor.unwrap_or(0)
    }

    fn publish(&self, version: u64) {
        let () = redis::cmd("SET")
            .arg("db:bumped")
            .arg(version)
            .query(&mut self.connection())
            .unwrap();
    }
}

/// What one race saw.
#[derive(Debug, Default)]
struct Race {
    reads: u64,
    stale: u64,
    bumps: u64,
    hit_ratio_without: f64,
}

const READERS: usize = 8;

/// Book P's tag in `branch`: one counter for every query type of the
/// namespace, whether its answers are tagged by the query or by the value.
fn book_scope(branch: u32) -> GenerationScope {
    ByIds::tag_scope_book(&branch, &P).unwrap()
}

/// The writer: changes P and bumps its tag (one counter for every query
/// type of the branch) for `length`; how many bumps.
fn write<C: TypedCache>(
    cache: &C,
    origin: &dyn Origin,
    scope: &GenerationScope,
    length: Duration,
) -> u64 {
    let end = Instant::now() + length;
    let mut bumps = 0;
    while Instant::now() < end {
        let version = origin.change();
        cache.invalidate(scope).unwrap();
        origin.publish(version);
        bumps += 1;
        thread::sleep(Duration::from_millis(3));
    }
    bumps
}

/// How a reader reads: its `i`-th read, of `term`, with `answer` as the
/// origin.
type Reading<'a> = dyn Fn(usize, &'static str, &dyn Fn() -> Answer) -> Vec<Book> + Sync + 'a;

type Answer = Result<Vec<Book>, std::io::Error>;

/// Readers reading through `reading` until `stop`: what they saw (`bumps`
/// left to the writer).
fn read(reading: &Reading<'_>, origin: &dyn Origin, stop: &AtomicBool) -> Race {
    let (reads, stale) = (AtomicU64::new(0), AtomicU64::new(0));
    let (calls_without, reads_without) = (AtomicU64::new(0), AtomicU64::new(0));
    thread::scope(|scope| {
        for reader in 0..READERS {
            let (reads, stale, calls_without, reads_without) =
                (&reads, &stale, &calls_without, &reads_without);
            scope.spawn(move || {
                let mut i = reader;
                while !stop.load(Ordering::SeqCst) {
                    i += 1;
                    let term = TERMS[i % TERMS.len()];
                    let without = !term.starts_with("with-");
                    let floor = origin.floor();
                    let answer = || {
                        if without {
                            calls_without.fetch_add(1, Ordering::Relaxed);
                        }
                        let books = origin.books(term);
                        // Slowly, so that fills overlap the writer's bumps.
                        thread::sleep(Duration::from_micros(300));
                        Ok(books)
                    };
                    let books = reading(i / TERMS.len(), term, &answer);
                    if without {
                        reads_without.fetch_add(1, Ordering::Relaxed);
                    }
                    reads.fetch_add(1, Ordering::Relaxed);
                    if books
                        .iter()
                        .any(|book| book.id == P && book.version < floor)
                    {
                        stale.fetch_add(1, Ordering::Relaxed);
                    }
                }
            });
        }
    });
    let calls_without = calls_without.into_inner() as f64;
    Race {
        reads: reads.into_inner(),
        stale: stale.into_inner(),
        bumps: 0,
        hit_ratio_without: 1.0 - calls_without / reads_without.into_inner().max(1) as f64,
    }
}

/// The writer and the readers in this process, for `length`.
fn race<C: TypedCache + Sync>(cache: &C, reading: &Reading<'_>, length: Duration) -> Race {
    let library = Library::default();
    let stop = AtomicBool::new(false);
    thread::scope(|scope| {
        let writer = scope.spawn(|| {
            let bumps = write(cache, &library, &book_scope(1), length);
            stop.store(true, Ordering::SeqCst);
            bumps
        });
        let race = read(reading, &library, &stop);
        Race {
            bumps: writer.join().unwrap(),
            ..race
        }
    })
}

/// Reads of the three tagged query types in turn: by ids (tags from the
/// query), searches and shelves (tags from the value).
fn tagged<C>(
    cache: &C,
) -> impl Fn(usize, &'static str, &dyn Fn() -> Answer) -> Vec<Book> + Sync + '_
where
    C: QueryCache<ByIds> + QueryCache<Search> + QueryCache<Shelf> + Sync,
{
    move |i, term, answer| {
        match i % 3 {
            0 => cache.get_or_load(&by_ids(term), answer),
            1 => cache.get_or_load(&search(term), answer),
            _ => cache.get_or_load(&shelf(term), answer),
        }
        .unwrap()
    }
}

/// Reads of answers declared without tags.
fn untagged<C: QueryCache<Untagged> + Sync>(
    cache: &C,
) -> impl Fn(usize, &'static str, &dyn Fn() -> Answer) -> Vec<Book> + Sync + '_ {
    move |_, term, answer| {
        let query = Untagged { branch: 1, term };
        cache.get_or_load(&query, answer).unwrap()
    }
}

fn search(term: &'static str) -> Search {
    Search { branch: 1, term }
}
fn shelf(term: &'static str) -> Shelf {
    Shelf { branch: 1, term }
}
fn by_ids(term: &'static str) -> ByIds {
    ByIds {
        branch: 1,
        ids: books_for(term).to_vec(),
    }
}

/// The race on `cache` reads no stale P and keeps hitting answers without
/// P; the same race on answers declared without tags (the mechanism off)
/// reads stale P, which shows the race can see what it checks.
fn strict_on<C>(name: &str, cache: &C)
where
    C: QueryCache<ByIds> + QueryCache<Search> + QueryCache<Shelf> + QueryCache<Untagged>,
    C: TypedCache + Sync,
{
    let tagged = race(cache, &tagged(cache), Duration::from_millis(1500));
    println!("{name}: {tagged:?}");
    assert!(
        tagged.bumps > 50 && tagged.reads > 500,
        "{name}: too short a race: {tagged:?}"
    );
    assert_eq!(
        tagged.stale, 0,
        "{name}: stale reads after a bump returned: {tagged:?}"
    );
    assert!(
        tagged.hit_ratio_without > 0.9,
        "{name}: answers without P stopped hitting: {tagged:?}"
    );
    let control = race(cache, &untagged(cache), Duration::from_millis(500));
    println!("{name}, untagged: {control:?}");
    assert!(
        control.stale > 0,
        "{name}: the race cannot see a stale read: {control:?}"
    );
}

#[test]
fn moka_is_strict_for_tags_from_the_query_and_the_value() {
    strict_on("moka", &MokaCache::new(MemoryGenerations::new(), 10_000));
}

fn redis_cache(url: String) -> RedisCache {
    RedisCache::new(RedisGenerations::new(RedisPool::open(url).unwrap()))
}

#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn redis_is_strict_for_tags_with_and_without_a_level_in_process() {
    let Some(server) = Server::start(false) else {
        return;
    };
    strict_on("redis", &redis_cache(server.url()));
    server.flush();
    strict_on(
        "redis + local",
        &redis_cache(server.url()).with_local(10_000),
    );
    server.flush();
    let tracked =
        RedisGenerations::tracked(RedisPool::open(server.url()).unwrap(), Tracking::default());
    strict_on(
        "redis + tracked local",
        &RedisCache::new(tracked).with_local(10_000),
    );
}

#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn a_redis_cluster_is_strict_for_tags() {
    let Some(cluster) = Cluster::start() else {
        return;
    };
    let pool = RedisPool::open_cluster(cluster.urls()).unwrap();
    strict_on(
        "cluster",
        &RedisCache::new(RedisGenerations::new(pool)).with_local(10_000),
    );
}

/// An answer is stored with its tags and served until one is bumped; a
/// bump of another book leaves it; an answer with more tags than the cache
/// keeps is returned and not cached.
fn tags_end_only_their_answers<C>(cache: &C)
where
    C: QueryCache<Search> + TypedCache,
{
    let calls = AtomicU64::new(0);
    let load = |term| {
        cache
            .get_or_load(&search(term), || {
                calls.fetch_add(1, Ordering::SeqCst);
                Ok::<_, std::io::Error>(Library::default().books(term))
            })
            .unwrap()
    };
    // A first fill of a tag never bumped before may be stored and not
    // served (its counter starts at the clock): the second one is.
    for _ in 0..2 {
        load("with-a");
        load("without-a");
    }
    let before = calls.load(Ordering::SeqCst);
    load("with-a");
    load("without-a");
    assert_eq!(calls.load(Ordering::SeqCst), before, "both hit");

    let other = Book::tag_scope_book::<Search>(&1, &7).unwrap();
    cache.invalidate(&other).unwrap();
    load("with-a");
    assert_eq!(
        calls.load(Ordering::SeqCst),
        before,
        "book 7 is in neither answer"
    );

    cache.invalidate(&book_scope(1)).unwrap();
    load("with-a");
    assert_eq!(
        calls.load(Ordering::SeqCst),
        before + 1,
        "book 42 is in this one"
    );
    load("without-a");
    assert_eq!(
        calls.load(Ordering::SeqCst),
        before + 1,
        "and not in this one"
    );
    let other_branch = book_scope(2);
    cache.invalidate(&other_branch).unwrap();
    load("with-a");
    assert_eq!(
        calls.load(Ordering::SeqCst),
        before + 1,
        "a tag lives in its tenant"
    );
}

#[test]
fn on_moka_a_bump_ends_only_the_answers_holding_its_tag() {
    tags_end_only_their_answers(&MokaCache::new(MemoryGenerations::new(), 1_000));
}

#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn on_redis_a_bump_ends_only_the_answers_holding_its_tag() {
    let Some(server) = Server::start(false) else {
        return;
    };
    tags_end_only_their_answers(&redis_cache(server.url()));
    server.flush();
    tags_end_only_their_answers(&redis_cache(server.url()).with_local(1_000));
}

/// The async twin of [`race`], on one query type: readers are tasks.
async fn async_race<C>(cache: Arc<C>, length: Duration) -> Race
where
    C: AsyncQueryCache<Search> + AsyncTypedCache + Send + Sync + 'static,
{
    let library = Arc::new(Library::default());
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (cache, library, stop) = (cache.clone(), library.clone(), stop.clone());
        tokio::spawn(async move {
            let end = Instant::now() + length;
            let mut bumps = 0;
            while Instant::now() < end {
                let version = library.change();
                cache.invalidate(&book_scope(1)).await.unwrap();
                library.publish(version);
                bumps += 1;
                tokio::time::sleep(Duration::from_millis(3)).await;
            }
            stop.store(true, Ordering::SeqCst);
            bumps
        })
    };
    let readers: Vec<_> = (0..READERS)
        .map(|reader| {
            let (cache, library, stop) = (cache.clone(), library.clone(), stop.clone());
            tokio::spawn(async move {
                let (mut reads, mut stale, mut i) = (0, 0, reader);
                while !stop.load(Ordering::SeqCst) {
                    i += 1;
                    let term = TERMS[i % TERMS.len()];
                    let floor = library.floor();
                    let library = library.clone();
                    let books = cache
                        .get_or_load(&search(term), || async move {
                            let books = library.books(term);
                            tokio::time::sleep(Duration::from_micros(300)).await;
                            Ok::<_, std::io::Error>(books)
                        })
                        .await
                        .unwrap();
                    reads += 1;
                    stale += u64::from(books.iter().any(|b| b.id == P && b.version < floor));
                    // A hit in process is ready at once: let the writer run.
                    tokio::task::yield_now().await;
                }
                (reads, stale)
            })
        })
        .collect();
    let mut race = Race {
        bumps: writer.await.unwrap(),
        ..Race::default()
    };
    for reader in readers {
        let (reads, stale) = reader.await.unwrap();
        race.reads += reads;
        race.stale += stale;
    }
    race
}

#[test]
fn async_moka_is_strict_for_tags_from_the_value() {
    let race = runtime().block_on(async_race(
        Arc::new(AsyncMokaCache::new(MemoryGenerations::new(), 10_000)),
        Duration::from_millis(1000),
    ));
    println!("async moka: {race:?}");
    assert!(race.bumps > 30 && race.reads > 300, "{race:?}");
    assert_eq!(race.stale, 0, "{race:?}");
}

#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn async_redis_is_strict_for_tags_from_the_value() {
    let Some(server) = Server::start(false) else {
        return;
    };
    let runtime = runtime();
    for local in [false, true] {
        server.flush();
        let race = runtime.block_on(async {
            let pool = AsyncRedisPool::connect(server.url()).await.unwrap();
            let cache = AsyncRedisCache::new(AsyncRedisGenerations::new(pool));
            let cache = match local {
                true => cache.with_local(10_000),
                false => cache,
            };
            async_race(Arc::new(cache), Duration::from_millis(1000)).await
        });
        println!("async redis, local {local}: {race:?}");
        assert!(race.bumps > 30 && race.reads > 300, "{race:?}");
        assert_eq!(race.stale, 0, "{race:?}");
    }
}

/// The reader's side of [`two_processes_read_no_stale_entity`]: this test
/// binary again, in a process of its own.
fn reader_process(url: &str) {
    let origin = RedisLibrary::new(url);
    let cache = redis_cache(url.to_owned()).with_local(10_000);
    let stop = AtomicBool::new(false);
    let race = thread::scope(|scope| {
        scope.spawn(|| {
            let mut db = origin.connection();
            loop {
                let done: Option<u8> = redis::cmd("GET").arg("db:stop").query(&mut db).unwrap();
                if done.is_some() {
                    break stop.store(true, Ordering::SeqCst);
                }
                thread::sleep(Duration::from_millis(10));
            }
        });
        read(&tagged(&cache), &origin, &stop)
    });
    println!(
        "READER reads={} stale={} hit_ratio_without={:.3}",
        race.reads, race.stale, race.hit_ratio_without
    );
}

#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn two_processes_read_no_stale_entity() {
    if let Ok(url) = std::env::var("ENTITY_TAGS_READER") {
        return reader_process(&url);
    }
    let Some(server) = Server::start(false) else {
        return;
    };
    let child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "two_processes_read_no_stale_entity"])
        .args(["--include-ignored", "--nocapture", "--test-threads", "1"])
        .env("ENTITY_TAGS_READER", server.url())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("the test binary runs again as the reader");
    let origin = RedisLibrary::new(&server.url());
    let writer = redis_cache(server.url());
    let bumps = write(
        &writer,
        &origin,
        &book_scope(1),
        Duration::from_millis(2_000),
    );
    let () = redis::cmd("SET")
        .arg("db:stop")
        .arg(1)
        .query(&mut server.connect())
        .unwrap();
    let report = ReaderReport::of(child.wait_with_output().unwrap());
    println!("{report}, bumps={bumps}");
    assert!(
        bumps > 100 && report.field::<u64>("reads") > 500,
        "{report}, bumps={bumps}"
    );
    assert_eq!(report.field::<u64>("stale"), 0, "{report}");
    assert!(report.field::<f64>("hit_ratio_without") > 0.9, "{report}");
}

#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn a_restore_from_rdb_after_a_bump_brings_no_tagged_answer_back() {
    let Some(mut server) = Server::start(false) else {
        return;
    };
    for local in [false, true] {
        server.flush();
        let origin = Library::default();
        let load = |cache: &RedisCache, origin: &Library| {
            cache
                .get_or_load(&search("with-a"), || {
                    Ok::<_, std::io::Error>(origin.books("with-a"))
                })
                .unwrap()
        };
        let cache = redis_cache(server.url());
        let cache = if local {
            cache.with_local(1_000)
        } else {
            cache
        };
        cache
            .get_or_load(&by_ids("with-b"), || {
                Ok::<_, std::io::Error>(origin.books("with-b"))
            })
            .unwrap();
        // Stored, then served (the first fill met its tags' counters new).
        load(&cache, &origin);
        load(&cache, &origin);
        assert_eq!(cache.stats().hits, 0);
        load(&cache, &origin);
        assert_eq!(cache.stats().hits, 1, "local {local}");
        // The snapshot holds the entry and the counters before the bump.
        server.save();
        let version = origin.change();
        cache.invalidate(&book_scope(1)).unwrap();
        server.restart_from_files();
        // The restored entries, filled before the bump, are never served
        // again: here or by a process that starts now; tagged by the value
        // or by the query (whose key the restored counters would name).
        let fresh = redis_cache(server.url());
        for cache in [&cache, &fresh] {
            let by_id = cache
                .get_or_load(&by_ids("with-b"), || {
                    Ok::<_, std::io::Error>(origin.books("with-b"))
                })
                .unwrap();
            for books in [load(cache, &origin), by_id] {
                let p = books.iter().find(|book| book.id == P).unwrap();
                assert_eq!(p.version, version, "local {local}");
            }
        }
    }
}

#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn the_fail_safe_never_serves_an_answer_whose_tag_was_bumped() {
    let Some(server) = Server::start(false) else {
        return;
    };
    let ttl = Duration::from_millis(300);
    for local in [false, true] {
        server.flush();
        let cache = redis_cache(server.url())
            .with_ttl::<Search>(ttl)
            .with_fail_safe(FailSafe::new(Duration::from_secs(30)));
        let cache = if local {
            cache.with_local(1_000)
        } else {
            cache
        };
        let origin = Library::default();
        let origin = &origin;
        let up = |term: &'static str| move || Ok::<_, String>(origin.books(term));
        let down = || Err::<Vec<Book>, _>("catalog down".to_owned());
        for term in ["with-a", "without-a"] {
            // Twice: the first fill met its tags' counters new.
            cache.get_or_load(&search(term), up(term)).unwrap();
            cache.get_or_load(&search(term), up(term)).unwrap();
        }
        thread::sleep(ttl + Duration::from_millis(100));
        cache.invalidate(&book_scope(1)).unwrap();
        // Expired both; the one holding P was bumped: never served again.
        let error = cache.get_or_load(&search("with-a"), down).unwrap_err();
        assert!(
            matches!(error, CacheError::Origin(_)),
            "local {local}: {error}"
        );
        let stale = cache.get_or_load(&search("without-a"), down).unwrap();
        assert_eq!(stale, origin.books("without-a"), "local {local}");
        assert_eq!(cache.stats().stale, 1, "local {local}");
    }
}

/// Sweeping a tag's scope after its bump deletes the entries whose value
/// holds the tag (at their current generation, so the generation's sweep
/// alone would keep them), and only those: not the answers without it, not
/// another branch's, not a foreign value under a key of the scope.
fn a_sweep_of_a_tag_deletes_the_answers_it_ended(pool: RedisPool) {
    use cache_key::GenerationStore;
    use cache_key::redis::SweepOptions;
    use redis::Commands;

    let generations = RedisGenerations::new(pool.clone());
    let cache = RedisCache::new(RedisGenerations::new(pool.clone())).with_max_tags(1_000);
    let search = |branch: u32, term: String| Search {
        branch,
        term: Box::leak(term.into_boxed_str()),
    };
    let book = |id: u64| Book { id, version: 1 };
    // A tag's counter starts at the server's clock when first read, and a
    // value filled before then is not served: make them before the fills.
    for branch in [1, 2] {
        for id in [P, 7] {
            cache
                .invalidate(&Book::tag_scope_book::<Search>(&branch, &id).unwrap())
                .unwrap();
        }
    }
    thread::sleep(Duration::from_millis(2));
    let holding: Vec<Search> = (0..20).map(|i| search(1, format!("holds {i}"))).collect();
    let without: Vec<Search> = (0..20).map(|i| search(1, format!("lacks {i}"))).collect();
    let elsewhere: Vec<Search> = (0..5).map(|i| search(2, format!("holds {i}"))).collect();
    for query in holding.iter().chain(&elsewhere) {
        cache.insert(query, vec![book(7), book(P)]).unwrap();
    }
    for query in &without {
        cache.insert(query, vec![book(7)]).unwrap();
    }
    // An answer whose tags' header runs past the first bytes a sweep reads
    // (700 books, P among them): read whole.
    // Its books' counters are made by its first read: filled again after.
    let many = search(1, "holds many".to_owned());
    let books: Vec<Book> = (1..=700).map(book).collect();
    cache.insert(&many, books.clone()).unwrap();
    assert!(
        cache.get(&many).unwrap().is_none(),
        "filled before its tags' counters"
    );
    thread::sleep(Duration::from_millis(2));
    cache.insert(&many, books).unwrap();
    // Answers tagged by their query: the books asked for.
    let by_ids = |branch: u32, ids: &[u64]| ByIds {
        branch,
        ids: ids.to_vec(),
    };
    let asking = [by_ids(1, &[P]), by_ids(1, &[7, P])];
    let not_asking = [by_ids(1, &[7]), by_ids(1, &[8]), by_ids(2, &[P])];
    for query in asking.iter().chain(&not_asking) {
        cache
            .insert(query, query.ids.iter().map(|&id| book(id)).collect())
            .unwrap();
        assert!(cache.get(query).unwrap().is_some(), "a hit before the bump");
    }
    let key_of = |query: &ByIds| generations.key_for(query).unwrap();
    let asked_keys: Vec<cache_key::Key> = asking.iter().map(key_of).collect();
    let foreign = search(1, "foreign".to_owned());
    let foreign_key = generations.key_for(&foreign).unwrap();
    let mut connection = pool.get().unwrap();
    let () = connection.rpush(&foreign_key, "not an entry").unwrap();
    let exists = |connection: &mut cache_key::redis::PooledConnection, query: &Search| -> bool {
        connection
            .exists(generations.key_for(query).unwrap())
            .unwrap()
    };
    for query in holding.iter().chain(&without).chain(&elsewhere) {
        assert!(cache.get(query).unwrap().is_some(), "a hit before the bump");
    }
    assert!(cache.get(&many).unwrap().is_some(), "a hit before the bump");
    let header: Vec<u8> = connection
        .getrange(generations.key_for(&many).unwrap(), 0, 8191)
        .unwrap();
    assert!(
        !header.windows(9).any(|window| window == b",\"value\":"),
        "its tags run past the first 8 KiB"
    );

    let scope = Book::tag_scope_book::<Search>(&1, &P).unwrap();
    // Before the bump, a sweep of the tag deletes nothing.
    let report = generations
        .sweep(&scope, SweepOptions::default().batch(7))
        .unwrap();
    assert_eq!((report.deleted, report.by_tag), (0, 0), "{report:?}");
    cache.invalidate(&scope).unwrap();
    // The generation's sweep of the branch keeps the answers holding P (their
    // keys are current) and deletes the 2 queries asking for P: their keys'
    // generation is older than their tags' counters (named by the entry's
    // `qtags`) now make it.
    let branch = GenerationScope::tenant_unchecked::<Search>(&[&1u32]).unwrap();
    let report = generations.sweep(&branch, SweepOptions::default()).unwrap();
    assert_eq!((report.deleted, report.by_tag), (2, 0), "{report:?}");
    assert!(holding.iter().all(|query| exists(&mut connection, query)));
    for key in &asked_keys {
        let gone: bool = connection.exists(key).unwrap();
        assert!(
            !gone,
            "the old generation of a query asking for P is deleted"
        );
    }
    for query in &not_asking {
        let kept: bool = connection.exists(key_of(query)).unwrap();
        assert!(kept, "a query not asking for P is kept");
    }

    let report = generations
        .sweep(&scope, SweepOptions::default().batch(7))
        .unwrap();
    assert_eq!((report.deleted, report.by_tag), (21, 21), "{report:?}");
    for query in holding.iter().chain([&many]) {
        assert!(!exists(&mut connection, query), "deleted");
        assert!(cache.get(query).unwrap().is_none());
    }
    for query in without.iter().chain(&elsewhere) {
        assert!(exists(&mut connection, query), "kept");
        assert!(cache.get(query).unwrap().is_some(), "still a hit");
    }
    let kept: i64 = connection.llen(&foreign_key).unwrap();
    assert_eq!(kept, 1, "a foreign value is left alone");
    let again = generations.sweep(&scope, SweepOptions::default()).unwrap();
    assert_eq!(again.deleted, 0, "{again:?}");

    // A tenant's bump, then its sweep: every answer of the branch left,
    // those tagged by their query too, and the foreign value under its key.
    let keys: Vec<cache_key::Key> = not_asking[..2].iter().map(key_of).collect();
    cache.invalidate(&branch).unwrap();
    let report = generations.sweep(&branch, SweepOptions::default()).unwrap();
    assert_eq!(
        (report.deleted, report.by_tag),
        (20 + 2 + 1, 0),
        "{report:?}"
    );
    for key in &keys {
        let gone: bool = connection.exists(key).unwrap();
        assert!(
            !gone,
            "a query-tagged answer of the bumped branch is deleted"
        );
    }
    let kept: bool = connection.exists(key_of(&not_asking[2])).unwrap();
    assert!(kept, "another branch's answer is kept");
}

#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn a_sweep_of_a_tag_deletes_the_answers_it_ended_on_a_server() {
    let Some(server) = Server::start(false) else {
        return;
    };
    a_sweep_of_a_tag_deletes_the_answers_it_ended(RedisPool::open(server.url()).unwrap());
}

#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn a_sweep_of_a_tag_deletes_the_answers_it_ended_on_a_cluster() {
    let Some(cluster) = Cluster::start() else {
        return;
    };
    a_sweep_of_a_tag_deletes_the_answers_it_ended(RedisPool::open_cluster(cluster.urls()).unwrap());
}

/// The async sweep: the same walk and verdicts as the blocking one, on a
/// server and on a cluster, its future spawned on the runtime (so `Send`):
/// a tag's sweep deletes the answers holding the bumped book, a branch's
/// sweep the answers of queries asking for it, and nothing else.
fn async_sweep_deletes_what_a_bump_ended(runtime: &tokio::runtime::Runtime, pool: AsyncRedisPool) {
    use cache_key::redis::SweepOptions;

    runtime.block_on(async {
        let generations = Arc::new(AsyncRedisGenerations::new(pool.clone()));
        let cache = AsyncRedisCache::new(AsyncRedisGenerations::new(pool));
        let book = |id: u64| Book { id, version: 1 };
        for id in [P, 7] {
            cache
                .invalidate(&Book::tag_scope_book::<Search>(&1, &id).unwrap())
                .await
                .unwrap();
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
        let search = |term: &'static str| Search { branch: 1, term };
        let (holding, lacking) = (search("async holds"), search("async lacks"));
        cache
            .insert(&holding, vec![book(P), book(7)])
            .await
            .unwrap();
        cache.insert(&lacking, vec![book(7)]).await.unwrap();
        let asking = ByIds {
            branch: 1,
            ids: vec![P],
        };
        let other = ByIds {
            branch: 1,
            ids: vec![7],
        };
        cache.insert(&asking, vec![book(P)]).await.unwrap();
        cache.insert(&other, vec![book(7)]).await.unwrap();
        for query in [&holding, &lacking] {
            assert!(
                cache.get(query).await.unwrap().is_some(),
                "a hit before the bump"
            );
        }
        let scope = Book::tag_scope_book::<Search>(&1, &P).unwrap();
        cache.invalidate(&scope).await.unwrap();

        let sweep = |scope: GenerationScope| {
            let generations = Arc::clone(&generations);
            tokio::spawn(async move { generations.sweep(&scope, SweepOptions::default()).await })
        };
        // The branch's sweep: the query asking for P, whose generation the
        // bump made old; the answer holding P is current by its key.
        let branch = GenerationScope::tenant_unchecked::<Search>(&[&1u32]).unwrap();
        let report = sweep(branch).await.unwrap().unwrap();
        assert_eq!((report.deleted, report.by_tag), (1, 0), "{report:?}");
        assert!(cache.get(&other).await.unwrap().is_some(), "kept");
        // The tag's: the answer holding P, which the bump ended.
        let report = sweep(scope.clone()).await.unwrap().unwrap();
        assert_eq!((report.deleted, report.by_tag), (1, 1), "{report:?}");
        assert!(cache.get(&holding).await.unwrap().is_none());
        assert!(cache.get(&lacking).await.unwrap().is_some(), "kept");
        let again = sweep(scope).await.unwrap().unwrap();
        assert_eq!(again.deleted, 0, "{again:?}");
    });
}

#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn the_async_sweep_deletes_what_a_bump_ended_on_a_server() {
    let Some(server) = Server::start(false) else {
        return;
    };
    let runtime = runtime();
    let pool = runtime
        .block_on(AsyncRedisPool::connect(server.url()))
        .unwrap();
    async_sweep_deletes_what_a_bump_ended(&runtime, pool);
}

#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn the_async_sweep_deletes_what_a_bump_ended_on_a_cluster() {
    let Some(cluster) = Cluster::start() else {
        return;
    };
    let runtime = runtime();
    let pool = runtime
        .block_on(AsyncRedisPool::connect_cluster(cluster.urls()))
        .unwrap();
    async_sweep_deletes_what_a_bump_ended(&runtime, pool);
}

/// A strict hit of an answer tagged by its value, once the tags found under
/// its key are known to the cache: the counters, the entry and its tags'
/// counters in one pipeline (one burst at a proxy in front of the server),
/// on both drivers; a bump of one of its tags is still seen by the next read,
/// and a value whose tags changed costs one more round trip, once.
#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn a_hit_tagged_by_its_value_is_one_round_trip() {
    use common::redis_server::Proxy;

    let Some(server) = Server::start(false) else {
        return;
    };
    let proxy = Proxy::to(server.port());
    let blocking = RedisCache::new(RedisGenerations::new(RedisPool::open(proxy.url()).unwrap()));
    let runtime = runtime();
    let asynchronous = runtime.block_on(async {
        AsyncRedisCache::new(AsyncRedisGenerations::new(
            AsyncRedisPool::connect(proxy.url()).await.unwrap(),
        ))
    });
    let get = |driver: &str, query: &Search| -> Option<Vec<Book>> {
        match driver {
            "blocking" => blocking.get(query).unwrap(),
            _ => runtime.block_on(asynchronous.get(query)).unwrap(),
        }
    };
    let book = |id: u64| Book { id, version: 1 };
    for (branch, driver) in [(1, "blocking"), (2, "async")] {
        for id in [P, 7, 8] {
            blocking
                .invalidate(&Book::tag_scope_book::<Search>(&branch, &id).unwrap())
                .unwrap();
        }
        thread::sleep(Duration::from_millis(2));
        let query = Search {
            branch,
            term: "with P",
        };
        blocking.insert(&query, vec![book(P), book(7)]).unwrap();
        assert!(
            get(driver, &query).is_some(),
            "{driver}: filled after its tags"
        );

        proxy.reset_bursts();
        for _ in 0..10 {
            assert_eq!(get(driver, &query), Some(vec![book(P), book(7)]));
        }
        assert_eq!(proxy.bursts(), 10, "{driver}: one round trip per hit");

        blocking
            .invalidate(&Book::tag_scope_book::<Search>(&branch, &P).unwrap())
            .unwrap();
        assert_eq!(get(driver, &query), None, "{driver}: the bump is seen");

        // Other tags under the key: checked on their own once, then guessed.
        thread::sleep(Duration::from_millis(2));
        blocking.insert(&query, vec![book(8)]).unwrap();
        proxy.reset_bursts();
        assert_eq!(get(driver, &query), Some(vec![book(8)]));
        assert_eq!(proxy.bursts(), 2, "{driver}: the new tags' own round trip");
        proxy.reset_bursts();
        assert_eq!(get(driver, &query), Some(vec![book(8)]));
        assert_eq!(proxy.bursts(), 1, "{driver}: then guessed");
    }
}
