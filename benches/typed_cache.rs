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
//! `benches/generations.rs` (whose measurement this copies).
//!
//! Run with `cargo bench --bench typed_cache`; see BENCHMARKS.md.

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use cache_key::cache::{CachedQuery, MokaCache};
use cache_key::{CacheKey, GenerationStore, Key, MemoryGenerations};
use criterion::Criterion;
use criterion::measurement::{Measurement, ValueFormatter};

const GENERATION: u64 = 4;

/// The CPU time the current thread has run, in nanoseconds.
fn thread_cpu_ns() -> u64 {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `now` is a valid `timespec` for the call to write.
    let status = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) };
    assert_eq!(status, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID)");
    now.tv_sec as u64 * 1_000_000_000 + now.tv_nsec as u64
}

/// Criterion's measurement of the thread's CPU time, in nanoseconds.
struct ThreadCpuTime;

impl Measurement for ThreadCpuTime {
    type Intermediate = u64;
    type Value = u64;

    fn start(&self) -> u64 {
        thread_cpu_ns()
    }

    fn end(&self, start: u64) -> u64 {
        thread_cpu_ns() - start
    }

    fn add(&self, a: &u64, b: &u64) -> u64 {
        a + b
    }

    fn zero(&self) -> u64 {
        0
    }

    fn to_f64(&self, value: &u64) -> f64 {
        *value as f64
    }

    fn formatter(&self) -> &dyn ValueFormatter {
        &Nanoseconds
    }
}

/// Values in nanoseconds, shown as such.
struct Nanoseconds;

impl ValueFormatter for Nanoseconds {
    fn scale_values(&self, _typical: f64, _values: &mut [f64]) -> &'static str {
        "ns (CPU)"
    }

    fn scale_throughputs(
        &self,
        _typical: f64,
        _throughput: &criterion::Throughput,
        _values: &mut [f64],
    ) -> &'static str {
        "ns (CPU)"
    }

    fn scale_for_machines(&self, _values: &mut [f64]) -> &'static str {
        "ns"
    }
}

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
