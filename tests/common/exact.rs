//! Values as exactly as the three languages hold them, for the exact-values
//! contract (WIRE-FORMAT.md, "Exact values"): a JSON tree whose integers
//! are integers, whose floats are their bits and whose text may hold a lone
//! surrogate (which only the ports can hold); a generator of such trees over
//! every range the contract names; the rules by which each language's
//! writer refuses one; and what each reader may read for what was written.
//!
//! The exact form, as JSON (the ports' `fromSpec` / `from_spec`, `toSpec` /
//! `to_spec`): `["null"]`, `["bool", b]`, `["int", "digits"]`, `["float",
//! "16 hex digits of its bits"]`, `["str", text]`, `["utf16", [code
//! units]]`, `["arr", [...]]`, `["obj", [[key, value], ...]]`.

use std::collections::BTreeSet;
use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};
use serde_json::{Value, json};

/// Text, or UTF-16 code units holding a lone surrogate (not Unicode text).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Text {
    Utf8(String),
    Utf16(Vec<u16>),
}

/// A JSON value as a writer holds it.
#[derive(Debug, Clone, PartialEq)]
pub enum Tree {
    Null,
    Bool(bool),
    Int(i128),
    Float(f64),
    Str(Text),
    Arr(Vec<Tree>),
    Obj(Vec<(Text, Tree)>),
}

/// A language of the contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Language {
    Rust,
    Node,
    Python,
}

impl Language {
    pub const ALL: [Language; 3] = [Language::Rust, Language::Node, Language::Python];

    pub fn name(self) -> &'static str {
        match self {
            Language::Rust => "rust",
            Language::Node => "node",
            Language::Python => "python",
        }
    }
}

/// 2^53 - 1: the largest integer every double below it is exact for.
pub const MAX_SAFE: i128 = (1 << 53) - 1;

impl Tree {
    pub fn spec(&self) -> Value {
        match self {
            Tree::Null => json!(["null"]),
            Tree::Bool(b) => json!(["bool", b]),
            Tree::Int(n) => json!(["int", n.to_string()]),
            Tree::Float(f) => json!(["float", format!("{:016x}", f.to_bits())]),
            Tree::Str(text) => text_spec(text),
            Tree::Arr(items) => json!(["arr", items.iter().map(Tree::spec).collect::<Vec<_>>()]),
            Tree::Obj(fields) => json!([
                "obj",
                fields
                    .iter()
                    .map(|(key, value)| json!([text_spec(key), value.spec()]))
                    .collect::<Vec<_>>()
            ]),
        }
    }

    /// The tree of an exact form; `None` for anything else.
    pub fn from_spec(spec: &Value) -> Option<Tree> {
        let body = spec.get(1);
        Some(match spec.get(0)?.as_str()? {
            "null" => Tree::Null,
            "bool" => Tree::Bool(body?.as_bool()?),
            "int" => Tree::Int(body?.as_str()?.parse().ok()?),
            "float" => Tree::Float(f64::from_bits(
                u64::from_str_radix(body?.as_str()?, 16).ok()?,
            )),
            "str" | "utf16" => Tree::Str(text_of(spec)?),
            "arr" => Tree::Arr(
                (body?.as_array()?.iter())
                    .map(Tree::from_spec)
                    .collect::<Option<_>>()?,
            ),
            "obj" => Tree::Obj(
                (body?.as_array()?.iter())
                    .map(|pair| Some((text_of(pair.get(0)?)?, Tree::from_spec(pair.get(1)?)?)))
                    .collect::<Option<_>>()?,
            ),
            _ => return None,
        })
    }
}

fn text_spec(text: &Text) -> Value {
    match text {
        Text::Utf8(text) => json!(["str", text]),
        Text::Utf16(units) => json!(["utf16", units]),
    }
}

fn text_of(spec: &Value) -> Option<Text> {
    let body = spec.get(1)?;
    match spec.get(0)?.as_str()? {
        "str" => Some(Text::Utf8(body.as_str()?.to_owned())),
        "utf16" => Some(Text::Utf16(
            (body.as_array()?.iter())
                .map(|unit| u16::try_from(unit.as_u64()?).ok())
                .collect::<Option<_>>()?,
        )),
        _ => None,
    }
}

