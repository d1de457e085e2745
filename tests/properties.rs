//! Proof under adversarial input: property tests of the key format.
//!
//! Every property runs at least [`CASES`] generated cases. The expected keys
//! come from a *model* written here from `KEY-FORMAT.md` alone (escaping,
//! canonical strings, criteria sorting, the 48-byte summary), not from the
//! crate's code, and the generators lean on the characters that break naive
//! key builders: the separators `: & = , % { } *`, whitespace, control
//! characters, emoji, combining marks and text that already looks escaped.
//!
//! | property | what it proves |
//! | --- | --- |
//! | `the_key_is_the_models_text`, `the_summary_starts_at_49_escaped_bytes` | builder keys are byte for byte the model's key |
//! | `*_are_injective` | model equal <=> keys equal (criteria, tenants, namespaces/operations, whole keys) |
//! | `insertion_order_*`, `call_order_*`, `hash_sets_*`, `none_absent_and_empty_*` | equal queries give one key |
//! | `every_key_decodes_to_its_parts`, `no_value_changes_the_number_of_segments` | structure: `decode` gives back the parts; 5 `:`-separated segments, 6 with criteria; escaped atoms only |
//! | `*_never_panics*` | builder, derive and decoder never panic, whatever the input; whatever `decode` accepts writes out as itself and is what `KeyBuilder` makes from its parts |
//!
//! A failure prints the minimal (shrunk) input. Failures are not persisted to
//! `proptest-regressions/`: copy the printed input into a fixed `#[test]`.
//! `PROPTEST_CASES=N` does not lower the case count (it is fixed here), but
//! `PROPTEST_RNG_SEED` can be used to replay a run.

#[path = "common/shortest_digits.rs"]
mod shortest_digits;

use std::cell::Cell;
use std::collections::hash_map::RandomState;
use std::collections::{BTreeSet, HashSet, VecDeque};
use std::fmt::Debug;
use std::num::NonZero;
use std::rc::Rc;
use std::sync::Arc;

use cache_key::{
    CacheKey, DecodedCriteria, DecodedKey, DecodedTenant, Key, KeyBuilder, KeyError, decode,
};
use proptest::collection::{btree_set, vec};
use proptest::prelude::*;
use proptest::sample::select;
use proptest::test_runner::{TestCaseError, TestRunner};
use sha2::{Digest, Sha256};

/// Cases per property.
const CASES: u32 = 10_000;

/// Criteria up to this many bytes (escaped) are kept as they are in the key.
const MAX_PLAIN: usize = 48;

// ---------------------------------------------------------------------------
// Running properties
// ---------------------------------------------------------------------------

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: CASES,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// Runs `test` on `CASES` values of `strategy`; on failure, panics with the
/// minimal failing input.
fn check<S>(name: &str, strategy: S, test: impl Fn(S::Value) -> Result<(), TestCaseError>)
where
    S: Strategy,
    S::Value: Debug,
{
    let mut runner = TestRunner::new(config());
    if let Err(error) = runner.run(&strategy, test) {
        panic!("property `{name}` failed: {error}");
    }
}

/// Fails the current case with `message` unless `condition` holds.
macro_rules! ensure {
    ($condition:expr, $($message:tt)+) => {
        if !$condition {
            return Err(TestCaseError::fail(format!($($message)+)));
        }
    };
}

// ---------------------------------------------------------------------------
// The model: KEY-FORMAT.md, written independently of the crate
// ---------------------------------------------------------------------------

