//! Two levels: a `RedisCache` with a level in process (`with_local`), on
//! real servers, through both drivers: a hit in process sends the counters
//! alone; an invalidation in one process is seen by the next read of every
//! other (two caches of their own, then two OS processes, against a writer
//! that invalidates all along: 0 stale reads); one origin call per key
//! across both levels; and the fail-safe, which serves a value that only
//! expired while the origin is down, for at most `max_stale`, and never a
//! value whose generation was bumped. The race of caches against a writer
//! runs on a three-primary cluster too.
//!
//! Each test starts its own servers and stops them by pid. Ignored by
//! default; run with `cargo test -- --include-ignored`.

mod common;
#[path = "common/library_search.rs"]
mod library_search;
#[allow(dead_code)]
#[path = "common/tier.rs"]
mod tier;

use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use cache_key::cache::CacheError;
use cache_key::cache::{AsyncQueryCache, AsyncTypedCache};
use cache_key::redis::{FailSafe, FailurePolicy};
use common::reader_report::ReaderReport;
use common::redis_server::{Cluster, Server, command_calls, reset_command_calls};
use library_search::{Book, dune, search};
use redis::Commands;
use tier::{Address, DRIVERS, Driver, Options, Tier};

fn two_levels() -> Options {
    Options {
        local: Some(1_000),
        ..Options::default()
    }
}

#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn a_hit_in_process_sends_the_counters_alone() {
    let Some(server) = Server::start(false) else {
        return;
    };
    let address = Address::Server(server.url());
    for driver in DRIVERS {
        server.flush();
        let tier = driver.tier(&address, two_levels());
        let query = search(1, "Dune");
        tier.insert(&query, &dune()).unwrap();
        let mut admin = server.connect();
        reset_command_calls(&mut admin);
        for _ in 0..10 {
            assert_eq!(tier.get(&query).unwrap(), Some(dune()));
        }
        let calls = command_calls(&mut admin);
        // The counters' MGET and its checks; no GET: the value is here.
        let read = [("mget", 10), ("client|getname", 10), ("wait", 10)];
        let read = read.map(|(name, n)| (name.to_owned(), n));
        assert_eq!(calls, BTreeMap::from(read), "{driver:?}");
        let stats = tier.stats();
        assert_eq!((stats.hits, stats.local_hits), (10, 10), "{stats:?}");

        // Another process: its first read takes the value from Redis and
        // keeps it, the next ones do not.
        let other = driver.tier(&address, two_levels());
        reset_command_calls(&mut admin);
        for _ in 0..3 {
            assert_eq!(other.get(&query).unwrap(), Some(dune()));
        }
        assert_eq!(command_calls(&mut admin).get("get"), Some(&1));
        let stats = other.stats();
        assert_eq!((stats.hits, stats.local_hits), (3, 2), "{stats:?}");
    }
}

#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn an_invalidation_in_one_process_is_seen_by_the_next_read_of_another() {
    let Some(server) = Server::start(false) else {
        return;
    };
    let address = Address::Server(server.url());
    for driver in DRIVERS {
        server.flush();
        let (one, other) = (
            driver.tier(&address, two_levels()),
            driver.tier(&address, two_levels()),
        );
        let query = search(1, "Dune");
        one.insert(&query, &dune()).unwrap();
        assert_eq!(other.get(&query).unwrap(), Some(dune()));
        assert_eq!(other.get(&query).unwrap(), Some(dune()));
        assert_eq!(other.stats().local_hits, 1);
        one.invalidate_tenant(1).unwrap();
        assert_eq!(other.get(&query).unwrap(), None, "{driver:?}");
        assert_eq!(one.get(&query).unwrap(), None, "{driver:?}");
    }
}

