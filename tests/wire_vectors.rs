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

// The sections of the file, each in a file of its own under tests/wire_vectors/.
#[path = "wire_vectors/envelopes.rs"]
mod envelopes;
#[path = "wire_vectors/exact.rs"]
mod exact;
#[path = "wire_vectors/scripts.rs"]
mod scripts;

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
const WIRE_FORMAT: u64 = 6;

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
// The file
// ---------------------------------------------------------------------------

/// Everything but the scripts, which [`the_scripts_are_the_ones_the_crate_sends`]
/// captures from a server.
fn generated() -> Value {
    let (counters, sums) = counters_and_sums();
    let (encode, decode) = envelopes::envelopes();
    json!({
        "wire_format": WIRE_FORMAT,
        "key_format": 2,
        "envelope_version": envelope::VERSION,
        "generated_by": "tests/wire_vectors.rs: CACHE_KEY_BLESS=1 cargo test --test wire_vectors -- --include-ignored",
        "counters": counters,
        "sums": sums,
        "tags": tags(),
        "envelopes": { "encode": encode, "decode": decode },
        "exact": { "values": exact::values(), "queries": exact::queries() },
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

const SECTIONS: [&[&str]; 9] = [
    &["counters"],
    &["sums"],
    &["tags", "scopes"],
    &["tags", "values"],
    &["tags", "clock"],
    &["envelopes", "encode"],
    &["envelopes", "decode"],
    &["exact", "values"],
    &["exact", "queries"],
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
