//! One Redis cache shared by Rust (`RedisCache`), Node.js
//! (`ports/js/cache.mjs`) and Python (`ports/python/cache_redis.py`), on a
//! real `redis-server` and a real three-primary Redis Cluster: what one
//! language writes the others hit, what one invalidates the others miss, a
//! restart from RDB after a port's bump brings nothing back for any of them,
//! and an envelope of a newer version is a miss everywhere. Answers tagged
//! from their value: what one language fills with tags every language
//! serves until any language bumps one of its tags (inside the branch, or
//! shared by every branch), a bump while the fill's origin works ends the
//! entry, and entries without the tag keep hitting. The ports run as
//! child processes (`cache-cli.mjs`, `cache_redis.py`), one per language and
//! test, answering a JSON line per request.
//!
//! A port whose interpreter or installed client (`npm ci` in `ports/js`,
//! `pip install --require-hashes -r ports/python/requirements.txt`) is
//! missing is skipped with a message, except under `CI=true`, where that is
//! a failure.

mod common;

use std::time::Duration;

use cache_key::cache::{CachedQuery, QueryCache, TypedCache};
use cache_key::redis::envelope;
use cache_key::redis::{RedisCache, RedisGenerations, RedisPool};
use cache_key::{CacheKey, GenerationScope, KeyError, Scopes, TagScope, Tags};
use common::ports::{Lang, Port, Target, ports, ports_installed};

// The examples of ports/README.md, run against a Rust service's entries.
#[path = "ports_shared_cache/readme_examples.rs"]
mod readme_examples;
use common::redis_server::{Cluster, Server};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Book {
    title: String,
    year: u16,
    subtitle: Option<String>,
}

/// A search of one branch, as in the crate's README (hash tag: its key and
/// two of its three counters share the branch's slot).
#[derive(CacheKey)]
#[cache_key(namespace = "library", operation = "search", hash_tag, value = Vec<Book>, ttl = "1m")]
struct Search {
    #[tenant]
    branch: u32,
    #[criterion]
    title: String,
}

/// A compound tenant: on a cluster its four counters sit in four slots.
#[derive(CacheKey)]
#[cache_key(namespace = "forge", operation = "issues", value = Vec<String>, value_id = "issue-titles", ttl = "1m")]
struct Issues {
    #[tenant]
    org: String,
    #[tenant]
    repo: String,
    #[criterion]
    page: u32,
}

/// A book on a shelf, and which printing: a new one each time it is filled.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Item {
    id: u64,
    author: String,
    printing: u32,
}

/// Answers tagged from their value (`CachedQuery` by hand, as
/// tests/entity_tags.rs does): each book inside the branch, each author
/// shared by every branch.
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

/// A query as the ports take it: the key vectors' JSON form, with the value id and TTL.
trait Described: CachedQuery {
    fn describe(&self) -> Value;
}

impl Described for Search {
    fn describe(&self) -> Value {
        json!({
            "namespace": "library", "operation": "search", "schema": 1, "hash_tag": true,
            "tenant": { "type": "int", "value": self.branch.to_string() },
            "criteria": [["title", { "type": "str", "value": self.title }]],
            "value_id": Self::VALUE_ID, "ttl_ms": Self::TTL.as_millis(),
        })
    }
}

impl Described for Issues {
    fn describe(&self) -> Value {
        json!({
            "namespace": "forge", "operation": "issues", "schema": 1,
            "tenant": [self.org, self.repo],
            "criteria": [["page", { "type": "int", "value": self.page.to_string() }]],
            "value_id": Self::VALUE_ID, "ttl_ms": Self::TTL.as_millis(),
        })
    }
}

impl Described for Shelf {
    fn describe(&self) -> Value {
        json!({
            "namespace": "library", "operation": "shelf", "schema": 1, "hash_tag": true,
            "tenant": { "type": "int", "value": self.branch.to_string() },
            "criteria": [["term", { "type": "str", "value": self.term }]],
            "value_id": Self::VALUE_ID, "ttl_ms": Self::TTL.as_millis(),
        })
    }
}

impl Described for ByIds {
    fn describe(&self) -> Value {
        let ids: Vec<Value> = (self.ids.iter())
            .map(|id| json!({ "type": "int", "value": id.to_string() }))
            .collect();
        let author = match &self.author {
            Some(author) => json!({ "type": "str", "value": author }),
            None => json!({ "type": "none" }),
        };
        json!({
            "namespace": "library", "operation": "by_ids", "schema": 1, "hash_tag": true,
            "tenant": { "type": "int", "value": self.branch.to_string() },
            "criteria": [["ids", { "type": "list", "items": ids }], ["author", author]],
            "query_tags": [
                { "criterion": "ids", "name": "book", "global": false },
                { "criterion": "author", "name": "author", "global": true },
            ],
            "value_id": Self::VALUE_ID, "ttl_ms": Self::TTL.as_millis(),
        })
    }
}

