//! Stability: the bytes of keys built from fixed inputs never change within a
//! key format version.
//!
//! `tests/data/golden-keys.txt` holds one line per case (`name<TAB>key`),
//! built from the inputs in [`cases`]. The default run only compares: any
//! difference fails, because a change of key bytes orphans every entry cached
//! in production under the old keys (and breaks sharing a cache with the
//! JavaScript generator or an older deploy).
//!
//! To change keys deliberately (a new format version, which also needs a schema
//! bump for every cached type), update [`FORMAT_VERSION`] and regenerate:
//!
//! ```text
//! CACHE_KEY_BLESS=1 cargo test --workspace --test golden
//! ```
//!
//! then review the diff of `tests/data/golden-keys.txt` line by line.
//! Adding a case is also done by blessing: existing lines must not change.

mod common;

use std::collections::{BTreeMap, BTreeSet, HashSet, VecDeque};
use std::fmt::Write as _;
use std::num::NonZero;

use cache_key::{CacheKey, CanonicalWriter, CriterionValue, Key, KeyBuilder, decode};
use common::fixtures::Search;
use common::vectors::vectors;

/// The key format version the golden file was generated for (KEY-FORMAT.md).
const FORMAT_VERSION: u32 = 2;

const GOLDEN: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/golden-keys.txt");

/// The environment variable that regenerates the golden file.
const BLESS: &str = "CACHE_KEY_BLESS";

// ---------------------------------------------------------------------------
// The fixed inputs
// ---------------------------------------------------------------------------

#[derive(CacheKey)]
#[cache_key(namespace = "crm", operation = "deals", schema = 3)]
struct Deals<'a> {
    #[tenant]
    organization: &'a str,
    #[tenant]
    role: &'a str,
    #[tenant(allow_zero = "visibility 0 is the public level, a real scope")]
    visibility: u8,
    #[criterion]
    stage: &'a str,
}

#[derive(CacheKey)]
#[cache_key(
    namespace = "library",
    global = "the branch directory is public",
    hash_tag
)]
struct BranchDirectory<'a> {
    #[criterion]
    city: Option<&'a str>,
}

#[derive(CacheKey)]
#[cache_key(
    namespace = "shop:svc",
    operation = "list items",
    rename_all = "camelCase"
)]
struct ListItems {
    #[tenant]
    account_id: u64,
    #[criterion]
    tag_names: Vec<String>,
    #[criterion]
    price_max: f64,
    #[criterion]
    in_stock: bool,
    #[criterion]
    categories: BTreeSet<u32>,
}

/// A user type with its own canonical string.
struct Shelf {
    aisle: u16,
    shelf: u8,
}

impl CriterionValue for Shelf {
    fn write_canonical(&self, out: &mut CanonicalWriter<'_>) {
        let _ = write!(out, "{}.{}", self.aisle, self.shelf);
    }
}

fn lib() -> KeyBuilder<'static> {
    let mut builder = KeyBuilder::new("library", "search");
    builder.generation(4).tenant("branch-2");
    builder
}

fn q<V: CriterionValue>(value: V) -> Key {
    lib().criterion("q", value).build().expect("a key")
}

