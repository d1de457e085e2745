//! The wire contract's conformance data, `tests/data/wire-vectors.json`,
//! generated from this crate and checked against it: counter names (query
//! parts to names), generation sums, tags (a tag's counter, the tags a value
//! gives and their counters, where the tag clock is read), envelopes
//! (fields, tags included, to exact bytes, and bytes to a hit or a miss
//! reason), and the scripts' text (instance, counter, clock, lock). The
//! Node.js and Python ports run the same file (`ports/`), so the three read
//! and write one Redis cache the same way. `cache-key/WIRE-FORMAT.md` is the
//! contract in prose; its version heads the file and this test's
//! [`WIRE_FORMAT`].
//!
//! The default run only compares. To regenerate after a deliberate change
//! of the wire (which is a new wire format version: bump [`WIRE_FORMAT`] and
//! the version at the top of WIRE-FORMAT.md, or the ports would read the
//! old contract), with a `redis-server` on `PATH` (the scripts are captured
//! from what the crate sends):
//!
//! ```text
//! CACHE_KEY_BLESS=1 cargo test --test wire_vectors -- --include-ignored
//! ```
//!
//! Blessing refuses to change an existing vector's answer (or a script)
//! under the same wire format version; adding vectors is allowed. While
//! blessing, the tests that read the file leave it to the one writing it.

mod common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write as _};
use std::net::TcpStream;
use std::sync::Mutex;
use std::time::{Duration, UNIX_EPOCH};

use cache_key::cache::{CachedQuery, RejectReason};
use cache_key::generation::{Counter, Counters, GenerationErrorKind, GenerationSum};
use cache_key::redis::envelope::{self, Expected};
use cache_key::redis::{RedisGenerations, RedisPool};
use cache_key::tag::TagClock;
use cache_key::tag::TagStamp;
use cache_key::{
    CacheKey, GenerationError, GenerationScope, GenerationStore, KeyError, Scopes, TagScope, Tags,
    TenantValue,
};
use common::redis_server::Server;
use serde::Serialize;
use serde_json::{Value, json};

/// The wire format version these vectors are for (`WIRE-FORMAT.md`).
const WIRE_FORMAT: u64 = 5;

const VECTORS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/wire-vectors.json");
const CONTRACT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/cache-key/WIRE-FORMAT.md");
const BLESS: &str = "CACHE_KEY_BLESS";

// ---------------------------------------------------------------------------
// The query types, and each instance's description in the JSON form of the
// key vectors (`tests/data/vectors.json`), which the ports build keys from.
// ---------------------------------------------------------------------------

#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
struct Book {
    title: String,
    year: u16,
    subtitle: Option<String>,
}

#[derive(CacheKey)]
#[cache_key(namespace = "library", operation = "search", hash_tag, value = Vec<Book>, ttl = "1m")]
struct Search {
    #[tenant]
    branch: u32,
    #[criterion]
    title: String,
}

#[derive(CacheKey)]
#[cache_key(namespace = "forge", operation = "issues", value = Vec<String>, ttl = "1m")]
struct Issues {
    #[tenant]
    org: String,
    #[tenant]
    repo: String,
    #[criterion]
    page: u32,
    #[criterion]
    labels: Vec<String>,
}

#[derive(CacheKey)]
#[cache_key(
    namespace = "li:b",
    operation = "count ries",
    global = "the same list for every tenant",
    value = u64,
    value_id = "country-count",
    ttl = "1m"
)]
struct Countries {
    #[criterion]
    region: Option<String>,
}

#[derive(CacheKey)]
#[cache_key(namespace = "crm", operation = "lookup", schema = 2, value = String, ttl = "1m")]
struct Lookup {
    #[tenant]
    account: String,
    #[criterion]
    who: String,
    #[criterion]
    text: String,
}

/// A book on a shelf: its id is a tag inside the branch, its author a tag
/// of every branch.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
struct Item {
    id: u64,
    author: String,
}

/// Answers tagged from their value (`CachedQuery` by hand, as the derive's
/// `value_tags` will write it): each book's id inside the branch, each
/// author shared by every branch.
#[derive(CacheKey)]
#[cache_key(namespace = "library", operation = "shelf", hash_tag)]
struct Shelf {
    #[tenant]
    branch: u32,
    #[criterion]
    term: String,
}

impl CachedQuery for Shelf {
    type Value = Vec<Item>;
    const VALUE_ID: &'static str = "Vec<Item>";
    const TTL: Duration = Duration::from_secs(60);
    const VALUE_TAGS: bool = true;

    fn write_value_tags(value: &Vec<Item>, tags: &mut Tags) -> Result<(), KeyError> {
        for item in value {
            tags.push(TagScope::Tenant, "book", "id", &item.id)?;
            tags.push(TagScope::Global, "author", "author", &item.author.as_str())?;
        }
        Ok(())
    }
}

/// Tagged by its criteria: the books it asks for, inside the branch, and an
/// author every branch shares.
#[derive(CacheKey)]
#[cache_key(namespace = "library", operation = "by_ids", hash_tag)]
struct ByIds {
    #[tenant]
    branch: u32,
    #[criterion]
    #[tag = "book"]
    ids: Vec<u64>,
    #[criterion]
    #[tag(name = "author", global = "authors are one catalog for every branch")]
    author: Option<String>,
}

fn str_value(text: &str) -> Value {
    json!({ "type": "str", "value": text })
}

fn int_value(n: u64) -> Value {
    json!({ "type": "int", "value": n.to_string() })
}

/// A query and its description, the key parts without a generation.
struct Described<Q> {
    name: &'static str,
    query: Q,
    json: Value,
}

fn search(name: &'static str, branch: u32, title: &str) -> Described<Search> {
    Described {
        name,
        query: Search {
            branch,
            title: title.to_owned(),
        },
        json: json!({
            "namespace": "library", "operation": "search", "schema": 1, "hash_tag": true,
            "tenant": int_value(branch.into()),
            "criteria": [["title", str_value(title)]],
        }),
    }
}

fn issues(
    name: &'static str,
    org: &str,
    repo: &str,
    page: u32,
    labels: &[&str],
) -> Described<Issues> {
    let items: Vec<Value> = labels.iter().map(|label| str_value(label)).collect();
    Described {
        name,
        query: Issues {
            org: org.to_owned(),
            repo: repo.to_owned(),
            page,
            labels: labels.iter().map(|label| (*label).to_owned()).collect(),
        },
        json: json!({
            "namespace": "forge", "operation": "issues", "schema": 1,
            "tenant": [org, repo],
            "criteria": [["labels", { "type": "list", "items": items }], ["page", int_value(page.into())]],
        }),
    }
}

/// A query tagged by its criteria: the JSON form says which criteria are
/// tags (`query_tags`, in the order the type declares them).
fn by_ids(name: &'static str, branch: u32, ids: &[u64], author: Option<&str>) -> Described<ByIds> {
    let items: Vec<Value> = ids.iter().map(|&id| int_value(id)).collect();
    Described {
        name,
        query: ByIds {
            branch,
            ids: ids.to_vec(),
            author: author.map(str::to_owned),
        },
        json: json!({
            "namespace": "library", "operation": "by_ids", "schema": 1, "hash_tag": true,
            "tenant": int_value(branch.into()),
            "criteria": [
                ["ids", { "type": "list", "items": items }],
                ["author", author.map_or(json!({ "type": "none" }), str_value)],
            ],
            "query_tags": [
                { "criterion": "ids", "name": "book", "global": false },
                { "criterion": "author", "name": "author", "global": true },
            ],
        }),
    }
}

