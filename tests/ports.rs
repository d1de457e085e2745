//! The Node.js and Python ports (`ports/js`, `ports/python`) held to this
//! crate: the cases of `tests/data/tenant-patterns.json` against
//! `KeyPattern`, and a few thousand seeded random queries and key texts sent
//! to each port through one subprocess, whose keys, errors and decoded parts
//! must equal the crate's, byte for byte.
//!
//! A port whose interpreter (`node`, `python3`) is missing is skipped with a
//! message, except under `CI=true`, where that is a failure.

mod common;

use std::collections::BTreeMap;
use std::io::Write as _;
use std::process::{Command, Stdio};

use cache_key::{
    CanonicalWriter, CriterionValue, DecodedTenant, KeyBuilder, KeyError, KeyPattern, TenantValue,
    decode,
};
use common::vectors::{Vector, integer, load, vector};
use serde_json::{Value, json};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// A tenant value: a string, or an integer as `{"type": "int", "value": "..."}`.
enum Tenant {
    Text(String),
    Integer(Vector),
}

impl CriterionValue for Tenant {
    fn write_canonical(&self, out: &mut CanonicalWriter<'_>) {
        match self {
            Tenant::Text(text) => out.write_value(text),
            Tenant::Integer(n) => out.write_value(n),
        }
    }
}

/// The integer 0 is an integer tenant's empty value, as every integer type's.
impl TenantValue for Tenant {
    fn is_empty_value(&self) -> bool {
        matches!(
            self,
            Tenant::Integer(Vector::Unsigned(0) | Vector::Signed(0))
        )
    }
}

fn tenant(value: &Value) -> Tenant {
    match value.as_str() {
        Some(text) => Tenant::Text(text.to_owned()),
        None => Tenant::Integer(integer(value["value"].as_str().expect("an integer tenant"))),
    }
}

/// A `Debug` name such as `EmptyTenant { .. }` or `MissingSegment` in snake
/// case, as the ports name their error kinds.
fn snake_kind(debug: &str) -> String {
    let mut kind = String::new();
    for c in debug.chars().take_while(char::is_ascii_alphanumeric) {
        if c.is_ascii_uppercase() && !kind.is_empty() {
            kind.push('_');
        }
        kind.push(c.to_ascii_lowercase());
    }
    kind
}

fn key_error(error: &KeyError) -> Value {
    json!({ "error": snake_kind(&format!("{error:?}")) })
}

/// The crate's answer to a query line: `{"key": ...}` or `{"error": kind}`.
fn build(query: &Value) -> Value {
    let str_of = |field: &str| query[field].as_str().expect(field);
    let mut builder = KeyBuilder::new(str_of("namespace"), str_of("operation"));
    let schema = query["schema"].as_u64().expect("schema");
    let generation = query["generation"].as_str().expect("generation");
    builder
        .schema(schema.try_into().expect("a u32 schema"))
        .generation(generation.parse().expect("a u64 generation"));
    match &query["tenant"] {
        Value::Null => {
            builder.global();
        }
        Value::Array(parts) => {
            for part in parts {
                builder.tenant(tenant(part));
            }
        }
        single => {
            builder.tenant(tenant(single));
        }
    }
    for criterion in query["criteria"].as_array().expect("criteria") {
        builder.criterion(
            criterion[0].as_str().expect("a name"),
            vector(&criterion[1]),
        );
    }
    builder.hash_tag(query["hash_tag"].as_bool().unwrap_or(false));
    if let Some(max) = query["max_len"].as_u64() {
        builder.max_len(max.try_into().expect("a usize"));
    }
    match builder.build() {
        Ok(key) => json!({ "key": key.as_str() }),
        Err(error) => key_error(&error),
    }
}

/// The crate's answer to `{"decode": text}`: the parts, or the error's kind and offset.
fn decoded(text: &str) -> Value {
    match decode(text) {
        Ok(key) => json!({ "decoded": {
            "version": key.format_version(),
            "namespace": key.namespace(),
            "schema": key.schema(),
            "generation": key.generation().to_string(),
            "tenant": match key.tenant() {
                DecodedTenant::Global => Value::Null,
                DecodedTenant::Parts(parts) => json!(parts),
            },
            "hash_tag": key.hash_tag(),
            "operation": key.operation(),
            "criteria": key.criteria().pairs(),
            "digest": key.criteria().digest(),
        }}),
        Err(error) => json!({
            "error": snake_kind(&format!("{:?}", error.kind())),
            "offset": error.offset(),
        }),
    }
}

