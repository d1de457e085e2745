//! Derived keys side by side with the other ways to make the same key.
//!
//! Six query shapes, four variants each:
//!
//! * `derived`: `#[derive(CacheKey)]`, `cache_key(generation)`;
//! * `builder`: the runtime `KeyBuilder` (for `search_2` also with its two
//!   criteria given in name order, `builder_in_name_order`);
//! * `hand_written`: what a careful developer writes for this key format by
//!   hand: one pre-sized `String`, `push_str`, `write!` for integers,
//!   `percent_encoding::utf8_percent_encode` for escaping, `sha2` for the
//!   summary, criteria in sorted order written out in the code;
//! * `serde_json_sha256`: the recipe many services use (Python's
//!   `json.dumps(sort_keys=True)`): the criteria serialized by `serde_json`
//!   through a `Value` (whose map keeps keys sorted), hashed with SHA-256, the
//!   hash as the key's tail.
//!
//! Before anything is timed, every case checks that `derived`, `builder` and
//! `hand_written` produce byte-identical keys, and that `serde_json_sha256` is
//! deterministic (also for a `HashSet` built in another order) and has the same
//! shape: the same body and a `c_` + 32 hex digits tail.
//!
//! Run with `cargo bench -p cache-key-benches --bench keys`; see BENCHMARKS.md.

#[path = "common/fixed_loop.rs"]
mod fixed_loop;

use std::collections::HashSet;
use std::fmt::Write as _;
use std::hint::black_box;
use std::time::Duration;

use cache_key::{CacheKey, KeyBuilder};
use criterion::{Criterion, criterion_group, criterion_main};
use fixed_loop::bench;
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use serde::{Serialize, Serializer};
use sha2::{Digest, Sha256};

// ---------------------------------------------------------------------------
// The query types: one struct each, deriving both `CacheKey` and `Serialize`
// (the tenant is not serialized: it is in the key's body).

/// The seed's two-criteria search.
#[derive(CacheKey, Serialize)]
#[cache_key(namespace = "library", operation = "search")]
struct Search<'a> {
    #[tenant]
    #[serde(skip_serializing)]
    branch: &'a str,
    #[criterion]
    title: &'a str,
    #[criterion]
    author: Option<&'a str>,
}

/// The one-criterion list.
#[derive(CacheKey, Serialize)]
#[cache_key(namespace = "library", operation = "list")]
struct BranchList {
    #[tenant]
    #[serde(skip_serializing)]
    branch: String,
    #[criterion]
    page: u32,
}

/// Eight criteria, whose criteria string (116 bytes) is summarized.
#[derive(CacheKey, Serialize)]
#[cache_key(namespace = "library", operation = "search", rename_all = "camelCase")]
#[serde(rename_all = "camelCase")]
struct FullSearch {
    #[tenant]
    #[serde(skip_serializing)]
    branch: String,
    #[criterion]
    title: String,
    #[criterion]
    author: String,
    #[criterion]
    year_from: u16,
    #[criterion]
    year_to: u16,
    #[criterion]
    lang: &'static str,
    #[criterion]
    status: &'static str,
    #[criterion]
    sort: &'static str,
    #[criterion]
    page: u32,
}

/// Non-ASCII text in the tenant and a criterion: most bytes need escaping.
#[derive(CacheKey, Serialize)]
#[cache_key(namespace = "library", operation = "search")]
struct Localized<'a> {
    #[tenant]
    #[serde(skip_serializing)]
    branch: &'a str,
    #[criterion]
    title: &'a str,
    #[criterion]
    lang: &'a str,
}

/// A list criterion.
#[derive(CacheKey, Serialize)]
#[cache_key(namespace = "library", operation = "by_tags")]
struct ByTags {
    #[tenant]
    #[serde(skip_serializing)]
    branch: String,
    #[criterion]
    tags: Vec<String>,
    #[criterion]
    page: u32,
}

/// A set criterion: its iteration order must never reach the key.
#[derive(CacheKey, Serialize)]
#[cache_key(namespace = "library", operation = "by_status")]
struct ByStatus {
    #[tenant]
    #[serde(skip_serializing)]
    branch: String,
    #[criterion]
    #[serde(serialize_with = "sorted")]
    status: HashSet<&'static str>,
}

/// Serializes a set as a sorted array, as the JSON recipe must (a `HashSet`
/// iterates in a different order in every process).
fn sorted<S: Serializer>(set: &HashSet<&'static str>, serializer: S) -> Result<S::Ok, S::Error> {
    let mut items: Vec<&str> = set.iter().copied().collect();
    items.sort_unstable();
    items.serialize(serializer)
}

