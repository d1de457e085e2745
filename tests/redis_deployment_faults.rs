//! The Redis tier through the faults of real deployments, for both drivers,
//! on real servers: a restart from the server's own `dump.rdb` and a replica
//! promoted after it missed a bump (each also with a level in process in
//! front, and over tracked counters), a server stopped with `SIGSTOP`, a
//! slow one, one down then back, one restarted between two reads, and an
//! async leader dropped mid-load.
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

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use cache_key::CacheKey;
use cache_key::cache::CacheError;
use cache_key::cache::{AsyncQueryCache, AsyncTypedCache};
use cache_key::generation::GenerationErrorKind;
use cache_key::redis::{FailurePolicy, InstanceCheck, Timeouts, Tracking};
use common::redis_server::{Proxy, Replicated, Server};
use library_search::{Book, dune, search};
use redis::Commands;
use tier::{Address, DRIVERS, Driver, Options, Tier, generation, origin_of};

/// The caches a restart or failover is tried on: one level; a level in
/// process in front, which holds the old entry at its old generation; and
/// that level over tracked counters, which also holds the counters.
fn layouts() -> [(&'static str, Options); 3] {
    let local = Options {
        local: Some(100),
        ..Options::default()
    };
    let tracked = Options {
        tracking: Some(Tracking::default().with_heartbeat(Duration::from_millis(100))),
        ..local
    };
    [
        ("one level", Options::default()),
        ("two levels", local),
        ("tracked", tracked),
    ]
}

/// A tier made with `options` (its subscription up, if tracked), the query
/// loaded with `dune()` at its current generation and read back.
fn loaded(driver: Driver, address: &Address, options: Options) -> Box<dyn Tier> {
    let tier = driver.tier(address, options);
    if options.tracking.is_some() {
        tier::until_tracking(&*tier);
    }
    let calls = AtomicUsize::new(0);
    tier.get_or_load(&search(1, "Dune"), &origin_of(&calls))
        .unwrap();
    assert_eq!(tier.get(&search(1, "Dune")).unwrap(), Some(dune()));
    tier
}

#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn a_restart_from_its_snapshot_never_serves_an_invalidated_value() {
    for (driver, (layout, options)) in DRIVERS.into_iter().flat_map(|d| layouts().map(|l| (d, l))) {
        let Some(mut server) = Server::start(false) else {
            return;
        };
        let address = Address::Server(server.url());
        let tier = loaded(driver, &address, options);
        let query = search(1, "Dune");
        let before = generation(&*tier, &query);
        server.save(); // the counters and the entry, in dump.rdb
        tier.invalidate_tenant(1).unwrap();
        let bumped = generation(&*tier, &query);
        assert!(bumped > before);

        server.restart_from_files();
        // The server is back with the counters from before the bump, and
        // the old entry under its key.
        let names = ["library:g", "library:g:t{1}", "library:g:t{1}:search"];
        let raw: Vec<String> = server.connect().mget(&names).unwrap();
        let restored: u64 = raw
            .iter()
            .map(|value| value.split(':').next().unwrap().parse::<u64>().unwrap())
            .sum();
        assert_eq!(
            restored, before,
            "the snapshot holds the counters from before the bump"
        );
        let old_key = query.cache_key(before).unwrap();
        assert!(
            server
                .connect()
                .exists::<_, bool>(old_key.as_str())
                .unwrap()
        );
        // Each pooled connection fails once after a restart; then reads.
        let read = retry_after_restart(|| tier.get(&query));
        assert_eq!(
            read, None,
            "{driver:?}, {layout}: the entry from before the bump was served"
        );
        assert!(generation(&*tier, &query) > bumped, "{driver:?}, {layout}");
        let fresh = vec![Book {
            title: "Dune (after the bump)".to_owned(),
            year: 1965,
            subtitle: None,
        }];
        let answer = tier.get_or_load(&query, &|| Ok(fresh.clone())).unwrap();
        assert_eq!(answer, fresh);
        assert_eq!(tier.get(&query).unwrap(), Some(fresh));
    }
}

/// `call` until it stops failing with a connection error (a pooled
/// connection the restart broke), at most a few times.
fn retry_after_restart<T>(call: impl Fn() -> Result<T, CacheError<std::convert::Infallible>>) -> T {
    for _ in 0..20 {
        match call() {
            Ok(value) => return value,
            Err(_) => thread::sleep(Duration::from_millis(50)),
        }
    }
    call().expect("Redis is back")
}

