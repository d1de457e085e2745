//! The Redis tier's behaviour, one suite for both drivers: every body runs
//! against the blocking `RedisCache` and the async `AsyncRedisCache`, on one
//! server and on a three-primary Redis Cluster, through `common/tier.rs`.
//! The faults of real deployments (restarts, a promoted replica, a stopped
//! server) are in `redis_deployment_faults.rs`.
//!
//! Each test starts its own servers (`tests/common/redis_server.rs`) and
//! stops them by pid. Ignored by default; run them with `cargo test --
//! --include-ignored`. Without `redis-server` they are skipped with a
//! message, except under CI (`CI=true`), where that is a failure.

mod common;
#[path = "common/library_search.rs"]
mod library_search;
#[allow(dead_code)]
#[path = "common/tier.rs"]
mod tier;

use std::collections::BTreeMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Barrier;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use cache_key::CacheKey;
use cache_key::cache::{AsyncQueryCache, AsyncTypedCache, QueryCache, TypedCache};
use cache_key::cache::{CacheError, Rejected};
use cache_key::generation::GenerationScope;
use cache_key::redis::{InstanceCheck, LoadLock, Timeouts};
use common::bad_entries::{add, bad_entries};
use common::redis_server::{Cluster, Proxy, Server, command_calls, key_slot, reset_command_calls};
use common::stampede::one_shared_error;
use library_search::{Book, Search, dune, search};
use redis::{Commands, ConnectionLike};
use serde_json::json;
use tier::{Address, DRIVERS, Driver, Options, Tier, generation, origin_of};

/// The servers a suite body runs on, and raw access to them.
enum Target {
    Server(Server),
    Cluster(Cluster),
}

impl Target {
    fn address(&self) -> Address {
        match self {
            Target::Server(server) => Address::Server(server.url()),
            Target::Cluster(cluster) => Address::Cluster(cluster.urls()),
        }
    }

    fn admin(&self) -> Admin {
        Admin(match self {
            Target::Server(server) => Box::new(server.connect()),
            Target::Cluster(cluster) => Box::new(cluster.connect()),
        })
    }

    fn flush(&self) {
        let servers: Vec<&Server> = match self {
            Target::Server(server) => vec![server],
            Target::Cluster(cluster) => cluster.nodes().iter().collect(),
        };
        for server in servers {
            server.flush();
        }
    }
}

/// A connection to either target, for the test's own commands.
struct Admin(Box<dyn ConnectionLike>);

impl ConnectionLike for Admin {
    fn req_packed_command(&mut self, cmd: &[u8]) -> redis::RedisResult<redis::Value> {
        self.0.req_packed_command(cmd)
    }
    fn req_packed_commands(
        &mut self,
        cmd: &[u8],
        offset: usize,
        count: usize,
    ) -> redis::RedisResult<Vec<redis::Value>> {
        self.0.req_packed_commands(cmd, offset, count)
    }
    fn req_command(&mut self, cmd: &redis::Cmd) -> redis::RedisResult<redis::Value> {
        self.0.req_command(cmd)
    }
    fn get_db(&self) -> i64 {
        self.0.get_db()
    }
    fn check_connection(&mut self) -> bool {
        self.0.check_connection()
    }
    fn is_open(&self) -> bool {
        self.0.is_open()
    }
}

/// Runs `body` for each driver on a fresh target (the data of one driver's
/// run flushed before the next).
fn each_driver(target: Target, body: fn(&dyn Tier, &Target)) {
    for driver in DRIVERS {
        target.flush();
        let tier = driver.tier(&target.address(), Options::default());
        body(&*tier, &target);
    }
}

/// The suite: each body as a test on one server and on a cluster.
macro_rules! suite {
    ($($body:ident),* $(,)?) => {
        mod on_a_server {
            $(
                #[test]
                #[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
                fn $body() {
                    let Some(server) = super::Server::start(false) else { return };
                    super::each_driver(super::Target::Server(server), super::$body);
                }
            )*
        }
        mod on_a_cluster {
            $(
                #[test]
                #[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
                fn $body() {
                    let Some(cluster) = super::Cluster::start() else { return };
                    super::each_driver(super::Target::Cluster(cluster), super::$body);
                }
            )*
        }
    };
}

suite! {
    entries_are_enveloped_set_with_px_and_read_back,
    every_bad_entry_is_a_miss_with_its_reason_once,
    another_redis_type_under_the_key_is_a_miss_the_next_load_overwrites,
    invalidating_makes_the_next_read_a_miss,
    concurrent_misses_reach_the_origin_once_and_share_its_error,
    a_panicking_origin_hands_the_flight_to_one_waiter,
    a_bump_while_the_origin_works_leaves_its_answer_unreachable,
    a_summarized_key_stores_no_criterion_text,
    a_value_json_cannot_hold_is_refused,
    reads_after_an_invalidation_never_see_the_old_value,
}

/// The envelope `tier` writes for `query` at its current generation.
fn good_envelope(tier: &dyn Tier, query: &Search) -> serde_json::Value {
    let readable = query.readable_key(generation(tier, query)).unwrap();
    json!({
        "v": 4,
        "schema": 1,
        "type": "Vec<Book>",
        "query": sha256_hex(readable.as_str()),
        "fresh": null,
        "value": [{"title": "Dune", "year": 1965, "subtitle": null}],
    })
}