fn shelf(branch: u32, term: &str) -> Shelf {
    Shelf {
        branch,
        term: term.to_owned(),
    }
}

fn item(id: u64, author: &str, printing: u32) -> Item {
    Item {
        id,
        author: author.to_owned(),
        printing,
    }
}

/// A tag of [`Shelf`]'s answers.
#[derive(Debug, Clone, Copy)]
enum Tag {
    /// A book, inside the branch.
    Book(u64),
    /// An author, shared by every branch.
    Author(&'static str),
}

impl Tag {
    /// As the ports take it (`cache-cli.mjs`'s header).
    fn json(self) -> Value {
        match self {
            Tag::Book(id) => {
                json!({ "name": "book", "value": { "type": "int", "value": id.to_string() } })
            }
            Tag::Author(name) => json!({ "name": "author", "value": name, "global": true }),
        }
    }

    /// The scope a Rust caller bumps, inside `branch` for a book.
    fn scope(self, branch: u32) -> GenerationScope {
        match self {
            Tag::Book(id) => {
                GenerationScope::tag_unchecked::<Shelf>(&[&branch], TagScope::Tenant, "book", &id)
            }
            Tag::Author(name) => {
                GenerationScope::tag_unchecked::<Shelf>(&[], TagScope::Global, "author", &name)
            }
        }
        .expect("a tag's scope")
    }
}

/// The tags of `items` as a port's origin gives them, as [`Shelf`] writes them.
fn tags_of(items: &[Item]) -> Value {
    let tags: Vec<Value> = items
        .iter()
        .flat_map(|item| {
            [
                Tag::Book(item.id).json(),
                json!({ "name": "author", "value": item.author, "global": true }),
            ]
        })
        .collect();
    Value::Array(tags)
}

fn search(branch: u32, title: &str) -> Search {
    Search {
        branch,
        title: title.to_owned(),
    }
}

fn issues(org: &str, repo: &str, page: u32) -> Issues {
    Issues {
        org: org.to_owned(),
        repo: repo.to_owned(),
        page,
    }
}

fn books(title: &str, year: u16) -> Vec<Book> {
    vec![Book {
        title: title.to_owned(),
        year,
        subtitle: Some(format!("{title}, é \"quoted\" \u{1f600}")),
    }]
}

// ---------------------------------------------------------------------------
// What this test asks the ports (tests/common/ports.rs starts them)
// ---------------------------------------------------------------------------

impl Port {
    fn read(&mut self, query: &impl Described) -> Value {
        self.ask(json!({ "op": "read", "query": query.describe() }))
    }

    /// The value of a hit, `None` on a miss (whose reason is `reason`).
    fn hit(&mut self, query: &impl Described) -> Option<Value> {
        let read = self.read(query);
        read["hit"]
            .as_bool()
            .expect("hit")
            .then(|| read["value"].clone())
    }

    fn get_or_load(&mut self, query: &impl Described, value: &impl Serialize) -> (Value, bool) {
        let answer =
            self.ask(json!({ "op": "get_or_load", "query": query.describe(), "value": value }));
        (
            answer["value"].clone(),
            answer["loaded"].as_bool().expect("loaded"),
        )
    }

    fn invalidate(&mut self, query: &impl Described, scope: &str) {
        self.ask(json!({ "op": "invalidate", "scope": scope, "query": query.describe() }));
    }

    /// Loads `items` as the answer of `query`, tagged as [`Shelf`] tags
    /// them; the origin bumps `during` (in the query's branch) before it
    /// answers, if given. Whether the origin was asked.
    fn fill(&mut self, query: &Shelf, items: &[Item], during: Option<Tag>) -> bool {
        let mut request = json!({
            "op": "get_or_load", "query": query.describe(), "value": items, "tags": tags_of(items),
        });
        if let Some(tag) = during {
            request["bump_during_origin"] = tag.json();
        }
        let answer = self.ask(request);
        assert_eq!(answer["value"], json_of(&items), "{}", self.lang.name());
        answer["loaded"].as_bool().expect("loaded")
    }

    /// How many round trips a read of `query` takes, which must hit.
    fn round_trips_of_a_hit(&mut self, query: &impl Described) -> u64 {
        let before = self.round_trips(query);
        assert!(self.hit(query).is_some(), "{}", self.lang.name());
        self.round_trips(query) - before
    }

    /// The port's count of round trips so far.
    fn round_trips(&mut self, query: &impl Described) -> u64 {
        let stats = self.ask(json!({ "op": "stats", "query": query.describe() }));
        (stats.get("roundTrips").or(stats.get("round_trips")))
            .and_then(Value::as_u64)
            .expect("round trips")
    }

