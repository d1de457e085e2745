//! `RedisCache` against real servers: entries written with `SET ... PX` in a
//! JSON envelope, every kind of bad entry written directly into Redis and
//! read back as a miss with its own reason, invalidation, one origin call per
//! key in the process under 200 threads (and an origin error reaching all of
//! them), and the same cache on a three-primary Redis Cluster.
//!
//! Each test starts its own servers (`tests/common/redis_server.rs`) and
//! stops them by pid when done. Ignored by default; run them with
//! `cargo test -- --include-ignored`. Without `redis-server` they are skipped
//! with a message, except under CI (`CI=true`), where that is a failure.

mod common;
#[path = "common/library_search.rs"]
mod library_search;

use std::sync::Barrier;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::Duration;

use cache_key::cache::{LoadLock, RedisCache, Rejected};
use cache_key::{CacheKey, GenerationStore, RedisGenerations};
use common::bad_entries::{add, bad_entries};
use common::redis_server::{Cluster, Server};
use common::stampede::{CALLERS, one_shared_error, stampede, until_misses};
use library_search::{Book, Search, dune, search};
use redis::Commands;
use serde_json::json;

fn origin(calls: &AtomicUsize) -> Result<Vec<Book>, String> {
    calls.fetch_add(1, Ordering::SeqCst);
    Ok(dune())
}

#[test]
#[ignore = "needs redis-server: apt-get install redis-server, then cargo test -- --include-ignored"]
fn entries_are_enveloped_set_with_px_and_read_back() {
    let Some(server) = Server::start(false) else {
        return;
    };
    let cache = RedisCache::new(server.connect(), RedisGenerations::new(server.connect()));
    let mut admin = server.connect();
    let calls = AtomicUsize::new(0);
    let query = search(1, "Dune");

    assert_eq!(
        cache.get_or_load(&query, || origin(&calls)).unwrap(),
        dune()
    );
    assert_eq!(
        cache.get_or_load(&query, || origin(&calls)).unwrap(),
        dune()
    );
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    let stats = cache.stats();
    assert_eq!(
        (stats.hits, stats.misses, stats.loads),
        (1, 1, 1),
        "{stats:?}"
    );

    let generation = cache.store().generation_for(&query).unwrap();
    let key = query.cache_key(generation).unwrap();
    let stored: String = admin.get(key.as_str()).unwrap();
    let envelope: serde_json::Value = serde_json::from_str(&stored).unwrap();
    assert_eq!(
        envelope,
        json!({
            "v": 1,
            "schema": 1,
            "type": std::any::type_name::<Vec<Book>>(),
            "query": query.readable_key(generation).unwrap().as_str(),
            "value": [{"title": "Dune", "year": 1965, "subtitle": null}],
        })
    );
    let ttl: i64 = admin.pttl(key.as_str()).unwrap();
    assert!(ttl > 0 && ttl <= 60_000, "PTTL {ttl}");

    // An overridden TTL reaches the SET.
    let cache = cache.with_ttl::<Search>(Duration::from_millis(1_500));
    cache.insert(&search(2, "Dune"), &dune()).unwrap();
    let key =
        search(2, "Dune").cache_key(cache.store().generation_for(&search(2, "Dune")).unwrap());
    let ttl: i64 = admin.pttl(key.unwrap().as_str()).unwrap();
    assert!(ttl > 0 && ttl <= 1_500, "PTTL {ttl}");
}

#[test]
#[ignore = "needs redis-server: apt-get install redis-server, then cargo test -- --include-ignored"]
fn every_bad_entry_is_a_miss_with_its_reason() {
    let Some(server) = Server::start(false) else {
        return;
    };
    let cache = RedisCache::new(server.connect(), RedisGenerations::new(server.connect()));
    let mut admin = server.connect();
    let query = search(1, "Dune");
    let generation = cache.store().generation_for(&query).unwrap();
    let key = query.cache_key(generation).unwrap();
    let readable = query.readable_key(generation).unwrap();
    let good = json!({
        "v": 1,
        "schema": 1,
        "type": std::any::type_name::<Vec<Book>>(),
        "query": readable.as_str(),
        "value": [{"title": "Dune", "year": 1965, "subtitle": null}],
    });
    let other_query = search(1, "Dune Messiah").readable_key(generation).unwrap();
    let mut expected = Rejected::default();
    for bad in bad_entries(&good, other_query.as_str()) {
        let () = admin.set(key.as_str(), bad.bytes).unwrap();
        assert_eq!(cache.get(&query).unwrap(), None, "{}", bad.what);
        expected = add(expected, bad.rejected);
        assert_eq!(cache.stats().rejected, expected, "{}", bad.what);
    }
    // The good entry is served, and get_or_load replaces a bad one.
    let () = admin.set(key.as_str(), good.to_string()).unwrap();
    assert_eq!(cache.get(&query).unwrap(), Some(dune()));
    let () = admin.set(key.as_str(), "garbage").unwrap();
    let calls = AtomicUsize::new(0);
    assert_eq!(
        cache.get_or_load(&query, || origin(&calls)).unwrap(),
        dune()
    );
    assert_eq!(cache.get(&query).unwrap(), Some(dune()));
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    let stats = cache.stats();
    assert_eq!(
        (stats.hits, stats.misses, stats.errors),
        (2, 9, 0),
        "{stats:?}"
    );
}