// ---------------------------------------------------------------------------
// The builder variant.

fn built_search(q: &Search<'_>, generation: u64) -> cache_key::Key {
    KeyBuilder::new("library", "search")
        .generation(generation)
        .tenant(q.branch)
        .criterion("title", q.title)
        .criterion("author", q.author)
        .build()
        .unwrap()
}

/// `built_search` with the criteria given in name order: the difference is
/// what laying them out in that order costs the builder.
fn built_search_in_name_order(q: &Search<'_>, generation: u64) -> cache_key::Key {
    KeyBuilder::new("library", "search")
        .generation(generation)
        .tenant(q.branch)
        .criterion("author", q.author)
        .criterion("title", q.title)
        .build()
        .unwrap()
}

fn built_list(q: &BranchList, generation: u64) -> cache_key::Key {
    KeyBuilder::new("library", "list")
        .generation(generation)
        .tenant(q.branch.as_str())
        .criterion("page", q.page)
        .build()
        .unwrap()
}

fn built_full(q: &FullSearch, generation: u64) -> cache_key::Key {
    KeyBuilder::new("library", "search")
        .generation(generation)
        .tenant(q.branch.as_str())
        .criterion("title", q.title.as_str())
        .criterion("author", q.author.as_str())
        .criterion("yearFrom", q.year_from)
        .criterion("yearTo", q.year_to)
        .criterion("lang", q.lang)
        .criterion("status", q.status)
        .criterion("sort", q.sort)
        .criterion("page", q.page)
        .build()
        .unwrap()
}

fn built_localized(q: &Localized<'_>, generation: u64) -> cache_key::Key {
    KeyBuilder::new("library", "search")
        .generation(generation)
        .tenant(q.branch)
        .criterion("title", q.title)
        .criterion("lang", q.lang)
        .build()
        .unwrap()
}

fn built_tags(q: &ByTags, generation: u64) -> cache_key::Key {
    KeyBuilder::new("library", "by_tags")
        .generation(generation)
        .tenant(q.branch.as_str())
        .criterion("tags", &q.tags)
        .criterion("page", q.page)
        .build()
        .unwrap()
}

fn built_status(q: &ByStatus, generation: u64) -> cache_key::Key {
    KeyBuilder::new("library", "by_status")
        .generation(generation)
        .tenant(q.branch.as_str())
        .criterion("status", &q.status)
        .build()
        .unwrap()
}

// ---------------------------------------------------------------------------
// The hand-written variant: the key format written out by hand, the way a
// careful developer would (correct escaping, empty values dropped, criteria
// sorted by name, summary above 48 bytes, one pre-sized allocation).

/// Everything but JavaScript's `encodeURIComponent` unreserved bytes.
const ESC: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'!')
    .remove(b'~')
    .remove(b'*')
    .remove(b'\'')
    .remove(b'(')
    .remove(b')');

#[derive(Debug)]
struct EmptyTenant;

fn push_esc(key: &mut String, text: &str) {
    for piece in utf8_percent_encode(text, ESC) {
        key.push_str(piece);
    }
}

/// `namespace:s1:g<generation>:t<tenant>:operation:`; the criteria follow.
/// Namespace and operation are constants that need no escaping.
fn push_body(
    key: &mut String,
    namespace: &str,
    generation: u64,
    tenant: &str,
    operation: &str,
) -> Result<(), EmptyTenant> {
    if tenant.is_empty() {
        return Err(EmptyTenant);
    }
    key.push_str(namespace);
    key.push_str(":s1:g");
    write!(key, "{generation}").unwrap();
    key.push_str(":t");
    push_esc(key, tenant);
    key.push(':');
    key.push_str(operation);
    key.push(':');
    Ok(())
}

/// Starts the pair `name=` (after a `&` unless it is the first).
fn push_name(key: &mut String, criteria_start: usize, name: &str) {
    if key.len() > criteria_start {
        key.push('&');
    }
    key.push_str(name);
    key.push('=');
}

/// Replaces criteria of more than 48 bytes with `c_` and 32 hex digits of
/// their SHA-256, or drops the `:` when there are none.
fn finish_tail(key: &mut String, criteria_start: usize) {
    let len = key.len() - criteria_start;
    if len == 0 {
        key.pop();
    } else if len > 48 {
        let digest = Sha256::digest(&key.as_bytes()[criteria_start..]);
        key.truncate(criteria_start);
        key.push_str("c_");
        const HEX: &[u8; 16] = b"0123456789abcdef";
        for byte in &digest[..16] {
            key.push(char::from(HEX[usize::from(byte >> 4)]));
            key.push(char::from(HEX[usize::from(byte & 0xf)]));
        }
    }
}