fn countries(name: &'static str, region: Option<&str>) -> Described<Countries> {
    Described {
        name,
        query: Countries {
            region: region.map(str::to_owned),
        },
        json: json!({
            "namespace": "li:b", "operation": "count ries", "schema": 1,
            "tenant": null,
            "criteria": [["region", region.map_or(json!({ "type": "none" }), str_value)]],
        }),
    }
}

fn lookup(name: &'static str, account: &str, who: &str, text: &str) -> Described<Lookup> {
    Described {
        name,
        query: Lookup {
            account: account.to_owned(),
            who: who.to_owned(),
            text: text.to_owned(),
        },
        json: json!({
            "namespace": "crm", "operation": "lookup", "schema": 2,
            "tenant": account,
            "criteria": [["who", str_value(who)], ["text", str_value(text)]],
        }),
    }
}

// ---------------------------------------------------------------------------
// Counters and sums, through a store of our own: the crate hands it a
// query's counters in order, and adds the values it gives.
// ---------------------------------------------------------------------------

/// A store that records the counters it is asked for and gives each the
/// value at its position in `values` (1 past the end).
struct Recording {
    values: Vec<u64>,
    names: Mutex<Vec<String>>,
}

impl Recording {
    fn new(values: Vec<u64>) -> Self {
        Recording {
            values,
            names: Mutex::new(Vec::new()),
        }
    }

    fn names(&self) -> Vec<String> {
        self.names.lock().expect("not poisoned").clone()
    }
}

impl GenerationStore for Recording {
    fn read(&self, counters: Counters<'_>, sum: &mut GenerationSum) -> Result<(), GenerationError> {
        let mut names = self.names.lock().expect("not poisoned");
        names.clear();
        for (i, counter) in counters.iter().enumerate() {
            names.push(counter.name());
            sum.add(self.values.get(i).copied().unwrap_or(1));
        }
        Ok(())
    }

    fn bump(&self, _: Counter<'_>) -> Result<(), GenerationError> {
        Ok(())
    }
}

/// A query's counters, outermost first, and the name of each scope a
/// caller invalidates.
fn counter_vector<Q: CacheKey>(
    described: &Described<Q>,
    scopes: Vec<(&str, GenerationScope)>,
) -> Value {
    let store = Recording::new(Vec::new());
    store.generation_for(&described.query).expect("counters");
    let scopes: serde_json::Map<String, Value> = scopes
        .into_iter()
        .map(|(what, scope)| (what.to_owned(), json!(scope.counter().name())))
        .collect();
    json!({
        "name": described.name,
        "query": described.json,
        "counters": store.names(),
        "scopes": scopes,
    })
}

/// The generation and key for counter values `values`, or the error.
fn sum_vector<Q: CacheKey>(described: &Described<Q>, name: &str, values: &[u64]) -> Value {
    let store = Recording::new(values.to_vec());
    let generation = store.generation_for(&described.query);
    assert_eq!(
        store.names().len(),
        values.len(),
        "{name}: one value per counter"
    );
    let texts: Vec<String> = values.iter().map(u64::to_string).collect();
    match generation {
        Ok(generation) => {
            let key = store.key_for(&described.query).expect("a key");
            let readable = described
                .query
                .readable_key(generation)
                .expect("a readable key");
            json!({
                "name": name, "query": described.json, "values": texts,
                "generation": generation.to_string(),
                "key": key.as_str(), "readable_key": readable.to_string(),
            })
        }
        Err(error) => {
            assert_eq!(
                error.kind(),
                GenerationErrorKind::Overflow,
                "{name}: {error}"
            );
            json!({ "name": name, "query": described.json, "values": texts, "error": "overflow" })
        }
    }
}

fn counters_and_sums() -> (Vec<Value>, Vec<Value>) {
    let dune = search("search, one tenant, hash tag", 2, "Dune");
    let sand = search("search, separators in a criterion", 7, "Sand: Borges & co");
    let rocket = issues(
        "issues, compound tenant with an escaped comma",
        "acme",
        "rocket,v2",
        3,
        &["bug", "a,b"],
    );
    let braces = issues(
        "issues, braces and a space in a tenant",
        "ac me{}",
        "main",
        1,
        &[],
    );
    let all = countries("countries, global, escaped namespace and operation", None);
    let europe = countries("countries, global, with a criterion", Some("Europe/West"));
    let long = lookup(
        "lookup, summarized key, escaped percent in the tenant",
        "t%20x",
        "jane.doe@example.com",
        "Jane Doe, who asked about the invoice of March and its second reminder",
    );

    let asked = by_ids(
        "by ids, tagged by its criteria: a tag per element, repeats kept, a global author",
        2,
        &[42, 7, 42],
        Some("Borges, J.L."),
    );
    let one_book = by_ids("by ids, one book, no author (no tag)", 2, &[7], None);

    let counters = vec![
        counter_vector(
            &dune,
            vec![
                ("namespace", GenerationScope::namespace::<Search>()),
                ("tenant", Search::tenant_scope(&2).expect("a scope")),
                ("operation", Search::operation_scope(&2).expect("a scope")),
            ],
        ),
        counter_vector(
            &sand,
            vec![("tenant", Search::tenant_scope(&7).expect("a scope"))],
        ),
        counter_vector(
            &rocket,
            vec![
                ("namespace", GenerationScope::namespace::<Issues>()),
                (
                    "leading_tenant",
                    Issues::tenant_scope_by_org(&"acme".to_owned()).expect("a scope"),
                ),
                (
                    "tenant",
                    Issues::tenant_scope((&"acme".to_owned(), &"rocket,v2".to_owned()))
                        .expect("a scope"),
                ),
                (
                    "operation",
                    Issues::operation_scope((&"acme".to_owned(), &"rocket,v2".to_owned()))
                        .expect("a scope"),
                ),
            ],
        ),
        counter_vector(
            &braces,
            vec![
                (
                    "leading_tenant",
                    Issues::tenant_scope_by_org(&"ac me{}".to_owned()).expect("a scope"),
                ),
                (
                    "operation",
                    Issues::operation_scope((&"ac me{}".to_owned(), &"main".to_owned()))
                        .expect("a scope"),
                ),
            ],
        ),
        counter_vector(
            &all,
            vec![
                ("namespace", GenerationScope::namespace::<Countries>()),
                (
                    "operation",
                    Countries::operation_scope(()).expect("a scope"),
                ),
            ],
        ),
        counter_vector(&europe, Vec::new()),
        counter_vector(
            &long,
            vec![(
                "tenant",
                Lookup::tenant_scope(&"t%20x".to_owned()).expect("a scope"),
            )],
        ),
        counter_vector(
            &asked,
            vec![
                ("book", ByIds::tag_scope_book(&2, &42).expect("a scope")),
                (
                    "author",
                    ByIds::tag_scope_author(&"Borges, J.L.".to_owned()).expect("a scope"),
                ),
            ],
        ),
        counter_vector(&one_book, Vec::new()),
    ];

    // Counters start at the server's clock in microseconds since 2020 (a
    // value of 2026 is about 2 * 10^14) and grow by one per bump.
    let clock = 207_360_000_000_000;
    let sums = vec![
        sum_vector(&dune, "three counters of one", &[1, 1, 1]),
        sum_vector(
            &dune,
            "three counters at the clock",
            &[clock, clock + 5, clock + 17],
        ),
        sum_vector(
            &rocket,
            "four counters, past 2^53",
            &[clock * 20, clock * 15, clock * 10, 3],
        ),
        sum_vector(&all, "a global query's two counters", &[clock, 2]),
        sum_vector(
            &long,
            "a summarized key, its readable key whole",
            &[4, 5, 6],
        ),
        sum_vector(&sand, "the largest sum", &[u64::MAX - 2, 1, 1]),
        sum_vector(&sand, "a sum past u64 is an error", &[u64::MAX - 1, 1, 1]),
        sum_vector(
            &rocket,
            "a counter at u64::MAX and one more",
            &[u64::MAX, 0, 1, 0],
        ),
        sum_vector(
            &asked,
            "a query's tags' counters, a repeated tag's twice",
            &[
                clock,
                clock + 1,
                clock + 2,
                clock + 40,
                5,
                clock + 40,
                clock + 3,
            ],
        ),
    ];
    (counters, sums)
}

