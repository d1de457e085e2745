//! A value that expires while reads of it are in flight: every read is a
//! hit or a load, never a panic. Freshness is decided once per read, at one
//! instant, and carried to whoever acts on it; a read that judged it twice
//! could find it fresh, leave the entry unnamed, then stale, with nowhere
//! to store the reload.
//!
//! Real `redis-server`, both drivers, a level in process (strict, then
//! tracked), 8 threads reading one key whose entries live 2 ms: the key
//! crosses its expiry thousands of times. Ignored by default; run with
//! `cargo test -- --include-ignored`.

mod common;
#[path = "common/library_search.rs"]
mod library_search;
#[allow(dead_code)]
#[path = "common/tier.rs"]
mod tier;

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use cache_key::redis::Tracking;
use common::redis_server::Server;
use library_search::{dune, search};
use tier::{Address, DRIVERS, Options, until_tracking};

#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn reads_crossing_an_expiry_never_panic() {
    let Some(server) = Server::start(false) else {
        return;
    };
    let address = Address::Server(server.url());
    let strict = Options {
        local: Some(1_000),
        ttl: Some(Duration::from_millis(2)),
        ..Options::default()
    };
    let tracked = Options {
        tracking: Some(Tracking::default()),
        ..strict
    };
    for (name, options) in [("strict", strict), ("tracked", tracked)] {
        for driver in DRIVERS {
            server.flush();
            let tier = driver.tier(&address, options);
            if options.tracking.is_some() {
                until_tracking(&*tier);
            }
            let query = search(1, "Dune");
            let (reads, panics) = (AtomicU64::new(0), AtomicU64::new(0));
            let until = Instant::now() + Duration::from_millis(2_000);
            thread::scope(|scope| {
                for _ in 0..8 {
                    scope.spawn(|| {
                        while Instant::now() < until {
                            let read = catch_unwind(AssertUnwindSafe(|| {
                                tier.get_or_load(&query, &|| Ok(dune()))
                            }));
                            match read {
                                Ok(answer) => assert_eq!(answer.unwrap(), dune()),
                                Err(_) => {
                                    panics.fetch_add(1, Ordering::Relaxed);
                                }
                            }
                            reads.fetch_add(1, Ordering::Relaxed);
                        }
                    });
                }
            });
            let (reads, panics) = (reads.into_inner(), panics.into_inner());
            let stats = tier.stats();
            eprintln!("{name} {driver:?}: {reads} reads, {panics} panics, {stats:?}");
            assert_eq!(panics, 0, "{name} {driver:?}: {reads} reads");
            // The key did cross its expiry: reloaded many times.
            assert!(stats.loads > 10, "{name} {driver:?}: {stats:?}");
        }
    }
}