/// `esc`: every byte but `A-Z a-z 0-9 - _ . ! ~ * ' ( )` as `%XX`, uppercase.
fn esc(text: &str) -> String {
    let mut out = String::new();
    for &byte in text.as_bytes() {
        if unreserved(byte) {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

fn unreserved(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || b"-_.!~*'()".contains(&byte)
}

/// A list's canonical string: each element with `%` as `%25` and `,` as `%2C`,
/// joined with `,`.
fn model_list(items: impl IntoIterator<Item = String>) -> String {
    items
        .into_iter()
        .map(|item| item.replace('%', "%25").replace(',', "%2C"))
        .collect::<Vec<_>>()
        .join(",")
}

/// A set's canonical string: the elements' canonical strings sorted by bytes,
/// deduplicated, written as a list.
fn model_set(items: impl IntoIterator<Item = String>) -> String {
    let sorted: BTreeSet<String> = items.into_iter().collect();
    model_list(sorted)
}

/// ECMA-262 `Number::toString`, from the shortest round-trip digits that
/// Rust's `Display` prints in positional notation.
fn model_float(positional: String, is_nan: bool, is_infinite: bool) -> String {
    if is_nan {
        return "NaN".into();
    }
    let (sign, magnitude) = match positional.strip_prefix('-') {
        Some(rest) => ("-", rest),
        None => ("", positional.as_str()),
    };
    if is_infinite {
        return format!("{sign}Infinity");
    }
    let (int, frac) = magnitude.split_once('.').unwrap_or((magnitude, ""));
    let all = format!("{int}{frac}");
    let leading = all.bytes().take_while(|&b| b == b'0').count();
    let digits = all[leading..].trim_end_matches('0');
    if digits.is_empty() {
        return "0".into(); // both zeros
    }
    // value = 0.digits × 10^n
    let n = int.len() as i64 - leading as i64;
    let k = digits.len() as i64;
    let body = if k <= n && n <= 21 {
        format!("{digits}{}", "0".repeat((n - k) as usize))
    } else if 0 < n && n <= 21 {
        format!("{}.{}", &digits[..n as usize], &digits[n as usize..])
    } else if -6 < n && n <= 0 {
        format!("0.{}{digits}", "0".repeat((-n) as usize))
    } else {
        let e = n - 1;
        let mantissa = if k == 1 {
            digits.to_owned()
        } else {
            format!("{}.{}", &digits[..1], &digits[1..])
        };
        format!("{mantissa}e{}{}", if e < 0 { '-' } else { '+' }, e.abs())
    };
    format!("{sign}{body}")
}

fn model_f64(x: f64) -> String {
    model_float(positional(x), x.is_nan(), x.is_infinite())
}

fn model_f32(x: f32) -> String {
    model_float(positional(x), x.is_nan(), x.is_infinite())
}

/// The shortest digits, ties to even, in positional notation; NaN, the
/// infinities and zeros as Rust's `Display` writes them.
fn positional<T>(x: T) -> String
where
    T: std::fmt::Display + std::fmt::LowerExp + Copy + std::str::FromStr + PartialEq + Into<f64>,
{
    let wide: f64 = x.into();
    if !wide.is_finite() || wide == 0.0 {
        return format!("{x}");
    }
    let magnitude = format!("{x:e}");
    let magnitude: T = magnitude
        .trim_start_matches('-')
        .parse()
        .ok()
        .expect("a float");
    let (digits, n) = shortest_digits::shortest_digits(magnitude);
    let sign = if wide < 0.0 { "-" } else { "" };
    let k = digits.len() as i32;
    if n <= 0 {
        format!("{sign}0.{}{digits}", "0".repeat((-n) as usize))
    } else if n >= k {
        format!("{sign}{digits}{}", "0".repeat((n - k) as usize))
    } else {
        format!("{sign}{}.{}", &digits[..n as usize], &digits[n as usize..])
    }
}

// ---------------------------------------------------------------------------
// Generated inputs
// ---------------------------------------------------------------------------

/// A criterion value of one of the types the format's table lists.
#[derive(Debug, Clone)]
enum Value {
    Str(String),
    BoxedStr(Box<str>),
    Char(char),
    U8(u8),
    I8(i8),
    U64(u64),
    I64(i64),
    U128(u128),
    I128(i128),
    Usize(usize),
    Isize(isize),
    NonZeroU32(NonZero<u32>),
    Bool(bool),
    F64(f64),
    F32(f32),
    OptStr(Option<String>),
    OptI64(Option<i64>),
    List(Vec<String>),
    Deque(VecDeque<String>),
    ArcList(Arc<[String]>),
    ListOpt(Vec<Option<String>>),
    ListF64(Vec<f64>),
    ListI128(Vec<i128>),
    Nested(Vec<Vec<String>>),
    Array([String; 2]),
    Set(BTreeSet<String>),
    SetI64(BTreeSet<i64>),
    /// Built into a `HashSet` with a fresh `RandomState` each time it is used.
    HashSet(Vec<String>),
    SetOfLists(BTreeSet<Vec<String>>),
    ListOfSets(Vec<BTreeSet<String>>),
    RcOptList(Rc<Option<Vec<Option<String>>>>),
}

impl Value {
    /// The canonical string, by the model.
    fn model(&self) -> String {
        let texts = |items: &[String]| items.to_vec();
        match self {
            Value::Str(s) => s.clone(),
            Value::BoxedStr(s) => s.to_string(),
            Value::Char(c) => c.to_string(),
            Value::U8(n) => n.to_string(),
            Value::I8(n) => n.to_string(),
            Value::U64(n) => n.to_string(),
            Value::I64(n) => n.to_string(),
            Value::U128(n) => n.to_string(),
            Value::I128(n) => n.to_string(),
            Value::Usize(n) => n.to_string(),
            Value::Isize(n) => n.to_string(),
            Value::NonZeroU32(n) => n.to_string(),
            Value::Bool(b) => b.to_string(),
            Value::F64(x) => model_f64(*x),
            Value::F32(x) => model_f32(*x),
            Value::OptStr(o) => o.clone().unwrap_or_default(),
            Value::OptI64(o) => o.map(|n| n.to_string()).unwrap_or_default(),
            Value::List(items) => model_list(texts(items)),
            Value::Deque(items) => model_list(items.iter().cloned()),
            Value::ArcList(items) => model_list(texts(items)),
            Value::ListOpt(items) => {
                model_list(items.iter().map(|o| o.clone().unwrap_or_default()))
            }
            Value::ListF64(items) => model_list(items.iter().map(|x| model_f64(*x))),
            Value::ListI128(items) => model_list(items.iter().map(i128::to_string)),
            Value::Nested(items) => model_list(items.iter().map(|inner| model_list(texts(inner)))),
            Value::Array(items) => model_list(texts(items)),
            Value::Set(items) => model_set(items.iter().cloned()),
            Value::SetI64(items) => model_set(items.iter().map(i64::to_string)),
            Value::HashSet(items) => model_set(items.iter().cloned()),
            Value::SetOfLists(items) => {
                model_set(items.iter().map(|inner| model_list(texts(inner))))
            }
            Value::ListOfSets(items) => {
                model_list(items.iter().map(|inner| model_set(inner.iter().cloned())))
            }
            Value::RcOptList(o) => match &**o {
                None => String::new(),
                Some(items) => model_list(items.iter().map(|o| o.clone().unwrap_or_default())),
            },
        }
    }

    /// Adds this value as criterion `name`, passing the concrete Rust type.
    fn add_to(&self, builder: &mut KeyBuilder<'_>, name: &str) {
        match self {
            Value::Str(s) => builder.criterion(name, s.as_str()),
            Value::BoxedStr(s) => builder.criterion(name, s.clone()),
            Value::Char(c) => builder.criterion(name, *c),
            Value::U8(n) => builder.criterion(name, *n),
            Value::I8(n) => builder.criterion(name, *n),
            Value::U64(n) => builder.criterion(name, *n),
            Value::I64(n) => builder.criterion(name, *n),
            Value::U128(n) => builder.criterion(name, *n),
            Value::I128(n) => builder.criterion(name, *n),
            Value::Usize(n) => builder.criterion(name, *n),
            Value::Isize(n) => builder.criterion(name, *n),
            Value::NonZeroU32(n) => builder.criterion(name, *n),
            Value::Bool(b) => builder.criterion(name, *b),
            Value::F64(x) => builder.criterion(name, *x),
            Value::F32(x) => builder.criterion(name, *x),
            Value::OptStr(o) => builder.criterion(name, o.as_deref()),
            Value::OptI64(o) => builder.criterion(name, *o),
            Value::List(items) => builder.criterion(name, items),
            Value::Deque(items) => builder.criterion(name, items),
            Value::ArcList(items) => builder.criterion(name, Arc::clone(items)),
            Value::ListOpt(items) => builder.criterion(name, items.as_slice()),
            Value::ListF64(items) => builder.criterion(name, items),
            Value::ListI128(items) => builder.criterion(name, items),
            Value::Nested(items) => builder.criterion(name, items),
            Value::Array(items) => builder.criterion(name, items),
            Value::Set(items) => builder.criterion(name, items),
            Value::SetI64(items) => builder.criterion(name, items),
            Value::HashSet(items) => {
                let mut set = HashSet::with_hasher(RandomState::new());
                set.extend(items.iter().cloned());
                builder.criterion(name, set)
            }
            Value::SetOfLists(items) => builder.criterion(name, items),
            Value::ListOfSets(items) => builder.criterion(name, items),
            Value::RcOptList(o) => builder.criterion(name, Rc::clone(o)),
        };
    }
}

/// One part of a tenant: text, an integer or a `char`.
#[derive(Debug, Clone)]
enum Part {
    Str(String),
    U64(u64),
    I128(i128),
    Char(char),
}

impl Part {
    fn model(&self) -> String {
        match self {
            Part::Str(s) => s.clone(),
            Part::U64(n) => n.to_string(),
            Part::I128(n) => n.to_string(),
            Part::Char(c) => c.to_string(),
        }
    }

    /// Adds the part; a zero integer is declared a real tenant, since the
    /// model writes it (`ZeroTenant` calls test the refusal).
    fn add_to(&self, builder: &mut KeyBuilder<'_>) {
        const REAL: &str = "0 is a real tenant in these properties";
        match self {
            Part::Str(s) => builder.tenant(s.clone()),
            Part::U64(n) => builder.tenant_allowing_zero(*n, REAL),
            Part::I128(n) => builder.tenant_allowing_zero(*n, REAL),
            Part::Char(c) => builder.tenant(*c),
        };
    }
}

#[derive(Debug, Clone)]
enum Tenant {
    Global,
    /// One part, or the parts of a compound tenant in order (`.tenant(a).tenant(b)`).
    Parts(Vec<Part>),
}

/// Everything a key is made of.
#[derive(Debug, Clone)]
struct Input {
    namespace: String,
    operation: String,
    schema: u32,
    generation: u64,
    tenant: Tenant,
    hash_tag: bool,
    /// Names are unique.
    criteria: Vec<(String, Value)>,
}

/// The canonical form of an input: what the key must be a function of, and
/// nothing else.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Canonical {
    namespace: String,
    operation: String,
    schema: u32,
    generation: u64,
    /// `None` for a global key.
    tenant: Option<Vec<String>>,
    hash_tag: bool,
    /// (name, canonical value), empties dropped, sorted by name bytes.
    pairs: Vec<(String, String)>,
}

impl Input {
    fn builder(&self) -> KeyBuilder<'_> {
        self.builder_calling(&self.steps())
    }

    fn build(&self) -> Result<Key, KeyError> {
        self.builder().build()
    }

    fn canonical(&self) -> Canonical {
        Canonical {
            namespace: self.namespace.clone(),
            operation: self.operation.clone(),
            schema: self.schema,
            generation: self.generation,
            tenant: match &self.tenant {
                Tenant::Global => None,
                Tenant::Parts(parts) => Some(parts.iter().map(Part::model).collect()),
            },
            hash_tag: self.hash_tag,
            pairs: model_pairs(&self.criteria),
        }
    }
}

fn model_pairs(criteria: &[(String, Value)]) -> Vec<(String, String)> {
    let mut pairs: Vec<(String, String)> = criteria
        .iter()
        .map(|(name, value)| (name.clone(), value.model()))
        .filter(|(_, value)| !value.is_empty())
        .collect();
    pairs.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    pairs
}

/// The criteria string of `pairs` before summarizing.
fn model_criteria(pairs: &[(String, String)]) -> String {
    pairs
        .iter()
        .map(|(name, value)| format!("{}={}", esc(name), esc(value)))
        .collect::<Vec<_>>()
        .join("&")
}

fn digest32(criteria: &str) -> String {
    Sha256::digest(criteria.as_bytes())
        .iter()
        .take(16)
        .map(|b| format!("{b:02x}"))
        .collect()
}

impl Canonical {
    fn criteria(&self) -> String {
        model_criteria(&self.pairs)
    }

    fn summarized(&self) -> bool {
        self.criteria().len() > MAX_PLAIN
    }

    /// The key, by the model.
    fn key(&self) -> String {
        let tenant = self
            .tenant
            .as_ref()
            .map(|parts| parts.iter().map(|p| esc(p)).collect::<Vec<_>>().join(","))
            .unwrap_or_default();
        let tenant = if self.hash_tag {
            format!("{{{tenant}}}")
        } else {
            tenant
        };
        let mut key = format!(
            "{}:s{}:g{}:t{tenant}:{}",
            esc(&self.namespace),
            self.schema,
            self.generation,
            esc(&self.operation)
        );
        let criteria = self.criteria();
        if criteria.len() > MAX_PLAIN {
            key.push_str(":c_");
            key.push_str(&digest32(&criteria));
        } else if !criteria.is_empty() {
            key.push(':');
            key.push_str(&criteria);
        }
        key
    }
}

// ---------------------------------------------------------------------------
// Strategies
// ---------------------------------------------------------------------------

/// Pieces of text that break naive keys: every separator, `%` and text that
/// already looks escaped, whitespace, control characters, emoji, a combining
/// mark next to its precomposed look-alike, and a forged criterion.
const NASTY: &[&str] = &[
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
fn tiny_text() -> impl Strategy<Value = String> {
    vec(
        select(&["a", "b", ",", "%", "1", ":", "&", "=", "2C", "{", " ", "é"][..]),
        0..3,
    )
    .prop_map(|pieces| pieces.concat())
}

/// Short adversarial text.
fn nasty_text() -> impl Strategy<Value = String> {
    vec(select(NASTY), 0..4).prop_map(|pieces| pieces.concat())
}

/// Any text: adversarial pieces, arbitrary `char`s (control characters and
/// all), or proptest's arbitrary `String`.
fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => nasty_text(),
        2 => vec(any::<char>(), 0..6).prop_map(String::from_iter),
        1 => any::<String>(),
    ]
}