/// A seeded generator (SplitMix64): the same cases on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn index(&mut self, len: usize) -> usize {
        usize::try_from(self.below(len as u64)).expect("an index")
    }

    fn percent(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.index(items.len())]
    }
}

/// Characters for generated text: the format's separators and the glob's,
/// escapes, control characters, and UTF-8 of every length.
const CHARS: &str = "abzAZ09-_.!~*'():&=,{}%?[]\\ /+\"#\0\n\t\u{7f}\u{80}éß中😀\u{301}\u{2028}\u{fffd}\u{ffff}\u{ff61}\u{10ffff}";

fn any_char(rng: &mut Rng) -> char {
    let at = rng.index(CHARS.chars().count());
    CHARS.chars().nth(at).expect("a character")
}

fn text(rng: &mut Rng, max_len: u64) -> String {
    let len = rng.below(max_len + 1);
    if rng.percent(50) {
        (0..len)
            .map(|_| char::from(b'a' + u8::try_from(rng.below(26)).expect("a letter")))
            .collect()
    } else {
        (0..len).map(|_| any_char(rng)).collect()
    }
}

fn int_text(rng: &mut Rng) -> String {
    match rng.below(5) {
        0 => (rng.below(200) as i64 - 100).to_string(),
        1 => rng.next().to_string(),
        2 => (rng.next() as i64).to_string(),
        3 => {
            let edges: [i128; 10] = [
                0,
                u64::MAX as i128,
                i64::MIN as i128,
                i64::MAX as i128,
                1 << 53,
                (1 << 53) + 1,
                -(1 << 53) - 1,
                i128::MIN,
                i128::MAX,
                -1,
            ];
            rng.pick(&edges).to_string()
        }
        _ => u128::MAX.to_string(),
    }
}

/// A float's decimal text that parses back to it in Rust, JavaScript and Python.
fn float_text(x: f64) -> String {
    if x.is_nan() {
        "NaN".to_owned()
    } else if x.is_infinite() {
        if x > 0.0 { "Infinity" } else { "-Infinity" }.to_owned()
    } else {
        format!("{x:e}")
    }
}

fn float(rng: &mut Rng) -> f64 {
    match rng.below(6) {
        0 => rng.pick(&[
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            0.0,
            -0.0,
            5e-324,
            f64::MIN_POSITIVE,
            f64::MAX,
            1e21,
            1e-7,
            1e-6,
            0.1,
            0.1 + 0.2,
            1_459_304_523_984_103.2,
            137_516_221_151_617.88,
        ]),
        1 => f64::from_bits(rng.next()),
        // N × 2^-k, N of 53 bits and k small: about one in six lies exactly
        // halfway between two shortest forms (one digit more, a final 5).
        2 | 3 => {
            let n = (1u64 << 52) | rng.below(1 << 52);
            let most = if rng.percent(50) { 3 } else { 10 };
            let k = 1 + rng.below(most);
            let x = n as f64 / (1u64 << k) as f64;
            if rng.percent(50) { x } else { -x }
        }
        4 => rng.below(2_000_000) as f64 / 1000.0 - 1000.0,
        _ => (rng.next() >> rng.below(64)) as f64 * if rng.percent(50) { 1e-300 } else { 1.0 },
    }
}

