//! How many heap allocations a key costs: exactly one for `cache_key` (the
//! key's own `String`), none for `write_key` into a buffer that has room; and
//! one for a typical `KeyBuilder` chain (its buffer, which becomes the key);
//! one for `GenerationStore::key_for` (the key); none for the key of a
//! typed moka hit.
//!
//! A counting global allocator counts only the allocations of the current
//! thread, and only while a measurement is running, so other tests running on
//! other threads of the harness (or the harness itself) are never counted.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::collections::{BTreeSet, HashSet};

use cache_key::cache::QueryCache;
use cache_key::{CacheKey, KeyBuilder};
use common::fixtures::{BranchList, FullSearch, Search};

struct Counting;

thread_local! {
    /// Whether this thread is being measured.
    static COUNTING: Cell<bool> = const { Cell::new(false) };
    /// Allocations (and reallocations) made by this thread while measured.
    static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
}

fn record() {
    // `try_with`: the allocator can run while thread-locals are torn down.
    let counting = COUNTING.try_with(Cell::get).unwrap_or(false);
    if counting {
        let _ = ALLOCATIONS.try_with(|count| count.set(count.get() + 1));
    }
}

// SAFETY: every call is forwarded to `System` unchanged; the counters are
// const-initialized thread-locals without destructors, which never allocate.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        record();
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        record();
        // SAFETY: as for `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        record();
        // SAFETY: the caller upholds `GlobalAlloc::realloc`'s contract.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller upholds `GlobalAlloc::dealloc`'s contract.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Runs `f` and returns its result with the number of allocations it made on
/// this thread.
fn allocations<T>(f: impl FnOnce() -> T) -> (T, usize) {
    ALLOCATIONS.with(|count| count.set(0));
    COUNTING.with(|counting| counting.set(true));
    let result = f();
    COUNTING.with(|counting| counting.set(false));
    (result, ALLOCATIONS.with(Cell::get))
}

#[derive(CacheKey)]
#[cache_key(namespace = "library", operation = "search")]
struct Localized<'a> {
    #[tenant]
    branch: &'a str,
    #[criterion]
    title: &'a str,
    #[criterion]
    lang: &'a str,
}

#[derive(CacheKey)]
#[cache_key(namespace = "library", operation = "by_tags")]
struct ByTags {
    #[tenant]
    branch: String,
    #[criterion]
    tags: Vec<String>,
    #[criterion]
    page: u32,
}

#[derive(CacheKey)]
#[cache_key(namespace = "library", operation = "by_status")]
struct ByStatus {
    #[tenant]
    branch: String,
    #[criterion]
    status: HashSet<&'static str>,
    #[criterion]
    years: BTreeSet<u16>,
}

/// Checks one query: `cache_key` allocates once and gives `expected`;
/// `write_key` into a cleared buffer of enough capacity allocates nothing.
fn check(query: &impl CacheKey, expected: &str) {
    let (key, count) = allocations(|| query.cache_key(4));
    assert_eq!(key.unwrap().as_str(), expected);
    assert_eq!(count, 1, "cache_key of {expected}: {count} allocations");

    let mut out = String::with_capacity(256);
    for _ in 0..3 {
        out.clear();
        let (result, count) = allocations(|| query.write_key(4, &mut out));
        result.unwrap();
        assert_eq!(out, expected);
        assert_eq!(count, 0, "write_key of {expected}: {count} allocations");
    }
}