fn short_text() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => nasty_text(),
        1 => vec(any::<char>(), 0..4).prop_map(String::from_iter),
    ]
}

fn non_empty(strategy: impl Strategy<Value = String>) -> impl Strategy<Value = String> {
    strategy.prop_map(|s| if s.is_empty() { "x".to_owned() } else { s })
}

fn i128s() -> impl Strategy<Value = i128> {
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

fn u128s() -> impl Strategy<Value = u128> {
    prop_oneof![
        3 => 0u128..4,
        1 => any::<u128>(),
        1 => select(vec![u128::MAX, u128::from(u64::MAX), 1 << 53, (1 << 53) + 1]),
    ]
}

fn f64s() -> impl Strategy<Value = f64> {
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

fn f32s() -> impl Strategy<Value = f32> {
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
fn value() -> impl Strategy<Value = Value> {
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
fn tiny_value() -> impl Strategy<Value = Value> {
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

const NAMES: &[&str] = &[
    "a", "b", "A", "title", "a:b", "k=v", "p&q", "a,b", "%", "Ω", "é", "e\u{301}", "y", " ", "😀",
];

fn name() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => select(NAMES).prop_map(str::to_owned),
        1 => non_empty(short_text()),
        // From a tiny alphabet, so that names often extend one another with
        // a separator or an escape (`a`, `a=`, `a%`, `a=b`).
        1 => non_empty(tiny_text()),
    ]
}

/// Criteria with unique names (a repeated name keeps its first value).
fn unique(criteria: Vec<(String, Value)>) -> Vec<(String, Value)> {
    let mut seen = HashSet::new();
    criteria
        .into_iter()
        .filter(|(name, _)| seen.insert(name.clone()))
        .collect()
}

fn criteria() -> impl Strategy<Value = Vec<(String, Value)>> {
    vec((name(), value()), 0..4).prop_map(unique)
}

fn tiny_criteria() -> impl Strategy<Value = Vec<(String, Value)>> {
    vec(
        (
            select(&["a", "b", "a:b", "Ω"][..]).prop_map(str::to_owned),
            tiny_value(),
        ),
        0..3,
    )
    .prop_map(unique)
}

fn part() -> impl Strategy<Value = Part> {
    prop_oneof![
        5 => non_empty(text()).prop_map(Part::Str),
        1 => any::<u64>().prop_map(Part::U64),
        1 => i128s().prop_map(Part::I128),
        1 => any::<char>().prop_map(Part::Char),
    ]
}

fn tiny_part() -> impl Strategy<Value = Part> {
    prop_oneof![
        4 => select(&["a", "b", "a,b", ",", "1", "%2C", "{}", "a%2Cb"][..])
            .prop_map(|s| Part::Str(s.to_owned())),
        1 => (0u64..3).prop_map(Part::U64),
        1 => select(&['a', ',', '1']).prop_map(Part::Char),
    ]
}

fn tenant() -> impl Strategy<Value = Tenant> {
    prop_oneof![
        1 => Just(Tenant::Global),
        4 => vec(part(), 1..4).prop_map(Tenant::Parts),
    ]
}

fn tiny_tenant() -> impl Strategy<Value = Tenant> {
    prop_oneof![
        1 => Just(Tenant::Global),
        4 => vec(tiny_part(), 1..4).prop_map(Tenant::Parts),
    ]
}

fn generation() -> impl Strategy<Value = u64> {
    prop_oneof![3 => 0u64..10, 1 => any::<u64>(), 1 => Just(u64::MAX)]
}

fn schema() -> impl Strategy<Value = u32> {
    prop_oneof![3 => 0u32..10, 1 => any::<u32>(), 1 => Just(u32::MAX)]
}

/// Any valid input: non-empty namespace, operation and tenant parts.
fn input() -> impl Strategy<Value = Input> {
    (
        non_empty(text()),
        non_empty(text()),
        schema(),
        generation(),
        tenant(),
        any::<bool>(),
        criteria(),
    )
        .prop_map(
            |(namespace, operation, schema, generation, tenant, hash_tag, criteria)| Input {
                namespace,
                operation,
                schema,
                generation,
                tenant,
                hash_tag,
                criteria,
            },
        )
}

/// Inputs from a tiny space.
fn tiny_input() -> impl Strategy<Value = Input> {
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
        .prop_map(
            |(namespace, operation, schema, generation, tenant, hash_tag, criteria)| Input {
                namespace,
                operation,
                schema,
                generation,
                tenant,
                hash_tag,
                criteria,
            },
        )
}

/// Two inputs that are mostly the same: `b` is `a` with some parts taken
/// from an independent `c`, so equal canonical forms reached by different
/// routes are frequent, and so are near misses.
fn near_pair() -> impl Strategy<Value = (Input, Input)> {
    (tiny_input(), tiny_input(), any::<u32>(), any::<u32>()).prop_map(|(a, c, low, high)| {
        // Each decision is taken with probability 1/4.
        let pick = |i: u32| (low >> i) & 1 == 1 && (high >> i) & 1 == 1;
        let mut b = a.clone();
        if pick(0) {
            b.namespace = c.namespace.clone();
        }
        if pick(1) {
            b.operation = c.operation.clone();
        }
        if pick(2) {
            b.schema = c.schema;
        }
        if pick(3) {
            b.generation = c.generation;
        }
        if pick(4) {
            b.tenant = c.tenant.clone();
        }
        if pick(5) {
            b.hash_tag = c.hash_tag;
        }
        for (i, criterion) in b.criteria.iter_mut().enumerate() {
            if pick(6 + i as u32)
                && let Some((_, value)) = c.criteria.get(i)
            {
                criterion.1 = value.clone();
            }
        }
        if pick(12) {
            b.criteria = c.criteria.clone();
        }
        if pick(13) {
            b.criteria.reverse();
        }
        if pick(14) {
            b.criteria.pop();
        }
        (a, b)
    })
}

// ---------------------------------------------------------------------------
// Checks shared by several properties
// ---------------------------------------------------------------------------

/// Text written by `esc`: unreserved bytes and `%XX` with uppercase hex only.
fn is_escaped(text: &str) -> bool {
    let bytes = text.as_bytes();
    let hex = |b: Option<&u8>| b.is_some_and(|b| b.is_ascii_digit() || (b'A'..=b'F').contains(b));
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            if !(hex(bytes.get(i + 1)) && hex(bytes.get(i + 2))) {
                return false;
            }
            i += 3;
        } else if unreserved(bytes[i]) {
            i += 1;
        } else {
            return false;
        }
    }
    true
}

/// The key's text splits at its separators into exactly the model's parts,
/// each an escaped atom: no value added or removed a separator.
fn check_layout(key: &str, model: &Canonical) -> Result<(), TestCaseError> {
    let segments: Vec<&str> = key.split(':').collect();
    let has_tail = !model.pairs.is_empty();
    let colons = key.matches(':').count();
    ensure!(
        segments.len() == if has_tail { 6 } else { 5 } && colons == segments.len() - 1,
        "{key:?} has {} segments, expected {}",
        segments.len(),
        if has_tail { 6 } else { 5 }
    );
    ensure!(
        is_escaped(segments[0]) && segments[0] == esc(&model.namespace),
        "namespace segment {:?}",
        segments[0]
    );
    ensure!(
        segments[1] == format!("s{}", model.schema),
        "schema segment"
    );
    ensure!(
        segments[2] == format!("g{}", model.generation),
        "generation segment"
    );
    let mut tenant = segments[3]
        .strip_prefix('t')
        .ok_or_else(|| TestCaseError::fail("tenant segment without `t`"))?;
    if model.hash_tag {
        tenant = tenant
            .strip_prefix('{')
            .and_then(|t| t.strip_suffix('}'))
            .ok_or_else(|| TestCaseError::fail("hash tag not `{...}`"))?;
    }
    ensure!(
        !tenant.contains(['{', '}']),
        "a brace inside the tenant segment of {key:?}"
    );
    match &model.tenant {
        None => ensure!(tenant.is_empty(), "a global key with tenant {tenant:?}"),
        Some(parts) => {
            let atoms: Vec<&str> = tenant.split(',').collect();
            ensure!(
                atoms.len() == parts.len(),
                "{} tenant atoms for {} parts in {key:?}",
                atoms.len(),
                parts.len()
            );
            for atom in atoms {
                ensure!(
                    !atom.is_empty() && is_escaped(atom),
                    "tenant atom {atom:?} in {key:?}"
                );
            }
        }
    }
    ensure!(
        is_escaped(segments[4]) && !segments[4].is_empty(),
        "operation segment {:?}",
        segments[4]
    );
    if has_tail {
        let tail = segments[5];
        if model.summarized() {
            let digest = tail.strip_prefix("c_").unwrap_or("");
            ensure!(
                digest.len() == 32
                    && digest
                        .bytes()
                        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)),
                "summary {tail:?}"
            );
        } else {
            let pairs: Vec<&str> = tail.split('&').collect();
            ensure!(
                pairs.len() == model.pairs.len(),
                "{} pairs in {tail:?}, expected {}",
                pairs.len(),
                model.pairs.len()
            );
            for pair in pairs {
                let atoms: Vec<&str> = pair.split('=').collect();
                ensure!(
                    atoms.len() == 2 && atoms.iter().all(|a| !a.is_empty() && is_escaped(a)),
                    "pair {pair:?} in {key:?}"
                );
            }
        }
    }
    Ok(())
}