fn value(rng: &mut Rng, depth: u32) -> Value {
    let kinds = if depth < 2 { 11 } else { 8 };
    match rng.below(kinds) {
        0 | 1 => {
            let max_len = if rng.percent(20) { 40 } else { 8 };
            json!({ "type": "str", "value": text(rng, max_len) })
        }
        2 => json!({ "type": "int", "value": int_text(rng) }),
        3 => json!({ "type": "bool", "value": rng.percent(50) }),
        4 | 5 => json!({ "type": "f64", "value": float_text(float(rng)) }),
        6 | 7 => json!({ "type": "none" }),
        kind => {
            let mut items: Vec<Value> = (0..rng.below(5)).map(|_| value(rng, depth + 1)).collect();
            if kind == 10 {
                // Sets with duplicate elements.
                if let Some(first) = items.first().cloned() {
                    items.push(first);
                }
            }
            json!({ "type": if kind == 8 { "list" } else { "set" }, "items": items })
        }
    }
}

fn tenant_part(rng: &mut Rng) -> Value {
    if rng.percent(20) {
        let n = if rng.percent(50) {
            rng.next().to_string()
        } else {
            (rng.next() as i64).to_string()
        };
        json!({ "type": "int", "value": n })
    } else if rng.percent(4) {
        json!("")
    } else {
        json!(text(rng, 10).chars().chain(['t']).collect::<String>())
    }
}

fn query(rng: &mut Rng) -> Value {
    // Generated text gets a final letter, so that empty names come only from
    // their own branch, at a rate that leaves room for the other mistakes.
    let name_or_empty = |rng: &mut Rng| {
        if rng.percent(2) {
            String::new()
        } else {
            text(rng, 10).chars().chain(['n']).collect()
        }
    };
    let namespace = name_or_empty(rng);
    let operation = name_or_empty(rng);
    let any_schema = rng.below(1 << 32);
    let schema = rng.pick(&[0, 1, 2, 7, u64::from(u32::MAX), any_schema]);
    let any_generation = rng.next();
    let generation = rng.pick(&[1, 4, 1 << 53, (1 << 53) + 1, u64::MAX, any_generation]);
    let tenant = match rng.below(100) {
        0..8 => Value::Null,
        8..20 => Value::Array((0..rng.below(4)).map(|_| tenant_part(rng)).collect()),
        _ => tenant_part(rng),
    };
    let mut names: Vec<String> = Vec::new();
    let mut criteria = Vec::new();
    for _ in 0..rng.below(9) {
        let name = match rng.below(100) {
            0..2 => String::new(),
            2..5 if !names.is_empty() => names[rng.index(names.len())].clone(),
            _ => text(rng, 8).chars().chain(['c']).collect(),
        };
        names.push(name.clone());
        criteria.push(json!([name, value(rng, 0)]));
    }
    let mut query = json!({
        "namespace": namespace,
        "operation": operation,
        "schema": schema,
        "generation": generation.to_string(),
        "tenant": tenant,
        "criteria": criteria,
    });
    if rng.percent(20) {
        query["hash_tag"] = json!(true);
    }
    if rng.percent(5) {
        query["max_len"] = json!(30 + rng.below(120));
    }
    query
}

/// `key` changed in one place, mostly into text that is not a key.
fn mutated(rng: &mut Rng, key: &str) -> String {
    let mut chars: Vec<char> = key.chars().collect();
    let at = rng.index(chars.len() + 1);
    match rng.below(7) {
        0 => chars.insert(at, any_char(rng)),
        1 if at < chars.len() => {
            chars.remove(at);
        }
        2 if at < chars.len() => chars[at] = any_char(rng),
        3 => chars.truncate(at),
        // Lowercase hex in the escapes.
        4 => return key.to_lowercase(),
        // A summary of the other length: 16 digits are format 1, 32 format 2.
        5 => {
            if let Some(start) = key.find(":c_") {
                let digest = &key[start + 3..];
                let other = if digest.len() == 16 {
                    format!("{digest}{digest}")
                } else {
                    digest[..16].to_owned()
                };
                return format!("{}{other}", &key[..start + 3]);
            }
            chars.insert(at, ':');
        }
        _ => chars.insert(at, rng.pick(&[':', '%', ',', '&', '=', '{', '}'])),
    }
    chars.into_iter().collect()
}