/// The Rust writer: integers as `i64` or `u64` (the contract's range),
/// floats as `f64`. A tree holding what Rust cannot hold (a lone
/// surrogate, an integer past 64 bits) is never given to it.
impl Serialize for Tree {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::Error as _;
        match self {
            Tree::Null => serializer.serialize_unit(),
            Tree::Bool(b) => serializer.serialize_bool(*b),
            Tree::Int(n) => match (i64::try_from(*n), u64::try_from(*n)) {
                (Ok(n), _) => serializer.serialize_i64(n),
                (_, Ok(n)) => serializer.serialize_u64(n),
                _ => Err(S::Error::custom("an integer past 64 bits")),
            },
            Tree::Float(f) => serializer.serialize_f64(*f),
            Tree::Str(Text::Utf8(text)) => serializer.serialize_str(text),
            Tree::Str(Text::Utf16(_)) => Err(S::Error::custom("a lone surrogate")),
            Tree::Arr(items) => {
                let mut seq = serializer.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(item)?;
                }
                seq.end()
            }
            Tree::Obj(fields) => {
                let mut map = serializer.serialize_map(Some(fields.len()))?;
                for (key, value) in fields {
                    match key {
                        Text::Utf8(key) => map.serialize_entry(key, value)?,
                        Text::Utf16(_) => return Err(S::Error::custom("a lone surrogate")),
                    }
                }
                map.end()
            }
        }
    }
}

/// The Rust reader: each JSON number as serde_json gives it (an integer as
/// an integer, anything with a fraction or an exponent as an `f64`).
impl<'de> Deserialize<'de> for Tree {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Tree, D::Error> {
        deserializer.deserialize_any(TreeVisitor)
    }
}

struct TreeVisitor;

impl<'de> Visitor<'de> for TreeVisitor {
    type Value = Tree;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_unit<E: de::Error>(self) -> Result<Tree, E> {
        Ok(Tree::Null)
    }

    fn visit_bool<E: de::Error>(self, b: bool) -> Result<Tree, E> {
        Ok(Tree::Bool(b))
    }

    fn visit_i64<E: de::Error>(self, n: i64) -> Result<Tree, E> {
        Ok(Tree::Int(n.into()))
    }

    fn visit_u64<E: de::Error>(self, n: u64) -> Result<Tree, E> {
        Ok(Tree::Int(n.into()))
    }