/// `decode(key)` gives back exactly the model's parts, and writes out as `key`.
fn check_decodes(key: &str, model: &Canonical) -> Result<(), TestCaseError> {
    let decoded = decode(key).map_err(|e| TestCaseError::fail(format!("{key:?}: {e}")))?;
    ensure!(
        decoded.namespace() == model.namespace,
        "namespace of {key:?}"
    );
    ensure!(decoded.schema() == model.schema, "schema of {key:?}");
    ensure!(
        decoded.generation() == model.generation,
        "generation of {key:?}"
    );
    ensure!(decoded.hash_tag() == model.hash_tag, "hash tag of {key:?}");
    let tenant = match &model.tenant {
        None => DecodedTenant::Global,
        Some(parts) => DecodedTenant::Parts(parts.clone()),
    };
    ensure!(
        *decoded.tenant() == tenant,
        "tenant of {key:?}: {:?}",
        decoded.tenant()
    );
    ensure!(
        decoded.operation() == model.operation,
        "operation of {key:?}"
    );
    let criteria = if model.pairs.is_empty() {
        DecodedCriteria::None
    } else if model.summarized() {
        DecodedCriteria::Digest(digest32(&model.criteria()))
    } else {
        DecodedCriteria::Pairs(model.pairs.clone())
    };
    ensure!(
        *decoded.criteria() == criteria,
        "criteria of {key:?}: {:?}, expected {criteria:?}",
        decoded.criteria()
    );
    ensure!(
        decoded.to_string() == key,
        "{key:?} writes out as {decoded}"
    );
    Ok(())
}

/// A decoded key built again with `KeyBuilder`, when its criteria are not
/// summarized.
fn rebuild(decoded: &DecodedKey) -> Option<Result<Key, KeyError>> {
    let mut builder = KeyBuilder::new(decoded.namespace(), decoded.operation());
    builder
        .schema(decoded.schema())
        .generation(decoded.generation())
        .hash_tag(decoded.hash_tag());
    match decoded.tenant() {
        DecodedTenant::Global => {
            builder.global();
        }
        DecodedTenant::Parts(parts) => {
            for part in parts {
                builder.tenant(part.as_str());
            }
        }
    }
    match decoded.criteria() {
        DecodedCriteria::Digest(_) => return None,
        DecodedCriteria::None => {}
        DecodedCriteria::Pairs(pairs) => {
            for (name, value) in pairs {
                builder.criterion(name.as_str(), value.as_str());
            }
        }
    }
    Some(builder.build())
}