/// Every case: a unique name and the key built from fixed inputs. Names
/// starting `vector-NNN` rebuild case NNN of `tests/data/vectors.json` and must
/// also equal its key.
// Float ties are written exactly: each literal is the double itself.
#[allow(clippy::excessive_precision)]
fn cases() -> Vec<(&'static str, Key)> {
    let ok = |r: Result<Key, cache_key::KeyError>| r.expect("a key");
    let x46 = "x".repeat(46);
    let x47 = "x".repeat(47);
    vec![
        // Conformance vectors (same inputs).
        (
            "vector-000-seed-search",
            ok(lib()
                .criterion("title", "Sand")
                .criterion("author", "Borges")
                .build()),
        ),
        (
            "vector-001-colon-in-value",
            ok(lib()
                .criterion("title", "Sand: Borges")
                .criterion("author", "")
                .build()),
        ),
        (
            "vector-005-eight-criteria-summarized",
            ok(KeyBuilder::new("library", "search")
                .generation(4)
                .tenant("branch-1")
                .criterion("title", "The Disconnected")
                .criterion("author", "Oğuz Atay")
                .criterion("yearFrom", 1970)
                .criterion("yearTo", 1980)
                .criterion("lang", "tr")
                .criterion("status", "on_shelf")
                .criterion("sort", "title")
                .criterion("page", 3)
                .build()),
        ),
        (
            "vector-006-criteria-exactly-48-bytes",
            ok(KeyBuilder::new("library", "search")
                .tenant("branch-1")
                .criterion("q", x46.as_str())
                .build()),
        ),
        (
            "vector-007-criteria-49-bytes-summarized",
            ok(KeyBuilder::new("library", "search")
                .tenant("branch-1")
                .criterion("q", x47.as_str())
                .build()),
        ),
        (
            "vector-079-float-tie-to-even",
            ok(KeyBuilder::new("lib", "q")
                .schema(7)
                .generation(99)
                .tenant("acme:corp")
                .criterion("tags2", -129940939551771.375f64)
                .build()),
        ),
        (
            "vector-163-float-tie-and-none",
            ok(KeyBuilder::new("ünicode", "search")
                .schema(0)
                .generation(99)
                .tenant("42")
                .criterion("year_from", 13444451486531.9375f64)
                .criterion("a_b", None::<&str>)
                .build()),
        ),
        (
            "glob-star-in-tenant",
            ok(KeyBuilder::new("a:b", "q")
                .generation(9007199254740991)
                .tenant("tenant*")
                .build()),
        ),
        (
            "escaped-looking-tenant",
            ok(KeyBuilder::new("user-svc", "op:x")
                .schema(7)
                .generation(4)
                .tenant("t%20x")
                .build()),
        ),
        (
            "dropped-and-byte-sorted",
            ok(KeyBuilder::new("user-svc", "profile")
                .schema(u32::MAX)
                .generation(4)
                .tenant("a,b")
                .criterion("fields", "")
                .criterion("yearFrom7", "=")
                .criterion("Ω", true)
                .criterion("status", None::<&str>)
                .criterion("k=v", 0)
                .build()),
        ),
        (
            "minus-zero-and-infinity-list",
            ok(KeyBuilder::new("lib", "profile")
                .schema(u32::MAX)
                .generation(4)
                .tenant("a&b=c")
                .criterion("a:b8", false)
                .criterion("yearTo", [-0.0, f64::INFINITY])
                .criterion("p&q", "")
                .build()),
        ),
        (
            "i64-min",
            ok(KeyBuilder::new("library", "get/by id")
                .schema(2)
                .tenant("branch-2")
                .criterion("café2", i64::MIN)
                .build()),
        ),
        (
            "list-with-comma-and-empty",
            ok(KeyBuilder::new("x", "list")
                .schema(u32::MAX)
                .generation(4)
                .tenant("v😀f;\\v<l\\")
                .criterion("author", 1)
                .criterion("page", 1)
                .criterion("limit", ["ogh", "li,no", ""])
                .build()),
        ),
        (
            "set-of-text",
            ok(KeyBuilder::new("ünicode", "list")
                .generation(4)
                .global()
                .criterion("k=v", BTreeSet::from(["é", "é", "a", "%"]))
                .criterion("yearFrom1", None::<u8>)
                .build()),
        ),
        (
            "global-no-criteria",
            ok(KeyBuilder::new("user-svc", "list")
                .schema(2)
                .generation(9007199254740991)
                .global()
                .build()),
        ),
        (
            "u64-max",
            ok(KeyBuilder::new("lib", "list")
                .schema(0)
                .generation(4)
                .tenant("branch-3")
                .criterion("a_b6", -1)
                .criterion("title7", u64::MAX)
                .build()),
        ),
        (
            "two-empty-elements",
            ok(KeyBuilder::new("x", "get/by id")
                .schema(0)
                .generation(4)
                .tenant("a,b")
                .criterion("q5", "hnx(文ccgx@")
                .criterion("author", ["", ""])
                .build()),
        ),
        (
            "exponent-plus",
            ok(KeyBuilder::new("a:b", "list")
                .schema(0)
                .generation(4)
                .tenant("a,b")
                .criterion("lang", "ydo0e'aaq")
                .criterion("offset", BTreeSet::from(["", ""]))
                .criterion("p&q", 1e300)
                .criterion("page", 1)
                .build()),
        ),
        (
            "float-list",
            ok(KeyBuilder::new("user-svc", "list")
                .schema(u32::MAX)
                .generation(4)
                .tenant("a,b")
                .criterion("title", None::<u8>)
                .criterion("status", 1970)
                .criterion("yearTo", -1)
                .criterion("offset", vec![-2.5, 1.5, 1e-7])
                .build()),
        ),
        // Derived keys.
        (
            "derive-search",
            ok(Search {
                branch: "branch-2",
                title: "Sand",
                author: Some("Borges"),
                year_from: Some(1970),
                request_id: 7,
            }
            .cache_key(4)),
        ),
        (
            "derive-search-none-dropped",
            ok(Search {
                branch: "branch-2",
                title: "Sand: Borges",
                author: None,
                year_from: None,
                request_id: 8,
            }
            .cache_key(4)),
        ),
        (
            "derive-compound-tenant",
            ok(Deals {
                organization: "acme, inc",
                role: "sales",
                visibility: 2,
                stage: "won",
            }
            .cache_key(3)),
        ),
        (
            "derive-compound-tenant-parts-with-commas",
            ok(Deals {
                organization: "a",
                role: "b,c",
                visibility: 0,
                stage: "",
            }
            .cache_key(1)),
        ),
        (
            "derive-global-hash-tag",
            ok(BranchDirectory {
                city: Some("Ankara"),
            }
            .cache_key(2)),
        ),
        (
            "derive-global-hash-tag-no-criteria",
            ok(BranchDirectory { city: None }.cache_key(2)),
        ),
        (
            "derive-rename-all-collections",
            ok(ListItems {
                account_id: 42,
                tag_names: vec!["red".into(), "a,b".into(), "50%".into()],
                price_max: 19.99,
                in_stock: true,
                categories: BTreeSet::from([10, 2, 33]),
            }
            .cache_key(1)),
        ),
        (
            "derive-rename-all-short",
            ok(ListItems {
                account_id: 1,
                tag_names: vec!["a,b".into()],
                price_max: -0.0,
                in_stock: false,
                categories: BTreeSet::new(),
            }
            .cache_key(1)),
        ),
        (
            "derive-rename-all-summarized",
            ok(ListItems {
                account_id: u64::MAX,
                tag_names: vec!["x".repeat(30)],
                price_max: f64::MAX,
                in_stock: false,
                categories: BTreeSet::new(),
            }
            .cache_key(u64::MAX)),
        ),
        // Escaping.
        ("escape-separators", q(": & = , { } %")),
        ("escape-unreserved-marks", q("A-z_0.9!~*'()")),
        ("escape-space-plus-slash", q("a b+c/d")),
        ("escape-already-escaped", q("%20%2C%25")),
        ("escape-control-chars", q("\0\t\n\r\u{7f}")),
        ("escape-c1-and-nbsp", q("\u{85}\u{a0}")),
        ("escape-emoji", q("😀")),
        ("escape-zwj-sequence", q("👩\u{200d}💻")),
        ("escape-combining-mark", q("e\u{301}")),
        ("escape-precomposed", q("é")),
        ("escape-bom", q("\u{feff}")),
        ("escape-forged-pair", q("x&title=Sand")),
        ("escape-forged-segments", q("x:s2:g9:tother:search")),
        ("escape-hash-tag-braces", q("{branch-1}")),
        // Numbers.
        ("int-u128-max", q(u128::MAX)),
        ("int-i128-min", q(i128::MIN)),
        ("int-zero-negative-nonzero", lib_many()),
        (
            "float-specials",
            q(vec![f64::NAN, f64::INFINITY, f64::NEG_INFINITY, -0.0]),
        ),
        ("float-subnormal-min", q(5e-324)),
        ("float-f64-max", q(f64::MAX)),
        ("float-1e21-and-1e20", q([1e21, 1e20])),
        ("float-1e-6-and-1e-7", q([1e-6, 1e-7])),
        ("float-point-three", q(0.1 + 0.2)),
        ("float-f32-shortest", q([0.1f32, 16777216.0, 3.4028235e38])),
        // Collections.
        ("list-comma-element", q(["a,b"])),
        ("list-two-elements", q(["a", "b"])),
        ("list-percent-element", q(["50%"])),
        ("list-none-elements", q([None, Some(1), None])),
        ("list-nested", q(vec![vec!["a", "b"], vec!["c"]])),
        ("list-nested-comma", q(vec![vec!["a,b"]])),
        ("list-deque", q(VecDeque::from(["z", "y"]))),
        (
            "set-numbers-sorted-as-text",
            q(BTreeSet::from([10, 2, 33, -1])),
        ),
        ("set-hash-dedup", q(HashSet::from(["b", "a", "b", "x y"]))),
        (
            "set-of-lists",
            q(BTreeSet::from([vec!["b"], vec!["a", "c"]])),
        ),
        ("option-some", q(Some("x"))),
        (
            "custom-criterion-value",
            q(Shelf {
                aisle: 12,
                shelf: 3,
            }),
        ),
        // Tenants, scopes and segments.
        (
            "tenant-integer",
            ok(KeyBuilder::new("library", "list").tenant(42u64).build()),
        ),
        (
            "tenant-char-and-nonzero",
            ok(KeyBuilder::new("library", "list")
                .tenant('ğ')
                .tenant(NonZero::new(7u16).expect("nonzero"))
                .build()),
        ),
        (
            "tenant-compound-builder",
            ok(KeyBuilder::new("crm", "deals")
                .tenant("acme")
                .tenant("admin")
                .build()),
        ),
        (
            "tenant-with-comma",
            ok(KeyBuilder::new("crm", "deals").tenant("acme,admin").build()),
        ),
        (
            "tenant-hash-tag",
            ok(lib().hash_tag(true).criterion("title", "Sand").build()),
        ),
        (
            "tenant-hash-tag-compound",
            ok(KeyBuilder::new("crm", "deals")
                .tenant("a")
                .tenant("b")
                .hash_tag(true)
                .build()),
        ),
        (
            "global-hash-tag",
            ok(KeyBuilder::new("crm", "countries")
                .global()
                .hash_tag(true)
                .build()),
        ),
        (
            "schema-and-generation-extremes",
            ok(KeyBuilder::new("ns", "op")
                .schema(u32::MAX)
                .generation(u64::MAX)
                .tenant("t")
                .build()),
        ),
        (
            "schema-and-generation-zero",
            ok(KeyBuilder::new("ns", "op")
                .schema(0)
                .generation(0)
                .tenant("t")
                .build()),
        ),
        (
            "names-escaped-and-byte-sorted",
            ok(KeyBuilder::new("ns", "op")
                .global()
                .criterion("Ω", 1)
                .criterion("a b", 2)
                .criterion("Z", 3)
                .criterion("é", 4)
                .criterion("_", 5)
                .build()),
        ),
    ]
}

