//! The generators of the property tests: adversarial text, values of every
//! type the format lists, and inputs drawn from a wide space or from a tiny
//! one where equal and look-alike parts are frequent.

use std::collections::HashSet;
use std::num::NonZero;
use std::rc::Rc;

use proptest::collection::{btree_set, vec};
use proptest::prelude::*;
use proptest::sample::select;

use super::inputs::{Input, Part, Tenant, Value};

/// Pieces of text that break naive keys: every separator, `%` and text that
/// already looks escaped, whitespace, control characters, emoji, a combining
/// mark next to its precomposed look-alike, and a forged criterion.
pub const NASTY: &[&str] = &[
    "a",
    "b",
    "1",
    "-",
    ":",
    "&",
    "=",
    ",",
    "%",
    "{",
    "}",
    "*",
    "?",
    "+",
    "/",
    " ",
    "\t",
    "\n",
    "\r",
    "\0",
    "\u{7f}",
    "\u{85}",
    "\u{a0}",
    "\u{200d}",
    "\u{feff}",
    "é",
    "e\u{301}",
    "Ω",
    "😀",
    "👩\u{200d}💻",
    "%2C",
    "%25",
    "%3A",
    "2C",
    "&title=",
    ":s1:g1:t",
    "c_",
];

/// Very short text from a tiny alphabet, so that equal and look-alike
/// values are frequent.
pub fn tiny_text() -> impl Strategy<Value = String> {
    vec(
        select(&["a", "b", ",", "%", "1", ":", "&", "=", "2C", "{", " ", "é"][..]),
        0..3,
    )
    .prop_map(|pieces| pieces.concat())
}

/// Short adversarial text.
pub fn nasty_text() -> impl Strategy<Value = String> {
    vec(select(NASTY), 0..4).prop_map(|pieces| pieces.concat())
}

/// Any text: adversarial pieces, arbitrary `char`s (control characters and
/// all), or proptest's arbitrary `String`.
pub fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => nasty_text(),
        2 => vec(any::<char>(), 0..6).prop_map(String::from_iter),
        1 => any::<String>(),
    ]
}

pub fn short_text() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => nasty_text(),
        1 => vec(any::<char>(), 0..4).prop_map(String::from_iter),
    ]
}

pub fn non_empty(strategy: impl Strategy<Value = String>) -> impl Strategy<Value = String> {
    strategy.prop_map(|s| if s.is_empty() { "x".to_owned() } else { s })
}

pub fn i128s() -> impl Strategy<Value = i128> {
    prop_oneof![
        3 => -3i128..4,
        1 => any::<i128>(),
        1 => select(vec![
            i128::MIN,
            i128::MAX,
            i128::from(i64::MIN),
            i128::from(u64::MAX),
            9007199254740993,
        ]),
    ]
}

pub fn u128s() -> impl Strategy<Value = u128> {
    prop_oneof![
        3 => 0u128..4,
        1 => any::<u128>(),
        1 => select(vec![u128::MAX, u128::from(u64::MAX), 1 << 53, (1 << 53) + 1]),
    ]
}

pub fn f64s() -> impl Strategy<Value = f64> {
    prop_oneof![
        3 => proptest::num::f64::ANY,
        2 => select(&[
            f64::NAN,
            -f64::NAN,
            0.0,
            -0.0,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::MIN_POSITIVE,
            f64::MIN_POSITIVE / 3.0, // subnormal
            5e-324,
            -5e-324,
            f64::MAX,
            f64::MIN,
            f64::EPSILON,
            1e21,
            1e20,
            123456789012345680000.0,
            1e-6,
            1e-7,
            0.000001234,
            0.1 + 0.2,
            -2.5,
            1.5,
            100.0,
            9007199254740993.0,
        ][..]),
        1 => (-1000i32..1000).prop_map(f64::from),
    ]
}

