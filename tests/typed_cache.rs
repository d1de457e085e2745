//! The typed cache in process (`MokaCache`, `AsyncMokaCache`): the query
//! type fixes the value type, per-type TTL, invalidation through the
//! generation store, and one origin call per key under 200 concurrent
//! misses (threads and tokio tasks), with an SQLite origin.

#[path = "../examples/stampede.rs"]
#[allow(dead_code)] // the example's `main`, which the test does not run
mod stampede_example;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use cache_key::cache::{AsyncMokaCache, CacheError, CachedQuery, MokaCache};
use cache_key::cache::{AsyncQueryCache, AsyncTypedCache, QueryCache, TypedCache};
use cache_key::{CacheKey, GenerationStore, MemoryGenerations, Scopes};
// `tests/common/stampede.rs`, as the example includes it.
use stampede_example::stampede::{CALLERS, stampede, until_misses};
use stampede_example::{Catalog, Search, search};

/// Written by hand: the impl the derive's `value` and `ttl` stand for.
#[derive(CacheKey)]
#[cache_key(namespace = "library", operation = "count")]
struct Count {
    #[tenant]
    branch: u32,
}

impl CachedQuery for Count {
    type Value = u64;
    const VALUE_ID: &'static str = "library.count";
    const TTL: Duration = Duration::from_secs(30);
}

/// The same key space as `Search` on purpose (this binary never calls
/// `registry::check`): its entries must never be read as a `Search`'s.
#[derive(CacheKey)]
#[cache_key(namespace = "library", operation = "search", value = u64, ttl = "1m")]
struct SearchCount {
    #[tenant]
    branch: u32,
    #[criterion]
    title: String,
}

/// A generic query: the derive's impl carries the `CacheKey` impl's bounds,
/// and a value built from the type parameter gets `Clone + Send + Sync + 'static`.
#[derive(CacheKey)]
#[cache_key(namespace = "library", operation = "by_id", value = Option<T>, ttl = "2h")]
struct ById<'a, T> {
    #[tenant]
    branch: &'a str,
    #[criterion]
    id: T,
}

fn open_catalog() -> Catalog {
    Catalog::open().expect("the example catalog opens")
}