// ---------------------------------------------------------------------------
// Tags: a tag's counter (the scope a caller bumps), the tags a value gives
// and their counters, and where a fill reads the tag clock.
// ---------------------------------------------------------------------------

/// A tag as the vectors describe it: its name, its value in the JSON form
/// of a tenant value (text, or `{"type": "int", ...}`), and whether it is
/// shared by every tenant of the namespace.
fn tag_json(scope: TagScope, name: &str, value: Value) -> Value {
    json!({ "name": name, "value": value, "global": scope == TagScope::Global })
}

/// One tag's line as [`Tags`] writes it (`#name=value` or `@name=value`).
fn tag_line(scope: TagScope, name: &str, value: &dyn TenantValue) -> String {
    let mut tags = Tags::new();
    tags.push(scope, name, "tag", value).expect("a tag");
    tags.as_str().trim_end_matches('\n').to_owned()
}

/// The counter a bump of tag `name` = `value` in `scope` sets, for
/// `described`'s query type and tenant `tenant`, or why there is none.
fn tag_scope_vector<Q: CacheKey>(
    name: &str,
    described: &Described<Q>,
    tenant: &[&dyn TenantValue],
    tag: (TagScope, &str, &dyn TenantValue, Value),
) -> Value {
    let (scope, tag_name, value, value_json) = tag;
    let tenant = match scope {
        TagScope::Tenant => tenant,
        TagScope::Global => &[],
    };
    let mut vector = json!({
        "name": name, "query": described.json, "tag": tag_json(scope, tag_name, value_json),
    });
    match GenerationScope::tag_unchecked::<Q>(tenant, scope, tag_name, value) {
        Ok(found) => vector["counter"] = json!(found.counter().name()),
        Err(error) => {
            assert!(
                matches!(error.key_error(), Some(KeyError::EmptyTag { .. })),
                "{name}: {error}"
            );
            vector["error"] = json!("empty_tag");
        }
    }
    vector
}

fn shelf(name: &'static str, branch: u32, term: &str) -> Described<Shelf> {
    Described {
        name,
        query: Shelf {
            branch,
            term: term.to_owned(),
        },
        json: json!({
            "namespace": "library", "operation": "shelf", "schema": 1, "hash_tag": true,
            "tenant": int_value(branch.into()),
            "criteria": [["term", str_value(term)]],
        }),
    }
}

fn item(id: u64, author: &str) -> Item {
    Item {
        id,
        author: author.to_owned(),
    }
}

/// The tags `value`, `described`'s answer, gives (as `Shelf` pushes them,
/// in order, repeats included), the list an entry keeps (sorted bytewise,
/// each once) and the counter of each, in that list's order.
fn value_tags_vector(name: &str, described: &Described<Shelf>, value: &[Item]) -> Value {
    let branch = described.query.branch;
    let mut tags = Tags::new();
    Shelf::write_value_tags(&value.to_vec(), &mut tags).expect("tags");
    tags.dedup();
    let kept: Vec<&str> = tags.as_str().lines().collect();

    let mut pushed = Vec::new();
    let mut counters = Vec::new();
    for book in value {
        let author = book.author.as_str();
        let each: [(TagScope, &str, &dyn TenantValue, Value); 2] = [
            (TagScope::Tenant, "book", &book.id, int_value(book.id)),
            (TagScope::Global, "author", &author, json!(author)),
        ];
        for (scope, tag_name, value, value_json) in each {
            pushed.push(tag_json(scope, tag_name, value_json));
            let tenant: &[&dyn TenantValue] = match scope {
                TagScope::Tenant => &[&branch],
                TagScope::Global => &[],
            };
            let counter = GenerationScope::tag_unchecked::<Shelf>(tenant, scope, tag_name, value)
                .expect("a scope")
                .counter()
                .name();
            counters.push((tag_line(scope, tag_name, value), counter));
        }
    }
    counters.sort();
    counters.dedup();
    let lines: Vec<&str> = counters.iter().map(|(line, _)| line.as_str()).collect();
    assert_eq!(
        lines, kept,
        "{name}: the tags' counters, in the list's order"
    );
    json!({
        "name": name, "query": described.json, "value": value,
        "tags": pushed, "kept": kept,
        "counters": counters.iter().map(|(_, counter)| counter).collect::<Vec<_>>(),
    })
}

/// Where a fill of `described`'s query reads the tag clock: the slot of
/// its tenant's tags, and the slot of its namespace's shared tags.
fn clock_vector<Q: CacheKey>(
    name: &str,
    described: &Described<Q>,
    tenant: &[&dyn TenantValue],
) -> Value {
    let at = |tenant: &[&dyn TenantValue], scope| {
        GenerationScope::tag_unchecked::<Q>(tenant, scope, "clock", &1u8)
            .expect("a scope")
            .counter()
            .name()
    };
    json!({
        "name": name, "query": described.json,
        "tenant": at(tenant, TagScope::Tenant), "global": at(&[], TagScope::Global),
    })
}