/// Whatever `decode` accepts is a key the format can produce: it writes out
/// as itself, and `KeyBuilder` makes the same key from its parts.
fn check_accepted(text: &str) -> Result<(), TestCaseError> {
    let decoded = match decode(text) {
        Ok(decoded) => decoded,
        Err(error) => {
            let offset = error.offset();
            ensure!(
                offset <= text.len() && text.is_char_boundary(offset),
                "error offset {offset} is not a position in {text:?}: {error}"
            );
            ensure!(!error.to_string().is_empty(), "an empty error message");
            return Ok(());
        }
    };
    {
        ensure!(
            decoded.to_string() == text,
            "decode accepted {text:?} but writes it as {decoded}"
        );
        if let Some(rebuilt) = rebuild(&decoded) {
            let rebuilt = rebuilt.map_err(|e| {
                TestCaseError::fail(format!(
                    "decode accepted {text:?} ({decoded:?}) but its parts give {e:?}"
                ))
            })?;
            ensure!(
                rebuilt.as_str() == text,
                "decode accepted {text:?} but its parts build {rebuilt:?}"
            );
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// The key is the model's text
// ---------------------------------------------------------------------------

#[test]
fn the_key_is_the_models_text() {
    let summarized = Cell::new(0);
    check("the_key_is_the_models_text", input(), |input| {
        let model = input.canonical();
        summarized.set(summarized.get() + usize::from(model.summarized()));
        let key = input
            .build()
            .map_err(|e| TestCaseError::fail(format!("no key: {e:?}")))?;
        let expected = model.key();
        ensure!(key.as_str() == expected, "key {key:?}, model {expected:?}");
        Ok(())
    });
    eprintln!(
        "the_key_is_the_models_text: {} of {CASES} summarized",
        summarized.get()
    );
}

#[test]
fn the_summary_starts_at_49_escaped_bytes() {
    // Criteria strings of 30 to 70 bytes, with escapes straddling the boundary.
    let piece = select(&["x", "xx", "xxxx", "é", ",", "%", "😀", "="][..]);
    let criterion = (
        select(&["q", "a:b", "Ω"][..]).prop_map(str::to_owned),
        vec(piece, 1..20).prop_map(|p| Value::Str(p.concat())),
    );
    let near = vec(criterion, 1..3)
        .prop_map(unique)
        .prop_filter("criteria around 48 bytes", |criteria| {
            (30..=70).contains(&model_criteria(&model_pairs(criteria)).len())
        });
    let lengths = Cell::new([0usize; 2]);
    check("the_summary_starts_at_49_escaped_bytes", near, |criteria| {
        let input = Input {
            namespace: "ns".into(),
            operation: "op".into(),
            schema: 1,
            generation: 1,
            tenant: Tenant::Global,
            hash_tag: false,
            criteria,
        };
        let model = input.canonical();
        let mut seen = lengths.get();
        seen[usize::from(model.summarized())] += 1;
        lengths.set(seen);
        let key = input
            .build()
            .map_err(|e| TestCaseError::fail(format!("no key: {e:?}")))?;
        ensure!(
            key.as_str() == model.key(),
            "{} criteria bytes: key {key:?}, model {:?}",
            model.criteria().len(),
            model.key()
        );
        Ok(())
    });
    let [plain, summarized] = lengths.get();
    eprintln!("the_summary_starts_at_49_escaped_bytes: {plain} plain, {summarized} summarized");
    assert!(
        plain > 1000 && summarized > 1000,
        "{plain} plain, {summarized} summarized"
    );
}

// ---------------------------------------------------------------------------
// 1. Injectivity: model equal <=> keys equal
// ---------------------------------------------------------------------------

/// Counts of an injectivity property, checked at the end: both outcomes must
/// have been exercised, or the property proved little.
#[derive(Default)]
struct Outcomes {
    equal: Cell<usize>,
    different: Cell<usize>,
    summarized: Cell<usize>,
}

impl Outcomes {
    /// Checks `model_a == model_b <=> key_a == key_b`; the converse only when
    /// neither key is summarized (a summary could collide, in theory).
    fn check<M: PartialEq + Debug>(
        &self,
        (model_a, key_a, summarized_a): (M, Key, bool),
        (model_b, key_b, summarized_b): (M, Key, bool),
    ) -> Result<(), TestCaseError> {
        let same_model = model_a == model_b;
        if same_model {
            ensure!(
                key_a == key_b,
                "same canonical form {model_a:?} gave {key_a:?} and {key_b:?}"
            );
        }
        if summarized_a || summarized_b {
            self.summarized.set(self.summarized.get() + 1);
            return Ok(());
        }
        let counter = if same_model {
            &self.equal
        } else {
            &self.different
        };
        counter.set(counter.get() + 1);
        ensure!(
            same_model == (key_a == key_b),
            "COLLISION: canonical forms {model_a:?} and {model_b:?} share the key {key_a:?}"
        );
        Ok(())
    }

    fn report(&self, name: &str) {
        let (equal, different, summarized) = (
            self.equal.get(),
            self.different.get(),
            self.summarized.get(),
        );
        eprintln!(
            "{name}: {equal} equal forms, {different} different, {summarized} skipped (summarized)"
        );
        assert!(
            equal >= CASES as usize / 20 && different >= CASES as usize / 20,
            "{name} exercised too few equal ({equal}) or different ({different}) canonical forms"
        );
    }
}

fn built(input: &Input) -> Result<(Canonical, Key, bool), TestCaseError> {
    let key = input
        .build()
        .map_err(|e| TestCaseError::fail(format!("no key: {e:?}")))?;
    let model = input.canonical();
    let summarized = model.summarized();
    Ok((model, key, summarized))
}

#[test]
fn whole_keys_are_injective() {
    let outcomes = Outcomes::default();
    check("whole_keys_are_injective", near_pair(), |(a, b)| {
        outcomes.check(built(&a)?, built(&b)?)
    });
    outcomes.report("whole_keys_are_injective");
}

#[test]
fn criteria_are_injective() {
    let outcomes = Outcomes::default();
    let one = |criteria: &[(String, Value)]| {
        let input = Input {
            namespace: "ns".into(),
            operation: "op".into(),
            schema: 1,
            generation: 1,
            tenant: Tenant::Global,
            hash_tag: false,
            criteria: criteria.to_vec(),
        };
        let (model, key, summarized) = built(&input)?;
        Ok::<_, TestCaseError>((model.pairs, key, summarized))
    };
    // Tiny criteria collide often; a few arbitrary ones catch the rest.
    let pairs = prop_oneof![
        4 => (tiny_criteria(), tiny_criteria()),
        1 => (criteria(), criteria()),
    ];
    check("criteria_are_injective", pairs, |(a, b)| {
        outcomes.check(one(&a)?, one(&b)?)
    });
    outcomes.report("criteria_are_injective");
}

/// The same tenant, each part written as another type with the same text.
fn equivalent_tenant(tenant: &Tenant) -> Tenant {
    match tenant {
        Tenant::Global => Tenant::Global,
        Tenant::Parts(parts) => Tenant::Parts(
            parts
                .iter()
                .map(|part| {
                    let text = part.model();
                    let mut chars = text.chars();
                    match (text.parse::<u64>(), chars.next(), chars.next()) {
                        (Ok(n), _, _) if !matches!(part, Part::U64(_)) => Part::U64(n),
                        (_, Some(c), None) if !matches!(part, Part::Char(_)) => Part::Char(c),
                        _ => Part::Str(text),
                    }
                })
                .collect(),
        ),
    }
}

#[test]
fn tenants_are_injective() {
    let outcomes = Outcomes::default();
    let one = |tenant: &Tenant| {
        let input = Input {
            namespace: "ns".into(),
            operation: "op".into(),
            schema: 1,
            generation: 1,
            tenant: tenant.clone(),
            hash_tag: false,
            criteria: vec![("q".into(), Value::Str("1".into()))],
        };
        let (model, key, summarized) = built(&input)?;
        Ok::<_, TestCaseError>((model.tenant, key, summarized))
    };
    let pairs = prop_oneof![
        3 => (tiny_tenant(), tiny_tenant()),
        1 => (tenant(), tenant()),
        // The same parts, each written as another type with the same text.
        1 => tiny_tenant().prop_map(|t| (t.clone(), equivalent_tenant(&t))),
        // A compound tenant against one part holding the parts joined by `,`.
        1 => vec(tiny_part(), 1..4).prop_map(|parts| {
            let joined = parts.iter().map(Part::model).collect::<Vec<_>>().join(",");
            (Tenant::Parts(parts), Tenant::Parts(vec![Part::Str(joined)]))
        }),
    ];
    check("tenants_are_injective", pairs, |(a, b)| {
        outcomes.check(one(&a)?, one(&b)?)
    });
    outcomes.report("tenants_are_injective");
}

#[test]
fn namespaces_and_operations_are_injective() {
    let outcomes = Outcomes::default();
    let one = |(namespace, operation): &(String, String)| {
        let input = Input {
            namespace: namespace.clone(),
            operation: operation.clone(),
            schema: 1,
            generation: 1,
            tenant: Tenant::Parts(vec![Part::Str("t".into())]),
            hash_tag: false,
            criteria: vec![],
        };
        let (_, key, summarized) = built(&input)?;
        Ok::<_, TestCaseError>(((namespace.clone(), operation.clone()), key, summarized))
    };
    let word = || {
        prop_oneof![
            4 => select(&["a", "b", "a:b", "a%3Ab", ":", "a:s1", "s1:g1"][..])
                .prop_map(str::to_owned),
            1 => non_empty(text()),
        ]
    };
    let pairs = prop_oneof![
        // Independent words from a tiny set: often equal.
        2 => ((word(), word()), (word(), word())),
        // The same words twice: one key, however they were obtained.
        1 => (word(), word()).prop_map(|pair| (pair.clone(), pair)),
        // The same three words, with the `:` moved from one side to the other.
        1 => (word(), word(), word()).prop_map(|(x, y, z)| {
            ((format!("{x}:{y}"), z.clone()), (x, format!("{y}:{z}")))
        }),
    ];
    check(
        "namespaces_and_operations_are_injective",
        pairs,
        |(a, b)| outcomes.check(one(&a)?, one(&b)?),
    );
    outcomes.report("namespaces_and_operations_are_injective");
}

// The classic collisions, fixed.

fn search(title: &str, author: &str) -> Key {
    KeyBuilder::new("library", "search")
        .tenant("branch-2")
        .criterion("title", title)
        .criterion("author", author)
        .build()
        .unwrap()
}

#[test]
fn a_separator_in_a_value_cannot_forge_a_second_criterion() {
    let two = search("Sand", "Borges");
    let one = search("Sand: Borges", "");
    assert_ne!(two, one);
    assert_eq!(
        two.as_str(),
        "library:s1:g1:tbranch-2:search:author=Borges&title=Sand"
    );
    assert_eq!(
        one.as_str(),
        "library:s1:g1:tbranch-2:search:title=Sand%3A%20Borges"
    );
    // A value carrying a whole forged pair.
    let forged = KeyBuilder::new("library", "search")
        .tenant("branch-2")
        .criterion("author", "Borges&title=Sand")
        .build()
        .unwrap();
    let real = KeyBuilder::new("library", "search")
        .tenant("branch-2")
        .criterion("author", "Borges")
        .criterion("title", "Sand")
        .build()
        .unwrap();
    assert_ne!(forged, real);
    assert_eq!(
        forged.as_str(),
        "library:s1:g1:tbranch-2:search:author=Borges%26title%3DSand"
    );
}

#[test]
fn a_comma_in_a_list_element_is_not_a_second_element() {
    let key = |list: &[&str]| {
        KeyBuilder::new("ns", "op")
            .global()
            .criterion("tags", list)
            .build()
            .unwrap()
    };
    assert_ne!(key(&["a,b"]), key(&["a", "b"]));
    assert_eq!(key(&["a,b"]).as_str(), "ns:s1:g1:t:op:tags=a%252Cb");
    assert_eq!(key(&["a", "b"]).as_str(), "ns:s1:g1:t:op:tags=a%2Cb");
    // An element that looks like an escaped comma.
    assert_ne!(key(&["a%2Cb"]), key(&["a,b"]));
    assert_ne!(key(&["a%2Cb"]), key(&["a", "b"]));
    // A text value equal to the list's canonical string is the same criterion.
    let text = KeyBuilder::new("ns", "op")
        .global()
        .criterion("tags", "a,b")
        .build()
        .unwrap();
    assert_eq!(text, key(&["a", "b"]));
}

#[test]
fn a_comma_in_a_tenant_is_not_a_compound_tenant() {
    let single = KeyBuilder::new("crm", "deals")
        .tenant("a,b")
        .build()
        .unwrap();
    let compound = KeyBuilder::new("crm", "deals")
        .tenant("a")
        .tenant("b")
        .build()
        .unwrap();
    assert_ne!(single, compound);
    assert_eq!(single.as_str(), "crm:s1:g1:ta%2Cb:deals");
    assert_eq!(compound.as_str(), "crm:s1:g1:ta,b:deals");
    let reversed = KeyBuilder::new("crm", "deals")
        .tenant("b")
        .tenant("a")
        .build()
        .unwrap();
    assert_ne!(compound, reversed, "compound tenants keep their order");
    let global = KeyBuilder::new("crm", "deals").global().build().unwrap();
    assert_ne!(global, single);
    assert_eq!(global.as_str(), "crm:s1:g1:t:deals");
}

#[test]
fn a_namespace_or_operation_cannot_forge_segments() {
    let forged = KeyBuilder::new("lib:s1:g1:tbranch-2", "search")
        .tenant("x")
        .build()
        .unwrap();
    assert_eq!(forged.as_str(), "lib%3As1%3Ag1%3Atbranch-2:s1:g1:tx:search");
    let a = KeyBuilder::new("a:b", "c").global().build().unwrap();
    let b = KeyBuilder::new("a", "b:c").global().build().unwrap();
    assert_ne!(a, b);
}

#[derive(CacheKey)]
#[cache_key(namespace = "library", operation = "search")]
struct ClassicSearch<'a> {
    #[tenant]
    branch: &'a str,
    #[criterion]
    title: &'a str,
    #[criterion]
    author: Option<&'a str>,
    #[criterion]
    tags: Vec<&'a str>,
}

#[test]
fn derived_keys_resist_the_classic_collisions() {
    let key = |title, author, tags: &[&'static str]| {
        ClassicSearch {
            branch: "branch-2",
            title,
            author,
            tags: tags.to_vec(),
        }
        .cache_key(4)
        .unwrap()
    };
    let two = key("Sand", Some("Borges"), &[]);
    let one = key("Sand: Borges", None, &[]);
    let forged = key("Sand", Some("x&title=Sand"), &[]);
    assert_ne!(two, one);
    assert_ne!(two, forged);
    assert_eq!(
        two.as_str(),
        "library:s1:g4:tbranch-2:search:author=Borges&title=Sand"
    );
    assert_eq!(
        forged.as_str(),
        "library:s1:g4:tbranch-2:search:author=x%26title%3DSand&title=Sand"
    );
    assert_ne!(key("x", None, &["a,b"]), key("x", None, &["a", "b"]));
    // None, absent and "" are the same query.
    assert_eq!(key("Sand", None, &[]), key("Sand", Some(""), &[""]));
}

// ---------------------------------------------------------------------------
// 2. Canonical equality: one query, one key
// ---------------------------------------------------------------------------

#[test]
fn insertion_order_does_not_change_the_key() {
    let strategy = (input(), any::<bool>()).prop_flat_map(|(input, reverse_too)| {
        let criteria = input.criteria.clone();
        (
            Just(input),
            Just(criteria).prop_shuffle(),
            Just(reverse_too),
        )
    });
    check(
        "insertion_order_does_not_change_the_key",
        strategy,
        |(input, shuffled, reverse_too)| {
            let mut other = input.clone();
            other.criteria = shuffled;
            if reverse_too {
                other.criteria.reverse();
            }
            let (a, b) = (input.build(), other.build());
            ensure!(a == b, "{a:?} != {b:?}");
            Ok(())
        },
    );
}

/// One method call of a `KeyBuilder` chain, for [`Input::builder_calling`].
#[derive(Debug, Clone, Copy)]
enum Step {
    Schema,
    Generation,
    HashTag,
    /// The next tenant part, or `global()`.
    Tenant,
    /// The criterion at this index.
    Criterion(usize),
}

impl Input {
    /// Every call that makes this input's key, in the key format's order:
    /// the settings, the tenant parts (or `global`), the criteria.
    fn steps(&self) -> Vec<Step> {
        let tenant_calls = match &self.tenant {
            Tenant::Global => 1,
            Tenant::Parts(parts) => parts.len(),
        };
        let mut steps = vec![Step::Schema, Step::Generation, Step::HashTag];
        steps.extend(std::iter::repeat_n(Step::Tenant, tenant_calls));
        steps.extend((0..self.criteria.len()).map(Step::Criterion));
        steps
    }

    /// A builder given this input's parts, its methods called in the order
    /// of `steps` (tenant parts still in their order).
    fn builder_calling(&self, steps: &[Step]) -> KeyBuilder<'_> {
        let mut builder = KeyBuilder::new(self.namespace.as_str(), self.operation.as_str());
        let mut parts = match &self.tenant {
            Tenant::Global => [].iter(),
            Tenant::Parts(parts) => parts.iter(),
        };
        for step in steps {
            match *step {
                Step::Schema => {
                    builder.schema(self.schema);
                }
                Step::Generation => {
                    builder.generation(self.generation);
                }
                Step::HashTag => {
                    builder.hash_tag(self.hash_tag);
                }
                Step::Tenant => match (&self.tenant, parts.next()) {
                    (Tenant::Global, _) => {
                        builder.global();
                    }
                    (Tenant::Parts(_), Some(part)) => part.add_to(&mut builder),
                    (Tenant::Parts(_), None) => {}
                },
                Step::Criterion(i) => {
                    let (name, value) = &self.criteria[i];
                    value.add_to(&mut builder, name);
                }
            }
        }
        builder
    }
}

#[test]
fn call_order_does_not_change_the_key() {
    // Settings after parts, tenant parts after criteria: the builder writes
    // the key as parts arrive, so these take its rarer paths.
    let strategy = input().prop_flat_map(|input| {
        let steps = input.steps();
        (Just(input), Just(steps).prop_shuffle())
    });
    check(
        "call_order_does_not_change_the_key",
        strategy,
        |(input, steps)| {
            let expected = input.build();
            let mut shuffled = input.builder_calling(&steps);
            let mut out = String::from("before:");
            let written = shuffled.write_into(&mut out).map(|()| out);
            let built = shuffled.build();
            ensure!(built == expected, "{steps:?}: {built:?} != {expected:?}");
            let expected_text = expected.map(|key| format!("before:{key}"));
            ensure!(
                written == expected_text,
                "{steps:?}: {written:?} != {expected_text:?}"
            );
            Ok(())
        },
    );
}

#[test]
fn hash_sets_give_one_key_whatever_their_order() {
    let strategy = vec(short_text(), 0..6).prop_flat_map(|items| {
        let shuffled = Just(items.clone()).prop_shuffle();
        (Just(items), shuffled)
    });
    check(
        "hash_sets_give_one_key_whatever_their_order",
        strategy,
        |(items, shuffled)| {
            let key = |value: &dyn Fn(&mut KeyBuilder<'static>)| {
                let mut builder = KeyBuilder::new("ns", "op");
                value(builder.tenant("t"));
                builder.build()
            };
            let mut forward = HashSet::with_hasher(RandomState::new());
            forward.extend(items.iter().cloned());
            let mut backward = HashSet::with_hasher(RandomState::new());
            backward.extend(shuffled.iter().cloned());
            let tree: BTreeSet<String> = items.iter().cloned().collect();
            let refs: HashSet<&str> = shuffled.iter().map(String::as_str).collect();
            let a = key(&|b| {
                b.criterion("s", forward.clone());
            });
            let b = key(&|b| {
                b.criterion("s", backward.clone());
            });
            let c = key(&|b| {
                b.criterion("s", tree.clone());
            });
            let d = key(&|b| {
                b.criterion("s", refs.clone());
            });
            ensure!(a == b && b == c && c == d, "{a:?} {b:?} {c:?} {d:?}");
            let mut sorted = items.clone();
            sorted.sort();
            sorted.dedup();
            let list = key(&|b| {
                b.criterion("s", sorted.clone());
            });
            ensure!(
                a == list,
                "a set is its sorted, deduplicated list: {a:?} {list:?}"
            );
            Ok(())
        },
    );
}

/// Every way of saying "no value" that the format drops.
fn add_empty<'a>(mut builder: KeyBuilder<'a>, name: &str, how: u8) -> KeyBuilder<'a> {
    match how {
        0 => &mut builder,
        1 => builder.criterion(name, None::<String>),
        2 => builder.criterion(name, Some("")),
        3 => builder.criterion(name, ""),
        4 => builder.criterion(name, String::new()),
        5 => builder.criterion(name, Vec::<String>::new()),
        6 => builder.criterion(name, vec![""]),
        7 => builder.criterion(name, vec![None::<u8>]),
        8 => builder.criterion(name, BTreeSet::<String>::new()),
        9 => builder.criterion(name, HashSet::from([""])),
        10 => builder.criterion(name, Some(Vec::<u8>::new())),
        11 => builder.criterion(name, [""]),
        12 => builder.criterion(name, vec![Vec::<&str>::new()]),
        13 => builder.criterion(name, BTreeSet::from([None::<&str>, Some("")])),
        _ => builder.criterion(name, None::<Option<i128>>),
    };
    builder
}