    /// Bumps `tag` (inside `query`'s branch for a book).
    fn bump(&mut self, query: &impl Described, tag: Tag) {
        self.ask(json!({ "op": "invalidate", "scope": "tag", "tag": tag.json(), "query": query.describe() }));
    }
}

fn json_of<T: Serialize>(value: &T) -> Value {
    serde_json::to_value(value).expect("JSON")
}

fn origin<T: Clone>(value: T) -> impl FnOnce() -> Result<T, String> {
    move || Ok(value)
}

// ---------------------------------------------------------------------------
/// Answers tagged by their query: the books it asks for, inside the
/// branch, and an author every branch shares.
#[derive(CacheKey)]
#[cache_key(namespace = "library", operation = "by_ids", hash_tag, value = Vec<Book>, ttl = "1m")]
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

fn by_ids(branch: u32, ids: &[u64], author: Option<&str>) -> ByIds {
    ByIds {
        branch,
        ids: ids.to_vec(),
        author: author.map(str::to_owned),
    }
}

// The matrix, on any target
// ---------------------------------------------------------------------------

/// Rust writes, Node and Python hit the same value; each port writes, Rust
/// and the other port hit it.
fn entries_written_by_one_language_hit_in_the_others<Q: Described<Value = V>, V>(
    target: &Target<'_>,
    queries: [Q; 3],
    values: [V; 3],
) where
    V: Clone + PartialEq + std::fmt::Debug + Serialize + for<'de> Deserialize<'de> + Send + Sync,
    RedisCache: QueryCache<Q>,
{
    let rust = target.rust();
    let mut ports = ports(target);
    let [by_rust, by_node, by_python] = queries;
    let [rust_value, node_value, python_value] = values;

    let got = rust
        .get_or_load(&by_rust, origin(rust_value.clone()))
        .expect("Rust loads");
    assert_eq!(got, rust_value);
    for port in &mut ports {
        assert_eq!(
            port.hit(&by_rust),
            Some(json_of(&rust_value)),
            "{} reads Rust's entry",
            port.lang.name()
        );
    }

    let (value, loaded) = ports[0].get_or_load(&by_node, &node_value);
    assert!(loaded && value == json_of(&node_value));
    let (value, loaded) = ports[1].get_or_load(&by_python, &python_value);
    assert!(loaded && value == json_of(&python_value));
    assert_eq!(
        rust.get(&by_node).expect("Rust reads"),
        Some(node_value.clone())
    );
    assert_eq!(
        rust.get(&by_python).expect("Rust reads"),
        Some(python_value.clone())
    );
    assert_eq!(ports[1].hit(&by_node), Some(json_of(&node_value)));
    assert_eq!(ports[0].hit(&by_python), Some(json_of(&python_value)));
    // Nobody asked its origin for another's entry.
    let (_, loaded) = ports[0].get_or_load(&by_rust, &"not asked");
    assert!(!loaded);
    let stats = rust.stats();
    assert_eq!((stats.loads, stats.hits, stats.rejected.total()), (1, 2, 0));
}

/// Each language invalidates a scope; every language's next read misses.
fn an_invalidation_by_any_language_is_a_miss_in_every_language<Q: Described<Value = V>, V>(
    target: &Target<'_>,
    query: &Q,
    value: V,
    // (who invalidates, the scope: `tenant`, `leading_tenant`, `operation`, `namespace`)
    rounds: &[(&str, &str)],
    rust_scope: impl Fn(&str) -> GenerationScope,
) where
    V: Clone + PartialEq + std::fmt::Debug + Serialize + for<'de> Deserialize<'de> + Send + Sync,
    RedisCache: QueryCache<Q>,
{
    let rust = target.rust();
    let mut ports = ports(target);
    for &(who, scope) in rounds {
        rust.get_or_load(query, origin(value.clone()))
            .expect("Rust loads");
        assert_eq!(rust.get(query).expect("Rust reads"), Some(value.clone()));
        for port in &mut ports {
            assert_eq!(
                port.hit(query),
                Some(json_of(&value)),
                "before {who}'s {scope} bump"
            );
        }
        match who {
            "rust" => rust
                .invalidate(&rust_scope(scope))
                .expect("Rust invalidates"),
            "node" => ports[0].invalidate(query, scope),
            "python" => ports[1].invalidate(query, scope),
            other => panic!("no language {other}"),
        }
        assert_eq!(
            rust.get(query).expect("Rust reads"),
            None,
            "Rust after {who}'s {scope} bump"
        );
        for port in &mut ports {
            let read = port.read(query);
            assert_eq!(
                (read["hit"].as_bool(), read["reason"].as_str()),
                (Some(false), Some("absent")),
                "{} after {who}'s {scope} bump: {read}",
                port.lang.name()
            );
        }
    }
}

/// A port by name: `node` or `python`.
fn port<'a>(ports: &'a mut [Port], who: &str) -> &'a mut Port {
    match who {
        "node" => &mut ports[0],
        "python" => &mut ports[1],
        other => panic!("no port {other}"),
    }
}