/// A list element: `%` and `,` are written `%25` and `%2C` before the whole
/// value is escaped, so in the key they are `%2525` and `%252C`.
fn push_esc_element(key: &mut String, text: &str) {
    for piece in utf8_percent_encode(text, ESC) {
        match piece {
            "%25" => key.push_str("%2525"),
            "%2C" => key.push_str("%252C"),
            piece => key.push_str(piece),
        }
    }
}

fn hand_search(q: &Search<'_>, generation: u64) -> Result<String, EmptyTenant> {
    let mut key = String::with_capacity(128);
    push_body(&mut key, "library", generation, q.branch, "search")?;
    let start = key.len();
    if let Some(author) = q.author.filter(|a| !a.is_empty()) {
        push_name(&mut key, start, "author");
        push_esc(&mut key, author);
    }
    if !q.title.is_empty() {
        push_name(&mut key, start, "title");
        push_esc(&mut key, q.title);
    }
    finish_tail(&mut key, start);
    Ok(key)
}

fn hand_list(q: &BranchList, generation: u64) -> Result<String, EmptyTenant> {
    let mut key = String::with_capacity(128);
    push_body(&mut key, "library", generation, &q.branch, "list")?;
    let start = key.len();
    push_name(&mut key, start, "page");
    write!(key, "{}", q.page).unwrap();
    finish_tail(&mut key, start);
    Ok(key)
}

fn hand_full(q: &FullSearch, generation: u64) -> Result<String, EmptyTenant> {
    // The criteria are written before they are hashed: room for them all.
    let mut key = String::with_capacity(256);
    push_body(&mut key, "library", generation, &q.branch, "search")?;
    let start = key.len();
    let text = |key: &mut String, name: &str, value: &str| {
        if !value.is_empty() {
            push_name(key, start, name);
            push_esc(key, value);
        }
    };
    text(&mut key, "author", &q.author);
    text(&mut key, "lang", q.lang);
    push_name(&mut key, start, "page");
    write!(key, "{}", q.page).unwrap();
    text(&mut key, "sort", q.sort);
    text(&mut key, "status", q.status);
    text(&mut key, "title", &q.title);
    push_name(&mut key, start, "yearFrom");
    write!(key, "{}", q.year_from).unwrap();
    push_name(&mut key, start, "yearTo");
    write!(key, "{}", q.year_to).unwrap();
    finish_tail(&mut key, start);
    Ok(key)
}

fn hand_localized(q: &Localized<'_>, generation: u64) -> Result<String, EmptyTenant> {
    let mut key = String::with_capacity(128);
    push_body(&mut key, "library", generation, q.branch, "search")?;
    let start = key.len();
    if !q.lang.is_empty() {
        push_name(&mut key, start, "lang");
        push_esc(&mut key, q.lang);
    }
    if !q.title.is_empty() {
        push_name(&mut key, start, "title");
        push_esc(&mut key, q.title);
    }
    finish_tail(&mut key, start);
    Ok(key)
}

fn hand_tags(q: &ByTags, generation: u64) -> Result<String, EmptyTenant> {
    let mut key = String::with_capacity(128);
    push_body(&mut key, "library", generation, &q.branch, "by_tags")?;
    let start = key.len();
    push_name(&mut key, start, "page");
    write!(key, "{}", q.page).unwrap();
    // An empty list, or a list of one empty element, is dropped.
    if !(q.tags.is_empty() || q.tags.len() == 1 && q.tags[0].is_empty()) {
        push_name(&mut key, start, "tags");
        for (i, tag) in q.tags.iter().enumerate() {
            if i > 0 {
                key.push_str("%2C");
            }
            push_esc_element(&mut key, tag);
        }
    }
    finish_tail(&mut key, start);
    Ok(key)
}

fn hand_status(q: &ByStatus, generation: u64) -> Result<String, EmptyTenant> {
    let mut key = String::with_capacity(128);
    push_body(&mut key, "library", generation, &q.branch, "by_status")?;
    let start = key.len();
    // Sorted by bytes, duplicates are impossible in a set; a lone "" is dropped.
    let mut status: Vec<&str> = q.status.iter().copied().collect();
    status.sort_unstable();
    if !(status.is_empty() || status.len() == 1 && status[0].is_empty()) {
        push_name(&mut key, start, "status");
        for (i, item) in status.iter().enumerate() {
            if i > 0 {
                key.push_str("%2C");
            }
            push_esc_element(&mut key, item);
        }
    }
    finish_tail(&mut key, start);
    Ok(key)
}