/// A `library` `search` key at generation 4 whose other parts `add` gives:
/// one allocation from `KeyBuilder::new` to `build` (the draft's buffer
/// becomes the key), none for `write_into` a buffer that has room.
fn check_builder(add: impl Fn(&mut KeyBuilder<'static>), expected: &str) {
    let build = || {
        let mut builder = KeyBuilder::new("library", "search");
        add(builder.generation(4));
        builder
    };
    let (key, count) = allocations(|| build().build());
    assert_eq!(key.unwrap().as_str(), expected);
    assert_eq!(count, 1, "KeyBuilder of {expected}: {count} allocations");

    let builder = build();
    let mut out = String::with_capacity(256);
    for _ in 0..3 {
        out.clear();
        let (result, count) = allocations(|| builder.write_into(&mut out));
        result.unwrap();
        assert_eq!(out, expected);
        assert_eq!(count, 0, "write_into of {expected}: {count} allocations");
    }
}

/// One test for all checks: the counters are per thread anyway, and one test
/// keeps the measured calls away from the harness's own bookkeeping.
#[test]
fn one_allocation_per_key_none_with_a_warm_buffer() {
    check(
        &Search {
            branch: "branch-2",
            title: "Sand",
            author: Some("Borges"),
            year_from: None,
            request_id: 1,
        },
        "library:s1:g4:tbranch-2:search:author=Borges&title=Sand",
    );
    check(
        &BranchList {
            branch: "branch-2".into(),
            page: 1,
        },
        "library:s1:g4:tbranch-2:list:page=1",
    );
    check(
        &FullSearch {
            branch: "branch-1".into(),
            title: "The Disconnected".into(),
            author: "Oğuz Atay".into(),
            year_from: 1970,
            year_to: 1980,
            lang: "tr",
            status: "on_shelf",
            sort: "title",
            page: 3,
        },
        "library:s1:g4:tbranch-1:search:c_648d4755bc125b8edc4087542d254b21",
    );
    check(
        &Localized {
            branch: "şube-3",
            title: "Kürk Mantolu Madonna",
            lang: "tr",
        },
        "library:s1:g4:t%C5%9Fube-3:search:lang=tr&title=K%C3%BCrk%20Mantolu%20Madonna",
    );
    check(
        &ByTags {
            branch: "branch-2".into(),
            tags: vec!["poetry".into(), "short stories".into(), "1970s".into()],
            page: 2,
        },
        "library:s1:g4:tbranch-2:by_tags:page=2&tags=poetry%2Cshort%20stories%2C1970s",
    );
    check(
        &ByStatus {
            branch: "branch-2".into(),
            status: ["on_shelf", "on_loan", "reserved"].into(),
            years: [1980, 1970].into(),
        },
        "library:s1:g4:tbranch-2:by_status:c_e30c71e100e3b2c018d6573900cc907a",
    );
    check_builder(
        |builder| {
            builder
                .tenant("branch-2")
                .criterion("title", "Sand")
                .criterion("author", Some("Borges"));
        },
        "library:s1:g4:tbranch-2:search:author=Borges&title=Sand",
    );
    check_builder(
        |builder| {
            builder
                .tenant("şube-3")
                .criterion("title", "Kürk Mantolu Madonna")
                .criterion("lang", "tr");
        },
        "library:s1:g4:t%C5%9Fube-3:search:lang=tr&title=K%C3%BCrk%20Mantolu%20Madonna",
    );
    // Eight criteria, mostly out of order, summarized: the draft holds all
    // 116 bytes of them until `build`.
    check_builder(
        |builder| {
            builder
                .tenant("branch-1")
                .criterion("title", "The Disconnected")
                .criterion("author", "Oğuz Atay")
                .criterion("yearFrom", 1970u16)
                .criterion("yearTo", 1980u16)
                .criterion("lang", "tr")
                .criterion("status", "on_shelf")
                .criterion("sort", "title")
                .criterion("page", 3u32);
        },
        "library:s1:g4:tbranch-1:search:c_648d4755bc125b8edc4087542d254b21",
    );
    // Past eight criteria, the builder's index of them in name order is one
    // more allocation.
    let names: Vec<String> = (0..12).map(|i| format!("n{i:02}")).collect();
    let (key, count) = allocations(|| {
        let mut builder = KeyBuilder::new("library", "search");
        builder.tenant("branch-2");
        for name in names.iter().rev() {
            builder.criterion(name, 1u8);
        }
        builder.build()
    });
    assert!(key.unwrap().as_str().contains(":search:c_"));
    assert_eq!(
        count, 2,
        "KeyBuilder of twelve criteria: {count} allocations"
    );
    // The counter itself works: a `String` of one byte is one allocation.
    let (_, count) = allocations(|| String::from("x"));
    assert_eq!(count, 1);
}

/// `key_for` reads the tenant from the key it writes: one allocation (the
/// key's), none with a warm buffer, at a one-digit generation and at a
/// generation whose digits go where the key's `0` was.
#[test]
fn key_for_allocates_only_the_key() {
    use cache_key::{GenerationStore, MemoryGenerations};

    let store = MemoryGenerations::new();
    let query = BranchList {
        branch: "branch-2".into(),
        page: 1,
    };
    for bumps in [0, 1, 11] {
        for _ in 0..bumps {
            store.invalidate_namespace::<BranchList>().unwrap();
        }
        let generation = store.generation_for(&query).unwrap();
        let (key, count) = allocations(|| store.key_for(&query));
        assert_eq!(key.unwrap(), query.cache_key(generation).unwrap());
        assert_eq!(
            count, 1,
            "key_for at generation {generation}: {count} allocations"
        );

        let mut out = String::with_capacity(256);
        let (result, count) = allocations(|| store.write_key_for(&query, &mut out));
        assert_eq!(result.unwrap(), generation);
        assert_eq!(
            count, 0,
            "write_key_for at generation {generation}: {count} allocations"
        );
    }
}

impl cache_key::cache::CachedQuery for Search<'_> {
    type Value = std::sync::Arc<Vec<String>>;
    const VALUE_ID: &'static str = "Arc<Vec<String>>";
    const TTL: std::time::Duration = std::time::Duration::from_secs(60);
}