/// Every language hits `query` with `value`.
fn hit_everywhere<Q: Described<Value = V>, V>(
    rust: &RedisCache,
    ports: &mut [Port],
    query: &Q,
    value: &V,
    context: &str,
) where
    V: Clone + PartialEq + std::fmt::Debug + Serialize + for<'de> Deserialize<'de> + Send + Sync,
    RedisCache: QueryCache<Q>,
{
    assert_eq!(
        rust.get(query).expect("Rust reads").as_ref(),
        Some(value),
        "Rust, {context}"
    );
    for port in ports.iter_mut() {
        let read = port.read(query);
        assert_eq!(
            (read["hit"].as_bool(), &read["value"]),
            (Some(true), &json_of(value)),
            "{}, {context}: {read}",
            port.lang.name()
        );
    }
}

/// Every language misses `query`, whose entry is there but holds a tag
/// bumped since its fill began.
fn tag_miss_everywhere(rust: &RedisCache, ports: &mut [Port], query: &Shelf, context: &str) {
    for port in ports.iter_mut() {
        let read = port.read(query);
        assert_eq!(
            (
                read["hit"].as_bool(),
                read["reason"].as_str(),
                read["tag_bumped"].as_bool()
            ),
            (Some(false), Some("absent"), Some(true)),
            "{}, {context}: {read}",
            port.lang.name()
        );
    }
    assert_eq!(
        rust.get(query).expect("Rust reads"),
        None,
        "Rust, {context}"
    );
}

/// Answers tagged by their query, in every language: what one writes the
/// others hit, under the key whose generation holds the query's tags'
/// counters; a bump of a book (inside the branch) or of an author (every
/// branch) by any language is a miss in every language for every query
/// asking for it, while the others keep hitting; and each language records
/// its query's tags in the entry (`qtags`), so that a sweep of the branch
/// deletes what such a bump made old, whoever wrote it.
fn query_tags_are_one_contract_in_every_language(target: &Target<'_>, branch: u32) {
    let rust = target.rust();
    let mut ports = ports(target);
    let asking = [
        by_ids(branch, &[42, 7], None),
        by_ids(branch, &[42], Some("Borges")),
        by_ids(branch, &[42, 42, 9], None),
    ];
    let others = [by_ids(branch, &[7], None), by_ids(branch + 1, &[42], None)];
    let value = |query: &ByIds| books(&format!("{:?}", query.ids), 1965);
    let fill = |rust: &RedisCache, ports: &mut [Port]| {
        // One writer per query: Rust, then each port.
        rust.insert(&asking[0], value(&asking[0]))
            .expect("an insert");
        let (_, loaded) = ports[0].get_or_load(&asking[1], &value(&asking[1]));
        assert!(loaded, "node loads");
        let (_, loaded) = ports[1].get_or_load(&asking[2], &value(&asking[2]));
        assert!(loaded, "python loads");
        for query in &others {
            rust.insert(query, value(query)).expect("an insert");
        }
        for query in asking.iter().chain(&others) {
            hit_everywhere(rust, ports, query, &value(query), "filled");
        }
    };
    let missed = |rust: &RedisCache, ports: &mut [Port], query: &ByIds, context: &str| {
        assert_eq!(
            rust.get(query).expect("Rust reads"),
            None,
            "Rust, {context}"
        );
        for port in ports.iter_mut() {
            let read = port.read(query);
            assert_eq!(
                (read["hit"].as_bool(), read["reason"].as_str()),
                (Some(false), Some("absent")),
                "{}, {context}: {read}",
                port.lang.name()
            );
        }
    };
    for who in ["rust", "node", "python"] {
        fill(&rust, &mut ports);
        match who {
            "rust" => rust
                .invalidate(&ByIds::tag_scope_book(&branch, &42).expect("a scope"))
                .expect("Rust bumps"),
            lang => port(&mut ports, lang).bump(&asking[0], Tag::Book(42)),
        }
        for query in &asking {
            missed(
                &rust,
                &mut ports,
                query,
                &format!("{:?} after {who}'s bump of book 42", query.ids),
            );
        }
        for query in &others {
            hit_everywhere(
                &rust,
                &mut ports,
                query,
                &value(query),
                &format!("{who}'s bump of book 42"),
            );
        }
    }
    // A global tag: an author of every branch.
    let borges = [
        by_ids(branch, &[1], Some("Borges")),
        by_ids(branch + 1, &[2], Some("Borges")),
    ];
    let le_guin = by_ids(branch, &[1], Some("Le Guin"));
    for who in ["node", "python", "rust"] {
        for query in borges.iter().chain([&le_guin]) {
            rust.insert(query, value(query)).expect("an insert");
        }
        match who {
            "rust" => rust
                .invalidate(&ByIds::tag_scope_author(&"Borges".to_owned()).expect("a scope"))
                .expect("Rust bumps"),
            lang => port(&mut ports, lang).bump(&asking[0], Tag::Author("Borges")),
        }
        for query in &borges {
            missed(
                &rust,
                &mut ports,
                query,
                &format!("after {who}'s bump of Borges"),
            );
        }
        hit_everywhere(&rust, &mut ports, &le_guin, &value(&le_guin), "Le Guin");
    }

    // The entries each language wrote record their query's tags: once a bump
    // made their generation old, a sweep of the branch deletes them.
    fill(&rust, &mut ports);
    let generations = match target {
        Target::Server(server) => {
            RedisGenerations::new(RedisPool::open(server.url()).expect("a pool"))
        }
        Target::Cluster(cluster) => {
            RedisGenerations::new(RedisPool::open_cluster(cluster.urls()).expect("a pool"))
        }
        Target::Url(url) => RedisGenerations::new(RedisPool::open(url.as_str()).expect("a pool")),
    };
    let keys: Vec<String> = (asking.iter())
        .map(|query| {
            ports[0].read(query)["key"]
                .as_str()
                .expect("a key")
                .to_owned()
        })
        .collect();
    rust.invalidate(&ByIds::tag_scope_book(&branch, &42).expect("a scope"))
        .expect("Rust bumps");
    let scope = ByIds::tenant_scope(&branch).expect("a scope");
    let report = generations
        .sweep(&scope, cache_key::redis::SweepOptions::default())
        .expect("a sweep");
    let mut connection = generations.pool().get().expect("a connection");
    for key in &keys {
        let kept: bool = redis::cmd("EXISTS")
            .arg(key)
            .query(&mut connection)
            .expect("EXISTS");
        assert!(!kept, "{key}: deleted by the sweep ({report:?})");
    }
    hit_everywhere(
        &rust,
        &mut ports,
        &others[0],
        &value(&others[0]),
        "after the sweep",
    );
}