/// Readers on their own caches while a writer raises a branch's version
/// (its "database") and invalidates after each change; a read that starts
/// after an invalidation returned must get a value at least as new.
/// `(reads, stale reads)`.
fn race(writer: &dyn Tier, readers: &[Box<dyn Tier>], run: Duration) -> (u64, u64) {
    let version = AtomicU64::new(0);
    let invalidated = AtomicU64::new(0);
    let (reads, stale) = (AtomicU64::new(0), AtomicU64::new(0));
    let deadline = Instant::now() + run;
    thread::scope(|scope| {
        scope.spawn(|| {
            while Instant::now() < deadline {
                let now = version.fetch_add(1, Ordering::SeqCst) + 1;
                writer.invalidate_tenant(1).unwrap();
                invalidated.store(now, Ordering::SeqCst);
                thread::sleep(Duration::from_millis(3));
            }
        });
        for reader in readers {
            scope.spawn(|| {
                while Instant::now() < deadline {
                    let floor = invalidated.load(Ordering::SeqCst);
                    let books = reader
                        .get_or_load(&search(1, "Dune"), &|| {
                            Ok(vec![book(version.load(Ordering::SeqCst))])
                        })
                        .unwrap();
                    reads.fetch_add(1, Ordering::Relaxed);
                    if version_of(&books) < floor {
                        stale.fetch_add(1, Ordering::Relaxed);
                    }
                }
            });
        }
    });
    (reads.into_inner(), stale.into_inner())
}

fn book(version: u64) -> Book {
    Book {
        title: format!("v{version}"),
        year: 1965,
        subtitle: None,
    }
}

fn version_of(books: &[Book]) -> u64 {
    books[0].title[1..].parse().unwrap()
}

#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn caches_of_their_own_never_read_stale_against_an_invalidating_writer() {
    let Some(server) = Server::start(false) else {
        return;
    };
    never_stale_against_an_invalidating_writer(&Address::Server(server.url()), &[&server]);
}

#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn on_a_cluster_caches_of_their_own_never_read_stale_against_an_invalidating_writer() {
    let Some(cluster) = Cluster::start() else {
        return;
    };
    let nodes: Vec<&Server> = cluster.nodes().iter().collect();
    never_stale_against_an_invalidating_writer(&Address::Cluster(cluster.urls()), &nodes);
}

/// [`race`] through each driver, on `servers` (flushed before each) at
/// `address`: 0 stale reads, and hits in process among them.
fn never_stale_against_an_invalidating_writer(address: &Address, servers: &[&Server]) {
    for driver in DRIVERS {
        for server in servers {
            server.flush();
        }
        let writer = driver.tier(address, two_levels());
        let readers = [
            driver.tier(address, two_levels()),
            driver.tier(address, two_levels()),
        ];
        let (reads, stale) = race(&*writer, &readers, Duration::from_millis(1_500));
        assert!(reads > 200, "{reads}");
        assert_eq!(stale, 0, "{driver:?}: {stale} of {reads}");
        let local: u64 = readers.iter().map(|r| r.stats().local_hits).sum();
        assert!(local > 0, "the readers hit in process");
    }
}

/// The reader's part of [`two_processes_never_read_stale`]: in a process of
/// its own, with the database in Redis (`db:version`, and `db:invalidated`
/// once an invalidation returned).
fn reader_process(url: &str, driver: Driver) {
    let tier = driver.tier(&Address::Server(url.to_owned()), two_levels());
    let mut db = redis::Client::open(url).unwrap().get_connection().unwrap();
    let (mut reads, mut stale) = (0u64, 0u64);
    let deadline = Instant::now() + Duration::from_millis(1_500);
    while Instant::now() < deadline {
        let floor: u64 = db
            .get::<_, Option<u64>>("db:invalidated")
            .unwrap()
            .unwrap_or(0);
        let books = tier
            .get_or_load(&search(1, "Dune"), &|| {
                let version: Option<u64> = redis::Client::open(url)
                    .and_then(|c| c.get_connection())
                    .and_then(|mut c| c.get("db:version"))
                    .map_err(|e| e.to_string())?;
                Ok(vec![book(version.unwrap_or(0))])
            })
            .unwrap();
        reads += 1;
        if version_of(&books) < floor {
            stale += 1;
        }
    }
    println!(
        "READER reads={reads} stale={stale} local={}",
        tier.stats().local_hits
    );
}