/// `tags`: `scopes` (a tag's counter), `values` (a value's tags and their
/// counters), `clock` (the names a fill's clock reads are sent with).
fn tags() -> Value {
    let dune = search("search, one tenant, hash tag", 2, "Dune");
    let rocket = issues(
        "issues, compound tenant with an escaped comma",
        "acme",
        "rocket,v2",
        3,
        &["bug"],
    );
    let all = countries("countries, global, escaped namespace and operation", None);
    let long = lookup(
        "lookup, escaped percent in the tenant",
        "t%20x",
        "jane",
        "hi",
    );
    let (branch, org, repo, account) = (2u32, "acme", "rocket,v2", "t%20x");
    let scopes = vec![
        tag_scope_vector(
            "a book inside a branch",
            &dune,
            &[&branch],
            (TagScope::Tenant, "book", &42u64, int_value(42)),
        ),
        tag_scope_vector(
            "an author of every branch, escaped",
            &dune,
            &[&branch],
            (
                TagScope::Global,
                "author",
                &"Borges, J.L.",
                json!("Borges, J.L."),
            ),
        ),
        tag_scope_vector(
            "a tag inside a compound tenant, name and value escaped",
            &rocket,
            &[&org, &repo],
            (TagScope::Tenant, "la bel", &"a=b#c@d", json!("a=b#c@d")),
        ),
        tag_scope_vector(
            "braces, a line break and non-ASCII in a value",
            &long,
            &[&account],
            (
                TagScope::Tenant,
                "note",
                &"{x}\n\u{e9}",
                json!("{x}\n\u{e9}"),
            ),
        ),
        tag_scope_vector(
            "a tag inside the tenant of a global query",
            &all,
            &[],
            (TagScope::Tenant, "country", &"fr", json!("fr")),
        ),
        tag_scope_vector(
            "a tag of every tenant of an escaped namespace",
            &all,
            &[],
            (
                TagScope::Global,
                "region",
                &"Europe/West",
                json!("Europe/West"),
            ),
        ),
        tag_scope_vector(
            "the largest integer",
            &dune,
            &[&branch],
            (TagScope::Tenant, "book", &u64::MAX, int_value(u64::MAX)),
        ),
        tag_scope_vector(
            "text 0 is a value",
            &dune,
            &[&branch],
            (TagScope::Tenant, "book", &"0", json!("0")),
        ),
        tag_scope_vector(
            "an empty value is refused",
            &dune,
            &[&branch],
            (TagScope::Tenant, "book", &"", json!("")),
        ),
        tag_scope_vector(
            "the integer 0 is refused (an id left at its default)",
            &dune,
            &[&branch],
            (TagScope::Tenant, "book", &0u64, int_value(0)),
        ),
        tag_scope_vector(
            "an empty value of every tenant is refused",
            &dune,
            &[&branch],
            (TagScope::Global, "author", &"", json!("")),
        ),
    ];

    let fiction = shelf("shelf, one tenant, hash tag", 2, "fiction");
    let values = vec![
        value_tags_vector(
            "two books, one author twice",
            &fiction,
            &[item(42, "Borges"), item(7, "Le Guin"), item(1965, "Borges")],
        ),
        value_tags_vector(
            "one book listed twice, a name to escape",
            &shelf("shelf, another branch", 10, "sf"),
            &[item(9, "\u{c9}mile Zola"), item(9, "\u{c9}mile Zola")],
        ),
        value_tags_vector("no books, no tags", &fiction, &[]),
    ];

    let clock = vec![
        clock_vector(fiction.name, &fiction, &[&branch]),
        clock_vector(rocket.name, &rocket, &[&org, &repo]),
        clock_vector(all.name, &all, &[]),
    ];
    json!({ "scopes": scopes, "values": values, "clock": clock })
}

// ---------------------------------------------------------------------------
// Envelopes
// ---------------------------------------------------------------------------

/// A fixed time entries are fresh until: 2026-12-01T00:00:00Z, in ms.
const FRESH: u64 = 1_796_083_200_000;

fn readable<Q: CacheKey>(query: &Q, generation: u64) -> String {
    query
        .readable_key(generation)
        .expect("a readable key")
        .to_string()
}

fn encode_vector<T: Serialize>(
    name: &str,
    schema: u32,
    value_id: &str,
    readable_key: &str,
    value: &T,
) -> Value {
    encode_stamped(name, schema, value_id, readable_key, value, None, None)
}

/// An envelope with a value's tags and when its fill began, and its query's
/// own tags: the vector holds them as the envelope does (`tags`, `since`,
/// `qtags`), when it has them.
fn encode_stamped<T: Serialize>(
    name: &str,
    schema: u32,
    value_id: &str,
    readable_key: &str,
    value: &T,
    stamp: Option<&TagStamp>,
    query_tags: Option<&Tags>,
) -> Value {
    let mut expected = Expected::new(schema, value_id, readable_key);
    if let Some(query_tags) = query_tags {
        expected = expected.with_query_tags(query_tags);
    }
    let bytes = envelope::encode(
        &expected,
        value,
        UNIX_EPOCH + Duration::from_millis(FRESH),
        stamp,
    )
    .expect("an envelope");
    let mut vector = json!({
        "name": name, "schema": schema, "value_id": value_id, "readable_key": readable_key,
        "query_digest": expected.query_digest(), "fresh": FRESH,
        // The value as serde_json writes it, so that a port parses it with
        // its fields in this order.
        "value_json": serde_json::to_string(value).expect("JSON"),
        "bytes": String::from_utf8(bytes).expect("envelopes are UTF-8"),
    });
    if let Some(stamp) = stamp {
        vector["tags"] = stamp_json(stamp)["tags"].clone();
        vector["since"] = stamp_json(stamp)["since"].clone();
    }
    if let Some(query_tags) = query_tags {
        vector["qtags"] = json!(query_tags.as_str().lines().collect::<Vec<_>>());
    }
    vector
}

/// A stamp as the envelope writes it: `{"tags": [...], "since": [t, g]}`.
fn stamp_json(stamp: &TagStamp) -> Value {
    let tags: Vec<&str> = stamp.tags.as_str().lines().collect();
    json!({ "tags": tags, "since": [stamp.since.tenant, stamp.since.global] })
}

fn reason(reason: RejectReason) -> &'static str {
    match reason {
        RejectReason::ValueType => "value_type",
        RejectReason::Query => "query",
        RejectReason::Schema => "schema",
        RejectReason::Version => "version",
        RejectReason::Undecodable => "undecodable",
        RejectReason::WrongType => "wrong_type",
        other => panic!("a reason the vectors do not name: {other:?}"),
    }
}

/// What a reader expecting `(schema, value_id, readable_key)` makes of
/// `bytes`, read as any JSON value.
fn decode_vector(
    name: &str,
    schema: u32,
    value_id: &str,
    readable_key: &str,
    bytes: &[u8],
) -> Value {
    let expected = Expected::new(schema, value_id, readable_key);
    let answer = match envelope::decode::<Value>(bytes, &expected) {
        Ok(decoded) => {
            let fresh = decoded
                .fresh_until
                .duration_since(UNIX_EPOCH)
                .expect("after 1970")
                .as_millis();
            let mut hit =
                json!({ "value": decoded.value, "fresh": u64::try_from(fresh).expect("a u64") });
            if let Some(stamp) = &decoded.tags {
                let stamp = stamp_json(stamp);
                hit["tags"] = stamp["tags"].clone();
                hit["since"] = stamp["since"].clone();
            }
            json!({ "hit": hit })
        }
        Err(why) => json!({ "miss": reason(why) }),
    };
    let mut vector = json!({
        "name": name, "schema": schema, "value_id": value_id, "readable_key": readable_key,
    });
    match std::str::from_utf8(bytes) {
        Ok(text) => vector["bytes"] = json!(text),
        Err(_) => {
            let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
            vector["bytes_hex"] = json!(hex);
        }
    }
    vector
        .as_object_mut()
        .expect("an object")
        .extend(answer.as_object().expect("an object").clone());
    vector
}

