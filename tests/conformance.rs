//! Every case of the key format's conformance vectors through the runtime
//! builder, byte for byte: `tests/data/vectors.json` (format 2, copied from the
//! shared conformance set), the version-1 keys of `vectors-format1.json`
//! through `decode`, and the exact-tie floats of `float-ties.json` as Node
//! writes them.

use cache_key::{CanonicalWriter, CriterionValue, DecodedCriteria, KeyBuilder, KeyError, decode};
use serde_json::Value;

/// A criterion value as the vectors describe it.
enum Vector {
    Str(String),
    Unsigned(u128),
    Signed(i128),
    Bool(bool),
    F64(f64),
    None,
    List(Vec<Vector>),
    Set(Vec<Vector>),
}

impl CriterionValue for Vector {
    fn write_canonical(&self, out: &mut CanonicalWriter<'_>) {
        match self {
            Vector::Str(text) => out.write_value(text),
            Vector::Unsigned(n) => out.write_value(n),
            Vector::Signed(n) => out.write_value(n),
            Vector::Bool(b) => out.write_value(b),
            Vector::F64(x) => out.write_value(x),
            Vector::None => out.write_value(&None::<u8>),
            Vector::List(items) => out.write_list(items),
            Vector::Set(items) => out.write_set(items),
        }
    }
}

fn vector(value: &Value) -> Vector {
    let text = || {
        value["value"]
            .as_str()
            .expect("a decimal string")
            .to_owned()
    };
    match value["type"].as_str().expect("a type") {
        "str" => Vector::Str(text()),
        "int" => {
            let text = text();
            match text.parse::<u128>() {
                Ok(n) => Vector::Unsigned(n),
                Err(_) => Vector::Signed(text.parse().expect("an integer")),
            }
        }
        "bool" => Vector::Bool(value["value"].as_bool().expect("a bool")),
        "f64" => Vector::F64(text().parse().expect("a float")),
        "none" => Vector::None,
        "list" => Vector::List(items(value)),
        "set" => Vector::Set(items(value)),
        other => panic!("unknown value type {other}"),
    }
}

fn items(value: &Value) -> Vec<Vector> {
    value["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(vector)
        .collect()
}

fn build(case: &Value) -> Result<String, KeyError> {
    let str_of = |field: &str| case[field].as_str().expect(field);
    let mut builder = KeyBuilder::new(str_of("namespace"), str_of("operation"));
    builder
        .schema(
            case["schema"]
                .as_u64()
                .expect("schema")
                .try_into()
                .expect("a u32 schema"),
        )
        .generation(case["generation"].as_u64().expect("generation"));
    match case["tenant"].as_str() {
        Some(tenant) => builder.tenant(tenant),
        None => builder.global(),
    };
    for criterion in case["criteria"].as_array().expect("criteria") {
        let name = criterion[0].as_str().expect("a name");
        builder.criterion(name, vector(&criterion[1]));
    }
    builder.build().map(String::from)
}

fn load(file: &str) -> Vec<Value> {
    let path = format!("{}/tests/data/{file}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|err| panic!("{path}: {err}"));
    serde_json::from_str(&text).unwrap_or_else(|err| panic!("{path}: {err}"))
}

#[test]
fn every_conformance_vector_matches_byte_for_byte() {
    let cases = load("vectors.json");
    assert_eq!(cases.len(), 400, "the vectors file holds 400 cases");

    let mut failures = Vec::new();
    for (i, case) in cases.iter().enumerate() {
        let got = build(case);
        let ok = match (&got, case["key"].as_str(), case["error"].as_str()) {
            (Ok(key), Some(expected), _) => key == expected,
            (Err(KeyError::EmptyTenant { .. }), None, Some("empty_tenant")) => true,
            (Err(KeyError::DuplicateCriterion { .. }), None, Some("duplicate_criterion")) => true,
            _ => false,
        };
        if !ok {
            failures.push(format!(
                "case {i}: got {got:?}, expected {}",
                case.get("key").unwrap_or(&case["error"])
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of 400 cases differ:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn every_format1_key_decodes_as_version_1_and_back() {
    let cases = load("vectors-format1.json");
    assert_eq!(cases.len(), 400, "the format-1 file holds 400 cases");
    let mut summarized = 0;
    for (i, case) in cases.iter().enumerate() {
        let Some(key) = case["key"].as_str() else {
            continue;
        };
        let decoded = decode(key).unwrap_or_else(|err| panic!("case {i}: {key}: {err}"));
        assert_eq!(decoded.to_string(), key, "case {i}");
        if let DecodedCriteria::Digest(digest) = decoded.criteria() {
            assert_eq!(digest.len(), 16, "case {i}: {key}");
            assert_eq!(decoded.format_version(), 1, "case {i}: {key}");
            summarized += 1;
        }
    }
    assert!(summarized >= 100, "only {summarized} version-1 summaries");
}

#[test]
fn every_format2_key_decodes_as_version_2_and_back() {
    for (i, case) in load("vectors.json").iter().enumerate() {
        let Some(key) = case["key"].as_str() else {
            continue;
        };
        let decoded = decode(key).unwrap_or_else(|err| panic!("case {i}: {key}: {err}"));
        assert_eq!(decoded.to_string(), key, "case {i}");
        assert_eq!(decoded.format_version(), 2, "case {i}: {key}");
    }
}

/// Doubles whose two shortest candidates are equally close: ECMAScript picks
/// the even digit (`1459304523984103.25` is `1459304523984103.2`). Node's text
/// for each is committed data, regenerated by `node tests/data/float-ties.mjs`.
#[test]
fn exact_ties_are_written_as_node_writes_them() {
    let ties = load("float-ties.json");
    assert!(ties.len() >= 50, "{} ties", ties.len());
    for tie in &ties {
        let exact = tie["value"].as_str().expect("a decimal");
        let js = tie["js"].as_str().expect("Node's text");
        let value: f64 = exact.parse().expect("an exactly representable double");
        let key = KeyBuilder::new("n", "o")
            .global()
            .criterion("x", value)
            .build()
            .expect("a key");
        assert_eq!(key.as_str(), format!("n:s1:g1:t:o:x={js}"), "{exact}");
    }
}
