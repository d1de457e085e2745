//! The `exact` section of the wire vectors (WIRE-FORMAT.md, "Exact
//! values"): values, in the exact form of `tests/common/exact.rs`, with the
//! rule each writer refuses them by, the JSON Rust writes for them and what
//! each reader reads of it; and queries with their declared Rust types,
//! with the key Rust builds or the reason it refuses them.

use std::time::UNIX_EPOCH;

use cache_key::redis::envelope::{self, Expected};
use cache_key::{KeyBuilder, KeyError};
use serde_json::{Value, json};

use super::common::exact::{Language, Text, Tree, held, read_form, refusals};
use super::common::vectors;

/// A float from its bits, as the vectors name them.
fn float(value: f64) -> Tree {
    Tree::Float(value)
}

fn text(value: &str) -> Tree {
    Tree::Str(Text::Utf8(value.to_owned()))
}

/// The one rule `writer` refuses `tree` by, or none; a case breaks at most one.
fn rule(tree: &Tree, writer: Language) -> Value {
    let rules = refusals(tree, writer);
    assert!(
        rules.len() <= 1,
        "a vector breaks one rule at most: {rules:?}"
    );
    rules.first().map_or(Value::Null, |rule| json!(rule))
}

/// A value vector: what each writer does with `tree`, and, when Rust
/// writes it, its JSON and what every reader reads of that.
fn value_vector(name: &str, tree: Tree, rust_holds: bool) -> Value {
    let mut refused = json!({
        "node": rule(&tree, Language::Node),
        "python": rule(&tree, Language::Python),
    });
    let mut vector = json!({ "name": name, "value": tree.spec() });
    // What each port reads back of what it wrote itself.
    let own: serde_json::Map<String, Value> = [Language::Node, Language::Python]
        .into_iter()
        .filter(|&lang| refusals(&tree, lang).is_empty())
        .map(|lang| {
            (
                lang.name().to_owned(),
                read_form(&held(&tree, lang), lang).spec(),
            )
        })
        .collect();
    vector["reads_own"] = own.into();
    if rust_holds {
        let expected = Expected::new(1, "Tree", "exact");
        let written = envelope::encode(&expected, &tree, UNIX_EPOCH, None);
        refused["rust"] = rule(&tree, Language::Rust);
        assert_eq!(written.is_err(), !refused["rust"].is_null(), "{name}");
        if written.is_ok() {
            vector["rust_json"] = json!(serde_json::to_string(&tree).expect("JSON"));
            vector["reads"] = json!({
                "rust": read_form(&tree, Language::Rust).spec(),
                "node": read_form(&tree, Language::Node).spec(),
                "python": read_form(&tree, Language::Python).spec(),
            });
        }
    }
    vector["refused"] = refused;
    vector
}