    fn visit_f64<E: de::Error>(self, f: f64) -> Result<Tree, E> {
        Ok(Tree::Float(f))
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<Tree, E> {
        Ok(Tree::Str(Text::Utf8(text.to_owned())))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Tree, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(Tree::Arr(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Tree, A::Error> {
        let mut fields = Vec::new();
        while let Some((key, value)) = map.next_entry::<String, Tree>()? {
            fields.push((Text::Utf8(key), value));
        }
        Ok(Tree::Obj(fields))
    }
}

// ---------------------------------------------------------------------------
// The rules: what a writer refuses, and what a reader reads
// ---------------------------------------------------------------------------

/// The rules by which `writer` refuses `tree` (WIRE-FORMAT.md, "Exact
/// values"): each one the tree breaks; empty when it is stored.
pub fn refusals(tree: &Tree, writer: Language) -> BTreeSet<&'static str> {
    let mut rules = BTreeSet::new();
    walk_rules(tree, writer, &mut rules);
    rules
}

fn walk_rules(tree: &Tree, writer: Language, rules: &mut BTreeSet<&'static str>) {
    let text = |text: &Text, rules: &mut BTreeSet<&'static str>| {
        if matches!(text, Text::Utf16(_)) {
            rules.insert("lone_surrogate");
        }
    };
    match tree {
        Tree::Null | Tree::Bool(_) => {}
        Tree::Int(n) => {
            if !(i128::from(i64::MIN)..=i128::from(u64::MAX)).contains(n) {
                rules.insert("integer_range");
            }
        }
        Tree::Float(f) if !f.is_finite() => {
            rules.insert("non_finite");
        }
        Tree::Float(f) => {
            // JavaScript writes these as digits, which others read as integers.
            if writer == Language::Node
                && f.fract() == 0.0
                && f.abs() > MAX_SAFE as f64
                && f.abs() < 1e21
            {
                rules.insert("inexact_integer");
            }
        }
        Tree::Str(t) => text(t, rules),
        Tree::Arr(items) => items
            .iter()
            .for_each(|item| walk_rules(item, writer, rules)),
        Tree::Obj(fields) => {
            for (key, value) in fields {
                text(key, rules);
                walk_rules(value, writer, rules);
            }
        }
    }
}

/// `tree` with each number `change` gives another form for changed.
fn map_numbers(tree: &Tree, change: &impl Fn(&Tree) -> Option<Tree>) -> Tree {
    match tree {
        Tree::Arr(items) => Tree::Arr(items.iter().map(|item| map_numbers(item, change)).collect()),
        Tree::Obj(fields) => Tree::Obj(
            (fields.iter())
                .map(|(key, value)| (key.clone(), map_numbers(value, change)))
                .collect(),
        ),
        leaf => change(leaf).unwrap_or_else(|| leaf.clone()),
    }
}

/// The tree `writer` holds for `tree`: JavaScript has one number type, so
/// a float that is a safe integer (not -0) is an integer there, written as
/// one.
pub fn held(tree: &Tree, writer: Language) -> Tree {
    map_numbers(tree, &|leaf| match leaf {
        Tree::Float(f)
            if writer == Language::Node
                && f.fract() == 0.0
                && f.abs() <= MAX_SAFE as f64
                && !(*f == 0.0 && f.is_sign_negative()) =>
        {
            Some(Tree::Int(*f as i128))
        }
        _ => None,
    })
}

/// What `reader` holds when it reads `tree`: JavaScript's Numbers are
/// floats, so a safe integer reads there as a float of its value.
pub fn read_form(tree: &Tree, reader: Language) -> Tree {
    map_numbers(tree, &|leaf| match leaf {
        Tree::Int(n) if reader == Language::Node && n.abs() <= MAX_SAFE => {
            Some(Tree::Float(*n as f64))
        }
        _ => None,
    })
}

/// Whether `reader` read `read` for `written` (as its writer held it):
/// floats bit for bit, integers exactly, fields in any order; a JavaScript
/// reader holds every number within ±(2^53 - 1) as a Number (a float),
/// past it as a BigInt (an integer).
pub fn reads_as(written: &Tree, read: &Tree, reader: Language) -> bool {
    match (written, read) {
        (Tree::Int(n), Tree::Float(f)) if reader == Language::Node && n.abs() <= MAX_SAFE => {
            f.to_bits() == (*n as f64).to_bits()
        }
        (Tree::Float(a), Tree::Float(b)) => a.to_bits() == b.to_bits(),
        (Tree::Arr(a), Tree::Arr(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(a, b)| reads_as(a, b, reader))
        }
        (Tree::Obj(a), Tree::Obj(b)) => {
            let (mut a, mut b) = (a.iter().collect::<Vec<_>>(), b.iter().collect::<Vec<_>>());
            a.sort_by(|x, y| x.0.cmp(&y.0));
            b.sort_by(|x, y| x.0.cmp(&y.0));
            a.len() == b.len()
                && a.iter()
                    .zip(&b)
                    .all(|(a, b)| a.0 == b.0 && reads_as(&a.1, &b.1, reader))
        }
        (a, b) => a == b,
    }
}

// ---------------------------------------------------------------------------
// The generator
// ---------------------------------------------------------------------------

/// SplitMix64: one seed, one sequence.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn pick<T: Clone>(&mut self, items: &[T]) -> T {
        items[usize::try_from(self.below(items.len() as u64)).expect("an index")].clone()
    }
}