/// Answers tagged from their value, in every language: what one fills the
/// others serve; a bump of one of its tags by any language (a book inside
/// the branch, an author of every branch) is a miss in every language,
/// while an answer without that tag, and an untagged one, keep hitting; a
/// bump while the fill's origin works ends the entry it stores.
fn value_tags_are_one_contract_in_every_language(target: &Target<'_>, branch: u32) {
    let rust = target.rust();
    let mut ports = ports(target);
    let untagged = search(branch, "Dune");
    rust.insert(&untagged, books("Dune", 1965))
        .expect("an insert");

    // An entity's first fill after its counter appears is stored and never
    // served: the counter, raised to the clock when first read, is above
    // the fill's start. The next fill is served.
    let first = shelf(branch, "first");
    assert!(ports[0].fill(&first, &[item(1, "Cortázar", 1)], None));
    tag_miss_everywhere(&rust, &mut ports, &first, "a first fill of new tags");
    let next = vec![item(1, "Cortázar", 2)];
    assert!(ports[1].fill(&first, &next, None), "the miss loads");
    hit_everywhere(&rust, &mut ports, &first, &next, "the next fill");
    // A hit on an entry with tags costs one round trip more than another
    // hit (each read once, its generation seen): its tags' counters (one
    // command per slot).
    hit_everywhere(&rust, &mut ports, &untagged, &books("Dune", 1965), "");
    for port in &mut ports {
        assert_eq!(
            port.round_trips_of_a_hit(&untagged),
            1,
            "{}",
            port.lang.name()
        );
        assert_eq!(port.round_trips_of_a_hit(&first), 2, "{}", port.lang.name());
    }

    let (book, author) = (Tag::Book(42), Tag::Author("Borges"));
    // Every tag below exists (bumped once), so that every fill is served.
    for tag in [book, author, Tag::Book(7), Tag::Author("Le Guin")] {
        rust.invalidate(&tag.scope(branch)).expect("a bump");
    }
    let with = shelf(branch, "with 42");
    let without = shelf(branch, "without 42");
    let kept = vec![item(7, "Le Guin", 1)];
    assert!(ports[1].fill(&without, &kept, None));
    // (who fills, who bumps, the tag)
    let rounds = [
        ("rust", "node", book),
        ("rust", "python", author),
        ("node", "rust", book),
        ("node", "python", author),
        ("python", "rust", author),
        ("python", "node", book),
    ];
    for (round, (filler, bumper, tag)) in rounds.into_iter().enumerate() {
        let printing = u32::try_from(round).expect("a few rounds") + 1;
        let value = vec![item(42, "Borges", printing), item(7, "Le Guin", printing)];
        let context = format!("round {round}: {filler} fills, {bumper} bumps {tag:?}");
        let loaded = match filler {
            "rust" => {
                let mut loaded = false;
                rust.get_or_load(&with, || {
                    loaded = true;
                    Ok::<_, String>(value.clone())
                })
                .expect("Rust loads");
                loaded
            }
            who => port(&mut ports, who).fill(&with, &value, None),
        };
        assert!(loaded, "{context}: the last bump ended the entry");
        hit_everywhere(&rust, &mut ports, &with, &value, &context);
        match bumper {
            "rust" => rust.invalidate(&tag.scope(branch)).expect("a bump"),
            who => port(&mut ports, who).bump(&with, tag),
        }
        tag_miss_everywhere(&rust, &mut ports, &with, &context);
        hit_everywhere(&rust, &mut ports, &without, &kept, &context);
        hit_everywhere(&rust, &mut ports, &untagged, &books("Dune", 1965), &context);
    }

    // A tag lives in its branch: book 42 of another branch is another tag.
    let value = vec![item(42, "Borges", 50)];
    assert!(ports[0].fill(&with, &value, None));
    ports[1].bump(&shelf(branch + 1, "with 42"), book);
    rust.invalidate(&book.scope(branch + 1)).expect("a bump");
    hit_everywhere(&rust, &mut ports, &with, &value, "another branch's book 42");

    // A bump while the origin works, after the fill read the tag clock:
    // the entry is stored, and never served in any language.
    rust.invalidate(&book.scope(branch)).expect("a bump");
    for filler in ["rust", "node", "python"] {
        let value = vec![item(42, "Borges", 100)];
        let context = format!("{filler}'s fill, book 42 bumped while its origin works");
        let loaded = match filler {
            "rust" => {
                let (node, mut loaded) = (&mut ports[0], false);
                rust.get_or_load(&with, || {
                    loaded = true;
                    node.bump(&with, book);
                    Ok::<_, String>(value.clone())
                })
                .expect("Rust loads");
                loaded
            }
            who => port(&mut ports, who).fill(&with, &value, Some(book)),
        };
        assert!(loaded, "{context}");
        tag_miss_everywhere(&rust, &mut ports, &with, &context);
    }
    hit_everywhere(&rust, &mut ports, &without, &kept, "at the end");
}