#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn two_processes_never_read_stale() {
    if let Ok(url) = std::env::var("TWO_LEVELS_READER") {
        let driver = match std::env::var("TWO_LEVELS_DRIVER").as_deref() {
            Ok("async") => Driver::Async,
            _ => Driver::Blocking,
        };
        return reader_process(&url, driver);
    }
    let Some(server) = Server::start(false) else {
        return;
    };
    for (driver, name) in [(Driver::Blocking, "blocking"), (Driver::Async, "async")] {
        server.flush();
        let child = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "two_processes_never_read_stale"])
            .args(["--include-ignored", "--nocapture", "--test-threads", "1"])
            .env("TWO_LEVELS_READER", server.url())
            .env("TWO_LEVELS_DRIVER", name)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("the test binary runs again as the reader");
        let writer = driver.tier(&Address::Server(server.url()), two_levels());
        let mut db = server.connect();
        let deadline = Instant::now() + Duration::from_millis(1_700);
        let mut version = 0u64;
        while Instant::now() < deadline {
            version += 1;
            let () = db.set("db:version", version).unwrap();
            writer.invalidate_tenant(1).unwrap();
            let () = db.set("db:invalidated", version).unwrap();
            thread::sleep(Duration::from_millis(5));
        }
        let report = ReaderReport::of(child.wait_with_output().unwrap());
        let field = |name: &str| report.field::<u64>(name);
        assert!(field("reads") > 100, "{report}");
        assert!(field("local") > 0, "{report}");
        assert_eq!(field("stale"), 0, "{name}: {report}");
        assert!(version > 50, "{version} invalidations");
    }
}

#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn one_origin_call_per_key_across_both_levels() {
    let Some(server) = Server::start(false) else {
        return;
    };
    let address = Address::Server(server.url());
    for driver in DRIVERS {
        server.flush();
        let tier = driver.tier(&address, two_levels());
        let calls = AtomicUsize::new(0);
        let query = search(1, "Dune");
        let callers = 32;
        let origin = || {
            let deadline = Instant::now() + Duration::from_secs(10);
            while tier.stats().misses < callers && Instant::now() < deadline {
                thread::sleep(Duration::from_millis(1));
            }
            thread::sleep(Duration::from_millis(20));
            calls.fetch_add(1, Ordering::SeqCst);
            Ok(dune())
        };
        thread::scope(|scope| {
            for _ in 0..callers {
                scope.spawn(|| assert_eq!(tier.get_or_load(&query, &origin).unwrap(), dune()));
            }
        });
        assert_eq!(calls.load(Ordering::SeqCst), 1, "{driver:?}");
        let stats = tier.stats();
        assert_eq!(
            (stats.loads, stats.coalesced),
            (1, callers - 1),
            "{stats:?}"
        );
        // Kept in process by the load: the next read is a hit there.
        assert_eq!(tier.get(&query).unwrap(), Some(dune()));
        assert_eq!(tier.stats().local_hits, 1);
    }
}