fn lib_many() -> Key {
    lib()
        .criterion("zero", 0)
        .criterion("neg", -7i8)
        .criterion("nz", NonZero::new(9u64).expect("nonzero"))
        .build()
        .expect("a key")
}

// ---------------------------------------------------------------------------
// The golden file
// ---------------------------------------------------------------------------

fn render(cases: &[(&str, Key)]) -> String {
    let mut out = format!(
        "# Golden keys of cache-key, key format version {FORMAT_VERSION} (cache-key/KEY-FORMAT.md).\n\
         # One case a line: name, a tab, the key. Inputs: tests/golden.rs.\n\
         # Do not edit by hand. A changed key orphans every entry cached under it in\n\
         # production: it needs a schema bump and a new format version. Regenerate\n\
         # deliberately with `{BLESS}=1 cargo test --workspace --test golden` and review the diff.\n\
         format-version\t{FORMAT_VERSION}\n"
    );
    for (name, key) in cases {
        let _ = writeln!(out, "{name}\t{key}");
    }
    out
}

/// The golden file's format version and its `(name, key)` lines.
fn parse(text: &str) -> (Option<u32>, Vec<(String, String)>) {
    let mut version = None;
    let mut lines = Vec::new();
    for line in text.lines() {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (name, value) = line
            .split_once('\t')
            .unwrap_or_else(|| panic!("golden line without a tab: {line:?}"));
        if name == "format-version" {
            version = Some(value.parse().expect("a format version"));
        } else {
            lines.push((name.to_owned(), value.to_owned()));
        }
    }
    (version, lines)
}