#[test]
#[ignore = "needs redis-server: apt-get install redis-server, then cargo test -- --include-ignored"]
fn invalidating_makes_the_next_read_a_miss() {
    let Some(server) = Server::start(false) else {
        return;
    };
    let cache = RedisCache::new(server.connect(), RedisGenerations::new(server.connect()));
    cache.insert(&search(1, "Dune"), &dune()).unwrap();
    cache.insert(&search(2, "Dune"), &dune()).unwrap();
    cache.invalidate_tenant::<Search>(&[&1u32]).unwrap();
    assert_eq!(cache.get(&search(1, "Dune")).unwrap(), None);
    assert_eq!(cache.get(&search(2, "Dune")).unwrap(), Some(dune()));
    cache.invalidate_namespace::<Search>().unwrap();
    assert_eq!(cache.get(&search(2, "Dune")).unwrap(), None);
    assert_eq!(cache.stats().rejected.total(), 0);
}

#[test]
#[ignore = "needs redis-server: apt-get install redis-server, then cargo test -- --include-ignored"]
fn concurrent_misses_in_one_process_reach_the_origin_once() {
    let Some(server) = Server::start(false) else {
        return;
    };
    let cache = RedisCache::new(server.connect(), RedisGenerations::new(server.connect()));
    let calls = AtomicUsize::new(0);
    let query = search(1, "Dune");
    let answers = stampede(|| {
        cache
            .get_or_load(&query, || {
                until_misses(|| cache.stats(), CALLERS as u64);
                origin(&calls)
            })
            .unwrap()
    });
    assert!(answers.iter().all(|a| a == &dune()));
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    let stats = cache.stats();
    assert_eq!(
        (stats.loads, stats.coalesced),
        (1, CALLERS as u64 - 1),
        "{stats:?}"
    );

    // An origin error reaches every caller of its flight and is not stored.
    let calls = AtomicUsize::new(0);
    let query = search(2, "Dune");
    let before = cache.stats().misses;
    let answers = stampede(|| {
        cache.get_or_load(&query, || {
            calls.fetch_add(1, Ordering::SeqCst);
            until_misses(|| cache.stats(), before + CALLERS as u64);
            Err::<Vec<Book>, _>("catalog down".to_owned())
        })
    });
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    let first = one_shared_error(&answers);
    assert_eq!(*first, "catalog down");
    assert_eq!(cache.stats().errors, CALLERS as u64);
    assert_eq!(cache.get(&query).unwrap(), None, "the error is not stored");
}

#[test]
#[ignore = "needs redis-server: apt-get install redis-server, then cargo test -- --include-ignored"]
fn the_cache_works_on_a_redis_cluster() {
    let Some(cluster) = Cluster::start() else {
        return;
    };
    let cache = RedisCache::new(cluster.connect(), RedisGenerations::new(cluster.connect()));
    let calls = AtomicUsize::new(0);
    for branch in 1..=20 {
        let query = search(branch, "Dune");
        assert_eq!(
            cache.get_or_load(&query, || origin(&calls)).unwrap(),
            dune()
        );
        assert_eq!(cache.get(&query).unwrap(), Some(dune()));
    }
    assert_eq!(calls.load(Ordering::SeqCst), 20);
    cache.invalidate_tenant::<Search>(&[&3u32]).unwrap();
    assert_eq!(cache.get(&search(3, "Dune")).unwrap(), None);
    assert_eq!(cache.get(&search(4, "Dune")).unwrap(), Some(dune()));
    let mut admin = cluster.connect();
    let generation = cache.store().generation_for(&search(4, "Dune")).unwrap();
    let key = search(4, "Dune").cache_key(generation).unwrap();
    let () = admin.set(key.as_str(), "garbage").unwrap();
    assert_eq!(cache.get(&search(4, "Dune")).unwrap(), None);
    let stats = cache.stats();
    assert_eq!(stats.rejected.undecodable, 1, "{stats:?}");
    assert_eq!(stats.errors, 0, "{stats:?}");
}

#[test]
#[ignore = "needs redis-server: apt-get install redis-server, then cargo test -- --include-ignored"]
fn a_bump_while_the_origin_works_leaves_its_answer_unreachable() {
    let Some(server) = Server::start(false) else {
        return;
    };
    let cache = RedisCache::new(server.connect(), RedisGenerations::new(server.connect()));
    let query = search(1, "Dune");
    let stale = cache.get_or_load(&query, || {
        cache.invalidate_tenant::<Search>(&[&1u32]).unwrap();
        Ok::<_, ()>(Vec::new())
    });
    assert_eq!(stale.unwrap(), []);
    assert_eq!(
        cache.get(&query).unwrap(),
        None,
        "stored under the old generation"
    );
    assert_eq!(
        cache.get_or_load(&query, || Ok::<_, ()>(dune())).unwrap(),
        dune()
    );
    assert_eq!(cache.get(&query).unwrap(), Some(dune()));
}