// ---------------------------------------------------------------------------
// One server
// ---------------------------------------------------------------------------

fn server() -> Option<Server> {
    if !ports_installed() {
        return None;
    }
    Server::start(false)
}

#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn on_a_server_what_one_language_writes_the_others_hit() {
    let Some(server) = server() else { return };
    entries_written_by_one_language_hit_in_the_others(
        &Target::Server(&server),
        [
            search(2, "Dune"),
            search(2, "Sand: Borges & co"),
            search(3, "Ficciones"),
        ],
        [
            books("Dune", 1965),
            books("Sand", 1975),
            books("Ficciones", 1944),
        ],
    );
}

/// Eight callers missing one key at once (promises in Node.js, threads in
/// Python) call the origin once, as a Rust cache does: the others wait on
/// its call and answer its value, or its error.
#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn concurrent_misses_of_one_key_call_the_origin_once_in_each_port() {
    let Some(server) = server() else { return };
    for lang in Lang::ALL {
        server.flush();
        let what = lang.name();
        let mut port = Port::start(lang, &Target::Server(&server));
        let value = json_of(&books("Dune", 1965));
        let together = port.ask(json!({
            "op": "load_together", "query": search(2, "Dune").describe(), "callers": 8, "value": value,
        }));
        let expected = json!({ "calls": 1, "values": [value], "errors": [], "coalesced": 7 });
        assert_eq!(
            together, expected,
            "{what}: one origin call answers every caller"
        );
        let failed = port.ask(json!({
            "op": "load_together", "query": search(3, "Dune").describe(), "callers": 8, "value": value, "fail": true,
        }));
        let errors = vec![json!("the origin failed"); 8];
        let expected = json!({ "calls": 1, "values": [], "errors": errors, "coalesced": 7 });
        assert_eq!(failed, expected, "{what}: its error is every caller's");
    }
}

#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn on_a_server_an_invalidation_by_any_language_is_a_miss_in_every_language() {
    let Some(server) = server() else { return };
    let rounds = [
        ("rust", "tenant"),
        ("node", "tenant"),
        ("python", "tenant"),
        ("rust", "operation"),
        ("node", "operation"),
        ("python", "operation"),
        ("rust", "namespace"),
        ("node", "namespace"),
        ("python", "namespace"),
    ];
    let scope = |kind: &str| match kind {
        "tenant" => Search::tenant_scope(&2).expect("a scope"),
        "operation" => Search::operation_scope(&2).expect("a scope"),
        "namespace" => GenerationScope::namespace::<Search>(),
        other => panic!("no scope {other}"),
    };
    let query = search(2, "Dune");
    an_invalidation_by_any_language_is_a_miss_in_every_language(
        &Target::Server(&server),
        &query,
        books("Dune", 1965),
        &rounds,
        scope,
    );
    // Another tenant's entry was never invalidated but by the namespace bumps.
    let rust = Target::Server(&server).rust();
    let other = search(3, "Dune");
    rust.insert(&other, books("Dune", 1966)).expect("an insert");
    let mut node = Port::start(Lang::Node, &Target::Server(&server));
    node.invalidate(&query, "tenant");
    assert_eq!(
        rust.get(&other).expect("Rust reads"),
        Some(books("Dune", 1966))
    );
}

#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn on_a_server_value_tags_are_one_contract_in_every_language() {
    let Some(server) = server() else { return };
    value_tags_are_one_contract_in_every_language(&Target::Server(&server), 2);
}

