//! Every kind of entry a typed Redis cache must refuse, as the bytes written
//! straight into Redis under a query's key, each with the rejection it must
//! be counted under.

use cache_key::cache::Rejected;
use serde_json::json;

/// Bytes to put under a key, and what reading them back must count.
pub struct BadEntry {
    pub what: &'static str,
    pub bytes: Vec<u8>,
    pub rejected: Rejected,
}

/// The bad entries for a query whose good envelope is `good`; `other_query`
/// is the digest of another query's readable key at the same generation.
pub fn bad_entries(good: &serde_json::Value, other_query: &str) -> Vec<BadEntry> {
    let with = |field: &str, value: serde_json::Value| {
        let mut entry = good.clone();
        entry[field] = value;
        entry.to_string().into_bytes()
    };
    let entry = |what, bytes, set: fn(&mut Rejected)| {
        let mut rejected = Rejected::default();
        set(&mut rejected);
        BadEntry {
            what,
            bytes,
            rejected,
        }
    };
    vec![
        entry("garbage", b"\xff\x00not json".to_vec(), |r| {
            r.undecodable = 1
        }),
        entry("bare value", br#"[{"title":"Dune"}]"#.to_vec(), |r| {
            r.undecodable = 1
        }),
        entry("no header", br#"{"v":4,"value":[]}"#.to_vec(), |r| {
            r.undecodable = 1
        }),
        entry("version 1", with("v", json!(1)), |r| r.version = 1),
        // Version 2 wrote `type_name` in `type`, so its entries also hold
        // another type; one that holds the declared id is no less old.
        entry("version 2", with("v", json!(2)), |r| r.version = 1),
        // Version 3 had no tags: a tagged entry read by it would outlive a
        // bump of its tags.
        entry("version 3", with("v", json!(3)), |r| r.version = 1),
        entry("version 5", with("v", json!(5)), |r| r.version = 1),
        entry(
            "tags without since",
            with("tags", json!(["#book=42"])),
            |r| r.undecodable = 1,
        ),
        entry("schema 2", with("schema", json!(2)), |r| r.schema = 1),
        entry("another value id", with("type", json!("u64")), |r| {
            r.value_type = 1
        }),
        entry("another query", with("query", json!(other_query)), |r| {
            r.query = 1
        }),
        entry("bad value", with("value", json!("Dune")), |r| {
            r.undecodable = 1
        }),
    ]
}

/// The counts of `a` and `b` added.
pub fn add(a: Rejected, b: Rejected) -> Rejected {
    let mut sum = a;
    sum.undecodable += b.undecodable;
    sum.version += b.version;
    sum.schema += b.schema;
    sum.value_type += b.value_type;
    sum.query += b.query;
    sum.wrong_type += b.wrong_type;
    sum
}