/// Two caches on connections of their own, as two processes have, missing
/// one key at once; each origin waits until both have missed.
fn two_processes_miss_at_once(
    caches: &[RedisCache<redis::Connection, RedisGenerations<redis::Connection>>; 2],
    query: &Search,
    calls: &AtomicUsize,
) -> Vec<Vec<Book>> {
    let both_missed = || {
        let mut stats = caches[0].stats();
        stats.misses += caches[1].stats().misses;
        stats
    };
    let start = Barrier::new(2);
    thread::scope(|scope| {
        let handles: Vec<_> = caches
            .iter()
            .map(|cache| {
                scope.spawn(|| {
                    start.wait();
                    cache
                        .get_or_load(query, || {
                            until_misses(both_missed, 2);
                            origin(calls)
                        })
                        .unwrap()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

#[test]
#[ignore = "needs redis-server: apt-get install redis-server, then cargo test -- --include-ignored"]
fn a_load_lock_makes_two_processes_load_once() {
    let Some(server) = Server::start(false) else {
        return;
    };
    let cache = |lock: Option<LoadLock>| {
        let cache = RedisCache::new(server.connect(), RedisGenerations::new(server.connect()));
        match lock {
            Some(lock) => cache.with_lock(lock),
            None => cache,
        }
    };
    let lock = LoadLock::new(Duration::from_secs(10), Duration::from_secs(10));
    let calls = AtomicUsize::new(0);

    // Without the lock each process asks the origin.
    let unlocked = [cache(None), cache(None)];
    let answers = two_processes_miss_at_once(&unlocked, &search(1, "Dune"), &calls);
    assert_eq!(answers, [dune(), dune()]);
    assert_eq!(calls.swap(0, Ordering::SeqCst), 2);

    let locked = [cache(Some(lock)), cache(Some(lock))];
    let query = search(2, "Dune");
    let answers = two_processes_miss_at_once(&locked, &query, &calls);
    assert_eq!(answers, [dune(), dune()]);
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    let (a, b) = (locked[0].stats(), locked[1].stats());
    assert_eq!((a.loads + b.loads, a.coalesced + b.coalesced), (1, 1));
    assert_eq!(a.errors + b.errors, 0);
    // Released by its owner once the answer is stored.
    let generation = locked[0].store().generation_for(&query).unwrap();
    let lock_name = format!("{}#lock", query.cache_key(generation).unwrap().as_str());
    let mut admin = server.connect();
    assert!(!admin.exists::<_, bool>(&lock_name).unwrap());
    // A lock's name is never a key (no pattern or sweep takes it for one).
    let key = lock_name.strip_suffix("#lock").unwrap();
    assert!(cache_key::decode(key).is_ok(), "{key}");
    assert!(cache_key::decode(&lock_name).is_err(), "{lock_name}");
}

#[test]
#[ignore = "needs redis-server: apt-get install redis-server, then cargo test -- --include-ignored"]
fn a_load_lock_held_elsewhere_is_waited_on_then_loaded_without() {
    let Some(server) = Server::start(false) else {
        return;
    };
    let wait = Duration::from_millis(300);
    let cache = RedisCache::new(server.connect(), RedisGenerations::new(server.connect()))
        .with_lock(LoadLock::new(Duration::from_secs(10), wait).poll(Duration::from_millis(20)));
    let query = search(1, "Dune");
    let generation = cache.store().generation_for(&query).unwrap();
    let lock_name = format!("{}#lock", query.cache_key(generation).unwrap().as_str());
    let mut admin = server.connect();
    let () = admin.set_ex(&lock_name, "another process", 60).unwrap();

    let calls = AtomicUsize::new(0);
    let started = std::time::Instant::now();
    assert_eq!(
        cache.get_or_load(&query, || origin(&calls)).unwrap(),
        dune()
    );
    assert!(started.elapsed() >= wait, "waited {:?}", started.elapsed());
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(cache.stats().loads, 1);
    // Another owner's lock is never released by this cache.
    let held: String = admin.get(&lock_name).unwrap();
    assert_eq!(held, "another process");

    // A lock freed without an answer (its owner's origin failed, its lease
    // ran out) is taken well before the wait ends.
    let wait = Duration::from_secs(30);
    let cache = RedisCache::new(server.connect(), RedisGenerations::new(server.connect()))
        .with_lock(LoadLock::new(Duration::from_secs(10), wait));
    let query = search(2, "Dune");
    let generation = cache.store().generation_for(&query).unwrap();
    let lock_name = format!("{}#lock", query.cache_key(generation).unwrap().as_str());
    let () = admin.pset_ex(&lock_name, "another process", 100).unwrap();
    let started = std::time::Instant::now();
    assert_eq!(
        cache.get_or_load(&query, || origin(&calls)).unwrap(),
        dune()
    );
    assert!(started.elapsed() < wait / 2, "took {:?}", started.elapsed());
    assert_eq!(calls.load(Ordering::SeqCst), 2);
}