#[test]
fn golden_keys_never_change() {
    let cases = cases();
    if std::env::var_os(BLESS).is_some_and(|v| v == "1") {
        std::fs::write(GOLDEN, render(&cases)).expect("write the golden file");
        eprintln!("{BLESS}=1: wrote {} cases to {GOLDEN}", cases.len());
        return;
    }
    let text = std::fs::read_to_string(GOLDEN).unwrap_or_else(|e| {
        panic!("{GOLDEN}: {e}; generate it with `{BLESS}=1 cargo test --workspace --test golden`")
    });
    let (version, golden) = parse(&text);
    assert_eq!(
        version,
        Some(FORMAT_VERSION),
        "the golden file is for format version {version:?}, these tests for {FORMAT_VERSION}"
    );
    let golden: BTreeMap<String, String> = golden.into_iter().collect();
    let built: BTreeMap<&str, &str> = cases.iter().map(|(n, k)| (*n, k.as_str())).collect();

    let mut problems = Vec::new();
    for (name, key) in &built {
        match golden.get(*name) {
            Some(expected) if expected == key => {}
            Some(expected) => problems.push(format!(
                "  {name}:\n    golden: {expected}\n    now:    {key}"
            )),
            None => problems.push(format!(
                "  {name}: not in the golden file (now {key}); a new case is added by blessing"
            )),
        }
    }
    for name in golden.keys() {
        if !built.contains_key(name.as_str()) {
            problems.push(format!("  {name}: in the golden file, but no longer built"));
        }
    }
    assert!(
        problems.is_empty(),
        "{} of {} golden keys differ:\n{}\n\n\
         A change of key bytes orphans every entry cached in production under the \
         old keys, and breaks sharing a cache with other services (the JavaScript \
         generator) and with the previous deploy. If the change is intended, it is a \
         new key format version: bump FORMAT_VERSION and the format version in \
         KEY-FORMAT.md, bump the schema of every cached type, and regenerate with \
         `{BLESS}=1 cargo test --workspace --test golden`. Otherwise, fix the regression.",
        problems.len(),
        built.len(),
        problems.join("\n")
    );
}

