//! Keys in a real Redis: deleting one tenant's keys with `SCAN MATCH` and the
//! exact `KeyPattern::matches` filter, and hash-tagged keys sharing a cluster
//! slot.
//!
//! Each test starts its own `redis-server` (`tests/common/redis_server.rs`)
//! and kills it when done. The tests are ignored by default; run them with
//! `cargo test -- --include-ignored`. Without `redis-server` on `PATH` they
//! are skipped with a message, except under CI (`CI=true`), where that is a
//! failure.

mod common;

use std::collections::{BTreeMap, BTreeSet, HashSet};

use cache_key::{Key, KeyBuilder, KeyPattern};
use common::redis_server::{Server, key_slot};
use redis::{Commands, Connection};

/// Every key `SCAN` returns for `glob`.
fn scan(connection: &mut Connection, glob: &str) -> BTreeSet<String> {
    let mut keys = BTreeSet::new();
    let mut cursor = 0u64;
    loop {
        let (next, batch): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(glob)
            .arg("COUNT")
            .arg(100)
            .query(connection)
            .expect("SCAN");
        keys.extend(batch);
        if next == 0 {
            return keys;
        }
        cursor = next;
    }
}

fn key(
    namespace: &str,
    tenant: Option<&str>,
    schema: u32,
    generation: u64,
    operation: &str,
) -> Key {
    let mut builder = KeyBuilder::new(namespace, operation);
    builder
        .schema(schema)
        .generation(generation)
        .criterion("page", 1);
    match tenant {
        Some(tenant) => builder.tenant(tenant),
        None => builder.global(),
    }
    .build()
    .expect("a key")
}

#[test]
#[ignore = "needs redis-server: apt-get install redis-server, then cargo test -- --include-ignored"]
fn deleting_one_tenant_leaves_every_other_key_intact() {
    let Some(server) = Server::start(false) else {
        return;
    };
    let mut connection = server.connect();

    // Tenants a careless glob would confuse, and an operation named `tacme*`
    // whose segment a `*` of the glob can line up with.
    let tenants = [
        Some("acme"),
        Some("acme*"),
        Some("acme-corp"),
        Some("a:b"),
        None,
    ];
    let mut keys: Vec<(Key, bool)> = Vec::new();
    for tenant in tenants {
        for schema in [1, 2] {
            for generation in [4, 5] {
                for operation in ["list", "tacme*"] {
                    let key = key("library", tenant, schema, generation, operation);
                    keys.push((key, tenant == Some("acme*")));
                }
            }
        }
    }
    let summarized = KeyBuilder::new("library", "search")
        .generation(5)
        .tenant("acme*")
        .criterion("title", "x".repeat(60))
        .build()
        .expect("a key");
    assert!(summarized.as_str().contains(":c_"));
    keys.push((summarized, true));
    keys.push((key("other", Some("acme*"), 1, 4, "list"), false));

    for (key, _) in &keys {
        let () = connection.set(key, key.as_str()).expect("SET");
    }
    let count: usize = redis::cmd("DBSIZE").query(&mut connection).expect("DBSIZE");
    assert_eq!(count, keys.len());

    // Delete tenant `acme*` across schemas and generations.
    let pattern = KeyPattern::tenant("library", "acme*").expect("a pattern");
    let scanned = scan(&mut connection, &pattern.glob());
    let doomed: Vec<&String> = scanned.iter().filter(|key| pattern.matches(key)).collect();
    assert!(
        scanned.len() > doomed.len(),
        "the glob alone also matches other tenants' keys: {scanned:#?}"
    );
    assert!(scanned.contains("library:s1:g4:tacme:tacme*:page=1"));
    let deleted: usize = connection.del(&doomed).expect("DEL");

    let expected_gone: BTreeSet<&str> = keys
        .iter()
        .filter(|(_, doomed)| *doomed)
        .map(|(key, _)| key.as_str())
        .collect();
    assert_eq!(deleted, expected_gone.len());
    assert_eq!(
        doomed
            .iter()
            .map(|key| key.as_str())
            .collect::<BTreeSet<_>>(),
        expected_gone
    );

    let remaining = scan(&mut connection, "*");
    let expected_remaining: BTreeSet<String> = keys
        .iter()
        .filter(|(_, doomed)| !doomed)
        .map(|(key, _)| key.to_string())
        .collect();
    assert_eq!(remaining, expected_remaining);
    for (key, doomed) in &keys {
        let value: Option<String> = connection.get(key).expect("GET");
        let expected = (!doomed).then(|| key.to_string());
        assert_eq!(value, expected, "{key}");
    }
}