pub fn f32s() -> impl Strategy<Value = f32> {
    prop_oneof![
        3 => proptest::num::f32::ANY,
        1 => select(&[
            f32::NAN,
            0.0,
            -0.0,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::MIN_POSITIVE / 3.0,
            f32::MAX,
            0.1,
            16777217.0,
            1e-7,
        ][..]),
    ]
}

/// Values of every type, with small collections of short adversarial text.
pub fn value() -> impl Strategy<Value = Value> {
    let items = || vec(short_text(), 0..3);
    prop_oneof![
        6 => text().prop_map(Value::Str),
        1 => short_text().prop_map(|s| Value::BoxedStr(s.into())),
        1 => any::<char>().prop_map(Value::Char),
        1 => any::<u8>().prop_map(Value::U8),
        1 => any::<i8>().prop_map(Value::I8),
        1 => any::<u64>().prop_map(Value::U64),
        2 => (-3i64..4).prop_map(Value::I64),
        1 => u128s().prop_map(Value::U128),
        2 => i128s().prop_map(Value::I128),
        1 => any::<usize>().prop_map(Value::Usize),
        1 => any::<isize>().prop_map(Value::Isize),
        1 => (1u32..).prop_map(|n| Value::NonZeroU32(NonZero::new(n).expect("n >= 1"))),
        1 => any::<bool>().prop_map(Value::Bool),
        3 => f64s().prop_map(Value::F64),
        2 => f32s().prop_map(Value::F32),
        2 => proptest::option::of(short_text()).prop_map(Value::OptStr),
        1 => proptest::option::of(-3i64..4).prop_map(Value::OptI64),
        3 => items().prop_map(Value::List),
        1 => items().prop_map(|v| Value::Deque(v.into())),
        1 => items().prop_map(|v| Value::ArcList(v.into())),
        2 => vec(proptest::option::of(short_text()), 0..3).prop_map(Value::ListOpt),
        1 => vec(f64s(), 0..3).prop_map(Value::ListF64),
        1 => vec(i128s(), 0..3).prop_map(Value::ListI128),
        2 => vec(items(), 0..3).prop_map(Value::Nested),
        1 => [short_text(), short_text()].prop_map(Value::Array),
        2 => btree_set(short_text(), 0..4).prop_map(Value::Set),
        1 => btree_set(-3i64..12, 0..4).prop_map(Value::SetI64),
        2 => items().prop_map(Value::HashSet),
        1 => btree_set(items(), 0..3).prop_map(Value::SetOfLists),
        1 => vec(btree_set(short_text(), 0..3), 0..3).prop_map(Value::ListOfSets),
        1 => proptest::option::of(vec(proptest::option::of(short_text()), 0..3))
            .prop_map(|o| Value::RcOptList(Rc::new(o))),
    ]
}

/// Values drawn from a tiny space, where different types often share a
/// canonical string (`"1"` and `1`, `"a,b"` and `["a", "b"]`...).
pub fn tiny_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        4 => tiny_text().prop_map(Value::Str),
        1 => (-1i64..3).prop_map(Value::I64),
        1 => proptest::option::of(tiny_text()).prop_map(Value::OptStr),
        2 => vec(tiny_text(), 0..3).prop_map(Value::List),
        1 => vec(proptest::option::of(tiny_text()), 0..3).prop_map(Value::ListOpt),
        1 => vec(vec(tiny_text(), 0..3), 0..3).prop_map(Value::Nested),
        1 => btree_set(tiny_text(), 0..3).prop_map(Value::Set),
        1 => vec(tiny_text(), 0..3).prop_map(Value::HashSet),
        1 => select(&[0.0, -0.0, 1.0, f64::NAN, 1e21][..]).prop_map(Value::F64),
        1 => any::<bool>().prop_map(Value::Bool),
    ]
}

pub const NAMES: &[&str] = &[
    "a", "b", "A", "title", "a:b", "k=v", "p&q", "a,b", "%", "Ω", "é", "e\u{301}", "y", " ", "😀",
];