fn envelopes() -> (Vec<Value>, Vec<Value>) {
    let dune = Search {
        branch: 2,
        title: "Dune".into(),
    };
    let dune_key = readable(&dune, 207_360_000_000_018);
    let books = vec![
        Book {
            title: "Dune".into(),
            year: 1965,
            subtitle: None,
        },
        Book {
            title: "Ficciones".into(),
            year: 1944,
            subtitle: Some("Tl\u{f6}n, Uqbar".into()),
        },
    ];
    let long = Lookup {
        account: "t%20x".into(),
        who: "jane.doe@example.com".into(),
        text: "Jane Doe, who asked about the invoice of March and its second reminder".into(),
    };
    let long_key = readable(&long, 15);
    let all_key = readable(&Countries { region: None }, 9);
    let awkward = "quote \" backslash \\ slash / newline \n tab \t nul \u{0} unit \u{1f} del \u{7f} \
                   \u{e9} \u{2028} \u{1f600} </script>";
    let mut encode = vec![
        encode_vector("a page of books", 1, Search::VALUE_ID, &dune_key, &books),
        encode_vector(
            "no books",
            1,
            Search::VALUE_ID,
            &dune_key,
            &Vec::<Book>::new(),
        ),
        encode_vector(
            "a declared value id, a global query",
            1,
            Countries::VALUE_ID,
            &all_key,
            &195u64,
        ),
        encode_vector(
            "the largest integer a double holds",
            1,
            Countries::VALUE_ID,
            &all_key,
            &9_007_199_254_740_991u64,
        ),
        encode_vector(
            "text JSON must escape, summarized key",
            2,
            Lookup::VALUE_ID,
            &long_key,
            &awkward,
        ),
        encode_vector("none", 1, "Option<String>", &all_key, &None::<String>),
        encode_vector(
            "nested, negative and float",
            1,
            "Stats",
            &all_key,
            &json!({ "ok": true, "n": -3, "ratio": 0.25, "tags": ["a", null] }),
        ),
    ];

    let fiction = Shelf {
        branch: 2,
        term: "fiction".into(),
    };
    let fiction_key = readable(&fiction, 218_937_600_000_042);
    let items = vec![item(42, "Borges"), item(7, "Le Guin"), item(1965, "Borges")];
    let mut tags = Tags::new();
    Shelf::write_value_tags(&items, &mut tags).expect("tags");
    tags.dedup();
    let since = TagClock {
        tenant: 218_937_600_000_000,
        global: 218_937_600_000_123,
    };
    let stamp = TagStamp { tags, since };
    let asked_books = ByIds {
        branch: 2,
        ids: vec![42, 7, 42],
        author: Some("Borges, J.L.".into()),
    };
    let mut asked_tags = Tags::new();
    asked_books.write_query_tags(&mut asked_tags).expect("tags");
    encode.extend([
        encode_stamped(
            "tagged: books inside the branch, authors of every branch",
            1,
            Shelf::VALUE_ID,
            &fiction_key,
            &items,
            Some(&stamp),
            None,
        ),
        encode_stamped(
            "an answer without tags has neither tags nor since",
            1,
            Shelf::VALUE_ID,
            &fiction_key,
            &Vec::<Item>::new(),
            Some(&TagStamp {
                tags: Tags::new(),
                since,
            }),
            None,
        ),
        encode_stamped(
            "tagged by its query (qtags, repeats kept) and by its value",
            1,
            Shelf::VALUE_ID,
            &readable(&asked_books, 218_937_600_000_042),
            &items,
            Some(&stamp),
            Some(&asked_tags),
        ),
    ]);

    let good = encode_vector("good", 1, Search::VALUE_ID, &dune_key, &books);
    let good_bytes = good["bytes"].as_str().expect("bytes").to_owned();
    let good_json: Value = serde_json::from_str(&good_bytes).expect("JSON");
    // The good envelope with `field` set to `value` (fields in serde_json's
    // order of a map: sorted, which a reader must accept as well).
    let with = |field: &str, value: Value| {
        let mut entry = good_json.clone();
        entry[field] = value;
        entry.to_string().into_bytes()
    };
    let without = |field: &str| {
        let mut entry = good_json.clone();
        entry.as_object_mut().expect("an object").remove(field);
        entry.to_string().into_bytes()
    };
    let other_digest = Expected::new(1, Search::VALUE_ID, &readable(&dune, 207_360_000_000_017))
        .query_digest()
        .to_owned();
    let expect =
        |name: &str, bytes: &[u8]| decode_vector(name, 1, Search::VALUE_ID, &dune_key, bytes);
    let mut invalid_utf8 = good_bytes.clone().into_bytes();
    let at = good_bytes.find("Dune").expect("a title");
    invalid_utf8[at + 1] = 0xff;
    let decode = vec![
        expect("as written", good_bytes.as_bytes()),
        expect(
            "the query's own tags recorded (qtags): a reader ignores them",
            &with("qtags", json!(["#title=Dune", "@shop=7"])),
        ),
        expect("fields sorted", &with("v", json!(envelope::VERSION))),
        expect(
            "an unknown field is ignored",
            &with("x-writer", json!("node")),
        ),
        expect(
            "white space around",
            format!(" \n{good_bytes}\t ").as_bytes(),
        ),
        expect(
            "fresh in the past is still this entry (freshness is the reader's clock)",
            &with("fresh", json!(1)),
        ),
        expect("version 5", &with("v", json!(5))),
        expect(
            "version 3 (no tags: it would serve a tagged entry after a bump)",
            &with("v", json!(3)),
        ),
        expect("version 2", &with("v", json!(2))),
        expect("version 1", &with("v", json!(1))),
        expect("a newer version with nothing else", br#"{"v":5}"#),
        expect(
            "a newer version, other fields of other types",
            br#"{"v":9,"schema":"one","value":1}"#,
        ),
        expect("another schema", &with("schema", json!(2))),
        expect("another value id", &with("type", json!("u64"))),
        expect(
            "another value id, differing in case",
            &with("type", json!("vec<book>")),
        ),
        expect("another query", &with("query", json!(other_digest))),
        expect(
            "the digest in uppercase",
            &with(
                "query",
                json!(
                    good_json["query"]
                        .as_str()
                        .expect("a digest")
                        .to_uppercase()
                ),
            ),
        ),
        expect("garbage", b"\xff\x00not json"),
        expect("empty", b""),
        expect("a bare value", br#"[{"title":"Dune"}]"#),
        expect("null", b"null"),
        expect("version 3 alone", br#"{"v":3}"#),
        expect("version 4 alone", br#"{"v":4}"#),
        expect("no header, a value", br#"{"v":4,"value":[]}"#),
        expect("no fresh", &without("fresh")),
        expect("no value", &without("value")),
        expect("no schema", &without("schema")),
        expect("no type", &without("type")),
        expect("no v", &without("v")),
        expect("v as text", &with("v", json!("3"))),
        expect("v negative", &with("v", json!(-3))),
        expect("v past u32", &with("v", json!(4_294_967_299u64))),
        expect("v a boolean", &with("v", json!(true))),
        expect("schema as text", &with("schema", json!("1"))),
        expect("schema null", &with("schema", Value::Null)),
        expect("type null", &with("type", Value::Null)),
        expect("type a number", &with("type", json!(3))),
        expect("query null", &with("query", Value::Null)),
        expect("fresh as text", &with("fresh", json!("1796083200000"))),
        expect("fresh negative", &with("fresh", json!(-1))),
        expect("fresh not whole", &with("fresh", json!(1.5))),
        expect(
            "value null (any JSON is a value here)",
            &with("value", Value::Null),
        ),
        expect(
            "text after the envelope",
            format!("{good_bytes}x").as_bytes(),
        ),
        expect(
            "two envelopes",
            format!("{good_bytes}{good_bytes}").as_bytes(),
        ),
        expect("bytes that are not UTF-8 in a string", &invalid_utf8),
        expect(
            "a byte order mark",
            format!("\u{feff}{good_bytes}").as_bytes(),
        ),
    ];

    // Tags: the good envelope with `tags` and `since` set (`None`: left out).
    let tagged = |tags: Option<Value>, since: Option<Value>| {
        let mut entry = good_json.clone();
        for (field, value) in [("tags", tags), ("since", since)] {
            if let Some(value) = value {
                entry[field] = value;
            }
        }
        entry.to_string().into_bytes()
    };
    let since = json!([218_937_600_000_000u64, 218_937_600_000_123u64]);
    let stamped = encode_stamped(
        "stamped",
        1,
        Search::VALUE_ID,
        &dune_key,
        &books,
        Some(&stamp),
        None,
    );
    let stamped_bytes = stamped["bytes"].as_str().expect("bytes").to_owned();
    let both = |name, tags: Value, since: Value| (name, Some(tags), Some(since));
    let book = || json!(["#book=42"]);
    let tag_cases: Vec<(&str, Option<Value>, Option<Value>)> = vec![
        both(
            "tags read as they are, unsorted and repeated",
            json!(["@author=Borges", "#book=7", "#book=7"]),
            since.clone(),
        ),
        both("an empty list of tags", json!([]), since.clone()),
        both(
            "every character a tag may hold",
            json!(["#AZaz09-_.!~*'()%=%C3%A9", "@a=b"]),
            // The largest a double holds exactly (JavaScript reads past it inexactly).
            json!([0, 9_007_199_254_740_991u64]),
        ),
        ("tags without since", Some(book()), None),
        ("since without tags", None, Some(since.clone())),
        both("tags null, since null", Value::Null, Value::Null),
        (
            "tags null, since given",
            Some(Value::Null),
            Some(since.clone()),
        ),
        ("tags given, since null", Some(book()), Some(Value::Null)),
        both("tags a string", json!("#book=42"), since.clone()),
        both("tags an object", json!({ "book": 42 }), since.clone()),
        both("a tag not a string", json!([42]), since.clone()),
        both("a tag null", json!([null]), since.clone()),
        both("an empty tag", json!([""]), since.clone()),
        both("a tag without its mark", json!(["book=42"]), since.clone()),
        both(
            "a tag with another mark",
            json!(["$book=42"]),
            since.clone(),
        ),
        both("a mark alone", json!(["#"]), since.clone()),
        both("a tag without =", json!(["#book"]), since.clone()),
        both("a tag without a name", json!(["#=42"]), since.clone()),
        both("a tag without a value", json!(["#book="]), since.clone()),
        both("a tag with two =", json!(["#a=b=c"]), since.clone()),
        both("a tag with a space", json!(["#bo ok=42"]), since.clone()),
        both(
            "a tag with a line break",
            json!(["#book=4\n#x=1"]),
            since.clone(),
        ),
        both(
            "a tag ending with a line break",
            json!(["#book=42\n"]),
            since.clone(),
        ),
        both("a tag with a raw #", json!(["#book=4#2"]), since.clone()),
        both("a tag with a raw @", json!(["#a@b=1"]), since.clone()),
        both(
            "a tag with a raw comma",
            json!(["#book=4,2"]),
            since.clone(),
        ),
        both(
            "a tag with a raw brace",
            json!(["#book={42}"]),
            since.clone(),
        ),
        both(
            "a tag with non-ASCII text",
            json!(["#book=\u{e9}"]),
            since.clone(),
        ),
        both(
            "one bad tag among good ones",
            json!(["#book=42", "#x"]),
            since.clone(),
        ),
        both("since with one number", book(), json!([1])),
        both("since with three numbers", book(), json!([1, 2, 3])),
        both("since empty", book(), json!([])),
        both("since a number", book(), json!(1)),
        both(
            "since an object",
            book(),
            json!({ "tenant": 1, "global": 2 }),
        ),
        both("since as text", book(), json!(["1", "2"])),
        both("since negative", book(), json!([-1, 2])),
        both("since not whole", book(), json!([1.5, 2])),
        both("since a boolean", book(), json!([true, 2])),
        both("since null inside", book(), json!([null, 2])),
    ];
    let mut decode = decode;
    decode.push(expect("tagged, as written", stamped_bytes.as_bytes()));
    decode.extend(
        tag_cases
            .into_iter()
            .map(|(name, tags, since)| expect(name, &tagged(tags, since))),
    );
    // Past u64: no integer type of serde_json's holds it, so written by hand.
    let past_u64 = String::from_utf8(tagged(Some(book()), Some(json!([1, 2])))).expect("UTF-8");
    decode.push(expect(
        "since past u64",
        past_u64
            .replace("[1,2]", "[18446744073709551616,2]")
            .as_bytes(),
    ));
    let mut tagged_v3: Value = serde_json::from_str(&stamped_bytes).expect("JSON");
    tagged_v3["v"] = json!(3);
    let mut bad_tag_other_schema = tagged_v3.clone();
    bad_tag_other_schema["v"] = json!(envelope::VERSION);
    bad_tag_other_schema["schema"] = json!(2);
    bad_tag_other_schema["tags"] = json!(["book=42"]);
    let mut bad_since_other_type = bad_tag_other_schema.clone();
    bad_since_other_type["schema"] = json!(1);
    bad_since_other_type["type"] = json!("u64");
    bad_since_other_type["since"] = json!("now");
    decode.extend([
        expect(
            "a tagged entry of version 3",
            tagged_v3.to_string().as_bytes(),
        ),
        expect(
            "bad tags under another schema: the schema first",
            bad_tag_other_schema.to_string().as_bytes(),
        ),
        expect(
            "a bad since under another value id: the value id first",
            bad_since_other_type.to_string().as_bytes(),
        ),
    ]);
    (encode, decode)
}

// ---------------------------------------------------------------------------
// The file
// ---------------------------------------------------------------------------

/// Everything but the scripts, which [`the_scripts_are_the_ones_the_crate_sends`]
/// captures from a server.
fn generated() -> Value {
    let (counters, sums) = counters_and_sums();
    let (encode, decode) = envelopes();
    json!({
        "wire_format": WIRE_FORMAT,
        "key_format": 2,
        "envelope_version": envelope::VERSION,
        "generated_by": "tests/wire_vectors.rs: CACHE_KEY_BLESS=1 cargo test --test wire_vectors -- --include-ignored",
        "counters": counters,
        "sums": sums,
        "tags": tags(),
        "envelopes": { "encode": encode, "decode": decode },
    })
}

fn read_file() -> Value {
    let text = std::fs::read_to_string(VECTORS).unwrap_or_else(|error| {
        panic!("{VECTORS}: {error}; generate it with `{BLESS}=1 cargo test --test wire_vectors -- --include-ignored`")
    });
    serde_json::from_str(&text).unwrap_or_else(|error| panic!("{VECTORS}: {error}"))
}

fn blessing() -> bool {
    std::env::var_os(BLESS).is_some_and(|value| value == "1")
}

/// The vectors of `file` and `now` under `path` (`counters`, ...), by name.
fn by_name<'a>(value: &'a Value, path: &[&str]) -> BTreeMap<&'a str, &'a Value> {
    let mut at = value;
    for step in path {
        at = &at[*step];
    }
    at.as_array()
        .map(|items| {
            items
                .iter()
                .map(|item| (item["name"].as_str().expect("a named vector"), item))
                .collect()
        })
        .unwrap_or_default()
}

const SECTIONS: [&[&str]; 7] = [
    &["counters"],
    &["sums"],
    &["tags", "scopes"],
    &["tags", "values"],
    &["tags", "clock"],
    &["envelopes", "encode"],
    &["envelopes", "decode"],
];

/// The differences between the file's vectors and the crate's, one line each.
fn differences(file: &Value, now: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    for field in ["wire_format", "key_format", "envelope_version"] {
        if file[field] != now[field] {
            problems.push(format!(
                "{field}: the file has {}, the crate {}",
                file[field], now[field]
            ));
        }
    }
    for path in SECTIONS {
        let (old, new) = (by_name(file, path), by_name(now, path));
        for (name, vector) in &new {
            match old.get(name) {
                Some(before) if before == vector => {}
                Some(before) => problems.push(format!(
                    "{}: {name}:\n    file:  {before}\n    crate: {vector}",
                    path.join(".")
                )),
                None => problems.push(format!("{}: {name}: not in the file", path.join("."))),
            }
        }
        for name in old.keys().filter(|name| !new.contains_key(*name)) {
            problems.push(format!(
                "{}: {name}: in the file, no longer generated",
                path.join(".")
            ));
        }
    }
    problems
}

#[test]
fn the_wire_vectors_are_the_crates() {
    if blessing() {
        // Written by the test that also captures the scripts.
        eprintln!(
            "{BLESS}=1: the file is written by the_scripts_are_the_ones_the_crate_sends (--include-ignored)"
        );
        return;
    }
    let problems = differences(&read_file(), &generated());
    assert!(
        problems.is_empty(),
        "tests/data/wire-vectors.json is not what the crate writes and reads:\n{}\n\n\
         The ports (Node.js, Python) follow this file: a change here changes what they must \
         send and accept. If it is deliberate, it is a new wire format: bump WIRE_FORMAT in \
         this test and the version at the top of cache-key/WIRE-FORMAT.md, describe the \
         change there, then `{BLESS}=1 cargo test --test wire_vectors -- --include-ignored` \
         and update the ports until their tests pass. Otherwise, fix the regression.",
        problems.join("\n")
    );
}

/// The number in the first line of the contract, `# Wire format N`.
fn contract_version(contract: &str) -> u64 {
    let first = contract.lines().next().unwrap_or_default();
    first
        .strip_prefix("# Wire format ")
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| {
            panic!("WIRE-FORMAT.md must start with `# Wire format <N>`, not {first:?}")
        })
}

#[test]
fn the_contract_the_vectors_and_this_test_name_one_wire_format_version() {
    if blessing() {
        return;
    }
    let contract = std::fs::read_to_string(CONTRACT).expect("cache-key/WIRE-FORMAT.md");
    assert_eq!(
        contract_version(&contract),
        WIRE_FORMAT,
        "WIRE-FORMAT.md and this test"
    );
    assert_eq!(
        read_file()["wire_format"],
        json!(WIRE_FORMAT),
        "wire-vectors.json and this test"
    );
    assert_eq!(read_file()["envelope_version"], json!(envelope::VERSION));
}

#[test]
fn the_contract_quotes_the_scripts_word_for_word() {
    if blessing() {
        return;
    }
    let contract = std::fs::read_to_string(CONTRACT).expect("cache-key/WIRE-FORMAT.md");
    let scripts = &read_file()["scripts"];
    for field in ["instance", "epoch_body", "clock", "release"] {
        let text = scripts[field]
            .as_str()
            .unwrap_or_else(|| panic!("scripts.{field}"));
        // Quoted in a ```lua block, the text as it is, ending with its own newline.
        let quoted = format!("```lua\n{}```", text.strip_prefix('\n').unwrap_or(text));
        assert!(
            contract.contains(&quoted),
            "WIRE-FORMAT.md does not quote scripts.{field} exactly:\n{text}"
        );
    }
}

// ---------------------------------------------------------------------------
// The scripts, as the crate sends them to a real server.
// ---------------------------------------------------------------------------

/// One argument list of a `MONITOR` line: `"EVAL" "local..." "1" ...`,
/// unescaped as Redis escapes them (`sdscatrepr`).
fn monitor_args(line: &str) -> Vec<String> {
    let mut args = Vec::new();
    let bytes = line.as_bytes();
    let mut i = line.find("] ").map_or(0, |at| at + 2);
    while i < bytes.len() {
        if bytes[i] != b'"' {
            i += 1;
            continue;
        }
        i += 1;
        let mut arg = Vec::new();
        while i < bytes.len() && bytes[i] != b'"' {
            if bytes[i] == b'\\' && i + 1 < bytes.len() {
                i += 1;
                match bytes[i] {
                    b'n' => arg.push(b'\n'),
                    b'r' => arg.push(b'\r'),
                    b't' => arg.push(b'\t'),
                    b'a' => arg.push(7),
                    b'b' => arg.push(8),
                    b'x' => {
                        let hex = &line[i + 1..i + 3];
                        arg.push(u8::from_str_radix(hex, 16).expect("a hex escape"));
                        i += 2;
                    }
                    other => arg.push(other),
                }
            } else {
                arg.push(bytes[i]);
            }
            i += 1;
        }
        i += 1;
        args.push(String::from_utf8(arg).expect("UTF-8 arguments"));
    }
    args
}

/// A SHA-1 as Redis names scripts by it (lowercase hex).
fn sha1(text: &str) -> String {
    redis::Script::new(text).get_hash().to_owned()
}

/// Every command the crate sends for a read, a bump and a load with the
/// lock, as `MONITOR` shows them, and the server's run id.
fn capture() -> Option<(Vec<Vec<String>>, String)> {
    use cache_key::cache::QueryCache;
    use cache_key::redis::{LoadLock, RedisCache};

    let server = Server::start(false)?;
    let mut monitor = TcpStream::connect(("127.0.0.1", server.port())).expect("a connection");
    monitor.write_all(b"MONITOR\r\n").expect("MONITOR");
    monitor
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("a timeout");
    let mut lines = BufReader::new(monitor.try_clone().expect("a clone"));
    let mut ok = String::new();
    lines.read_line(&mut ok).expect("+OK");
    assert_eq!(ok.trim_end(), "+OK");

    // Per read: the instance learned with its script, so that every script
    // the contract quotes is sent.
    let cache = RedisCache::new(RedisGenerations::new(
        RedisPool::builder()
            .instance_check(cache_key::redis::InstanceCheck::PerRead)
            .open(server.url())
            .expect("a pool"),
    ))
    .with_lock(LoadLock::new(
        Duration::from_secs(5),
        Duration::from_secs(5),
    ));
    let query = Search {
        branch: 2,
        title: "Dune".into(),
    };
    let books = cache
        .get_or_load(&query, || Ok::<_, String>(Vec::new()))
        .expect("a load");
    assert!(books.is_empty());
    cache_key::cache::TypedCache::invalidate(&cache, &Search::tenant_scope(&2).expect("a scope"))
        .expect("a bump");
    // A fill tagged from its value (the clock read before the origin), then
    // a read of it (its tags' counters read as counters are).
    let fiction = Shelf {
        branch: 2,
        term: "fiction".into(),
    };
    let items = vec![item(42, "Borges"), item(7, "Le Guin"), item(1965, "Borges")];
    cache
        .get_or_load(&fiction, || Ok::<_, String>(items.clone()))
        .expect("a load");
    cache.get(&fiction).expect("a read");
    // A command of our own marks the end of the capture.
    let _: Option<String> = redis::cmd("GET")
        .arg("wire-vectors:end")
        .query(&mut server.connect())
        .expect("GET");

    let mut commands = Vec::new();
    loop {
        let mut line = String::new();
        lines.read_line(&mut line).expect("a MONITOR line");
        let args = monitor_args(line.trim_end());
        if args.get(1).is_some_and(|key| key == "wire-vectors:end") {
            break;
        }
        commands.push(args);
    }
    let info: String = redis::cmd("INFO")
        .arg("server")
        .query(&mut server.connect())
        .expect("INFO");
    let run_id = info
        .lines()
        .find_map(|line| line.strip_prefix("run_id:"))
        .expect("a run id")
        .trim()
        .to_owned();
    Some((commands, run_id))
}

#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn the_scripts_are_the_ones_the_crate_sends() {
    let Some((commands, run_id)) = capture() else {
        return;
    };
    let evals: Vec<&Vec<String>> = commands
        .iter()
        .filter(|args| args[0].eq_ignore_ascii_case("EVAL"))
        .collect();
    let instance = evals
        .iter()
        .find(|args| args.len() == 4 && args[2] == "1")
        .expect("the instance script's EVAL")[1]
        .clone();
    let prefix = format!("local epoch = '{run_id}'");
    let code = evals
        .iter()
        .find(|args| args[1].starts_with(&prefix))
        .expect("the instance's counter script's EVAL")[1]
        .clone();
    let epoch_body = code[prefix.len()..].to_owned();
    let release = evals
        .iter()
        .find(|args| args[1].contains("DEL"))
        .expect("the lock's release script")[1]
        .clone();
    // The clock script, sent with a name in the slot of the tenant's tags.
    let clock_eval = evals
        .iter()
        .find(|args| args[1].contains("TIME") && !args[1].starts_with("local epoch"))
        .expect("the clock script's EVAL");
    let clock = clock_eval[1].clone();
    let tags = &generated()["tags"];
    let fiction = by_name(tags, &["clock"])["shelf, one tenant, hash tag"];
    assert_eq!(
        clock_eval[2..],
        [
            "1".to_owned(),
            fiction["tenant"].as_str().expect("a name").to_owned()
        ],
        "the clock is read in the slot of the vectors' name"
    );
    // The tagged entry's read sends its tags' counters, as the vectors name them.
    let counters = &by_name(tags, &["values"])["two books, one author twice"]["counters"];
    let counters: Vec<&str> = counters
        .as_array()
        .expect("counters")
        .iter()
        .map(|name| name.as_str().expect("a name"))
        .collect();
    let mut read = counters.clone();
    read.push("r");
    assert!(
        commands
            .iter()
            .any(|args| args[0].eq_ignore_ascii_case("EVALSHA")
                && args[2] == counters.len().to_string()
                && args[3..] == read[..]),
        "no read of the tags' counters {counters:?} in {commands:?}"
    );
    // The script every counter command names by SHA-1 is the one loaded.
    let evalsha: Vec<&Vec<String>> = commands
        .iter()
        .filter(|args| args[0].eq_ignore_ascii_case("EVALSHA"))
        .collect();
    assert!(!evalsha.is_empty(), "{commands:?}");
    assert!(
        evalsha.iter().all(|args| args[1] == sha1(&code)),
        "{evalsha:?}"
    );
    let modes: Vec<&str> = evalsha
        .iter()
        .map(|args| args.last().expect("a mode").as_str())
        .collect();
    assert!(modes.contains(&"r") && modes.contains(&"b"), "{modes:?}");

    let example_id = "9a1c0ffee0ddba11c0de5ca1ab1e0b5e55ed4e11";
    let scripts = json!({
        "instance": instance,
        "instance_sha1": sha1(&instance),
        "epoch_prefix": "local epoch = '",
        "epoch_after_run_id": "'",
        "epoch_body": epoch_body,
        "example": {
            "run_id": example_id,
            "sha1": sha1(&format!("local epoch = '{example_id}'{epoch_body}")),
        },
        "clock": clock,
        "clock_sha1": sha1(&clock),
        "release": release,
        "release_sha1": sha1(&release),
    });

    if blessing() {
        let mut all = generated();
        if let Ok(text) = std::fs::read_to_string(VECTORS) {
            let file: Value = serde_json::from_str(&text).expect("the old file");
            if file["wire_format"] == all["wire_format"] {
                let changed: Vec<String> = differences(&file, &all)
                    .into_iter()
                    .filter(|line| !line.ends_with("not in the file"))
                    .collect();
                let scripts_changed = file.get("scripts").is_some_and(|old| *old != scripts);
                assert!(
                    changed.is_empty() && !scripts_changed,
                    "refusing to bless: existing vectors changed under wire format {}:\n{}{}\n\
                     Bump WIRE_FORMAT here and in WIRE-FORMAT.md first.",
                    WIRE_FORMAT,
                    changed.join("\n"),
                    if scripts_changed {
                        "\nscripts changed"
                    } else {
                        ""
                    }
                );
            }
        }
        all["scripts"] = scripts;
        let text = serde_json::to_string_pretty(&all).expect("JSON") + "\n";
        std::fs::write(VECTORS, text).expect("write the vectors");
        eprintln!("{BLESS}=1: wrote {VECTORS}");
        return;
    }
    let file = read_file();
    assert_eq!(
        file["scripts"], scripts,
        "the scripts in tests/data/wire-vectors.json are not the ones the crate sends \
         (see this file's header to regenerate)"
    );
}
