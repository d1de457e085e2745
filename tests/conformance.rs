//! Every case of the key format's conformance vectors (`tests/data/vectors.json`,
//! a copy of the cases shared with the reference JavaScript generator) through
//! the runtime builder, byte for byte.

use cache_key::{CanonicalWriter, CriterionValue, KeyBuilder, KeyError};
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

#[test]
fn every_conformance_vector_matches_byte_for_byte() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/vectors.json"
    ))
    .expect("tests/data/vectors.json");
    let cases: Vec<Value> = serde_json::from_str(&text).expect("valid JSON");
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