/// [`good_envelope`] fresh for another minute, as stored.
fn stored_envelope(tier: &dyn Tier, query: &Search) -> serde_json::Value {
    let mut envelope = good_envelope(tier, query);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    envelope["fresh"] = json!(now.as_millis() as u64 + 60_000);
    envelope
}

fn sha256_hex(text: &str) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(text.as_bytes())
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

fn key_of(tier: &dyn Tier, query: &Search) -> String {
    query
        .cache_key(generation(tier, query))
        .unwrap()
        .to_string()
}

fn entries_are_enveloped_set_with_px_and_read_back(tier: &dyn Tier, target: &Target) {
    let mut admin = target.admin();
    let calls = AtomicUsize::new(0);
    let query = search(1, "Dune");
    assert_eq!(
        tier.get_or_load(&query, &origin_of(&calls)).unwrap(),
        dune()
    );
    assert_eq!(
        tier.get_or_load(&query, &origin_of(&calls)).unwrap(),
        dune()
    );
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    let stats = tier.stats();
    assert_eq!(
        (stats.hits, stats.misses, stats.loads),
        (1, 1, 1),
        "{stats:?}"
    );

    let key = key_of(tier, &query);
    let stored: String = admin.get(&key).unwrap();
    let mut envelope: serde_json::Value = serde_json::from_str(&stored).unwrap();
    // Fresh until the TTL (60 s) from the write, in ms since 1970.
    let fresh = envelope["fresh"].take().as_u64().unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    assert!(
        fresh > now + 50_000 && fresh <= now + 60_000,
        "{fresh} at {now}"
    );
    envelope["fresh"] = json!(null);
    assert_eq!(envelope, good_envelope(tier, &query));
    let ttl: i64 = admin.pttl(&key).unwrap();
    assert!(ttl > 0 && ttl <= 60_000, "PTTL {ttl}");
    assert_eq!(tier.get(&query).unwrap(), Some(dune()));

    // An overridden TTL reaches the SET.
    let address = target.address();
    let short = Options {
        ttl: Some(Duration::from_millis(1_500)),
        ..Options::default()
    };
    let other = tier.driver().tier(&address, short);
    other.insert(&search(2, "Dune"), &dune()).unwrap();
    let ttl: i64 = admin.pttl(key_of(&*other, &search(2, "Dune"))).unwrap();
    assert!(ttl > 0 && ttl <= 1_500, "PTTL {ttl}");
}

fn every_bad_entry_is_a_miss_with_its_reason_once(tier: &dyn Tier, target: &Target) {
    let mut admin = target.admin();
    let query = search(1, "Dune");
    let key = key_of(tier, &query);
    let good = stored_envelope(tier, &query);
    let generation = generation(tier, &query);
    let other = search(1, "Dune Messiah").readable_key(generation).unwrap();
    let mut expected = Rejected::default();
    for bad in bad_entries(&good, &sha256_hex(other.as_str())) {
        let () = admin.set(&key, &bad.bytes).unwrap();
        assert_eq!(tier.get(&query).unwrap(), None, "{}", bad.what);
        expected = add(expected, bad.rejected);
        assert_eq!(tier.stats().rejected, expected, "{}", bad.what);
    }
    // The good entry is served, and get_or_load replaces a bad one, its
    // rejection counted once.
    let () = admin.set(&key, good.to_string()).unwrap();
    assert_eq!(tier.get(&query).unwrap(), Some(dune()));
    let () = admin.set(&key, "garbage").unwrap();
    let calls = AtomicUsize::new(0);
    assert_eq!(
        tier.get_or_load(&query, &origin_of(&calls)).unwrap(),
        dune()
    );
    expected.undecodable += 1;
    assert_eq!(
        tier.stats().rejected,
        expected,
        "one count per rejected read"
    );
    assert_eq!(tier.get(&query).unwrap(), Some(dune()));
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    let stats = tier.stats();
    let reads = bad_entries(&good, "").len() as u64 + 1;
    assert_eq!(
        (stats.hits, stats.misses, stats.errors),
        (2, reads, 0),
        "{stats:?}"
    );
}

fn another_redis_type_under_the_key_is_a_miss_the_next_load_overwrites(
    tier: &dyn Tier,
    target: &Target,
) {
    let mut admin = target.admin();
    let query = search(1, "Dune");
    let key = key_of(tier, &query);
    let _: i64 = admin.rpush(&key, "a list").unwrap();
    assert_eq!(tier.get(&query).unwrap(), None);
    let calls = AtomicUsize::new(0);
    assert_eq!(
        tier.get_or_load(&query, &origin_of(&calls)).unwrap(),
        dune()
    );
    assert_eq!(calls.load(Ordering::SeqCst), 1, "the origin is asked");
    assert_eq!(
        tier.get(&query).unwrap(),
        Some(dune()),
        "and overwrote the list"
    );
    let stats = tier.stats();
    assert_eq!(stats.rejected.wrong_type, 2, "{stats:?}");
    assert_eq!((stats.errors, stats.hits), (0, 1), "{stats:?}");
}

fn invalidating_makes_the_next_read_a_miss(tier: &dyn Tier, _: &Target) {
    tier.insert(&search(1, "Dune"), &dune()).unwrap();
    tier.insert(&search(2, "Dune"), &dune()).unwrap();
    tier.invalidate_tenant(1).unwrap();
    assert_eq!(tier.get(&search(1, "Dune")).unwrap(), None);
    assert_eq!(tier.get(&search(2, "Dune")).unwrap(), Some(dune()));
    assert_eq!(tier.stats().rejected.total(), 0);
}