#[test]
fn the_derive_declares_the_value_type_and_ttl() {
    assert_eq!(Search::TTL, Duration::from_secs(300));
    assert_eq!(Search::VALUE_ID, "Vec<String>");
    assert_eq!(<ById<'_, u64> as CachedQuery>::VALUE_ID, "Option<T>");
    assert_eq!(SearchCount::TTL, Duration::from_secs(60));
    assert_eq!(
        <ById<'_, u64> as CachedQuery>::TTL,
        Duration::from_secs(7_200)
    );
    fn value_of<Q: CachedQuery>(_: &Q, value: Q::Value) -> Q::Value {
        value
    }
    let titles: Vec<String> = value_of(&search(1, "Dune"), vec![]);
    assert!(titles.is_empty());

    let cache = MokaCache::new(MemoryGenerations::new(), 1_000);
    let by_id = ById {
        branch: "b-2",
        id: 7u64,
    };
    assert_eq!(
        cache.get_or_load(&by_id, || Ok::<_, ()>(Some(49))).unwrap(),
        Some(49)
    );
    assert_eq!(cache.get(&by_id).unwrap(), Some(Some(49)));
    let by_name = ById {
        branch: "b-2",
        id: "seven",
    };
    assert_eq!(cache.get(&by_name).unwrap(), None, "another value type");
}

#[test]
fn the_query_type_fixes_the_value_type() {
    let cache = MokaCache::new(MemoryGenerations::new(), 1_000);
    cache
        .insert(&search(1, "Dune"), vec!["Dune".to_owned()])
        .unwrap();
    cache.insert(&Count { branch: 1 }, 3).unwrap();

    let titles: Option<Vec<String>> = cache.get(&search(1, "Dune")).unwrap();
    let count: Option<u64> = cache.get(&Count { branch: 1 }).unwrap();
    assert_eq!(titles, Some(vec!["Dune".to_owned()]));
    assert_eq!(count, Some(3));
    assert_eq!(
        cache.get(&search(2, "Dune")).unwrap(),
        None,
        "another tenant"
    );

    // Another value type under the same key is another moka cache: a miss,
    // never a wrong value, and each keeps its own answer.
    let clash = SearchCount {
        branch: 1,
        title: "Dune".to_owned(),
    };
    assert_eq!(
        clash.cache_key(1).unwrap(),
        search(1, "Dune").cache_key(1).unwrap()
    );
    assert_eq!(cache.get(&clash).unwrap(), None);
    let stats = cache.stats();
    assert_eq!((stats.hits, stats.misses), (2, 2), "{stats:?}");
    assert_eq!(stats.rejected.total(), 0, "{stats:?}");

    assert_eq!(cache.get_or_load(&clash, || Ok::<_, ()>(7)).unwrap(), 7);
    assert_eq!(cache.get(&clash).unwrap(), Some(7));
    assert_eq!(
        cache.get(&search(1, "Dune")).unwrap(),
        Some(vec!["Dune".to_owned()])
    );
}

#[test]
fn each_type_lives_its_ttl_and_the_cache_can_override_it() {
    let cache = MokaCache::new(MemoryGenerations::new(), 1_000)
        .with_ttl::<Count>(Duration::from_millis(50));
    assert_eq!(cache.ttl_for::<Search>(), Search::TTL);
    assert_eq!(cache.ttl_for::<Count>(), Duration::from_millis(50));

    cache.insert(&search(1, "Dune"), vec![]).unwrap();
    cache.insert(&Count { branch: 1 }, 3).unwrap();
    // Only the expiry is asserted: a sleep longer than the TTL cannot flake.
    thread::sleep(Duration::from_millis(300));
    assert_eq!(cache.get(&Count { branch: 1 }).unwrap(), None);
    assert_eq!(cache.get(&search(1, "Dune")).unwrap(), Some(vec![]));
}

#[test]
fn invalidating_through_the_store_makes_the_next_read_a_miss() {
    let cache = MokaCache::new(MemoryGenerations::new(), 1_000);
    let catalog = open_catalog();
    for branch in [1, 2] {
        let query = search(branch, "Dune");
        cache
            .get_or_load(&query, || catalog.search(&query))
            .unwrap();
    }
    assert_eq!(catalog.queries(), 2);
    assert_eq!(
        cache.get(&search(1, "Dune")).unwrap().unwrap(),
        ["Dune", "Dune Messiah"]
    );

    cache
        .invalidate(&Search::tenant_scope(&1u32).unwrap())
        .unwrap();
    assert_eq!(cache.get(&search(1, "Dune")).unwrap(), None);
    assert_eq!(
        cache.get(&search(2, "Dune")).unwrap().unwrap(),
        ["Dune"],
        "other tenant kept"
    );

    let query = search(1, "Dune");
    cache
        .get_or_load(&query, || catalog.search(&query))
        .unwrap();
    assert_eq!(catalog.queries(), 3);
    cache
        .invalidate(&Search::operation_scope(&1u32).unwrap())
        .unwrap();
    assert_eq!(cache.get(&query).unwrap(), None);
    cache.insert(&query, vec![]).unwrap();
    cache.invalidate_namespace::<Search>().unwrap();
    assert_eq!(cache.get(&query).unwrap(), None);
    assert_eq!(cache.get(&search(2, "Dune")).unwrap(), None);
    // One bump each of the tenant, operation and namespace counters.
    assert_eq!(cache.store().generation_for(&query).unwrap(), 3);
}

/// `cargo run --example stampede`, its two counts asserted.
#[test]
fn the_stampede_example_reaches_sqlite_once_through_the_cache_and_200_times_without() {
    let catalog = open_catalog();
    let typed = stampede_example::typed_cache(&catalog).unwrap();
    assert_eq!(typed.queries, 1);
    assert_eq!(typed.answers.len(), CALLERS);
    assert!(typed.answers.iter().all(|a| a == &["Dune", "Dune Messiah"]));

    let catalog = open_catalog();
    let naive = stampede_example::naive(&catalog).unwrap();
    assert_eq!(naive.queries, CALLERS);
    assert!(naive.answers.iter().all(|a| a == &["Dune", "Dune Messiah"]));
}

#[test]
fn concurrent_misses_count_one_load_and_the_rest_as_coalesced() {
    let cache = MokaCache::new(MemoryGenerations::new(), 1_000);
    let catalog = open_catalog();
    let query = search(1, "Dune");
    stampede(|| {
        cache
            .get_or_load(&query, || {
                until_misses(|| cache.stats(), CALLERS as u64);
                catalog.search(&query)
            })
            .unwrap()
    });
    let stats = cache.stats();
    assert_eq!(catalog.queries(), 1);
    assert_eq!(
        (stats.misses, stats.loads),
        (CALLERS as u64, 1),
        "{stats:?}"
    );
    assert_eq!(stats.coalesced, CALLERS as u64 - 1, "{stats:?}");
    assert_eq!(stats.errors, 0, "{stats:?}");
}

#[test]
fn an_origin_error_reaches_every_waiter_and_is_not_cached() {
    let cache = MokaCache::new(MemoryGenerations::new(), 1_000);
    let calls = AtomicUsize::new(0);
    let query = search(1, "Dune");
    let answers = stampede(|| {
        cache.get_or_load(&query, || {
            calls.fetch_add(1, Ordering::SeqCst);
            until_misses(|| cache.stats(), CALLERS as u64);
            Err::<Vec<String>, _>("catalog down")
        })
    });
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    for answer in &answers {
        match answer {
            Err(CacheError::Origin(error)) => assert_eq!(**error, "catalog down"),
            other => panic!("expected the origin's error, got {other:?}"),
        }
    }
    let stats = cache.stats();
    assert_eq!(
        (stats.loads, stats.errors),
        (1, CALLERS as u64),
        "{stats:?}"
    );

    assert_eq!(cache.get(&query).unwrap(), None, "the error is not cached");
    let value = cache.get_or_load(&query, || Ok::<_, &str>(vec!["Dune".to_owned()]));
    assert_eq!(value.unwrap(), ["Dune"]);
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

/// 200 tokio tasks miss one cold key at once.
async fn task_stampede<T: Send + 'static>(call: impl Fn() -> tokio::task::JoinHandle<T>) -> Vec<T> {
    let handles: Vec<_> = (0..CALLERS).map(|_| call()).collect();
    let mut answers = Vec::with_capacity(CALLERS);
    for handle in handles {
        answers.push(handle.await.unwrap());
    }
    answers
}

async fn until_misses_async(cache: &AsyncMokaCache<MemoryGenerations>, misses: u64) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while cache.stats().misses < misses {
        assert!(Instant::now() < deadline, "only {:?}", cache.stats());
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    tokio::time::sleep(Duration::from_millis(20)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_tasks_missing_one_key_reach_the_origin_once() {
    let cache = Arc::new(AsyncMokaCache::new(MemoryGenerations::new(), 1_000));
    let catalog = Arc::new(open_catalog());
    let answers = task_stampede(|| {
        let (cache, catalog) = (cache.clone(), catalog.clone());
        tokio::spawn(async move {
            let query = search(1, "Dune");
            cache
                .get_or_load(&query, || async {
                    until_misses_async(&cache, CALLERS as u64).await;
                    catalog.search(&query)
                })
                .await
                .unwrap()
        })
    })
    .await;
    assert!(answers.iter().all(|a| a == &["Dune", "Dune Messiah"]));
    assert_eq!(catalog.queries(), 1);
    let stats = cache.stats();
    assert_eq!(
        (stats.loads, stats.coalesced),
        (1, CALLERS as u64 - 1),
        "{stats:?}"
    );
    assert_eq!(
        cache.get(&search(1, "Dune")).await.unwrap().unwrap().len(),
        2
    );

    // The naive way, on the same runtime: every task reaches the origin.
    let naive = Arc::new(AsyncMokaCache::new(MemoryGenerations::new(), 1_000));
    let catalog = Arc::new(open_catalog());
    task_stampede(|| {
        let (cache, catalog) = (naive.clone(), catalog.clone());
        tokio::spawn(async move {
            let query = search(1, "Dune");
            if cache.get(&query).await.unwrap().is_none() {
                until_misses_async(&cache, CALLERS as u64).await;
                let titles = catalog.search(&query).unwrap();
                cache.insert(&query, titles).await.unwrap();
            }
        })
    })
    .await;
    assert!(catalog.queries() > 1);
    assert_eq!(catalog.queries(), CALLERS);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_async_origin_error_reaches_every_task_and_is_not_cached() {
    let cache = Arc::new(AsyncMokaCache::new(MemoryGenerations::new(), 1_000));
    let calls = Arc::new(AtomicUsize::new(0));
    let answers = task_stampede(|| {
        let (cache, calls) = (cache.clone(), calls.clone());
        tokio::spawn(async move {
            let query = Count { branch: 1 };
            let answer = cache
                .get_or_load(&query, || async {
                    calls.fetch_add(1, Ordering::SeqCst);
                    until_misses_async(&cache, CALLERS as u64).await;
                    Err::<u64, _>("catalog down")
                })
                .await;
            matches!(answer, Err(CacheError::Origin(e)) if *e == "catalog down")
        })
    })
    .await;
    assert!(answers.iter().all(|&origin_error| origin_error));
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(cache.stats().errors, CALLERS as u64);
    assert_eq!(cache.get(&Count { branch: 1 }).await.unwrap(), None);
}

#[test]
fn the_capacity_bounds_each_value_types_entries() {
    let cache = MokaCache::new(MemoryGenerations::new(), 10);
    for branch in 1..=1_000u32 {
        cache.insert(&Count { branch }, u64::from(branch)).unwrap();
    }
    cache.run_pending_tasks();
    let counts = cache.entry_count();
    assert!((1..=10).contains(&counts), "{counts} entries");

    for branch in 1..=1_000u32 {
        cache.insert(&search(branch, "Dune"), vec![]).unwrap();
    }
    cache.run_pending_tasks();
    let all = cache.entry_count();
    assert!(
        all > counts && all <= 20,
        "{all} entries, {counts} of them counts"
    );
}

#[test]
fn a_bump_while_the_origin_works_leaves_its_answer_unreachable() {
    // The race rule: the key is named before the origin runs, so an answer
    // computed from data older than a bump is stored under the old generation.
    let cache = MokaCache::new(MemoryGenerations::new(), 1_000);
    let query = search(1, "Dune");
    let stale = cache.get_or_load(&query, || {
        cache
            .invalidate(&Search::tenant_scope(&1u32).unwrap())
            .unwrap();
        Ok::<_, ()>(vec!["before the bump".to_owned()])
    });
    assert_eq!(stale.unwrap(), ["before the bump"]);
    assert_eq!(cache.get(&query).unwrap(), None);
    let fresh = cache.get_or_load(&query, || Ok::<_, ()>(vec!["after".to_owned()]));
    assert_eq!(fresh.unwrap(), ["after"]);
    assert_eq!(cache.get(&query).unwrap().unwrap(), ["after"]);
}