#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn on_a_server_query_tags_are_one_contract_in_every_language() {
    let Some(server) = server() else { return };
    query_tags_are_one_contract_in_every_language(&Target::Server(&server), 2);
}

#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn a_restart_from_rdb_after_a_ports_bump_brings_nothing_back_for_anyone() {
    let Some(mut server) = server() else { return };
    // Each language reads first once after the restart (the first reader
    // raises the restored counters), after a bump by each port in turn.
    let cases = [("node", "rust"), ("python", "node"), ("node", "python")];
    let rust = Target::Server(&server).rust();
    let mut ports = ports(&Target::Server(&server));
    for (round, (bumper, first)) in cases.into_iter().enumerate() {
        let query = search(2, "Dune");
        let stale = books("Dune, before the bump", 1965);
        rust.insert(&query, stale.clone()).expect("an insert");
        for port in &mut ports {
            assert_eq!(port.hit(&query), Some(json_of(&stale)), "round {round}");
        }
        let old_key = ports[0].read(&query)["key"]
            .as_str()
            .expect("a key")
            .to_owned();
        // The snapshot holds the entry and the counters before the bump.
        server.save();
        match bumper {
            "node" => ports[0].invalidate(&query, "tenant"),
            _ => ports[1].invalidate(&query, "tenant"),
        }
        server.restart_from_files();
        // The old entry is back in Redis, under its old key, and so are the
        // counters that name it: only their run id tells they are old.
        let back: bool = redis::cmd("EXISTS")
            .arg(&old_key)
            .query(&mut server.connect())
            .expect("EXISTS");
        assert!(back, "round {round}: the snapshot holds the old entry");
        let mut order = vec![first];
        order.extend(
            ["rust", "node", "python"]
                .into_iter()
                .filter(|who| *who != first),
        );
        for who in order {
            match who {
                "rust" => assert_eq!(
                    rust.get(&query).expect("Rust reads after the restart"),
                    None,
                    "round {round}: Rust after {bumper}'s bump and a restart"
                ),
                lang => {
                    let port = if lang == "node" {
                        &mut ports[0]
                    } else {
                        &mut ports[1]
                    };
                    let read = port.read(&query);
                    assert_eq!(
                        read["hit"].as_bool(),
                        Some(false),
                        "round {round}: {lang} after {bumper}'s bump and a restart: {read}"
                    );
                }
            }
        }
    }
}

#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn an_envelope_of_a_newer_version_is_a_miss_in_every_language() {
    let Some(server) = server() else { return };
    let rust = Target::Server(&server).rust();
    let mut ports = ports(&Target::Server(&server));
    let query = search(4, "Dune");
    rust.insert(&query, books("Dune", 1965)).expect("an insert");
    let key = ports[0].read(&query)["key"]
        .as_str()
        .expect("a key")
        .to_owned();
    let mut connection = server.connect();
    let bytes: Vec<u8> = redis::cmd("GET")
        .arg(&key)
        .query(&mut connection)
        .expect("GET");
    let mut newer: Value = serde_json::from_slice(&bytes).expect("an envelope");
    assert_eq!(newer["v"], json!(envelope::VERSION));
    // The next version, of a future release: same fields, another meaning.
    newer["v"] = json!(envelope::VERSION + 1);
    newer["value"] = json!({ "books": "of another shape" });
    let () = redis::cmd("SET")
        .arg(&key)
        .arg(newer.to_string())
        .query(&mut connection)
        .expect("SET");
    for port in &mut ports {
        let read = port.read(&query);
        assert_eq!(
            (read["hit"].as_bool(), read["reason"].as_str()),
            (Some(false), Some("version")),
            "{}: {read}",
            port.lang.name()
        );
    }
    assert_eq!(rust.get(&query).expect("a miss, not an error"), None);
    assert_eq!(rust.stats().rejected.version, 1);
    // The next load overwrites it, for everyone.
    let (value, loaded) = ports[1].get_or_load(&query, &books("Dune", 1966));
    assert!(loaded && value == json_of(&books("Dune", 1966)));
    assert_eq!(
        rust.get(&query).expect("Rust reads"),
        Some(books("Dune", 1966))
    );
    assert_eq!(ports[0].hit(&query), Some(json_of(&books("Dune", 1966))));
}

