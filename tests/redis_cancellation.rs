//! Every public async call of the Redis cache is cancel-safe: dropped at
//! each point where it waits (its k-th `Pending`, for every k until it
//! finishes), it leaves nothing behind: no flight, no open circuit, a
//! bump it may have sent remembered as pending; and the next call answers
//! as if nothing happened. On a real `redis-server`, with and without a
//! level in process.
//!
//! Ignored by default; run with `cargo test -- --include-ignored`.

mod common;
#[path = "common/drop_at_wait.rs"]
mod drop_at_wait;
#[path = "common/library_search.rs"]
mod library_search;

use std::future::Future;
use std::pin::pin;
use std::time::Duration;

use cache_key::Scopes;
use cache_key::cache::{AsyncQueryCache, AsyncTypedCache};
use cache_key::redis::{AsyncRedisCache, AsyncRedisGenerations, AsyncRedisPool, LoadLock};
use common::redis_server::Server;
use drop_at_wait::dropped_at;
use library_search::{Search, dune, search};
use tokio::sync::Notify;

/// Drops the call `make` gives at each of its waits in turn, calling
/// `check` after each drop (the shared loop), and asserts it waited at
/// least once: otherwise the test dropped nothing.
async fn drop_at_each_wait<F: Future>(
    what: &str,
    make: impl Fn() -> F,
    check: impl AsyncFn(usize),
) -> usize {
    let waits = drop_at_wait::drop_at_each_wait(what, 1_000, make, check).await;
    assert!(waits > 0, "{what} never waited: the test dropped nothing");
    waits
}

/// One thread: the connections' tasks run only when the call under test
/// yields, so that each round trip is a wait of that call, every time.
fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

async fn caches(url: &str) -> Vec<(&'static str, AsyncRedisCache)> {
    let cache = || async {
        let pool = AsyncRedisPool::connect(url).await.unwrap();
        AsyncRedisCache::new(AsyncRedisGenerations::new(pool))
    };
    vec![
        ("async", cache().await),
        ("async + level in process", cache().await.with_local(1_000)),
    ]
}

/// What a dropped call may not leave behind: a flight (the next caller
/// of its key would wait on nobody) or an open circuit.
fn nothing_left(case: &str, cache: &AsyncRedisCache) {
    assert_eq!(cache.__map_sizes().flights, 0, "{case}: a flight left");
    assert!(!cache.pool().is_skipping(), "{case}: the circuit open");
}

#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn a_read_a_load_and_an_insert_dropped_at_each_wait_leave_nothing_behind() {
    let Some(server) = Server::start(false) else {
        return;
    };
    runtime().block_on(async {
        for (name, cache) in caches(&server.url()).await {
            server.flush();
            let query = search(1, "Dune");
            // An origin that waits too (a database's round trip).
            let origin = || async {
                tokio::time::sleep(Duration::from_millis(2)).await;
                Ok::<_, String>(dune())
            };
            let load = || cache.get_or_load(&query, origin);
            let after_load = async |waits: usize| {
                let case = format!("{name}: get_or_load dropped at wait {waits}");
                nothing_left(&case, &cache);
                // Its key is not stuck: a load now answers.
                let other = search(1, &format!("after {waits}"));
                let answer = cache.get_or_load(&other, || async { Ok::<_, String>(dune()) });
                assert_eq!(answer.await.unwrap(), dune(), "{case}");
            };
            let dropped = drop_at_each_wait("get_or_load", load, after_load).await;
            println!("{name}: get_or_load dropped at each of its {dropped} waits");
            assert_eq!(cache.get(&query).await.unwrap(), Some(dune()), "{name}");

            let read = || cache.get(&query);
            let after_read = async |waits: usize| {
                nothing_left(&format!("{name}: get dropped at wait {waits}"), &cache);
            };
            drop_at_each_wait("get", read, after_read).await;

            let insert = || cache.insert(&query, dune());
            let after_insert = async |waits: usize| {
                let case = format!("{name}: insert dropped at wait {waits}");
                nothing_left(&case, &cache);
                // Stored or not, never half-stored: a hit or a miss.
                let found = cache.get(&query).await.unwrap();
                assert!(found.is_none() || found == Some(dune()), "{case}");
            };
            drop_at_each_wait("insert", insert, after_insert).await;
        }
    });
}

