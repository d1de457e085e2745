//! The shared conformance data of `tests/data/`, and criterion values in the
//! JSON form of the vectors: `{"type": "str" | "int" | "bool" | "f64",
//! "value": ...}` (integers and floats as decimal strings), `{"type": "none"}`,
//! or `{"type": "list" | "set", "items": [...]}`.

use cache_key::{CanonicalWriter, CriterionValue};
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::spec_model;

/// The JSON file `tests/data/{file}`.
pub fn load<T: DeserializeOwned>(file: &str) -> T {
    let path = format!("{}/tests/data/{file}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|err| panic!("{path}: {err}"));
    serde_json::from_str(&text).unwrap_or_else(|err| panic!("{path}: {err}"))
}

/// The cases of `tests/data/vectors.json`, the format-2 conformance vectors.
pub fn vectors() -> Vec<Value> {
    load("vectors.json")
}

/// A criterion value as the vectors describe it.
pub enum Vector {
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

/// An integer's decimal text, unsigned when it fits a `u128`.
pub fn integer(text: &str) -> Vector {
    match text.parse::<u128>() {
        Ok(n) => Vector::Unsigned(n),
        Err(_) => Vector::Signed(text.parse().expect("an integer")),
    }
}

/// The value `value` describes.
pub fn vector(value: &Value) -> Vector {
    let text = || value["value"].as_str().expect("a decimal string");
    let items = || value["items"].as_array().expect("items").iter().map(vector);
    match value["type"].as_str().expect("a type") {
        "str" => Vector::Str(text().to_owned()),
        "int" => integer(text()),
        "bool" => Vector::Bool(value["value"].as_bool().expect("a bool")),
        "f64" => Vector::F64(text().parse().expect("a float")),
        "none" => Vector::None,
        "list" => Vector::List(items().collect()),
        "set" => Vector::Set(items().collect()),
        other => panic!("unknown value type {other}"),
    }
}

/// The canonical string of the value `value` describes, by the spec model
/// (independently of the crate).
pub fn canonical(value: &Value) -> String {
    let text = || value["value"].as_str().expect("a string").to_owned();
    let items = || {
        value["items"]
            .as_array()
            .expect("items")
            .iter()
            .map(canonical)
    };
    match value["type"].as_str().expect("a type") {
        "str" | "int" => text(),
        "bool" => value["value"].as_bool().expect("a bool").to_string(),
        "f64" => spec_model::js_number::<f64>(text().parse().expect("a float")),
        "none" => String::new(),
        "list" => spec_model::list(items()),
        "set" => spec_model::set(items()),
        other => panic!("unknown value type {other}"),
    }
}