/// The request lines and the crate's answers: random queries, then the keys
/// they gave and changed copies of them to decode.
fn cases() -> (Vec<Value>, Vec<Value>) {
    const QUERIES: usize = 3000;
    let mut rng = Rng(0x5eed_0019);
    let queries: Vec<Value> = (0..QUERIES).map(|_| query(&mut rng)).collect();
    let built: Vec<Value> = queries.iter().map(build).collect();
    let mut texts = Vec::new();
    for answer in &built {
        if let Some(key) = answer["key"].as_str() {
            texts.push(key.to_owned());
            texts.push(mutated(&mut rng, key));
        }
    }
    let decodes: Vec<Value> = texts.iter().map(|text| json!({ "decode": text })).collect();
    let answers = texts.iter().map(|text| decoded(text));
    let requests = queries.into_iter().chain(decodes).collect();
    (requests, built.into_iter().chain(answers).collect())
}

/// Checks that the cases reach what they are meant to: summarized and plain
/// keys, every builder error, many decode errors.
fn check_coverage(requests: &[Value], answers: &[Value]) {
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for (request, answer) in requests.iter().zip(answers) {
        let what = if request.get("decode").is_some() {
            "decode"
        } else {
            "build"
        };
        let outcome = match (answer["key"].as_str(), answer["error"].as_str()) {
            (Some(key), _) if key.contains(":c_") => "summarized".to_owned(),
            (Some(_), _) => "key".to_owned(),
            (None, Some(error)) => error.to_owned(),
            (None, None) => "decoded".to_owned(),
        };
        *counts.entry(format!("{what} {outcome}")).or_default() += 1;
    }
    println!("cases: {counts:?}");
    for expected in [
        "build key",
        "build summarized",
        "build empty_tenant",
        "build duplicate_criterion",
        "build empty_criterion_name",
        "build empty_namespace",
        "build empty_operation",
        "build too_long",
        "decode decoded",
    ] {
        assert!(
            counts.get(expected).is_some_and(|&n| n >= 10),
            "fewer than 10 cases of {expected}: {counts:?}"
        );
    }
    let decode_outcomes = counts.keys().filter(|k| k.starts_with("decode ")).count();
    assert!(
        decode_outcomes >= 12,
        "few kinds of decode errors: {counts:?}"
    );
}

/// Whether a port's interpreter can run here; under `CI=true` it must.
fn available(program: &str) -> bool {
    let found = Command::new(program)
        .arg("--version")
        .output()
        .is_ok_and(|output| output.status.success());
    if !found {
        let ci = std::env::var("CI").is_ok_and(|ci| ci == "true");
        assert!(!ci, "`{program}` is missing: CI must test the ports");
        eprintln!("skipped: `{program}` is not installed, so its port is not compared");
    }
    found
}

/// Runs a port once over every request line and returns its answer lines.
fn run_port(program: &str, args: &[&str], requests: &[Value]) -> Vec<Value> {
    let mut input = String::new();
    for request in requests {
        input.push_str(&request.to_string());
        input.push('\n');
    }
    let mut child = Command::new(program)
        .args(args)
        .current_dir(ROOT)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|err| panic!("cannot start {program}: {err}"));
    let mut stdin = child.stdin.take().expect("stdin");
    // Written from a thread: the port answers while it reads, and a full
    // stdout pipe would otherwise stop both sides.
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let output = child.wait_with_output().expect("the port's output");
    writer
        .join()
        .expect("the writer")
        .expect("writing the requests");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "{program} {args:?} failed:\n{stderr}"
    );
    let stdout = String::from_utf8(output.stdout).expect("UTF-8 answers");
    stdout
        .lines()
        .map(|line| serde_json::from_str(line).expect("a JSON answer"))
        .collect()
}