#[test]
fn case_names_are_unique_and_plain() {
    let cases = cases();
    let names: BTreeSet<&str> = cases.iter().map(|(n, _)| *n).collect();
    assert_eq!(names.len(), cases.len(), "a case name is repeated");
    for name in names {
        assert!(
            !name.is_empty() && !name.contains(['\t', '\n', '#']) && name != "format-version",
            "{name:?}"
        );
    }
    assert!(cases.len() >= 60, "only {} cases", cases.len());
}

#[test]
fn every_golden_key_decodes_and_writes_out_as_itself() {
    for (name, key) in cases() {
        let decoded = decode(key.as_str()).unwrap_or_else(|e| panic!("{name}: {key:?}: {e}"));
        assert_eq!(decoded.to_string(), key.as_str(), "{name}");
    }
}

/// The cases named `vector-NNN-...` equal case NNN of the conformance vectors.
#[test]
fn vector_cases_agree_with_the_conformance_vectors() {
    let vectors = vectors();
    let mut checked = 0;
    for (name, key) in cases() {
        let Some(rest) = name.strip_prefix("vector-") else {
            continue;
        };
        let index: usize = rest[..3].parse().expect("vector-NNN");
        assert_eq!(
            Some(key.as_str()),
            vectors[index]["key"].as_str(),
            "{name} differs from conformance case {index}"
        );
        checked += 1;
    }
    assert!(checked >= 7, "{checked}");
}
