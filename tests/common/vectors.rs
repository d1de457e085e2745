//! Criterion values in the JSON form of the conformance vectors:
//! `{"type": "str" | "int" | "bool" | "f64", "value": ...}` (integers and
//! floats as decimal strings), `{"type": "none"}`, or
//! `{"type": "list" | "set", "items": [...]}`.

use cache_key::{CanonicalWriter, CriterionValue};
use serde_json::Value;

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