#[test]
fn none_absent_and_empty_give_the_same_key() {
    let strategy = (input(), name(), 0u8..15, 0u8..15);
    check(
        "none_absent_and_empty_give_the_same_key",
        strategy,
        |(input, extra, how_a, how_b)| {
            if input.criteria.iter().any(|(name, _)| *name == extra) {
                return Ok(());
            }
            let a = add_empty(input.builder(), &extra, how_a).build();
            let b = add_empty(input.builder(), &extra, how_b).build();
            let base = input.build();
            ensure!(
                a == base && b == base,
                "empty variants {how_a} and {how_b} of {extra:?}: {a:?} {b:?} vs {base:?}"
            );
            Ok(())
        },
    );
}

// ---------------------------------------------------------------------------
// 3. Structure: decode gives back the parts; separators only where they belong
// ---------------------------------------------------------------------------

#[test]
fn every_key_decodes_to_its_parts() {
    let summarized = Cell::new(0);
    check("every_key_decodes_to_its_parts", input(), |input| {
        let (model, key, is_summarized) = built(&input)?;
        summarized.set(summarized.get() + usize::from(is_summarized));
        check_layout(key.as_str(), &model)?;
        check_decodes(key.as_str(), &model)
    });
    eprintln!(
        "every_key_decodes_to_its_parts: {} of {CASES} summarized",
        summarized.get()
    );
}