#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn an_invalidation_dropped_at_each_wait_is_made_before_the_next_read() {
    let Some(server) = Server::start(false) else {
        return;
    };
    runtime().block_on(async {
        for (name, cache) in caches(&server.url()).await {
            server.flush();
            let query = search(1, "Dune");
            let scope = Search::tenant_scope(&1).unwrap();
            let fill = async || {
                let filled = cache.insert(&query, dune()).await;
                filled.unwrap();
                assert_eq!(cache.get(&query).await.unwrap(), Some(dune()));
            };
            fill().await;
            let invalidate = || cache.invalidate(&scope);
            let after = async |waits: usize| {
                let case = format!("{name}: invalidate dropped at wait {waits}");
                // Sent or not, its caller was not told: it is pending, and
                // made before the next read.
                assert_eq!(cache.stats().pending_invalidations, 1, "{case}");
                assert_eq!(cache.get(&query).await.unwrap(), None, "{case}");
                assert_eq!(cache.stats().pending_invalidations, 0, "{case}");
                nothing_left(&case, &cache);
                fill().await;
            };
            let dropped = drop_at_each_wait("invalidate", invalidate, after).await;
            println!("{name}: invalidate dropped at each of its {dropped} waits");
        }
    });
}

/// The lock names a load holds on `server`: `<key>#lock`.
fn locks_held(server: &Server) -> Vec<String> {
    redis::cmd("KEYS")
        .arg("*#lock")
        .query(&mut server.connect())
        .unwrap()
}

#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn a_load_holding_the_load_lock_dropped_at_each_wait_releases_it() {
    let Some(server) = Server::start(false) else {
        return;
    };
    runtime().block_on(async {
        for (name, cache) in caches(&server.url()).await {
            server.flush();
            // Held far longer than the test: only a release frees it.
            let lock = LoadLock::new(Duration::from_secs(600), Duration::from_secs(600));
            let cache = cache.with_lock(lock);
            let query = search(1, "Dune");
            let origin = || async {
                tokio::time::sleep(Duration::from_millis(2)).await;
                Ok::<_, String>(dune())
            };
            let load = || cache.get_or_load(&query, origin);
            let after = async |waits: usize| {
                let case = format!("{name}: a locked get_or_load dropped at wait {waits}");
                nothing_left(&case, &cache);
                // Released from a task of its own: given its turn, it runs.
                let mut turns = 0;
                while !locks_held(&server).is_empty() {
                    assert!(turns < 10_000, "{case}: the lock is still held");
                    turns += 1;
                    tokio::task::yield_now().await;
                }
            };
            let dropped = drop_at_each_wait("a locked get_or_load", load, after).await;
            println!("{name}: a locked get_or_load dropped at each of its {dropped} waits");
            assert_eq!(locks_held(&server), Vec::<String>::new(), "{name}");
            assert_eq!(cache.get(&query).await.unwrap(), Some(dune()), "{name}");
        }
    });
}

#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn a_caller_waiting_on_another_callers_flight_dropped_at_each_wait_leaves_it_whole() {
    let Some(server) = Server::start(false) else {
        return;
    };
    runtime().block_on(async {
        for (name, cache) in caches(&server.url()).await {
            server.flush();
            let query = search(1, "Dune");
            let (entered, gate) = (Notify::new(), Notify::new());
            let leading = cache.get_or_load(&query, || async {
                entered.notify_one();
                gate.notified().await;
                Ok::<_, String>(dune())
            });
            let mut leading = pin!(leading);
            // The leader runs until its origin is called, and stays there.
            tokio::select! {
                _ = leading.as_mut() => panic!("{name}: the leader answered with its origin closed"),
                () = entered.notified() => {}
            }
            // A waiter's two waits, its read and then the flight (which
            // lands only once the gate opens), each dropped.
            for waits in 0..2 {
                let case = format!("{name}: a waiter dropped at wait {waits}");
                let waiter = cache.get_or_load(&query, || async {
                    Err::<Vec<_>, String>("a waiter called its origin".to_owned())
                });
                let dropped = dropped_at(waiter, waits).await;
                assert!(dropped.is_none(), "{case}: it answered");
                assert_eq!(cache.__map_sizes().flights, 1, "{case}: the leader's flight");
            }
            gate.notify_one();
            assert_eq!(leading.await.unwrap(), dune(), "{name}");
            nothing_left(name, &cache);
            assert_eq!(cache.get(&query).await.unwrap(), Some(dune()), "{name}");
            assert_eq!(cache.stats().loads, 1, "{name}: the waiters loaded nothing");
        }
    });
}