#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn a_promoted_replica_never_serves_an_invalidated_value() {
    for (driver, (layout, options)) in DRIVERS.into_iter().flat_map(|d| layouts().map(|l| (d, l))) {
        let Some(mut servers) = Replicated::start() else {
            return;
        };
        // Clients reach the primary through an address that a failover
        // moves to the replica.
        let proxy = Proxy::to(servers.primary.port());
        let address = Address::Server(proxy.url());
        let tier = loaded(driver, &address, options);
        let query = search(1, "Dune");
        servers.wait_in_sync();

        servers.cut_link();
        tier.invalidate_tenant(1).unwrap(); // acknowledged by the primary only
        let bumped = generation(&*tier, &query);
        servers.fail_over();
        proxy.point_at(servers.replica.port());

        let read = retry_after_restart(|| tier.get(&query));
        assert_eq!(
            read, None,
            "{driver:?}, {layout}: the promoted replica served the old entry"
        );
        assert!(generation(&*tier, &query) > bumped, "{driver:?}, {layout}");
        let calls = AtomicUsize::new(0);
        assert_eq!(
            tier.get_or_load(&query, &origin_of(&calls)).unwrap(),
            dune()
        );
        assert_eq!(calls.load(Ordering::SeqCst), 1);
    }
}

#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn a_stopped_server_is_an_error_within_the_timeout() {
    let Some(server) = Server::start(false) else {
        return;
    };
    let address = Address::Server(server.url());
    for driver in DRIVERS {
        let tier = loaded(driver, &address, strict());
        let query = search(1, "Dune");
        server.pause();
        let calls = AtomicUsize::new(0);
        // Each call on a thread of its own, so that a hang fails the test
        // instead of hanging it.
        let (sent, received) = mpsc::channel();
        let started = Instant::now();
        let tier = &*tier;
        let (calls_ref, query_ref) = (&calls, &query);
        thread::scope(|scope| {
            scope.spawn(move || {
                let get = tier.get(query_ref).map(drop).map_err(|e| e.to_string());
                let load = tier
                    .get_or_load(query_ref, &origin_of(calls_ref))
                    .map(drop)
                    .map_err(|e| e.to_string());
                // Another branch: the server runs the bump when it resumes.
                let bump = tier.invalidate_tenant(2).map_err(|e| e.to_string());
                let _ = sent.send((get, load, bump));
            });
            let answers = received.recv_timeout(Duration::from_secs(10));
            server.resume();
            let (get, load, bump) = answers.expect("a call hung on a stopped server");
            assert!(
                get.is_err() && load.is_err() && bump.is_err(),
                "{get:?} {load:?} {bump:?}"
            );
        });
        // Three calls, each bounded by the 500 ms call timeout.
        assert!(
            started.elapsed() < Duration::from_secs(4),
            "{:?}",
            started.elapsed()
        );
        assert_eq!(calls.load(Ordering::SeqCst), 0, "the origin is not asked");
        assert_eq!(retry_after_restart(|| tier.get(&query)), Some(dune()));
    }
}

#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn a_short_timeout_bounds_a_slow_server() {
    let Some(server) = Server::start(false) else {
        return;
    };
    let address = Address::Server(server.url());
    let quick = Options {
        timeouts: Some(Timeouts::default().with_call(Duration::from_millis(100))),
        ..strict()
    };
    for driver in DRIVERS {
        let tier = driver.tier(&address, quick);
        tier.insert(&search(1, "Dune"), &dune()).unwrap();
        let sleeper = thread::spawn({
            let mut admin = server.connect();
            move || {
                let () = redis::cmd("DEBUG")
                    .arg("SLEEP")
                    .arg(1)
                    .query(&mut admin)
                    .unwrap();
            }
        });
        thread::sleep(Duration::from_millis(50));
        let started = Instant::now();
        assert!(tier.get(&search(1, "Dune")).is_err());
        assert!(
            started.elapsed() < Duration::from_millis(600),
            "{:?}",
            started.elapsed()
        );
        sleeper.join().unwrap();
    }
}