/// A typed moka hit writes its key into a buffer of its thread and looks it
/// up as `&str`: it allocates nothing of its own (moka allocates now and then
/// when a read triggers its maintenance), where a raw moka `get` with
/// `cache_key` allocates the key on every read.
#[test]
fn a_typed_moka_hit_allocates_no_key() {
    use cache_key::cache::MokaCache;
    use cache_key::{GenerationStore, MemoryGenerations};
    use std::sync::Arc;

    let query = Search {
        branch: "branch-2",
        title: "Sand",
        author: Some("Borges"),
        year_from: None,
        request_id: 1,
    };
    let cache = MokaCache::new(MemoryGenerations::new(), 100);
    let page = Arc::new(vec!["The Book of Sand".to_owned()]);
    cache.insert(&query, page.clone()).unwrap();
    // The first read sizes the thread's buffer.
    assert!(cache.get(&query).unwrap().is_some());
    let without_allocation = (0..100)
        .filter(|_| {
            let (hit, count) = allocations(|| cache.get(&query).unwrap());
            assert!(hit.is_some());
            count == 0
        })
        .count();
    assert!(
        without_allocation >= 90,
        "only {without_allocation} of 100 typed hits allocated nothing"
    );

    let raw: moka::sync::Cache<cache_key::Key, Arc<Vec<String>>> = moka::sync::Cache::new(100);
    let generation = cache.store().generation_for(&query).unwrap();
    raw.insert(query.cache_key(generation).unwrap(), page);
    for _ in 0..100 {
        let (hit, count) = allocations(|| raw.get(&query.cache_key(generation).unwrap()));
        assert!(hit.is_some());
        assert!(
            count >= 1,
            "a raw moka hit with `cache_key`: {count} allocations"
        );
    }
}

/// A product page, tagged by its product: the tag is a criterion's.
#[derive(CacheKey)]
#[cache_key(namespace = "shop", operation = "product")]
struct ProductPage {
    #[tenant]
    shop: u32,
    #[criterion]
    #[tag = "product"]
    id: u64,
}

/// A query tagged by its criteria writes its tags in the key's own buffer,
/// past the key: `write_key_for` allocates nothing for them either.
#[test]
fn a_query_tag_allocates_nothing_once_warm() {
    use cache_key::{GenerationStore, MemoryGenerations};

    let store = MemoryGenerations::new();
    let query = ProductPage { shop: 1, id: 42 };
    let mut out = String::with_capacity(256);
    let first = store.write_key_for(&query, &mut out).unwrap();
    out.clear();
    let (result, count) = allocations(|| store.write_key_for(&query, &mut out));
    assert_eq!(result.unwrap(), first);
    assert_eq!(
        count, 0,
        "write_key_for of a tagged query: {count} allocations"
    );
}