// ---------------------------------------------------------------------------
// The serde_json + SHA-256 variant.

/// `namespace:s1:g<generation>:t<tenant>:operation:c_<32 hex digits of the
/// SHA-256 of the criteria as JSON with sorted keys>`.
fn json_key<T: Serialize>(
    criteria: &T,
    namespace: &str,
    generation: u64,
    tenant: &str,
    operation: &str,
) -> Result<String, EmptyTenant> {
    // A `Value`'s map is a `BTreeMap`: keys come out sorted, as with
    // `json.dumps(sort_keys=True)`.
    let value = serde_json::to_value(criteria).unwrap();
    let json = serde_json::to_vec(&value).unwrap();
    let digest = Sha256::digest(&json);
    let mut key = String::with_capacity(128);
    push_body(&mut key, namespace, generation, tenant, operation)?;
    key.push_str("c_");
    for byte in &digest[..16] {
        write!(key, "{byte:02x}").unwrap();
    }
    Ok(key)
}

// ---------------------------------------------------------------------------
// The cases.

fn search() -> Search<'static> {
    Search {
        branch: "branch-2",
        title: "Sand",
        author: Some("Borges"),
    }
}

fn list() -> BranchList {
    BranchList {
        branch: "branch-2".into(),
        page: 1,
    }
}

fn full() -> FullSearch {
    FullSearch {
        branch: "branch-1".into(),
        title: "The Disconnected".into(),
        author: "Oğuz Atay".into(),
        year_from: 1970,
        year_to: 1980,
        lang: "tr",
        status: "on_shelf",
        sort: "title",
        page: 3,
    }
}

fn localized() -> Localized<'static> {
    Localized {
        branch: "şube-3",
        title: "Kürk Mantolu Madonna",
        lang: "tr",
    }
}

fn tags() -> ByTags {
    ByTags {
        branch: "branch-2".into(),
        tags: vec!["poetry".into(), "short stories".into(), "1970s".into()],
        page: 2,
    }
}

fn status() -> ByStatus {
    ByStatus {
        branch: "branch-2".into(),
        status: ["on_shelf", "on_loan", "reserved"].into(),
    }
}

const GENERATION: u64 = 4;

/// The checks made before timing: byte-equal keys from the first three
/// variants (and equal to `expected`), a deterministic JSON variant of the same shape.
fn check(expected: &str, derived: &str, built: &str, hand: &str, json: &str, json_again: &str) {
    assert_eq!(derived, expected, "derived");
    assert_eq!(built, expected, "builder");
    assert_eq!(hand, expected, "hand-written");
    assert_eq!(
        json, json_again,
        "serde_json + SHA-256 is not deterministic"
    );
    let (body, _) = expected.rsplit_once(':').unwrap();
    let (json_body, json_tail) = json.rsplit_once(':').unwrap();
    assert_eq!(json_body, body, "serde_json + SHA-256: another body");
    let hex = json_tail.strip_prefix("c_").expect("a c_ tail");
    assert!(
        hex.len() == 32 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')),
        "serde_json + SHA-256: tail {json_tail}"
    );
}