#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn the_fail_safe_serves_an_expired_value_never_an_invalidated_one() {
    let Some(server) = Server::start(false) else {
        return;
    };
    let address = Address::Server(server.url());
    let ttl = Duration::from_millis(300);
    let max_stale = Duration::from_millis(1_500);
    for local in [None, Some(1_000)] {
        for driver in DRIVERS {
            server.flush();
            let options = Options {
                ttl: Some(ttl),
                local,
                fail_safe: Some(FailSafe::new(max_stale)),
                ..Options::default()
            };
            let tier = driver.tier(&address, options);
            let query = search(1, "Dune");
            let down = || Err::<Vec<Book>, _>("catalog down".to_owned());
            assert_eq!(tier.get_or_load(&query, &|| Ok(dune())).unwrap(), dune());
            thread::sleep(ttl + Duration::from_millis(100));
            // Expired: no longer a hit, but served while the origin is down.
            assert_eq!(tier.get(&query).unwrap(), None);
            assert_eq!(tier.get_or_load(&query, &down).unwrap(), dune());
            assert_eq!(tier.stats().stale, 1, "{driver:?} {local:?}");
            // A fresh answer replaces it.
            let fresh = vec![book(2)];
            assert_eq!(
                tier.get_or_load(&query, &|| Ok(fresh.clone())).unwrap(),
                fresh
            );
            assert_eq!(tier.get(&query).unwrap(), Some(fresh));

            // Invalidated: never served again, whatever the origin does.
            tier.invalidate_tenant(1).unwrap();
            let error = tier.get_or_load(&query, &down).unwrap_err();
            assert!(matches!(error, CacheError::Origin(_)), "{error}");

            // Expired for longer than `max_stale`: the origin's error.
            let query = search(2, "Dune");
            tier.get_or_load(&query, &|| Ok(dune())).unwrap();
            thread::sleep(ttl + max_stale + Duration::from_millis(100));
            assert!(tier.get_or_load(&query, &down).is_err(), "{driver:?}");
            assert_eq!(tier.stats().stale, 1);
        }
    }
}

#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn a_stale_value_in_process_gives_way_to_a_fresh_one_in_redis() {
    let Some(server) = Server::start(false) else {
        return;
    };
    let address = Address::Server(server.url());
    let ttl = Duration::from_millis(300);
    for driver in DRIVERS {
        server.flush();
        let options = Options {
            ttl: Some(ttl),
            local: Some(1_000),
            // Kept past the TTL, here and in Redis.
            fail_safe: Some(FailSafe::new(Duration::from_secs(10))),
            ..Options::default()
        };
        let (a, b) = (
            driver.tier(&address, options),
            driver.tier(&address, options),
        );
        let query = search(1, "Dune");
        assert_eq!(a.get_or_load(&query, &|| Ok(dune())).unwrap(), dune());
        thread::sleep(ttl + Duration::from_millis(100));
        // Another process reloads it: `a` reads that, not its own stale copy,
        // and asks no origin.
        let fresh = vec![book(2)];
        assert_eq!(b.get_or_load(&query, &|| Ok(fresh.clone())).unwrap(), fresh);
        let origin = || Err::<Vec<Book>, _>("the origin was called".to_owned());
        assert_eq!(a.get(&query).unwrap().as_ref(), Some(&fresh), "{driver:?}");
        assert_eq!(a.get_or_load(&query, &origin).unwrap(), fresh, "{driver:?}");
        assert_eq!(a.stats().loads, 1, "{driver:?}");
        // Its entries gone from Redis (the counters stay), the stale copy
        // here is still the fail-safe's.
        thread::sleep(ttl + Duration::from_millis(100));
        let mut admin = server.connect();
        let entries: Vec<String> = admin.keys("*title=Dune*").unwrap();
        assert!(!entries.is_empty());
        let () = admin.del(entries).unwrap();
        let down = || Err::<Vec<Book>, _>("catalog down".to_owned());
        assert_eq!(a.get_or_load(&query, &down).unwrap(), fresh, "{driver:?}");
        assert_eq!(a.stats().stale, 1, "{driver:?}");
    }
}