#[test]
fn no_value_changes_the_number_of_segments() {
    // One criterion whose value is drawn from separators only.
    let separators = vec(
        select(&[":", "&", "=", ",", "{", "}", "%", "%3A", "*"][..]),
        1..12,
    )
    .prop_map(|pieces| pieces.concat());
    let strategy = (
        separators.clone(),
        separators.clone(),
        separators,
        any::<bool>(),
    );
    check(
        "no_value_changes_the_number_of_segments",
        strategy,
        |(value, tenant, namespace, hash_tag)| {
            let with = KeyBuilder::new(namespace.as_str(), namespace.as_str())
                .tenant(tenant.as_str())
                .hash_tag(hash_tag)
                .criterion(value.as_str(), value.as_str())
                .build()
                .map_err(|e| TestCaseError::fail(format!("{e:?}")))?;
            let without = KeyBuilder::new(namespace.as_str(), namespace.as_str())
                .tenant(tenant.as_str())
                .hash_tag(hash_tag)
                .build()
                .map_err(|e| TestCaseError::fail(format!("{e:?}")))?;
            // 6 segments (5 `:`) with criteria, 5 segments (4 `:`) without.
            ensure!(with.as_str().split(':').count() == 6, "{with:?}");
            ensure!(without.as_str().split(':').count() == 5, "{without:?}");
            for key in [&with, &without] {
                let braces = key.as_str().matches(['{', '}']).count();
                ensure!(braces == if hash_tag { 2 } else { 0 }, "{key:?}");
                ensure!(
                    !key.as_str().contains(['&', '=', ',']) || key == &with,
                    "{key:?}"
                );
            }
            ensure!(
                !with.as_str().contains(['&', ',']),
                "one criterion, one tenant part: {with:?}"
            );
            ensure!(with.as_str().matches('=').count() <= 1, "{with:?}");
            Ok(())
        },
    );
}

// ---------------------------------------------------------------------------
// 5. Panics: no input makes the builder, the derive or the decoder panic
// ---------------------------------------------------------------------------

/// Builder calls in any order, valid or not.
#[derive(Debug, Clone)]
enum Call {
    Tenant(Part),
    EmptyTenant,
    /// An integer tenant left at 0, not declared real.
    ZeroTenant,
    Global,
    Criterion(String, Value),
    EmptyName(Value),
}

fn call() -> impl Strategy<Value = Call> {
    prop_oneof![
        3 => part().prop_map(Call::Tenant),
        1 => Just(Call::EmptyTenant),
        1 => Just(Call::ZeroTenant),
        1 => Just(Call::Global),
        6 => (
            prop_oneof![
                3 => select(&["a", "b", "a:b"][..]).prop_map(str::to_owned),
                1 => name(),
            ],
            value(),
        )
            .prop_map(|(n, v)| Call::Criterion(n, v)),
        1 => value().prop_map(Call::EmptyName),
    ]
}

#[test]
fn the_builder_never_panics_and_reports_the_right_mistake() {
    let strategy = (
        text(),
        text(),
        schema(),
        generation(),
        any::<bool>(),
        vec(call(), 0..6),
        proptest::option::of(0usize..120),
    );
    check(
        "the_builder_never_panics_and_reports_the_right_mistake",
        strategy,
        |(namespace, operation, schema, generation, hash_tag, calls, max_len)| {
            let mut builder = KeyBuilder::new(namespace.as_str(), operation.as_str());
            builder
                .schema(schema)
                .generation(generation)
                .hash_tag(hash_tag);
            if let Some(max) = max_len {
                builder.max_len(max);
            }
            let (mut parts, mut global, mut criteria) = (Vec::new(), false, Vec::new());
            let mut possible = Vec::new(); // the mistakes the model sees
            for call in &calls {
                match call {
                    Call::Tenant(part) => {
                        if !global {
                            parts.push(part.model());
                        }
                        if part.model().is_empty() && !global {
                            possible.push("EmptyTenant");
                        }
                        if global {
                            possible.push("TenantAndGlobal");
                        }
                        part.add_to(&mut builder);
                    }
                    Call::EmptyTenant => {
                        if global {
                            possible.push("TenantAndGlobal");
                        } else {
                            possible.push("EmptyTenant");
                            parts.push(String::new());
                        }
                        builder.tenant("");
                    }
                    Call::ZeroTenant => {
                        if global {
                            possible.push("TenantAndGlobal");
                        } else {
                            possible.push("EmptyTenant");
                            parts.push("0".to_owned());
                        }
                        builder.tenant(0u32);
                    }
                    Call::Global => {
                        global = true;
                        if !parts.is_empty() {
                            possible.push("TenantAndGlobal");
                        }
                        builder.global();
                    }
                    Call::Criterion(name, value) => {
                        if criteria.iter().any(|(n, _): &(String, Value)| n == name) {
                            possible.push("DuplicateCriterion");
                        }
                        criteria.push((name.clone(), value.clone()));
                        value.add_to(&mut builder, name);
                    }
                    Call::EmptyName(value) => {
                        possible.push("EmptyCriterionName");
                        value.add_to(&mut builder, "");
                    }
                }
            }
            if parts.is_empty() && !global {
                possible.push("MissingTenant");
            }
            if namespace.is_empty() {
                possible.push("EmptyNamespace");
            }
            if operation.is_empty() {
                possible.push("EmptyOperation");
            }
            let result = builder.build();
            if possible.is_empty() {
                let model = Canonical {
                    namespace: namespace.clone(),
                    operation: operation.clone(),
                    schema,
                    generation,
                    tenant: if global { None } else { Some(parts) },
                    hash_tag,
                    pairs: model_pairs(&criteria),
                };
                let expected = model.key();
                match (result, max_len) {
                    (Err(KeyError::TooLong { len, max }), Some(limit)) => ensure!(
                        max == limit && len == expected.len() && len > limit,
                        "TooLong {{ len: {len}, max: {max} }} for {expected:?}"
                    ),
                    (Ok(key), limit) => {
                        ensure!(key.as_str() == expected, "{key:?} vs model {expected:?}");
                        ensure!(
                            limit.is_none_or(|limit| key.as_str().len() <= limit),
                            "{key:?} is over max_len {limit:?}"
                        );
                    }
                    (Err(error), _) => {
                        return Err(TestCaseError::fail(format!("unexpected {error:?}")));
                    }
                }
            } else {
                let name = match &result {
                    Ok(key) => {
                        return Err(TestCaseError::fail(format!(
                            "expected one of {possible:?}, got {key:?}"
                        )));
                    }
                    Err(KeyError::EmptyTenant { .. }) => "EmptyTenant",
                    Err(KeyError::DuplicateCriterion { .. }) => "DuplicateCriterion",
                    Err(KeyError::EmptyCriterionName { .. }) => "EmptyCriterionName",
                    Err(KeyError::MissingTenant) => "MissingTenant",
                    Err(KeyError::TenantAndGlobal) => "TenantAndGlobal",
                    Err(KeyError::EmptyNamespace) => "EmptyNamespace",
                    Err(KeyError::EmptyOperation) => "EmptyOperation",
                    Err(other) => {
                        return Err(TestCaseError::fail(format!(
                            "expected one of {possible:?}, got {other:?}"
                        )));
                    }
                };
                ensure!(
                    possible.contains(&name),
                    "expected one of {possible:?}, got {result:?}"
                );
            }
            Ok(())
        },
    );
}

