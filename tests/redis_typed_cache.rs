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

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use cache_key::cache::{CacheError, CachedQuery, RedisCache, Rejected};
use cache_key::{CacheKey, GenerationStore, RedisGenerations};
use common::redis_server::{Cluster, Server};
use common::stampede::{CALLERS, stampede, until_misses};
use redis::Commands;
use serde::{Deserialize, Serialize};
use serde_json::json;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Book {
    title: String,
    year: u16,
    subtitle: Option<String>,
}

// Hash-tagged, unlike `typed_cache.rs`'s: on Redis Cluster a tenant's keys share one slot.
#[derive(CacheKey)]
#[cache_key(namespace = "library", operation = "search", hash_tag)]
struct Search {
    #[tenant]
    branch: u32,
    #[criterion]
    title: String,
}

impl CachedQuery for Search {
    type Value = Vec<Book>;
    const TTL: Duration = Duration::from_secs(60);
}

fn search(branch: u32, title: &str) -> Search {
    Search {
        branch,
        title: title.to_owned(),
    }
}

fn dune() -> Vec<Book> {
    vec![Book {
        title: "Dune".to_owned(),
        year: 1965,
        subtitle: None,
    }]
}

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
    let with = |field: &str, value: serde_json::Value| {
        let mut entry = good.clone();
        entry[field] = value;
        entry.to_string().into_bytes()
    };
    let other_query = search(1, "Dune Messiah").readable_key(generation).unwrap();
    let cases: Vec<(&str, Vec<u8>, Rejected)> = vec![
        (
            "garbage",
            b"\xff\x00not json".to_vec(),
            reject(|r| r.undecodable = 1),
        ),
        (
            "bare value",
            br#"[{"title":"Dune"}]"#.to_vec(),
            reject(|r| r.undecodable = 1),
        ),
        ("version 2", with("v", json!(2)), reject(|r| r.version = 1)),
        (
            "schema 2",
            with("schema", json!(2)),
            reject(|r| r.schema = 1),
        ),
        (
            "another type",
            with("type", json!("u64")),
            reject(|r| r.value_type = 1),
        ),
        (
            "another query",
            with("query", json!(other_query.as_str())),
            reject(|r| r.query = 1),
        ),
        (
            "bad value",
            with("value", json!("Dune")),
            reject(|r| r.undecodable = 1),
        ),
    ];
    let mut expected = Rejected::default();
    for (what, bytes, rejected) in cases {
        let () = admin.set(key.as_str(), bytes).unwrap();
        assert_eq!(cache.get(&query).unwrap(), None, "{what}");
        expected = add(expected, rejected);
        assert_eq!(cache.stats().rejected, expected, "{what}");
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
        (2, 8, 0),
        "{stats:?}"
    );
}

fn reject(set: impl FnOnce(&mut Rejected)) -> Rejected {
    let mut rejected = Rejected::default();
    set(&mut rejected);
    rejected
}

fn add(a: Rejected, b: Rejected) -> Rejected {
    let mut sum = a;
    sum.undecodable += b.undecodable;
    sum.version += b.version;
    sum.schema += b.schema;
    sum.value_type += b.value_type;
    sum.query += b.query;
    sum
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
    let first = match &answers[0] {
        Err(CacheError::Origin(e)) => e.clone(),
        other => panic!("expected the origin's error, got {other:?}"),
    };
    for answer in &answers {
        assert!(matches!(answer, Err(CacheError::Origin(e)) if Arc::ptr_eq(e, &first)));
    }
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