/// The value vectors: exact floats (the ones fast parsers round, -0.0,
/// subnormals, integral floats on both sides of what JavaScript writes as
/// digits), integers at the edges of 2^53 and 64 bits, text, and one case
/// per refusal rule.
pub fn values() -> Vec<Value> {
    let two_53 = 9_007_199_254_740_992_i128;
    let mut vectors = vec![
        value_vector(
            "floats a fast parser reads one ulp off",
            Tree::Arr(vec![
                float(41.0 * 0.01),
                float(632.0 / 7.0),
                float(0.1 + 0.2),
            ]),
            true,
        ),
        value_vector("negative zero", float(-0.0), true),
        value_vector(
            "subnormals and the largest float",
            Tree::Arr(vec![
                float(5e-324),
                float(-2.225_073_858_507_201e-308),
                float(f64::MAX),
            ]),
            true,
        ),
        value_vector(
            "an integral float JavaScript writes with an exponent",
            Tree::Arr(vec![float(1e21), float(-1.5e300)]),
            true,
        ),
        value_vector(
            "an integral float: an integer in JavaScript",
            float(42.0),
            true,
        ),
        value_vector(
            "integers at the edges of 2^53 and 64 bits",
            Tree::Arr(vec![
                Tree::Int(two_53 - 1),
                Tree::Int(two_53),
                Tree::Int(two_53 + 1),
                Tree::Int(-two_53 - 1),
                Tree::Int(u64::MAX.into()),
                Tree::Int(i64::MIN.into()),
            ]),
            true,
        ),
        value_vector(
            "astral text and escapes",
            Tree::Obj(vec![
                (
                    Text::Utf8("title".to_owned()),
                    text("😀 \u{10ffff} \"q\" \\ \n \u{1}"),
                ),
                (
                    Text::Utf8("__proto__".to_owned()),
                    text("a field like another"),
                ),
            ]),
            true,
        ),
        // One rule each.
        value_vector("NaN", Tree::Arr(vec![float(1.5), float(f64::NAN)]), true),
        value_vector("an infinity", float(f64::NEG_INFINITY), true),
        value_vector(
            "an integral float JavaScript writes as digits",
            Tree::Arr(vec![float(1_441_151_880_758_558_720.0)]),
            true,
        ),
        value_vector(
            "an integer past 2^64 - 1",
            Tree::Int(i128::from(u64::MAX) + 1),
            false,
        ),
        value_vector(
            "an integer below -2^63",
            Tree::Int(i128::from(i64::MIN) - 1),
            false,
        ),
        value_vector(
            "a lone surrogate",
            Tree::Arr(vec![Tree::Str(Text::Utf16(vec![0x61, 0xd800]))]),
            false,
        ),
        value_vector(
            "a key with a lone surrogate",
            Tree::Obj(vec![(Text::Utf16(vec![0xdc00]), Tree::Null)]),
            false,
        ),
    ];
    vectors.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
    vectors
}

// ---------------------------------------------------------------------------
// Queries with declared types
// ---------------------------------------------------------------------------

/// Whether Rust's type `ty` holds the criterion value `value` (the JSON
/// form of the key vectors), as its compiler would: why not, otherwise.
fn rust_refusal(ty: &str, value: &Value) -> Option<&'static str> {
    if let Some(inner) = ty.strip_prefix("Option<").and_then(|t| t.strip_suffix('>')) {
        return (value["type"] != "none")
            .then(|| rust_refusal(inner, value))
            .flatten();
    }
    if let Some(inner) = ty.strip_prefix("Vec<").and_then(|t| t.strip_suffix('>')) {
        let items = value["items"].as_array()?;
        return items.iter().find_map(|item| rust_refusal(inner, item));
    }
    let kind = value["type"].as_str().expect("a type");
    let integer = |fits: fn(i128) -> bool| match kind {
        "int" => {
            let n: i128 = value["value"].as_str()?.parse().ok()?;
            (!fits(n)).then_some("out_of_range")
        }
        _ => Some("not_an_integer"),
    };
    match ty {
        "u8" => integer(|n| u8::try_from(n).is_ok()),
        "u32" => integer(|n| u32::try_from(n).is_ok()),
        "u64" => integer(|n| u64::try_from(n).is_ok()),
        "i64" => integer(|n| i64::try_from(n).is_ok()),
        "String" => (kind != "str").then_some("wrong_type"),
        "bool" => (kind != "bool").then_some("wrong_type"),
        other => panic!("no vector declares {other}"),
    }
}