/// A derived struct with a compound tenant, every kind of criterion and
/// names that need escaping (and sort differently escaped).
#[derive(CacheKey, Debug, Clone)]
#[cache_key(namespace = "prop:ns", operation = "q&a x")]
struct Derived {
    #[tenant]
    org: String,
    #[tenant]
    role: i64,
    #[criterion]
    title: String,
    #[criterion(rename = "a:b")]
    author: Option<String>,
    #[criterion(rename = "p&q")]
    tags: Vec<String>,
    #[criterion(rename = "Ω")]
    labels: BTreeSet<String>,
    #[criterion(rename = "é")]
    seen: HashSet<String>,
    #[criterion(rename = "Z")]
    score: f64,
    #[criterion]
    big: Option<i128>,
    #[criterion(rename = "e\u{301}")]
    nested: Vec<Option<Vec<String>>>,
    #[criterion(rename = "%")]
    ratio: Option<f32>,
    #[skip]
    #[allow(dead_code)]
    request_id: u64,
}

fn mostly_empty<T: Debug + Clone + Default>(
    strategy: impl Strategy<Value = T>,
) -> impl Strategy<Value = T> {
    prop_oneof![2 => Just(T::default()), 1 => strategy]
}

fn derived() -> impl Strategy<Value = Derived> {
    (
        (
            text(),
            any::<i64>(),
            mostly_empty(short_text()),
            proptest::option::of(short_text()),
        ),
        (
            mostly_empty(vec(short_text(), 0..3)),
            mostly_empty(btree_set(short_text(), 0..3)),
            mostly_empty(vec(short_text(), 0..3)),
        ),
        (
            f64s(),
            proptest::option::weighted(0.3, i128s()),
            mostly_empty(vec(proptest::option::of(vec(short_text(), 0..2)), 0..2)),
            proptest::option::weighted(0.3, f32s()),
            any::<u64>(),
        ),
    )
        .prop_map(
            |(
                (org, role, title, author),
                (tags, labels, seen),
                (score, big, nested, ratio, id),
            )| {
                Derived {
                    org,
                    role,
                    title,
                    author,
                    tags,
                    labels,
                    seen: seen.into_iter().collect(),
                    score,
                    big,
                    nested,
                    ratio,
                    request_id: id,
                }
            },
        )
}

#[test]
fn the_derive_equals_the_builder_and_never_panics() {
    let summarized = Cell::new(0);
    check(
        "the_derive_equals_the_builder_and_never_panics",
        (derived(), generation()),
        |(query, generation)| {
            let derived = query.cache_key(generation);
            let mut out = String::from("prefix|");
            let written = query.write_key(generation, &mut out);
            let reference = KeyBuilder::new("prop:ns", "q&a x")
                .generation(generation)
                .tenant(query.org.as_str())
                .tenant(query.role)
                .criterion("title", query.title.as_str())
                .criterion("a:b", query.author.as_deref())
                .criterion("p&q", &query.tags)
                .criterion("Ω", &query.labels)
                .criterion("é", &query.seen)
                .criterion("Z", query.score)
                .criterion("big", query.big)
                .criterion("e\u{301}", &query.nested)
                .criterion("%", query.ratio)
                .build();
            match (&derived, &reference) {
                (Ok(a), Ok(b)) => {
                    ensure!(a == b, "derive {a:?}, builder {b:?}");
                    ensure!(
                        written.is_ok() && out == format!("prefix|{a}"),
                        "write_key wrote {out:?}"
                    );
                    let decoded = decode(a.as_str())
                        .map_err(|e| TestCaseError::fail(format!("{a:?}: {e}")))?;
                    summarized
                        .set(summarized.get() + usize::from(decoded.criteria().digest().is_some()));
                    ensure!(decoded.to_string() == a.as_str(), "{a:?}");
                }
                (Err(KeyError::EmptyTenant { field }), Err(KeyError::EmptyTenant { .. })) => {
                    ensure!(field == "org", "the empty tenant is named {field:?}");
                    ensure!(
                        written.is_err() && out == "prefix|",
                        "write_key wrote {out:?}"
                    );
                }
                _ => {
                    return Err(TestCaseError::fail(format!(
                        "derive {derived:?}, builder {reference:?}"
                    )));
                }
            }
            Ok(())
        },
    );
    eprintln!(
        "the_derive_equals_the_builder_and_never_panics: {} of {CASES} summarized",
        summarized.get()
    );
}

#[test]
fn derived_field_names_are_what_the_builder_uses() {
    let names: Vec<&str> = Derived::KEY_SCHEMA
        .criteria()
        .iter()
        .map(|c| c.name())
        .collect();
    let mut expected = vec!["title", "a:b", "p&q", "Ω", "é", "Z", "big", "e\u{301}", "%"];
    expected.sort_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
    assert_eq!(names, expected);
}

#[test]
fn decode_never_panics_on_arbitrary_text() {
    let strategy = prop_oneof![
        2 => any::<String>(),
        2 => vec(any::<char>(), 0..40).prop_map(String::from_iter),
        3 => vec(
            select(&[
                ":", "s", "g", "t", "1", "0", "a", "%", "%2", "%2C", "%2c", "%41", "%C3%A9",
                "%C3", "%FF", "{", "}", ",", "&", "=", "c_", "0123456789abcdef", "é", "\0",
            ][..]),
            0..16,
        )
        .prop_map(|pieces| pieces.concat()),
        3 => vec(
            select(&[
                "x", ":s1", ":g1", ":t", ":tb", ":t{", "}", ":op", ":a=1", "&b=2", ":c_",
                "0123456789abcdef", "%", ",", "=",
            ][..]),
            0..10,
        )
        .prop_map(|pieces| pieces.concat()),
    ];
    check("decode_never_panics_on_arbitrary_text", strategy, |text| {
        check_accepted(&text)
    });
}

/// An edit of a valid key.
#[derive(Debug, Clone)]
enum Mutation {
    FlipByte { at: usize, mask: u8 },
    Truncate { at: usize },
    Insert { at: usize, text: &'static str },
    Remove { at: usize },
    Swap { at: usize },
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let at = any::<usize>();
    prop_oneof![
        2 => (at, 1u8..).prop_map(|(at, mask)| Mutation::FlipByte { at, mask }),
        1 => at.prop_map(|at| Mutation::Truncate { at }),
        3 => (
            at,
            select(&[
                "%", ":", "{", "}", ",", "&", "=", "%2", "%25", "%3A", "%41", "%e9", "0", "c_",
                "\u{feff}",
            ][..]),
        )
            .prop_map(|(at, text)| Mutation::Insert { at, text }),
        1 => at.prop_map(|at| Mutation::Remove { at }),
        1 => at.prop_map(|at| Mutation::Swap { at }),
    ]
}

impl Mutation {
    fn apply(&self, key: &str) -> String {
        let mut bytes = key.as_bytes().to_vec();
        let index = |at: usize, len: usize| if len == 0 { 0 } else { at % len };
        match *self {
            Mutation::FlipByte { at, mask } => {
                if !bytes.is_empty() {
                    let i = index(at, bytes.len());
                    bytes[i] ^= mask;
                }
            }
            Mutation::Truncate { at } => bytes.truncate(index(at, bytes.len() + 1)),
            Mutation::Insert { at, text } => {
                let i = index(at, bytes.len() + 1);
                bytes.splice(i..i, text.bytes());
            }
            Mutation::Remove { at } => {
                if !bytes.is_empty() {
                    bytes.remove(index(at, bytes.len()));
                }
            }
            Mutation::Swap { at } => {
                if bytes.len() >= 2 {
                    let i = index(at, bytes.len() - 1);
                    bytes.swap(i, i + 1);
                }
            }
        }
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

#[test]
fn decode_never_panics_on_mutated_keys() {
    let accepted = Cell::new(0);
    check(
        "decode_never_panics_on_mutated_keys",
        (input(), vec(mutation(), 1..4)),
        |(input, mutations)| {
            let key = input
                .build()
                .map_err(|e| TestCaseError::fail(format!("{e:?}")))?;
            let mutated = mutations
                .iter()
                .fold(key.as_str().to_owned(), |text, m| m.apply(&text));
            if decode(&mutated).is_ok() {
                accepted.set(accepted.get() + 1);
            }
            check_accepted(&mutated)
        },
    );
    eprintln!(
        "decode_never_panics_on_mutated_keys: {} of {CASES} mutated keys still decode",
        accepted.get()
    );
}

// ---------------------------------------------------------------------------
// Findings
// ---------------------------------------------------------------------------

/// Every key the builder makes decodes: an empty namespace or operation,
/// which `decode` rejects, is refused when building instead.
#[test]
fn an_empty_namespace_or_operation_is_refused_or_decodes() {
    for (namespace, operation) in [("", "op"), ("ns", ""), ("", "")] {
        let built = KeyBuilder::new(namespace, operation).global().build();
        assert!(
            matches!(
                built,
                Err(KeyError::EmptyNamespace | KeyError::EmptyOperation)
            ),
            "KeyBuilder::new({namespace:?}, {operation:?}) gave {built:?}"
        );
    }
}