pub fn name() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => select(NAMES).prop_map(str::to_owned),
        1 => non_empty(short_text()),
        // From a tiny alphabet, so that names often extend one another with
        // a separator or an escape (`a`, `a=`, `a%`, `a=b`).
        1 => non_empty(tiny_text()),
    ]
}

/// Criteria with unique names (a repeated name keeps its first value).
pub fn unique(criteria: Vec<(String, Value)>) -> Vec<(String, Value)> {
    let mut seen = HashSet::new();
    criteria
        .into_iter()
        .filter(|(name, _)| seen.insert(name.clone()))
        .collect()
}

pub fn criteria() -> impl Strategy<Value = Vec<(String, Value)>> {
    vec((name(), value()), 0..4).prop_map(unique)
}

pub fn tiny_criteria() -> impl Strategy<Value = Vec<(String, Value)>> {
    vec(
        (
            select(&["a", "b", "a:b", "Ω"][..]).prop_map(str::to_owned),
            tiny_value(),
        ),
        0..3,
    )
    .prop_map(unique)
}

pub fn part() -> impl Strategy<Value = Part> {
    prop_oneof![
        5 => non_empty(text()).prop_map(Part::Str),
        1 => any::<u64>().prop_map(Part::U64),
        1 => i128s().prop_map(Part::I128),
        1 => any::<char>().prop_map(Part::Char),
    ]
}

pub fn tiny_part() -> impl Strategy<Value = Part> {
    prop_oneof![
        4 => select(&["a", "b", "a,b", ",", "1", "%2C", "{}", "a%2Cb"][..])
            .prop_map(|s| Part::Str(s.to_owned())),
        1 => (0u64..3).prop_map(Part::U64),
        1 => select(&['a', ',', '1']).prop_map(Part::Char),
    ]
}

pub fn tenant() -> impl Strategy<Value = Tenant> {
    prop_oneof![
        1 => Just(Tenant::Global),
        4 => vec(part(), 1..4).prop_map(Tenant::Parts),
    ]
}

pub fn tiny_tenant() -> impl Strategy<Value = Tenant> {
    prop_oneof![
        1 => Just(Tenant::Global),
        4 => vec(tiny_part(), 1..4).prop_map(Tenant::Parts),
    ]
}

pub fn generation() -> impl Strategy<Value = u64> {
    prop_oneof![3 => 0u64..10, 1 => any::<u64>(), 1 => Just(u64::MAX)]
}

pub fn schema() -> impl Strategy<Value = u32> {
    prop_oneof![3 => 0u32..10, 1 => any::<u32>(), 1 => Just(u32::MAX)]
}

/// Any valid input: non-empty namespace, operation and tenant parts.
pub fn input() -> impl Strategy<Value = Input> {
    (
        non_empty(text()),
        non_empty(text()),
        schema(),
        generation(),
        tenant(),
        any::<bool>(),
        criteria(),
    )
        .prop_map(assemble)
}

/// Inputs from a tiny space.
pub fn tiny_input() -> impl Strategy<Value = Input> {
    let texts = ["lib", "a:b", "a%3Ab", "a", "a,b"];
    (
        select(texts.to_vec()).prop_map(str::to_owned),
        select(texts.to_vec()).prop_map(str::to_owned),
        0u32..2,
        0u64..2,
        tiny_tenant(),
        prop::bool::weighted(0.2),
        tiny_criteria(),
    )
        .prop_map(assemble)
}

/// An input's parts in field order.
type Parts = (String, String, u32, u64, Tenant, bool, Vec<(String, Value)>);

/// The input of `parts`.
fn assemble(
    (namespace, operation, schema, generation, tenant, hash_tag, criteria): Parts,
) -> Input {
    Input {
        namespace,
        operation,
        schema,
        generation,
        tenant,
        hash_tag,
        criteria,
    }
}