#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn a_foreign_entry_is_a_miss_with_its_reason_in_every_language() {
    let Some(server) = server() else { return };
    let rust = Target::Server(&server).rust();
    let mut ports = ports(&Target::Server(&server));
    let query = search(5, "Dune");
    let other = search(5, "Sand");
    rust.insert(&other, books("Sand", 1975)).expect("an insert");
    let from = ports[0].read(&other)["key"]
        .as_str()
        .expect("a key")
        .to_owned();
    let to = ports[0].read(&query)["key"]
        .as_str()
        .expect("a key")
        .to_owned();
    let mut connection = server.connect();
    let bytes: Vec<u8> = redis::cmd("GET")
        .arg(&from)
        .query(&mut connection)
        .expect("GET");
    // Another query's entry copied under this query's key; then a list.
    let () = redis::cmd("SET")
        .arg(&to)
        .arg(&bytes)
        .query(&mut connection)
        .expect("SET");
    for port in &mut ports {
        assert_eq!(
            port.read(&query)["reason"],
            json!("query"),
            "{}",
            port.lang.name()
        );
    }
    assert_eq!(rust.get(&query).expect("a miss"), None);
    let () = redis::cmd("DEL")
        .arg(&to)
        .query(&mut connection)
        .expect("DEL");
    let _: i64 = redis::cmd("RPUSH")
        .arg(&to)
        .arg("x")
        .query(&mut connection)
        .expect("RPUSH");
    for port in &mut ports {
        assert_eq!(
            port.read(&query)["reason"],
            json!("wrong_type"),
            "{}",
            port.lang.name()
        );
    }
    assert_eq!(rust.get(&query).expect("a miss"), None);
    let rejected = rust.stats().rejected;
    assert_eq!((rejected.query, rejected.wrong_type), (1, 1));
}

// ---------------------------------------------------------------------------
// A three-primary Redis Cluster
// ---------------------------------------------------------------------------

fn cluster() -> Option<Cluster> {
    if !ports_installed() {
        return None;
    }
    Cluster::start()
}

#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn on_a_cluster_what_one_language_writes_the_others_hit() {
    let Some(cluster) = cluster() else { return };
    let target = Target::Cluster(&cluster);
    // Counters in several slots: the namespace's, each tenant prefix's.
    let names: Vec<u16> = ["forge:g", "forge:g:t{acme}", "forge:g:t{acme,rocket}"]
        .iter()
        .map(|name| common::redis_server::key_slot(&mut cluster.nodes()[0].connect(), name))
        .collect();
    assert!(names[0] != names[1] && names[1] != names[2], "{names:?}");
    let titles = |title: &str| vec![title.to_owned(), format!("{title}, again")];
    entries_written_by_one_language_hit_in_the_others(
        &target,
        [
            issues("acme", "rocket", 1),
            issues("acme", "rocket", 2),
            issues("acme", "lander", 1),
        ],
        [
            titles("crash on start"),
            titles("slow build"),
            titles("docs"),
        ],
    );
    entries_written_by_one_language_hit_in_the_others(
        &target,
        [search(2, "Dune"), search(7, "Dune"), search(8, "Dune")],
        [
            books("Dune", 1965),
            books("Dune", 1966),
            books("Dune", 1967),
        ],
    );
}

#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn on_a_cluster_an_invalidation_by_any_language_is_a_miss_in_every_language() {
    let Some(cluster) = cluster() else { return };
    let (org, repo) = ("acme".to_owned(), "rocket".to_owned());
    let scope = |kind: &str| match kind {
        "leading_tenant" => Issues::tenant_scope_by_org(&org).expect("a scope"),
        "tenant" => Issues::tenant_scope((&org, &repo)).expect("a scope"),
        "operation" => Issues::operation_scope((&org, &repo)).expect("a scope"),
        "namespace" => GenerationScope::namespace::<Issues>(),
        other => panic!("no scope {other}"),
    };
    let rounds = [
        ("rust", "leading_tenant"),
        ("node", "leading_tenant"),
        ("python", "leading_tenant"),
        ("python", "tenant"),
        ("node", "operation"),
        ("rust", "namespace"),
        ("python", "namespace"),
    ];
    an_invalidation_by_any_language_is_a_miss_in_every_language(
        &Target::Cluster(&cluster),
        &issues("acme", "rocket", 1),
        vec!["crash on start".to_owned()],
        &rounds,
        scope,
    );
}

#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn on_a_cluster_value_tags_are_one_contract_in_every_language() {
    let Some(cluster) = cluster() else { return };
    let branch = branch_apart_from_shared_tags(&cluster);
    value_tags_are_one_contract_in_every_language(&Target::Cluster(&cluster), branch);
}

/// A branch whose tags sit on another primary than the tags every branch
/// shares: two tag clocks, each compared with its own counters.
fn branch_apart_from_shared_tags(cluster: &Cluster) -> u32 {
    let mut connection = cluster.nodes()[0].connect();
    let mut owner =
        |name: &str| cluster.owner(common::redis_server::key_slot(&mut connection, name));
    let shared = owner("library:g:@{library}:author=Borges");
    (1..100)
        .find(|branch| owner(&format!("library:g:t{{{branch}}}:#book=42")) != shared)
        .expect("a branch on another primary")
}

#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn on_a_cluster_query_tags_are_one_contract_in_every_language() {
    let Some(cluster) = cluster() else { return };
    let branch = branch_apart_from_shared_tags(&cluster);
    query_tags_are_one_contract_in_every_language(&Target::Cluster(&cluster), branch);
}

// ---------------------------------------------------------------------------
// ports/README.md's examples, run as they are shown
// ---------------------------------------------------------------------------