#[test]
#[ignore = "needs redis-server: apt-get install redis-server, then cargo test -- --include-ignored"]
fn hash_tagged_keys_of_one_tenant_share_a_cluster_slot() {
    let Some(server) = Server::start(true) else {
        return;
    };
    let mut connection = server.connect();

    let keys_of = |tenant: &str, hash_tag: bool| -> Vec<Key> {
        let mut keys = Vec::new();
        for operation in ["list", "search", "tacme*"] {
            for generation in [1, 2, 3] {
                let builder = || {
                    let mut builder = KeyBuilder::new("library", operation);
                    builder
                        .generation(generation)
                        .tenant(tenant)
                        .hash_tag(hash_tag);
                    builder
                };
                keys.push(builder().build().expect("a key"));
                keys.push(
                    builder()
                        .criterion("page", generation)
                        .build()
                        .expect("a key"),
                );
                keys.push(
                    builder()
                        .criterion("title", "Sand: Borges {1}".repeat(4))
                        .criterion("tags", ["a", "b"])
                        .build()
                        .expect("a key"),
                );
            }
        }
        keys
    };

    for (tenant, escaped) in [("acme", "acme"), ("a:b", "a%3Ab"), ("acme*", "acme*")] {
        let slots: BTreeMap<u16, Vec<Key>> =
            keys_of(tenant, true)
                .into_iter()
                .fold(BTreeMap::new(), |mut slots, key| {
                    let slot = key_slot(&mut connection, key.as_str());
                    slots.entry(slot).or_default().push(key);
                    slots
                });
        assert_eq!(slots.len(), 1, "tenant {tenant}: {slots:#?}");
        // The hash tag is the escaped tenant: its slot is that text's slot.
        let tag_slot = key_slot(&mut connection, escaped);
        assert_eq!(slots.keys().next(), Some(&tag_slot));

        let untagged: HashSet<u16> = keys_of(tenant, false)
            .iter()
            .map(|key| key_slot(&mut connection, key.as_str()))
            .collect();
        assert!(
            untagged.len() > 1,
            "without hash tags, a tenant's keys spread"
        );
    }

    let tenant_slots: HashSet<u16> = (0..20)
        .map(|i| {
            let key = KeyBuilder::new("library", "list")
                .tenant(format!("tenant-{i}").as_str())
                .hash_tag(true)
                .build()
                .expect("a key");
            key_slot(&mut connection, key.as_str())
        })
        .collect();
    assert!(
        tenant_slots.len() > 1,
        "different tenants spread over slots: {tenant_slots:?}"
    );
}

/// Every key of an organization, whatever the repository: `SCAN` with the
/// leading-values glob (`[,:]` after the organization, a class Redis globs
/// support), then the exact filter, on a real server.
#[test]
#[ignore = "needs redis-server: apt-get install redis-server, then cargo test -- --include-ignored"]
fn deleting_an_organization_deletes_all_its_repositories_and_nothing_else() {
    let Some(server) = Server::start(false) else {
        return;
    };
    let mut connection = server.connect();

    let tenants: [&[&str]; 7] = [
        &["rust-lang", "cargo"],
        &["rust-lang", "rust"],
        &["rust-lang"],
        &["rust-lang-x", "y"],
        &["rust-lang*", "z"],
        &["rust", "lang"],
        &["tokio-rs", "rust-lang"],
    ];
    let mut keys: Vec<(Key, bool)> = Vec::new();
    for parts in tenants {
        for hash_tag in [false, true] {
            for operation in ["issues", "rust-lang"] {
                let mut builder = KeyBuilder::new("forge", operation);
                for part in parts {
                    builder.tenant(*part);
                }
                let key = builder
                    .hash_tag(hash_tag)
                    .criterion("page", 1)
                    .build()
                    .expect("a key");
                keys.push((key, parts[0] == "rust-lang" && !hash_tag));
            }
        }
    }
    for (key, _) in &keys {
        let () = connection.set(key, key.as_str()).expect("SET");
    }

    let pattern = KeyPattern::leading_tenant("forge", ["rust-lang"]).expect("a pattern");
    assert_eq!(pattern.glob(), "forge:s*:g*:trust-lang[,:]*");
    let scanned = scan(&mut connection, &pattern.glob());
    let doomed: BTreeSet<&str> = scanned
        .iter()
        .filter(|key| pattern.matches(key))
        .map(String::as_str)
        .collect();
    let expected: BTreeSet<&str> = keys
        .iter()
        .filter(|(_, doomed)| *doomed)
        .map(|(key, _)| key.as_str())
        .collect();
    assert_eq!(doomed, expected);
    // The glob found them all; `rust-lang-x,y` and `rust-lang*,z` it never matched.
    assert!(scanned.iter().all(|key| !key.contains("trust-lang-x")));
    let deleted: usize = connection
        .del(doomed.iter().collect::<Vec<_>>())
        .expect("DEL");
    assert_eq!(deleted, expected.len());
    let remaining = scan(&mut connection, "*");
    assert_eq!(remaining.len(), keys.len() - expected.len());

    // With a hash tag the glob ends the values with `[,}]`.
    let tagged = KeyPattern::leading_tenant("forge", ["rust-lang"])
        .expect("a pattern")
        .with_hash_tag(true);
    let scanned = scan(&mut connection, &tagged.glob());
    let found: Vec<&String> = scanned.iter().filter(|key| tagged.matches(key)).collect();
    assert_eq!(found.len(), 6, "{found:?}");
}