/// A server killed, then back empty on the same port: with the failures
/// returned, every call meanwhile is an error and asks no origin; the same
/// cache, on the same pool, loads again once its connections are made
/// again.
#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn a_server_down_then_back_fails_closed_then_loads_again() {
    let Some(mut server) = Server::start(false) else {
        return;
    };
    for driver in DRIVERS {
        let address = Address::Server(server.url());
        let tier = loaded(driver, &address, strict());
        let query = search(1, "Dune");
        server.stop();
        let calls = AtomicUsize::new(0);
        for _ in 0..3 {
            let error = tier
                .get_or_load(&query, &origin_of(&calls))
                .expect_err("no answer without Redis");
            let CacheError::Generation(error) = error else {
                panic!("{driver:?}: the counters' read fails first: {error}");
            };
            assert_eq!(error.kind(), GenerationErrorKind::Store, "{error:?}");
        }
        assert_eq!(calls.load(Ordering::SeqCst), 0, "the origin was asked");
        server.restart();
        let deadline = Instant::now() + Duration::from_secs(10);
        let answer = loop {
            match tier.get_or_load(&query, &origin_of(&calls)) {
                Ok(answer) => break answer,
                Err(error) => assert!(Instant::now() < deadline, "{driver:?}: {error}"),
            }
            thread::sleep(Duration::from_millis(50));
        };
        assert_eq!(answer, dune());
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        assert_eq!(tier.get(&query).unwrap(), Some(dune()));
    }
}

/// An async leader whose future is dropped (a client that went away) hands
/// its flight to a waiter.
#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn a_dropped_async_leader_is_taken_over_by_a_waiter() {
    use cache_key::redis::{AsyncRedisCache, AsyncRedisGenerations, AsyncRedisPool};
    use std::sync::Arc;

    let Some(server) = Server::start(false) else {
        return;
    };
    tier::runtime().block_on(async {
        let pool = AsyncRedisPool::connect(server.url()).await.unwrap();
        let cache = Arc::new(AsyncRedisCache::new(AsyncRedisGenerations::new(pool)));
        let calls = Arc::new(AtomicUsize::new(0));
        let misses = |count: u64| {
            let cache = cache.clone();
            async move {
                while cache.stats().misses < count {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        };
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
        misses(1).await;
        let waiter = tokio::spawn({
            let (cache, calls) = (cache.clone(), calls.clone());
            async move {
                cache
                    .get_or_load(&search(1, "Dune"), || async move { origin_of(&calls)() })
                    .await
            }
        });
        misses(2).await;
        assert_eq!(calls.load(Ordering::SeqCst), 1, "the waiter waits");
        leader.abort();
        assert!(leader.await.unwrap_err().is_cancelled());
        assert_eq!(waiter.await.unwrap().unwrap(), dune());
        assert_eq!(calls.load(Ordering::SeqCst), 2);
        assert_eq!(cache.get(&search(1, "Dune")).await.unwrap(), Some(dune()));
    });
}

/// A tier whose calls return Redis's failures instead of answering without
/// the cache.
fn strict() -> Options {
    Options {
        failure_policy: Some(FailurePolicy::ReturnError),
        ..Options::default()
    }
}

/// A plain read trusts the counters stamped with the instance id its
/// connection learned when it opened. A server restarted from its own
/// files behind the same address, between two reads of one cache, closes
/// that connection; the next one learns the new instance id, so the
/// counters the snapshot brought back (stamped by the old process, from
/// before a bump) are raised, never trusted, and the entry the snapshot
/// brought back, which the bump had ended, is never read again. Both
/// drivers, the instance checked per connection (the default) and per
/// read.
#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn a_server_restarted_between_two_reads_is_learned_again() {
    let Some(mut server) = Server::start(false) else {
        return;
    };
    let book = |title: &str| {
        vec![Book {
            title: title.to_owned(),
            year: 1965,
            subtitle: None,
        }]
    };
    let query = search(1, "Dune");
    for check in [InstanceCheck::PerConnection, InstanceCheck::PerRead] {
        for driver in DRIVERS {
            server.restart();
            let options = Options {
                instance_check: Some(check),
                ..Options::default()
            };
            let tier = driver.tier(&Address::Server(server.url()), options);
            assert_eq!(
                tier.get_or_load(&query, &|| Ok(book("before"))).unwrap(),
                book("before")
            );
            server.save();
            tier.invalidate_tenant(1).unwrap();
            assert_eq!(
                tier.get_or_load(&query, &|| Ok(book("after"))).unwrap(),
                book("after")
            );

            server.restart_from_files();
            // What came back: the tenant's counter as the old process wrote
            // it before the bump, and the entry the bump had ended.
            let restored: String = server.connect().get("library:g:t{1}").unwrap();
            let instance = server.instance_id();
            assert!(!restored.ends_with(&instance), "{restored} by {instance}");

            let answer = tier.get_or_load(&query, &|| Ok(book("reloaded"))).unwrap();
            assert_eq!(answer, book("reloaded"), "{driver:?} {check:?}");
            assert_eq!(tier.get(&query).unwrap(), Some(book("reloaded")));
        }
    }
}