/// Compares a port's answers with the crate's.
fn compare(port: &str, requests: &[Value], expected: &[Value], got: &[Value]) {
    assert_eq!(
        got.len(),
        expected.len(),
        "{port} answered {} of {} lines",
        got.len(),
        expected.len()
    );
    let mut differences = Vec::new();
    for ((request, expected), got) in requests.iter().zip(expected).zip(got) {
        if got != expected {
            differences.push(format!("{request}\n  crate: {expected}\n  {port}: {got}"));
        }
    }
    assert!(
        differences.is_empty(),
        "{} of {} answers from {port} differ from the crate's; the first ones:\n{}",
        differences.len(),
        expected.len(),
        differences
            .iter()
            .take(12)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
    println!(
        "{port}: {} answers, all equal to the crate's",
        expected.len()
    );
}

fn compare_port(port: &str, program: &str, args: &[&str]) {
    if !available(program) {
        return;
    }
    let (requests, expected) = cases();
    check_coverage(&requests, &expected);
    let got = run_port(program, args, &requests);
    compare(port, &requests, &expected, &got);
}

#[test]
fn the_node_port_builds_and_decodes_as_the_crate_does() {
    compare_port("node", "node", &["ports/js/cli.mjs"]);
}

#[test]
fn the_python_port_builds_and_decodes_as_the_crate_does() {
    compare_port(
        "python",
        "python3",
        &["ports/python/cache_key.py", "--batch"],
    );
}

/// Redis's glob matching for what patterns use: `*`, `?` and `\x`.
fn glob_matches(glob: &[u8], text: &[u8]) -> bool {
    match glob.split_first() {
        None => text.is_empty(),
        Some((b'*', rest)) => (0..=text.len()).any(|skip| glob_matches(rest, &text[skip..])),
        Some((b'?', rest)) => !text.is_empty() && glob_matches(rest, &text[1..]),
        Some((b'\\', [c, rest @ ..])) => text.first() == Some(c) && glob_matches(rest, &text[1..]),
        Some((c, rest)) => text.first() == Some(c) && glob_matches(rest, &text[1..]),
    }
}

/// The pattern a case of `tenant-patterns.json` describes.
fn pattern(case: &Value) -> Result<KeyPattern, KeyError> {
    let namespace = case["namespace"].as_str().expect("namespace");
    let mut pattern = match case.get("tenant") {
        None => KeyPattern::namespace(namespace),
        Some(Value::Null) => KeyPattern::global(namespace),
        Some(Value::Array(parts)) => {
            KeyPattern::compound_tenant(namespace, parts.iter().map(tenant))?
        }
        Some(single) => KeyPattern::tenant(namespace, tenant(single))?,
    };
    if let Some(operation) = case["operation"].as_str() {
        pattern = pattern.with_operation(operation);
    }
    if let Some(schema) = case["schema"].as_u64() {
        pattern = pattern.with_schema(schema.try_into().expect("a u32 schema"));
    }
    if let Some(generation) = case["generation"].as_u64() {
        pattern = pattern.with_generation(generation);
    }
    Ok(pattern.with_hash_tag(case["hash_tag"].as_bool().unwrap_or(false)))
}

#[test]
fn the_tenant_pattern_cases_hold_for_the_crate() {
    let data: Value = load("tenant-patterns.json");
    let cases = data["cases"].as_array().expect("cases");
    let mut failures = Vec::new();
    let mut keys = 0;
    for (i, case) in cases.iter().enumerate() {
        let pattern = match (pattern(case), case["error"].as_str()) {
            (Ok(pattern), None) => pattern,
            (Err(error), Some(expected)) => {
                if key_error(&error)["error"] != expected {
                    failures.push(format!("case {i}: {error:?}, expected {expected}"));
                }
                continue;
            }
            (got, _) => {
                failures.push(format!("case {i}: {got:?}, expected {}", case["error"]));
                continue;
            }
        };
        let glob = pattern.glob();
        if glob != case["glob"].as_str().expect("glob") {
            failures.push(format!("case {i}: glob {glob}, expected {}", case["glob"]));
        }
        for expected in case["keys"].as_array().expect("keys") {
            keys += 1;
            let key = expected["key"].as_str().expect("key");
            let matches = pattern.matches(key);
            let by_glob = glob_matches(glob.as_bytes(), key.as_bytes());
            if matches != expected["matches"] || by_glob != expected["glob_matches"] {
                failures.push(format!(
                    "case {i}: {key}: matches {matches}, glob {by_glob}; expected {expected}"
                ));
            }
            // The glob is a first filter: it never misses a key in the scope.
            assert!(!matches || by_glob, "case {i}: {glob} misses {key}");
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(keys >= 50, "only {keys} keys in the tenant-pattern cases");
}