#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn a_soft_timeout_serves_the_stale_value_of_a_slow_origin() {
    use cache_key::redis::{AsyncRedisCache, AsyncRedisGenerations, AsyncRedisPool};

    let Some(server) = Server::start(false) else {
        return;
    };
    let ttl = Duration::from_millis(200);
    tier::runtime().block_on(async {
        let pool = AsyncRedisPool::connect(server.url()).await.unwrap();
        let fail_safe =
            FailSafe::new(Duration::from_secs(5)).with_soft_timeout(Duration::from_millis(100));
        let cache = AsyncRedisCache::new(AsyncRedisGenerations::new(pool))
            .with_ttl::<library_search::Search>(ttl)
            .with_fail_safe(fail_safe);
        let query = search(1, "Dune");
        cache
            .get_or_load(&query, || async { Ok::<_, String>(dune()) })
            .await
            .unwrap();
        tokio::time::sleep(ttl + Duration::from_millis(50)).await;
        let started = Instant::now();
        let answer = cache
            .get_or_load(&query, || async {
                tokio::time::sleep(Duration::from_secs(2)).await;
                Ok::<_, String>(vec![book(2)])
            })
            .await
            .unwrap();
        assert_eq!(answer, dune(), "the stale value");
        assert!(
            started.elapsed() < Duration::from_millis(800),
            "{:?}",
            started.elapsed()
        );
        assert_eq!(cache.stats().stale, 1);
        // No stale value at hand (another key): the slow origin is waited for.
        let started = Instant::now();
        let answer = cache
            .get_or_load(&search(2, "Dune"), || async {
                tokio::time::sleep(Duration::from_millis(300)).await;
                Ok::<_, String>(vec![book(3)])
            })
            .await
            .unwrap();
        assert_eq!(answer, vec![book(3)]);
        assert!(started.elapsed() >= Duration::from_millis(300));
    });
}

/// With Redis out of reach and its failures returned
/// (`FailurePolicy::ReturnError`), the fail-safe serves nothing: the value
/// kept in process is not served, whether the counters are read (strict) or
/// tracked (the subscription drops with the server), and the origin is not
/// asked.
#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn without_redis_a_cache_returning_failures_serves_nothing() {
    let Some(mut server) = Server::start(false) else {
        return;
    };
    let ttl = Duration::from_millis(300);
    for tracking in [None, Some(cache_key::redis::Tracking::default())] {
        for driver in DRIVERS {
            server.restart();
            let address = Address::Server(server.url());
            let options = Options {
                ttl: Some(ttl),
                local: Some(1_000),
                fail_safe: Some(FailSafe::new(Duration::from_secs(30))),
                tracking,
                failure_policy: Some(FailurePolicy::ReturnError),
                ..Options::default()
            };
            let tier = driver.tier(&address, options);
            if tracking.is_some() {
                tier::until_tracking(&*tier);
            }
            let query = search(1, "Dune");
            assert_eq!(tier.get_or_load(&query, &|| Ok(dune())).unwrap(), dune());
            // Warm in process: the value is the level's to serve, if anyone's.
            assert_eq!(tier.get(&query).unwrap(), Some(dune()));
            assert!(tier.stats().local_hits > 0, "{driver:?} {tracking:?}");
            thread::sleep(ttl + Duration::from_millis(100));
            server.stop();
            let calls = AtomicUsize::new(0);
            let down = || {
                calls.fetch_add(1, Ordering::SeqCst);
                Err::<Vec<Book>, _>("catalog down".to_owned())
            };
            for _ in 0..2 {
                // The counters' read fails, or (tracked, before the
                // subscription is known lost) the entry's.
                let answer = tier.get_or_load(&query, &down);
                assert!(
                    answer.as_ref().is_err_and(CacheError::is_backend_failure),
                    "{driver:?} {tracking:?}: {answer:?}"
                );
                let read = tier.get(&query);
                assert!(read.as_ref().is_err_and(CacheError::is_backend_failure));
            }
            assert_eq!(calls.load(Ordering::SeqCst), 0, "{driver:?} {tracking:?}");
            assert_eq!(tier.stats().stale, 0, "{driver:?} {tracking:?}");
        }
    }
}
