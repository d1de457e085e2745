//! What the typed cache costs on a hit in process: `MokaCache::get(&query)`
//! (the query's generation read from `MemoryGenerations`, its key built, its
//! value type's moka cache found, the moka lookup with a cache-wide TTL, an
//! `Arc` clone, a counter) against a raw `moka::sync::Cache::get` with a key
//! built by `query.cache_key(4)` (a generation the caller already has), and
//! against raw moka with a TTL and/or the key from `store.key_for(&query)`,
//! so that each part of the gap shows: the TTL, the generation read, and the
//! typed layer's own cost. The value is a page of 20 books behind an `Arc`,
//! as values usually are in moka.
//!
//! Times are the benchmark thread's **CPU time**, as in
//! `benches/generations.rs` (`benches/common/cpu_time.rs`).
//!
//! Run with `cargo bench -p cache-key-benches --bench typed_cache`; see BENCHMARKS.md.

#[path = "common/cpu_time.rs"]
mod cpu_time;
#[path = "common/fixed_loop.rs"]
mod fixed_loop;

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use cache_key::cache::QueryCache;
use cache_key::cache::{CachedQuery, MokaCache};
use cache_key::{CacheKey, GenerationStore, Key, MemoryGenerations};
use cpu_time::ThreadCpuTime;
use criterion::Criterion;
use fixed_loop::bench;
use moka::sync::Cache;

const GENERATION: u64 = 4;

/// The seed's two-criteria search (as in `benches/keys.rs`).
#[derive(CacheKey)]
#[cache_key(namespace = "library", operation = "search", value = Arc<Vec<Book>>, ttl = "10m")]
struct Search<'a> {
    #[tenant]
    branch: &'a str,
    #[criterion]
    title: &'a str,
    #[criterion]
    author: Option<&'a str>,
}

#[allow(dead_code)]
#[derive(Debug)]
struct Book {
    title: String,
    author: String,
    year: u16,
    subtitle: Option<String>,
}

fn page() -> Arc<Vec<Book>> {
    Arc::new(
        (0..20)
            .map(|i| Book {
                title: format!("The Book of Sand, volume {i}"),
                author: "Jorge Luis Borges".to_owned(),
                year: 1975 + i,
                subtitle: (i % 2 == 0).then(|| "and other stories".to_owned()),
            })
            .collect(),
    )
}

fn main() {
    let mut criterion = Criterion::default()
        .with_measurement(ThreadCpuTime)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(2))
        .sample_size(50)
        .configure_from_args();
    let query = Search {
        branch: "branch-2",
        title: "Sand",
        author: Some("Borges"),
    };

    let typed = MokaCache::new(MemoryGenerations::new(), 10_000);
    typed.insert(&query, page()).unwrap();
    let store = MemoryGenerations::new();
    let by_hand = query.cache_key(GENERATION).unwrap();
    let by_store = store.key_for(&query).unwrap();
    let plain = |key: &Key| {
        let cache: Cache<Key, Arc<Vec<Book>>> = Cache::new(10_000);
        cache.insert(key.clone(), page());
        cache
    };
    // With the cache-wide TTL the typed cache gives each value type.
    let with_ttl = |key: &Key| {
        let cache: Cache<Key, Arc<Vec<Book>>> = Cache::builder()
            .max_capacity(10_000)
            .time_to_live(<Search as CachedQuery>::TTL)
            .build();
        cache.insert(key.clone(), page());
        cache
    };
    let (raw, raw_ttl) = (plain(&by_hand), with_ttl(&by_hand));
    let (raw_store, raw_store_ttl) = (plain(&by_store), with_ttl(&by_store));
    // Every variant hits before anything is timed.
    assert!(typed.get(&query).unwrap().is_some());
    for cache in [&raw, &raw_ttl] {
        assert!(cache.get(&query.cache_key(GENERATION).unwrap()).is_some());
    }
    for cache in [&raw_store, &raw_store_ttl] {
        assert!(cache.get(&store.key_for(&query).unwrap()).is_some());
    }

    let mut group = criterion.benchmark_group("moka_hit");
    bench(&mut group, "moka_hit", "typed_get", || {
        typed.get(black_box(&query)).unwrap()
    });
    for (name, cache) in [
        ("raw_get_cache_key", &raw),
        ("raw_get_cache_key_ttl", &raw_ttl),
    ] {
        bench(&mut group, "moka_hit", name, || {
            cache.get(&black_box(&query).cache_key(GENERATION).unwrap())
        });
    }
    for (name, cache) in [
        ("raw_get_key_for", &raw_store),
        ("raw_get_key_for_ttl", &raw_store_ttl),
    ] {
        bench(&mut group, "moka_hit", name, || {
            cache.get(&store.key_for(black_box(&query)).unwrap())
        });
    }
    group.finish();
    criterion.final_summary();
}