/// A query of `criteria` (name, declared type, value) for tenant `tenant`
/// (a `u64`): its key, or why Rust refuses it.
fn query_vector(name: &str, tenant: u64, criteria: &[(&str, &str, Value)]) -> Value {
    let types: serde_json::Map<String, Value> = (criteria.iter())
        .filter(|(_, ty, _)| !ty.is_empty())
        .map(|(name, ty, _)| ((*name).to_owned(), json!(ty)))
        .collect();
    let mut vector = json!({
        "name": name,
        "query": {
            "namespace": "shop", "operation": "find", "schema": 1, "generation": "3",
            "tenant": { "type": "int", "value": tenant.to_string() },
            "criteria": criteria.iter().map(|(name, _, value)| json!([name, value])).collect::<Vec<_>>(),
            "tenant_type": "u64",
            "criterion_types": types,
        },
    });
    let refused = criteria.iter().find_map(|(name, ty, value)| {
        if ty.is_empty() {
            return Some(format!("unknown_criterion {name}"));
        }
        rust_refusal(ty, value).map(str::to_owned)
    });
    if let Some(kind) = refused {
        // Rust has no field of that name, or no value of that type: a port refuses it.
        let kind = kind.split(' ').next().expect("a kind");
        vector["error"] = json!(kind);
        return vector;
    }
    let mut builder = KeyBuilder::new("shop", "find");
    builder.generation(3).tenant(tenant);
    for (name, _, value) in criteria {
        builder.criterion(name, vectors::vector(value));
    }
    match builder.build() {
        Ok(key) => vector["key"] = json!(key.as_str()),
        Err(KeyError::EmptyTenant { .. }) => vector["error"] = json!("empty_tenant"),
        Err(other) => panic!("{name}: {other}"),
    }
    vector
}

fn int(n: i128) -> Value {
    json!({ "type": "int", "value": n.to_string() })
}

fn f64_value(text: &str) -> Value {
    json!({ "type": "f64", "value": text })
}

/// Queries the ports must build as Rust does, or refuse as Rust does.
pub fn queries() -> Vec<Value> {
    let past_2_53 = 9_007_199_254_740_993;
    let mut vectors = vec![
        query_vector(
            "a u64 past 2^53, exactly",
            2,
            &[("id", "u64", int(past_2_53))],
        ),
        query_vector(
            "an absent optional criterion",
            2,
            &[
                ("page", "Option<u32>", json!({ "type": "none" })),
                ("q", "String", json!({ "type": "str", "value": "dune" })),
            ],
        ),
        query_vector("tenant 0", 0, &[("id", "u64", int(1))]),
        query_vector(
            "a fraction for an integer",
            2,
            &[("page", "u32", f64_value("1.5"))],
        ),
        query_vector(
            "a float past 2^53 for a u64",
            2,
            &[("id", "u64", f64_value("9007199254740993"))],
        ),
        query_vector("300 for a u8", 2, &[("stars", "u8", int(300))]),
        query_vector("-1 for a u64", 2, &[("id", "u64", int(-1))]),
        query_vector("2^63 for an i64", 2, &[("offset", "i64", int(1 << 63))]),
        query_vector("2^64 for a u64", 2, &[("id", "u64", int(1 << 64))]),
        query_vector(
            "a fraction in a list of integers",
            2,
            &[(
                "ids",
                "Vec<u64>",
                json!({ "type": "list", "items": [int(1), f64_value("1.5")] }),
            )],
        ),
        query_vector("a number for text", 2, &[("q", "String", int(5))]),
        query_vector(
            "text for a bool",
            2,
            &[("open", "bool", json!({ "type": "str", "value": "true" }))],
        ),
        query_vector(
            "a criterion the type does not declare",
            2,
            &[("color", "", int(1))],
        ),
    ];
    vectors.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
    vectors
}

/// The crate reads what the vectors say it reads of the JSON it writes,
/// and each refused query is refused for the vector's reason.
#[test]
fn the_crate_reads_its_exact_values_as_the_vectors_say() {
    let expected = Expected::new(1, "Tree", "exact");
    for vector in values() {
        let Some(json) = vector["rust_json"].as_str() else {
            continue;
        };
        let value = Tree::from_spec(&vector["value"]).expect("an exact form");
        let bytes = envelope::encode(&expected, &value, UNIX_EPOCH, None).expect("stored");
        assert!(
            String::from_utf8_lossy(&bytes).ends_with(&format!(",\"value\":{json}}}")),
            "{}",
            vector["name"]
        );
        let read = envelope::decode::<Tree>(&bytes, &expected).expect("a hit");
        assert_eq!(
            read.value.spec(),
            vector["reads"]["rust"],
            "{}",
            vector["name"]
        );
    }
}