/// A float: its bits at random (every exponent: subnormals, NaN and the
/// infinities at their share, 1 in 2,048 each), or one of the values that
/// break readers (-0.0, the subnormal extremes, integers near 2^53, 2^64 and
/// 1e21, decimals such as 0.41 that fast parsers round the wrong way).
fn float(rng: &mut Rng) -> f64 {
    const EDGES: [f64; 14] = [
        -0.0,
        0.0,
        5e-324,
        -2.225_073_858_507_201e-308,
        f64::MIN_POSITIVE,
        f64::MAX,
        f64::MIN,
        9_007_199_254_740_992.0,
        9_007_199_254_740_994.0,
        -9_007_199_254_740_991.0,
        18_446_744_073_709_551_616.0,
        1e21,
        999_999_999_999_999_900_000.0,
        1.0,
    ];
    match rng.below(10) {
        0..=5 => f64::from_bits(rng.next()),
        6 => rng.pick(&EDGES),
        // Sums of hundredths and quotients: what arithmetic gives.
        7 => (rng.below(10_000) as f64) * 0.01,
        8 => (rng.below(100_000) as f64) / ((rng.below(99) + 1) as f64),
        _ => (rng.next() >> rng.below(64)) as f64 * if rng.below(2) == 0 { 1.0 } else { -1.0 },
    }
}

/// An integer near 0, 2^53 or 2^64 (either side), or of any 64-bit value;
/// past 64 bits only for a port (Rust holds no such value).
fn integer(rng: &mut Rng, port: bool) -> i128 {
    let near = |rng: &mut Rng, at: i128| at + i128::from(rng.below(5)) - 2;
    match rng.below(8) {
        0 => i128::from(rng.below(1000)) - 500,
        1 => near(rng, MAX_SAFE + 1),
        2 => -near(rng, MAX_SAFE + 1),
        3 => near(rng, i128::from(u64::MAX)).min(if port {
            i128::MAX
        } else {
            i128::from(u64::MAX)
        }),
        4 => near(rng, i128::from(i64::MIN)).max(if port {
            i128::MIN
        } else {
            i128::from(i64::MIN)
        }),
        5 => i128::from(rng.next() as i64),
        _ => i128::from(rng.next()),
    }
}

/// Text: ASCII, escapes JSON must write (quotes, controls), accents, CJK,
/// astral characters (emoji, U+10FFFF); for a port, 1 in 20 holds a lone
/// surrogate.
fn text(rng: &mut Rng, port: bool) -> Text {
    const PIECES: [&str; 14] = [
        "a",
        "Z",
        " ",
        "\"",
        "\\",
        "\n",
        "\u{1}",
        "\u{7f}",
        "é",
        "ğ",
        "書",
        "😀",
        "\u{10ffff}",
        "𝄞",
    ];
    let text: String = (0..rng.below(8)).map(|_| rng.pick(&PIECES)).collect();
    if !port || rng.below(20) != 0 {
        return Text::Utf8(text);
    }
    let mut units: Vec<u16> = text.encode_utf16().collect();
    let at = usize::try_from(rng.below(units.len() as u64 + 1)).expect("an index");
    units.insert(at, rng.pick(&[0xd800, 0xdbff, 0xdc00, 0xdfff]));
    Text::Utf16(units)
}

/// A random tree, nested at most `depth` levels more; for the ports (`port`)
/// with what only they can hold (lone surrogates, integers past 64 bits).
pub fn tree(rng: &mut Rng, depth: u32, port: bool) -> Tree {
    let kinds = if depth == 0 { 6 } else { 8 };
    match rng.below(kinds) {
        0 => Tree::Null,
        1 => Tree::Bool(rng.below(2) == 0),
        2 => Tree::Int(integer(rng, port)),
        3 | 4 => Tree::Float(float(rng)),
        5 => Tree::Str(text(rng, port)),
        6 => Tree::Arr(
            (0..rng.below(5))
                .map(|_| tree(rng, depth - 1, port))
                .collect(),
        ),
        _ => {
            let mut fields: Vec<(Text, Tree)> = Vec::new();
            for _ in 0..rng.below(5) {
                let key = text(rng, port);
                // One field per key: every language's objects are maps.
                if fields.iter().all(|(taken, _)| *taken != key) {
                    fields.push((key, tree(rng, depth - 1, port)));
                }
            }
            Tree::Obj(fields)
        }
    }
}
