//! What the typed cache costs on a hit in process: `MokaCache::get(&query)`
//! (the query's generation read from `MemoryGenerations`, its key built, the
//! moka lookup, the checked downcast, an `Arc` clone) against a raw
//! `moka::sync::Cache::get` with a key built by `query.cache_key(4)` (a
//! generation the caller already has), and against raw moka with the key
//! from `store.key_for(&query)` (so the typed layer's own cost shows apart
//! from the generation read). The value is a page of 20 books behind an
//! `Arc`, as values usually are in moka.
//!
//! Times are the benchmark thread's **CPU time**, as in
//! `benches/generations.rs` (`benches/common/cpu_time.rs`).
//!
//! Run with `cargo bench --bench typed_cache`; see BENCHMARKS.md.

#[path = "common/cpu_time.rs"]
mod cpu_time;

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use cache_key::cache::{CachedQuery, MokaCache};
use cache_key::{CacheKey, GenerationStore, Key, MemoryGenerations};
use cpu_time::ThreadCpuTime;
use criterion::Criterion;

const GENERATION: u64 = 4;

/// The seed's two-criteria search (as in `benches/keys.rs`).
#[derive(CacheKey)]
#[cache_key(namespace = "library", operation = "search")]
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

impl CachedQuery for Search<'_> {
    type Value = Arc<Vec<Book>>;
    const TTL: Duration = Duration::from_secs(600);
}

/// A per-entry expiry as the typed cache uses (one TTL for every entry here).
struct FixedTtl;

impl moka::Expiry<Key, Arc<Vec<Book>>> for FixedTtl {
    fn expire_after_create(
        &self,
        _: &Key,
        _: &Arc<Vec<Book>>,
        _: std::time::Instant,
    ) -> Option<Duration> {
        Some(Duration::from_secs(600))
    }
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
    let raw: moka::sync::Cache<Key, Arc<Vec<Book>>> = moka::sync::Cache::new(10_000);
    raw.insert(query.cache_key(GENERATION).unwrap(), page());
    // Raw moka with a per-entry expiry, as the typed cache has.
    let raw_ttl: moka::sync::Cache<Key, Arc<Vec<Book>>> = moka::sync::Cache::builder()
        .max_capacity(10_000)
        .expire_after(FixedTtl)
        .build();
    raw_ttl.insert(query.cache_key(GENERATION).unwrap(), page());
    let store = MemoryGenerations::new();
    let raw_store: moka::sync::Cache<Key, Arc<Vec<Book>>> = moka::sync::Cache::new(10_000);
    raw_store.insert(store.key_for(&query).unwrap(), page());
    // Every variant hits before anything is timed.
    assert!(typed.get(&query).unwrap().is_some());
    assert!(raw.get(&query.cache_key(GENERATION).unwrap()).is_some());
    assert!(raw_ttl.get(&query.cache_key(GENERATION).unwrap()).is_some());
    assert!(raw_store.get(&store.key_for(&query).unwrap()).is_some());

    let mut group = criterion.benchmark_group("moka_hit");
    group.bench_function("typed_get", |b| {
        b.iter(|| black_box(typed.get(black_box(&query)).unwrap()))
    });
    group.bench_function("raw_get_cache_key", |b| {
        b.iter(|| black_box(raw.get(&black_box(&query).cache_key(GENERATION).unwrap())))
    });
    group.bench_function("raw_get_cache_key_expire_after", |b| {
        b.iter(|| black_box(raw_ttl.get(&black_box(&query).cache_key(GENERATION).unwrap())))
    });
    group.bench_function("raw_get_key_for", |b| {
        b.iter(|| black_box(raw_store.get(&store.key_for(black_box(&query)).unwrap())))
    });
    group.finish();
    criterion.final_summary();
}