fn checks() {
    let q = search();
    let json = json_key(&q, "library", GENERATION, q.branch, "search").unwrap();
    check(
        "library:s1:g4:tbranch-2:search:author=Borges&title=Sand",
        q.cache_key(GENERATION).unwrap().as_str(),
        built_search(&q, GENERATION).as_str(),
        &hand_search(&q, GENERATION).unwrap(),
        &json,
        &json_key(&search(), "library", GENERATION, q.branch, "search").unwrap(),
    );
    assert_eq!(
        built_search_in_name_order(&q, GENERATION),
        built_search(&q, GENERATION)
    );
    // The JSON really is sorted by key.
    assert_eq!(
        serde_json::to_string(&serde_json::to_value(&q).unwrap()).unwrap(),
        r#"{"author":"Borges","title":"Sand"}"#
    );

    let q = list();
    check(
        "library:s1:g4:tbranch-2:list:page=1",
        q.cache_key(GENERATION).unwrap().as_str(),
        built_list(&q, GENERATION).as_str(),
        &hand_list(&q, GENERATION).unwrap(),
        &json_key(&q, "library", GENERATION, &q.branch, "list").unwrap(),
        &json_key(&list(), "library", GENERATION, &q.branch, "list").unwrap(),
    );

    let q = full();
    check(
        "library:s1:g4:tbranch-1:search:c_648d4755bc125b8edc4087542d254b21",
        q.cache_key(GENERATION).unwrap().as_str(),
        built_full(&q, GENERATION).as_str(),
        &hand_full(&q, GENERATION).unwrap(),
        &json_key(&q, "library", GENERATION, &q.branch, "search").unwrap(),
        &json_key(&full(), "library", GENERATION, &q.branch, "search").unwrap(),
    );

    let q = localized();
    check(
        "library:s1:g4:t%C5%9Fube-3:search:lang=tr&title=K%C3%BCrk%20Mantolu%20Madonna",
        q.cache_key(GENERATION).unwrap().as_str(),
        built_localized(&q, GENERATION).as_str(),
        &hand_localized(&q, GENERATION).unwrap(),
        &json_key(&q, "library", GENERATION, q.branch, "search").unwrap(),
        &json_key(&localized(), "library", GENERATION, q.branch, "search").unwrap(),
    );

    let q = tags();
    check(
        "library:s1:g4:tbranch-2:by_tags:page=2&tags=poetry%2Cshort%20stories%2C1970s",
        q.cache_key(GENERATION).unwrap().as_str(),
        built_tags(&q, GENERATION).as_str(),
        &hand_tags(&q, GENERATION).unwrap(),
        &json_key(&q, "library", GENERATION, &q.branch, "by_tags").unwrap(),
        &json_key(&tags(), "library", GENERATION, &q.branch, "by_tags").unwrap(),
    );
    // A comma or percent sign inside an element, by hand as by the crate.
    let tricky = ByTags {
        tags: vec!["a,b".into(), "50%".into(), String::new()],
        ..tags()
    };
    assert_eq!(
        hand_tags(&tricky, GENERATION).unwrap(),
        tricky.cache_key(GENERATION).unwrap().as_str()
    );

    let q = status();
    // The same set built in another order, with another hasher state.
    let mut reordered = HashSet::new();
    for item in ["reserved", "on_loan", "on_shelf"] {
        reordered.insert(item);
    }
    let again = ByStatus {
        branch: q.branch.clone(),
        status: reordered,
    };
    assert_eq!(
        again.cache_key(GENERATION).unwrap(),
        q.cache_key(GENERATION).unwrap()
    );
    check(
        "library:s1:g4:tbranch-2:by_status:status=on_loan%2Con_shelf%2Creserved",
        q.cache_key(GENERATION).unwrap().as_str(),
        built_status(&q, GENERATION).as_str(),
        &hand_status(&q, GENERATION).unwrap(),
        &json_key(&q, "library", GENERATION, &q.branch, "by_status").unwrap(),
        &json_key(&again, "library", GENERATION, &q.branch, "by_status").unwrap(),
    );
}

// ---------------------------------------------------------------------------
// The benchmarks.

macro_rules! case {
    ($c:ident, $name:literal, $query:expr, $built:ident, $hand:ident, $ns:literal, $op:literal) => {{
        let query = $query;
        let mut group = $c.benchmark_group($name);
        bench(&mut group, $name, "derived", || {
            black_box(&query).cache_key(black_box(GENERATION)).unwrap()
        });
        bench(&mut group, $name, "builder", || {
            $built(black_box(&query), black_box(GENERATION))
        });
        bench(&mut group, $name, "hand_written", || {
            $hand(black_box(&query), black_box(GENERATION)).unwrap()
        });
        bench(&mut group, $name, "serde_json_sha256", || {
            let query = black_box(&query);
            json_key(query, $ns, black_box(GENERATION), &query.branch, $op).unwrap()
        });
        group.finish();
    }};
}

fn keys(c: &mut Criterion) {
    checks();
    case!(
        c,
        "search_2",
        search(),
        built_search,
        hand_search,
        "library",
        "search"
    );
    let query = search();
    bench(
        &mut c.benchmark_group("search_2"),
        "search_2",
        "builder_in_name_order",
        || built_search_in_name_order(black_box(&query), black_box(GENERATION)),
    );
    case!(
        c,
        "list_1",
        list(),
        built_list,
        hand_list,
        "library",
        "list"
    );
    case!(
        c,
        "search_8_summarized",
        full(),
        built_full,
        hand_full,
        "library",
        "search"
    );
    case!(
        c,
        "non_ascii",
        localized(),
        built_localized,
        hand_localized,
        "library",
        "search"
    );
    case!(
        c,
        "vec",
        tags(),
        built_tags,
        hand_tags,
        "library",
        "by_tags"
    );
    case!(
        c,
        "hash_set",
        status(),
        built_status,
        hand_status,
        "library",
        "by_status"
    );
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(2))
        .sample_size(50);
    targets = keys
}
criterion_main!(benches);