/// Runs `call` on `callers` threads released at once; their answers, or
/// the panics they ended with (`None`).
fn at_once<T: Send>(callers: usize, call: impl Fn() -> T + Sync) -> Vec<Option<T>> {
    let start = Barrier::new(callers);
    thread::scope(|scope| {
        let handles: Vec<_> = (0..callers)
            .map(|_| {
                scope.spawn(|| {
                    start.wait();
                    catch_unwind(AssertUnwindSafe(&call)).ok()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

/// Waits until `tier` has counted `misses` misses, then a little longer so
/// that the last callers reach their flight.
fn until_misses(tier: &dyn Tier, misses: u64) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while tier.stats().misses < misses {
        assert!(Instant::now() < deadline, "only {:?}", tier.stats());
        thread::sleep(Duration::from_millis(1));
    }
    thread::sleep(Duration::from_millis(20));
}

const CALLERS: usize = 64;

fn concurrent_misses_reach_the_origin_once_and_share_its_error(tier: &dyn Tier, _: &Target) {
    let calls = AtomicUsize::new(0);
    let query = search(1, "Dune");
    let origin = || {
        until_misses(tier, CALLERS as u64);
        origin_of(&calls)()
    };
    let answers = at_once(CALLERS, || tier.get_or_load(&query, &origin).unwrap());
    assert!(answers.iter().all(|a| a.as_ref() == Some(&dune())));
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    let stats = tier.stats();
    assert_eq!(
        (stats.loads, stats.coalesced),
        (1, CALLERS as u64 - 1),
        "{stats:?}"
    );

    // An origin error reaches every caller of its flight and is not stored.
    let calls = AtomicUsize::new(0);
    let query = search(2, "Dune");
    let before = tier.stats().misses;
    let failing = || {
        calls.fetch_add(1, Ordering::SeqCst);
        until_misses(tier, before + CALLERS as u64);
        Err("catalog down".to_owned())
    };
    let answers: Vec<_> = at_once(CALLERS, || tier.get_or_load(&query, &failing))
        .into_iter()
        .map(Option::unwrap)
        .collect();
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(*one_shared_error(&answers), "catalog down");
    assert_eq!(tier.stats().errors, CALLERS as u64);
    assert_eq!(tier.get(&query).unwrap(), None, "the error is not stored");
}

fn a_panicking_origin_hands_the_flight_to_one_waiter(tier: &dyn Tier, _: &Target) {
    const LATENCY: Duration = Duration::from_millis(200);
    let calls = AtomicUsize::new(0);
    let query = search(1, "Dune");
    let origin = || {
        let call = calls.fetch_add(1, Ordering::SeqCst);
        thread::sleep(LATENCY);
        assert!(call > 0, "the first origin call panics");
        Ok(dune())
    };
    let answers = at_once(8, || tier.get_or_load(&query, &origin).unwrap());
    assert_eq!(
        answers.iter().filter(|a| a.is_none()).count(),
        1,
        "one panic"
    );
    assert!(answers.iter().flatten().all(|a| a == &dune()));
    assert_eq!(
        calls.load(Ordering::SeqCst),
        2,
        "the panic, then one waiter's call"
    );
    // No caller started a third call, and none waited out a timeout: a
    // call's bound passing would be an error or a degraded answer.
    let stats = tier.stats();
    assert_eq!((stats.errors, stats.degraded), (0, 0), "{stats:?}");
    assert_eq!(tier.get(&query).unwrap(), Some(dune()));
}

fn a_bump_while_the_origin_works_leaves_its_answer_unreachable(tier: &dyn Tier, _: &Target) {
    let query = search(1, "Dune");
    let stale = tier.get_or_load(&query, &|| {
        tier.invalidate_tenant(1).unwrap();
        Ok(Vec::new())
    });
    assert_eq!(stale.unwrap(), []);
    assert_eq!(
        tier.get(&query).unwrap(),
        None,
        "stored under the old generation"
    );
    assert_eq!(tier.get_or_load(&query, &|| Ok(dune())).unwrap(), dune());
    assert_eq!(tier.get(&query).unwrap(), Some(dune()));
}

fn a_summarized_key_stores_no_criterion_text(tier: &dyn Tier, target: &Target) {
    let title = "Jane Doe, jane.doe@example.com, SSN 123-45-6789";
    let query = search(7, title);
    let key = key_of(tier, &query);
    assert!(key.contains(":c_"), "a summarized key: {key}");
    tier.insert(&query, &dune()).unwrap();
    let stored: Vec<u8> = target.admin().get(&key).unwrap();
    let stored = String::from_utf8(stored).unwrap();
    for piece in ["Jane", "jane", "example.com", "123-45", "SSN", "title="] {
        assert!(!stored.contains(piece), "{piece:?} in {stored}");
    }
    // The envelope names the query by its readable key's digest, criteria
    // whole, not by the summary the key holds.
    let envelope: serde_json::Value = serde_json::from_str(&stored).unwrap();
    let readable = query.readable_key(generation(tier, &query)).unwrap();
    assert!(readable.as_str().contains("title=Jane"), "{readable}");
    assert_eq!(envelope["query"], sha256_hex(readable.as_str()));
    assert_eq!(tier.get(&query).unwrap(), Some(dune()));
    // Another query's entry copied onto the key is still caught.
    let other = search(7, "Jane Doe, jane.doe@example.com, SSN 123-45-6780");
    tier.insert(&other, &dune()).unwrap();
    let copied: Vec<u8> = target.admin().get(key_of(tier, &other)).unwrap();
    let () = target.admin().set(&key, copied).unwrap();
    assert_eq!(tier.get(&query).unwrap(), None);
    assert_eq!(tier.stats().rejected.query, 1);
}

/// A `Vec<Book>` holds no float: this body keys a query whose value does.
fn a_value_json_cannot_hold_is_refused(tier: &dyn Tier, target: &Target) {
    prices::check(tier.driver(), &target.address());
}

/// A query whose value holds floats, for the NaN test.
mod prices {
    use super::*;
    use cache_key::redis::{
        AsyncRedisCache, AsyncRedisGenerations, AsyncRedisPool, RedisCache, RedisGenerations,
        RedisPool,
    };

    #[derive(CacheKey)]
    #[cache_key(namespace = "shop", operation = "prices", value = Vec<f64>, ttl = "1m")]
    pub struct Prices {
        #[tenant]
        pub shop: u32,
    }

    pub fn check(driver: Driver, address: &Address) {
        let query = Prices { shop: 1 };
        let nan = vec![1.5, f64::NAN];
        let (insert, loaded, stored, stats) = match driver {
            Driver::Blocking => {
                let pool = match address {
                    Address::Server(url) => RedisPool::open(url.as_str()),
                    Address::Cluster(urls) => {
                        RedisPool::open_cluster(urls.iter().map(String::as_str))
                    }
                }
                .unwrap();
                let cache = RedisCache::new(RedisGenerations::new(pool));
                let insert = cache.insert(&query, nan.clone());
                let loaded = cache.get_or_load(&query, || Ok::<_, String>(nan.clone()));
                let stored = cache.get(&query).unwrap();
                (insert, loaded, stored, cache.stats())
            }
            Driver::Async => {
                let runtime = tier::runtime();
                runtime.block_on(async {
                    let pool = match address {
                        Address::Server(url) => AsyncRedisPool::connect(url.as_str()).await,
                        Address::Cluster(urls) => {
                            AsyncRedisPool::connect_cluster(urls.iter().map(String::as_str)).await
                        }
                    }
                    .unwrap();
                    let cache = AsyncRedisCache::new(AsyncRedisGenerations::new(pool));
                    let insert = cache.insert(&query, nan.clone()).await;
                    let loaded = cache
                        .get_or_load(&query, || async { Ok::<_, String>(nan.clone()) })
                        .await;
                    let stored = cache.get(&query).await.unwrap();
                    (insert, loaded, stored, cache.stats())
                })
            }
        };
        let Err(CacheError::Unstorable(error)) = insert else {
            panic!("NaN refused at insert, got {insert:?}");
        };
        assert_eq!(error.to_string(), "the value cannot be cached as JSON");
        assert_eq!(
            error.source().unwrap().to_string(),
            "[1] is NaN, which JSON cannot hold \
             (serde_json writes it as null, so the entry would never read back as this value)"
        );
        // The origin's answer is served, never stored: the insert failed,
        // the load did not.
        assert!(loaded.unwrap()[1].is_nan());
        assert_eq!(stored, None);
        assert_eq!((stats.errors, stats.degraded), (1, 1), "{stats:?}");
    }
}

fn reads_after_an_invalidation_never_see_the_old_value(tier: &dyn Tier, _: &Target) {
    // The "database": one version per branch, raised by the writer, which
    // invalidates after each change. A reader that starts after an
    // invalidation returned must get a value at least as new.
    let versions = [AtomicU64::new(0), AtomicU64::new(0)];
    let invalidated = [AtomicU64::new(0), AtomicU64::new(0)];
    let (reads, stale) = (AtomicU64::new(0), AtomicU64::new(0));
    let deadline = Instant::now() + Duration::from_millis(1_500);
    let title_of = |version: u64| format!("v{version}");
    thread::scope(|scope| {
        scope.spawn(|| {
            while Instant::now() < deadline {
                for branch in 0..2 {
                    let version = versions[branch].fetch_add(1, Ordering::SeqCst) + 1;
                    tier.invalidate_tenant(branch as u32 + 1).unwrap();
                    invalidated[branch].store(version, Ordering::SeqCst);
                }
                thread::sleep(Duration::from_millis(2));
            }
        });
        for _ in 0..3 {
            scope.spawn(|| {
                while Instant::now() < deadline {
                    for branch in 0..2 {
                        let floor = invalidated[branch].load(Ordering::SeqCst);
                        let query = search(branch as u32 + 1, "Dune");
                        let books = tier
                            .get_or_load(&query, &|| {
                                let version = versions[branch].load(Ordering::SeqCst);
                                Ok(vec![Book {
                                    title: title_of(version),
                                    year: 1965,
                                    subtitle: None,
                                }])
                            })
                            .unwrap();
                        let seen: u64 = books[0].title[1..].parse().unwrap();
                        reads.fetch_add(1, Ordering::Relaxed);
                        if seen < floor {
                            stale.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
            });
        }
    });
    assert!(reads.load(Ordering::Relaxed) > 100, "{reads:?}");
    assert_eq!(stale.load(Ordering::Relaxed), 0, "of {reads:?} reads");
    assert!(tier.stats().hits > 0, "{:?}", tier.stats());
}

// ---------------------------------------------------------------------------
// Both drivers on one Redis; the load lock between processes.

#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn the_drivers_share_entries_and_invalidations() {
    let Some(server) = Server::start(false) else {
        return;
    };
    let address = Address::Server(server.url());
    let blocking = Driver::Blocking.tier(&address, Options::default());
    let not_blocking = Driver::Async.tier(&address, Options::default());
    blocking.insert(&search(1, "Dune"), &dune()).unwrap();
    assert_eq!(not_blocking.get(&search(1, "Dune")).unwrap(), Some(dune()));
    not_blocking.insert(&search(2, "Dune"), &dune()).unwrap();
    assert_eq!(blocking.get(&search(2, "Dune")).unwrap(), Some(dune()));
    not_blocking.invalidate_tenant(1).unwrap();
    assert_eq!(blocking.get(&search(1, "Dune")).unwrap(), None);
    blocking.invalidate_tenant(2).unwrap();
    assert_eq!(not_blocking.get(&search(2, "Dune")).unwrap(), None);
}

// ---------------------------------------------------------------------------
// A value type's identity in Redis is its declared `VALUE_ID`, not its path.

/// One shelf query before and after its value type moved to another module:
/// two Rust types of one shape, and the same key (namespace, operation,
/// tenant). `value = Vec<Book>` is written the same in both, so both ids
/// are `"Vec<Book>"`; `Reshelved` gives its own id, for a changed meaning.
mod shelf {
    use cache_key::CacheKey;
    use serde::{Deserialize, Serialize};

    pub mod before {
        use super::*;

        #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
        pub struct Book {
            pub title: String,
        }

        #[derive(CacheKey)]
        #[cache_key(namespace = "library", operation = "shelf", value = Vec<Book>, ttl = "1m")]
        pub struct Shelf {
            #[tenant]
            pub branch: u32,
        }
    }

    pub mod after {
        use super::*;

        #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
        pub struct Book {
            pub title: String,
        }

        #[derive(CacheKey)]
        #[cache_key(namespace = "library", operation = "shelf", value = Vec<Book>, ttl = "1m")]
        pub struct Shelf {
            #[tenant]
            pub branch: u32,
        }

        #[derive(CacheKey)]
        #[cache_key(
            namespace = "library",
            operation = "shelf",
            value = Vec<Book>,
            value_id = "library.shelf.v2",
            ttl = "1m"
        )]
        pub struct Reshelved {
            #[tenant]
            pub branch: u32,
        }
    }

    pub fn cache(url: &str) -> cache_key::redis::RedisCache {
        use cache_key::redis::{RedisCache, RedisGenerations, RedisPool};
        RedisCache::new(RedisGenerations::new(RedisPool::open(url).unwrap()))
    }
}

#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn a_value_type_moved_to_another_module_keeps_its_entries_hitting() {
    use shelf::{after, before};
    let Some(server) = Server::start(false) else {
        return;
    };
    assert_ne!(
        std::any::type_name::<before::Book>(),
        std::any::type_name::<after::Book>()
    );
    assert_eq!(
        before::Shelf { branch: 1 }.cache_key(0).unwrap(),
        after::Shelf { branch: 1 }.cache_key(0).unwrap()
    );
    let writer = shelf::cache(&server.url());
    let reader = shelf::cache(&server.url());
    let dune = |title: &str| before::Book {
        title: title.to_owned(),
    };
    writer
        .insert(&before::Shelf { branch: 1 }, vec![dune("Dune")])
        .unwrap();
    assert_eq!(
        reader.get(&after::Shelf { branch: 1 }).unwrap(),
        Some(vec![after::Book {
            title: "Dune".to_owned()
        }])
    );
    // And back: an entry written after the move reads before it.
    reader
        .insert(
            &after::Shelf { branch: 2 },
            vec![after::Book {
                title: "Emma".to_owned(),
            }],
        )
        .unwrap();
    assert_eq!(
        writer.get(&before::Shelf { branch: 2 }).unwrap(),
        Some(vec![dune("Emma")])
    );
    for stats in [reader.stats(), writer.stats()] {
        assert_eq!((stats.hits, stats.misses), (1, 0), "{stats:?}");
        assert_eq!(stats.rejected.total(), 0, "{stats:?}");
    }
}

#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn a_changed_value_id_is_a_miss_counted_under_value_type() {
    use shelf::after::{Book, Reshelved, Shelf};
    let Some(server) = Server::start(false) else {
        return;
    };
    let cache = shelf::cache(&server.url());
    let dune = vec![Book {
        title: "Dune".to_owned(),
    }];
    cache.insert(&Shelf { branch: 1 }, dune.clone()).unwrap();
    assert_eq!(cache.get(&Reshelved { branch: 1 }).unwrap(), None);
    let stats = cache.stats();
    assert_eq!(
        (stats.hits, stats.misses, stats.errors),
        (0, 1, 0),
        "{stats:?}"
    );
    let mut rejected = Rejected::default();
    rejected.value_type = 1;
    assert_eq!(stats.rejected, rejected);
    // The next load (its read rejected once more) overwrites the entry
    // under the new id: the old type's read is then the miss.
    let loaded = cache
        .get_or_load(&Reshelved { branch: 1 }, || Ok::<_, String>(dune.clone()))
        .unwrap();
    assert_eq!(loaded, dune);
    assert_eq!(cache.get(&Reshelved { branch: 1 }).unwrap(), Some(dune));
    assert_eq!(cache.get(&Shelf { branch: 1 }).unwrap(), None);
    assert_eq!(cache.stats().rejected.value_type, 3);
}

fn lock_name(tier: &dyn Tier, query: &Search) -> String {
    format!("{}#lock", key_of(tier, query))
}

#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn a_load_lock_makes_two_processes_load_once() {
    let Some(server) = Server::start(false) else {
        return;
    };
    let address = Address::Server(server.url());
    let locked = Options {
        lock: Some(LoadLock::new(
            Duration::from_secs(10),
            Duration::from_secs(10),
        )),
        ..Options::default()
    };
    for driver in DRIVERS {
        server.flush();
        let calls = AtomicUsize::new(0);
        // Without the lock each process asks the origin.
        let unlocked = [
            driver.tier(&address, Options::default()),
            driver.tier(&address, Options::default()),
        ];
        let answers = two_processes_miss_at_once(&unlocked, &search(1, "Dune"), &calls);
        assert_eq!(answers, [dune(), dune()]);
        assert_eq!(calls.swap(0, Ordering::SeqCst), 2);

        let tiers = [driver.tier(&address, locked), driver.tier(&address, locked)];
        let query = search(2, "Dune");
        let answers = two_processes_miss_at_once(&tiers, &query, &calls);
        assert_eq!(answers, [dune(), dune()]);
        assert_eq!(calls.load(Ordering::SeqCst), 1, "{driver:?}");
        let (a, b) = (tiers[0].stats(), tiers[1].stats());
        assert_eq!((a.loads + b.loads, a.coalesced + b.coalesced), (1, 1));
        assert_eq!(a.errors + b.errors, 0);
        // Released by its owner once the answer is stored; never a key.
        let name = lock_name(&*tiers[0], &query);
        assert!(!server.connect().exists::<_, bool>(&name).unwrap());
        assert!(cache_key::decode(&name).is_err(), "{name}");
    }
}

/// Two caches of their own, as two processes have, missing one key at
/// once; each origin waits until both have missed.
fn two_processes_miss_at_once(
    tiers: &[Box<dyn Tier>; 2],
    query: &Search,
    calls: &AtomicUsize,
) -> Vec<Vec<Book>> {
    let both_missed = || tiers[0].stats().misses + tiers[1].stats().misses >= 2;
    let start = Barrier::new(2);
    thread::scope(|scope| {
        let handles: Vec<_> = tiers
            .iter()
            .map(|tier| {
                let (start, both_missed) = (&start, &both_missed);
                scope.spawn(move || {
                    start.wait();
                    tier.get_or_load(query, &|| {
                        let deadline = Instant::now() + Duration::from_secs(10);
                        while !both_missed() && Instant::now() < deadline {
                            thread::sleep(Duration::from_millis(1));
                        }
                        thread::sleep(Duration::from_millis(20));
                        origin_of(calls)()
                    })
                    .unwrap()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn a_load_lock_is_released_when_its_origin_panics() {
    let Some(server) = Server::start(false) else {
        return;
    };
    let address = Address::Server(server.url());
    let wait = Duration::from_secs(30);
    let locked = Options {
        lock: Some(LoadLock::new(Duration::from_secs(60), wait)),
        ..Options::default()
    };
    for driver in DRIVERS {
        server.flush();
        let tier = driver.tier(&address, locked);
        let query = search(1, "Dune");
        let name = lock_name(&*tier, &query);
        let panicked = catch_unwind(AssertUnwindSafe(|| {
            tier.get_or_load(&query, &|| {
                assert!(server.connect().exists::<_, bool>(&name).unwrap());
                panic!("the origin panics while holding the lock")
            })
        }));
        assert!(panicked.is_err());
        // The async driver releases it from a task: give it a moment.
        let deadline = Instant::now() + Duration::from_secs(5);
        while server.connect().exists::<_, bool>(&name).unwrap() {
            assert!(
                Instant::now() < deadline,
                "{driver:?}: the lock outlived its panic"
            );
            thread::sleep(Duration::from_millis(5));
        }
        // Another process loads at once, without waiting for the lease.
        let other = driver.tier(&address, locked);
        let started = Instant::now();
        let calls = AtomicUsize::new(0);
        assert_eq!(
            other.get_or_load(&query, &origin_of(&calls)).unwrap(),
            dune()
        );
        assert!(started.elapsed() < wait / 10, "{:?}", started.elapsed());
    }
}

#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn a_load_lock_held_elsewhere_is_waited_on_then_loaded_without() {
    let Some(server) = Server::start(false) else {
        return;
    };
    let address = Address::Server(server.url());
    for driver in DRIVERS {
        server.flush();
        let wait = Duration::from_millis(300);
        let lock =
            LoadLock::new(Duration::from_secs(10), wait).with_poll(Duration::from_millis(20));
        let tier = driver.tier(
            &address,
            Options {
                lock: Some(lock),
                ..Options::default()
            },
        );
        let query = search(1, "Dune");
        let name = lock_name(&*tier, &query);
        let mut admin = server.connect();
        let () = admin.set_ex(&name, "another process", 60).unwrap();
        let calls = AtomicUsize::new(0);
        let started = Instant::now();
        assert_eq!(
            tier.get_or_load(&query, &origin_of(&calls)).unwrap(),
            dune()
        );
        assert!(started.elapsed() >= wait, "waited {:?}", started.elapsed());
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        let held: String = admin.get(&name).unwrap();
        assert_eq!(
            held, "another process",
            "another owner's lock is never released"
        );
    }
}

// ---------------------------------------------------------------------------
// Faults.

/// A hit costs one round trip: the counters' `MGET` (plain: the connection
/// learned its server's run id when it opened, and `CLIENT GETNAME` checks
/// it still reaches that process) and the entry's `GET`, in one pipeline
/// (one burst of the client's, at a proxy in front of the server), with
/// `WAIT 0 0` (the server is still a primary) and nothing else; with the
/// instance checked per read, the counters' `EVALSHA` (whose script runs
/// the `MGET`) in place of the `MGET` and its `CLIENT GETNAME`.
#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn a_hit_is_one_pipeline_of_the_counters_and_the_entry() {
    let Some(server) = Server::start(false) else {
        return;
    };
    let proxy = Proxy::to(server.port());
    let address = Address::Server(proxy.url());
    for (check, counters) in [
        (
            InstanceCheck::PerConnection,
            vec![("mget", 10), ("client|getname", 10), ("wait", 10)],
        ),
        (
            InstanceCheck::PerRead,
            vec![("evalsha", 10), ("mget", 10), ("wait", 10)],
        ),
    ] {
        for driver in DRIVERS {
            server.flush();
            let options = Options {
                instance_check: Some(check),
                ..Options::default()
            };
            let tier = driver.tier(&address, options);
            let query = search(1, "Dune");
            tier.insert(&query, &dune()).unwrap();
            assert_eq!(tier.get(&query).unwrap(), Some(dune()));
            let mut admin = server.connect();
            reset_command_calls(&mut admin);
            proxy.reset_bursts();
            for _ in 0..10 {
                assert_eq!(tier.get(&query).unwrap(), Some(dune()));
            }
            let calls = command_calls(&mut admin);
            let mut expected: BTreeMap<String, u64> = BTreeMap::from([("get".to_owned(), 10)]);
            expected.extend(
                counters
                    .iter()
                    .map(|&(name, calls)| (name.to_owned(), calls)),
            );
            assert_eq!(calls, expected, "{driver:?} {check:?}");
            assert_eq!(proxy.bursts(), 10, "{driver:?}: one burst per hit");
        }
    }
}

/// On a cluster, a blocking hit writes each primary it reads from its
/// commands at once, all of them before it waits for a reply: one burst per
/// node (counted at proxies the nodes announce as their addresses, so that
/// clients reach them only through those), the same commands on each node
/// as the async driver's, and one round trip: with every node stopped
/// (`SIGSTOP`), it has written to each node it needs before any answers.
/// The async driver's bursts are printed (`--nocapture`), not checked: its
/// commands are concurrent tasks, and one written after an answer arrived
/// counts apart.
#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn on_a_cluster_a_hit_writes_each_node_once_in_one_round_trip() {
    let Some(cluster) = Cluster::start_behind_proxies() else {
        return;
    };
    let address = Address::Cluster(cluster.urls());
    // A tenant whose counters live on another primary than the namespace's:
    // a hit sends one node an `EVALSHA`, the other an `EVALSHA` and the `GET`.
    let mut node = cluster.nodes()[0].connect();
    let mut owner =
        |scope: GenerationScope| cluster.owner(key_slot(&mut node, &scope.counter().name()));
    let namespace = owner(GenerationScope::namespace::<Search>());
    let query = (1..100)
        .map(|branch| search(branch, "Dune"))
        .find(|query| owner(GenerationScope::tenant_of(query).unwrap()) != namespace)
        .expect("a tenant on another primary than the namespace");
    let tenant = owner(GenerationScope::tenant_of(&query).unwrap());
    let proxies = cluster.proxies();
    // Per node (in the order of `proxies`): whether a hit touches it.
    let touched: Vec<u64> = proxies
        .iter()
        .map(|proxy| u64::from([namespace, tenant].contains(&proxy.port())))
        .collect();
    let bursts = || proxies.iter().map(Proxy::bursts).collect::<Vec<u64>>();
    // Long enough for the stopped nodes below not to time the hit out.
    let patient = Options {
        timeouts: Some(Timeouts::default().with_call(Duration::from_secs(10))),
        ..Options::default()
    };
    let mut commands = Vec::new();
    for driver in DRIVERS {
        for node in cluster.nodes() {
            node.flush();
        }
        let tier = driver.tier(&address, patient);
        tier.insert(&query, &dune()).unwrap();
        assert_eq!(tier.get(&query).unwrap(), Some(dune()));

        let mut admins: Vec<redis::Connection> =
            cluster.nodes().iter().map(Server::connect).collect();
        admins.iter_mut().for_each(reset_command_calls);
        proxies.iter().for_each(Proxy::reset_bursts);
        for _ in 0..10 {
            assert_eq!(tier.get(&query).unwrap(), Some(dune()));
        }
        let ten = bursts();
        println!("{driver:?}: ten hits, bursts per node {ten:?}");
        if driver == Driver::Blocking {
            let once_each: Vec<u64> = touched.iter().map(|touched| touched * 10).collect();
            assert_eq!(ten, once_each, "one burst per node a hit reads from");
        }
        commands.push(admins.iter_mut().map(command_calls).collect::<Vec<_>>());

        proxies.iter().for_each(Proxy::reset_bursts);
        for node in cluster.nodes() {
            node.pause();
        }
        let (hit, written) = thread::scope(|scope| {
            let hit = scope.spawn(|| tier.get(&query));
            let deadline = Instant::now() + Duration::from_secs(5);
            while bursts().iter().sum::<u64>() < touched.iter().sum() && Instant::now() < deadline {
                thread::sleep(Duration::from_millis(5));
            }
            let written = bursts();
            for node in cluster.nodes() {
                node.resume();
            }
            (hit.join().unwrap(), written)
        });
        assert_eq!(hit.unwrap(), Some(dune()), "{driver:?}");
        let after = bursts();
        println!(
            "{driver:?}: a hit on stopped nodes, bursts {written:?} before any answer, {after:?} in all"
        );
        if driver == Driver::Blocking {
            assert_eq!(
                written, touched,
                "each node the hit reads from written to before any answered"
            );
            assert_eq!(after, touched, "nothing sent after the answers");
        }
    }
    // On each node, an `EVALSHA` (and the `MGET` its script runs) per
    // counter slot it holds, and the `GET` on the tenant's.
    let expected: Vec<BTreeMap<String, u64>> = proxies
        .iter()
        .map(|proxy| {
            let (has_namespace, has_tenant) = (proxy.port() == namespace, proxy.port() == tenant);
            let scripts = 10 * u64::from(has_namespace) + 10 * u64::from(has_tenant);
            [
                ("evalsha", scripts),
                ("mget", scripts),
                ("get", 10 * u64::from(has_tenant)),
            ]
            .into_iter()
            .filter(|&(_, calls)| calls > 0)
            .map(|(name, calls)| (name.to_owned(), calls))
            .collect()
        })
        .collect();
    assert_eq!(commands[0], expected, "the blocking hits' commands");
    assert_eq!(commands[1], commands[0], "the async hits' commands");
}

/// On a cluster, connections closed under the client (every node's, by
/// the proxies it reaches them through: a restart, an idle timeout) cost
/// no call: the next hit connects again, on either driver.
#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn on_a_cluster_connections_closed_under_the_client_fail_no_hit() {
    let Some(cluster) = Cluster::start_behind_proxies() else {
        return;
    };
    let query = search(1, "Dune");
    for driver in DRIVERS {
        for node in cluster.nodes() {
            node.flush();
        }
        let tier = driver.tier(&Address::Cluster(cluster.urls()), Options::default());
        tier.insert(&query, &dune()).unwrap();
        assert_eq!(tier.get(&query).unwrap(), Some(dune()));
        for _ in 0..3 {
            cluster.proxies().iter().for_each(Proxy::drop_connections);
            assert_eq!(tier.get(&query).unwrap(), Some(dune()), "{driver:?}");
        }
    }
}

/// On a cluster, reads follow a slot moved to another primary: while its
/// keys are moved (the old owner answers `ASK` for those it no longer
/// holds) and once the slot is (`MOVED`). The counters that moved were
/// written by another server, so the first read after the move raises
/// them: a miss, never an error nor the old value. After a `MOVED` the
/// blocking driver reads the slots again before its next batch, and hits
/// are one burst per node again, none to the old owner.
#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn on_a_cluster_reads_follow_a_slot_moved_to_another_primary() {
    for driver in DRIVERS {
        let Some(cluster) = Cluster::start_behind_proxies() else {
            return;
        };
        let tier = driver.tier(&Address::Cluster(cluster.urls()), Options::default());
        let query = search(1, "Dune");
        tier.insert(&query, &dune()).unwrap();
        assert_eq!(tier.get(&query).unwrap(), Some(dune()));
        let mut node = cluster.nodes()[0].connect();
        let mut owner =
            |scope: GenerationScope| cluster.owner(key_slot(&mut node, &scope.counter().name()));
        let namespace = owner(GenerationScope::namespace::<Search>());
        let from = owner(GenerationScope::tenant_of(&query).unwrap());
        let tenant = GenerationScope::tenant_of(&query).unwrap().counter().name();
        let slot = key_slot(&mut cluster.nodes()[0].connect(), &tenant);
        // Ports as the cluster announces them: the proxies'.
        let to = cluster
            .proxies()
            .iter()
            .map(Proxy::port)
            .find(|&port| port != from)
            .unwrap();

        // The tenant's two counters and the entry.
        assert_eq!(cluster.migrate_keys(slot, to), 3);
        assert_eq!(
            tier.get(&query).unwrap(),
            None,
            "{driver:?}: asked elsewhere"
        );
        let calls = AtomicUsize::new(0);
        assert_eq!(
            tier.get_or_load(&query, &origin_of(&calls)).unwrap(),
            dune()
        );
        assert_eq!(tier.get(&query).unwrap(), Some(dune()), "{driver:?}");

        cluster.assign(slot, to);
        assert_eq!(tier.get(&query).unwrap(), Some(dune()), "{driver:?}: moved");
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        if driver == Driver::Blocking {
            // This one reads the slots and connects to the new owner.
            assert_eq!(tier.get(&query).unwrap(), Some(dune()));
            cluster.proxies().iter().for_each(Proxy::reset_bursts);
            assert_eq!(tier.get(&query).unwrap(), Some(dune()));
            let bursts: Vec<u64> = cluster.proxies().iter().map(Proxy::bursts).collect();
            let expected: Vec<u64> = cluster
                .proxies()
                .iter()
                .map(|proxy| u64::from([namespace, to].contains(&proxy.port())))
                .collect();
            assert_eq!(bursts, expected, "one burst per node, to the new owner");
        }
    }
}
