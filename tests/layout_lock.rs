//! `cache_key::registry::check_lock` on a real crate: a package written under
//! the target directory, with one query type per kind of layout change, built
//! and tested with cargo as a user's crate is. Its first build compiles
//! cache-key in a target directory of its own (as trybuild does); the later
//! ones recompile the small crate only.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// One kind of layout change: a query type in namespace `shop`, its
/// `#[cache_key]` arguments after the namespace and its fields, before and
/// after the change, and the lines its report must show.
struct Change {
    name: &'static str,
    before: (&'static str, &'static str),
    after: (&'static str, &'static str),
    report: &'static str,
}

const SHOP: &str = "#[tenant] pub shop: u32";

const CHANGES: &[Change] = &[
    Change {
        name: "NewCriterion",
        before: ("", "#[tenant] pub shop: u32, #[criterion] pub q: String"),
        after: (
            "",
            "#[tenant] pub shop: u32, #[criterion] pub q: String, #[criterion] pub page: u32",
        ),
        report: "    + criterion page = page: u32",
    },
    Change {
        name: "RenamedCriterion",
        before: ("", "#[tenant] pub shop: u32, #[criterion] pub q: String"),
        after: (
            "",
            "#[tenant] pub shop: u32, #[criterion(rename = \"query\")] pub q: String",
        ),
        report: "    - criterion q = q: String\n    + criterion query = q: String",
    },
    Change {
        name: "Normalized",
        before: ("", "#[tenant] pub shop: u32, #[criterion] pub q: String"),
        after: (
            "",
            "#[tenant] pub shop: u32, #[criterion(trim, lowercase)] pub q: String",
        ),
        report: "    + criterion q = q: String, trim, lowercase",
    },
    Change {
        name: "TenantType",
        before: ("", "#[tenant] pub shop: u32, #[criterion] pub q: String"),
        after: ("", "#[tenant] pub shop: u64, #[criterion] pub q: String"),
        report: "    - tenant shop: u32\n    + tenant shop: u64",
    },
    Change {
        name: "CompoundOrder",
        before: ("", "#[tenant] pub org: String, #[tenant] pub repo: String"),
        after: ("", "#[tenant] pub repo: String, #[tenant] pub org: String"),
        report: "    - tenant org: String\n      tenant repo: String\n    + tenant org: String",
    },
    Change {
        name: "RenameAll",
        before: (
            "",
            "#[tenant] pub shop: u32, #[criterion] pub year_from: u16",
        ),
        after: (
            ", rename_all = \"camelCase\"",
            "#[tenant] pub shop: u32, #[criterion] pub year_from: u16",
        ),
        report: "    + criterion yearFrom = year_from: u16",
    },
    // `Page` gains a criterion in the changed crate.
    Change {
        name: "Flattened",
        before: (
            "",
            "#[tenant] pub shop: u32, #[criterion(flatten)] pub page: Page",
        ),
        after: (
            "",
            "#[tenant] pub shop: u32, #[criterion(flatten)] pub page: Page",
        ),
        report: "    - flatten page: Page (page)\n    + flatten page: Page (page, per_page)",
    },
    Change {
        name: "HashTag",
        before: ("", SHOP),
        after: (", hash_tag", SHOP),
        report: "    + hash_tag",
    },
    Change {
        name: "MaxLen",
        before: ("", SHOP),
        after: (", max_len = 250", SHOP),
        report: "    + max_len = 250",
    },
    Change {
        name: "ValueType",
        before: (", value = Vec<String>, ttl = \"5m\"", SHOP),
        after: (", value = Vec<u64>, ttl = \"5m\"", SHOP),
        report: "    - value Vec<String>, ttl 300000 ms\n    - value_id = Vec<String>\n    + value Vec<u64>, ttl 300000 ms\n    + value_id = Vec<u64>",
    },
    // The same value type under a declared id: its entries written before
    // are misses, so the change is reviewed like a new value type.
    Change {
        name: "ValueId",
        before: (", value = Vec<String>, ttl = \"5m\"", SHOP),
        after: (
            ", value = Vec<String>, value_id = \"titles-v2\", ttl = \"5m\"",
            SHOP,
        ),
        report: "      value Vec<String>, ttl 300000 ms\n    - value_id = Vec<String>\n    + value_id = titles-v2",
    },
    Change {
        name: "Tagged",
        before: ("", "#[tenant] pub shop: u32, #[criterion] pub product: u64"),
        after: (
            "",
            "#[tenant] pub shop: u32, #[criterion] #[tag = \"product\"] pub product: u64",
        ),
        report: "      criterion product = product: u64\n    + tag product = product",
    },
    // A tag inside the tenant becomes one of every tenant: another counter.
    Change {
        name: "GlobalTag",
        before: (
            "",
            "#[tenant] pub shop: u32, #[criterion] #[tag = \"product\"] pub product: u64",
        ),
        after: (
            "",
            "#[tenant] pub shop: u32, #[criterion] #[tag(name = \"product\", global = \"one catalog\")] pub product: u64",
        ),
        report: "    - tag product = product\n    + tag product = product, global",
    },
    Change {
        name: "ValueTags",
        before: (", value = Vec<Item>, ttl = \"5m\"", SHOP),
        after: (", value = Vec<Item>, ttl = \"5m\", value_tags", SHOP),
        report: "      value_id = Vec<Item>\n    + value_tags",
    },
    Change {
        name: "Ttl",
        before: (", value = Vec<String>, ttl = \"5m\"", SHOP),
        after: (", value = Vec<String>, ttl = \"10m\"", SHOP),
        report: "    + value Vec<String>, ttl 600000 ms",
    },
];

/// A `#[derive(CacheKey)]` struct in namespace `shop`.
fn query_type(name: &str, args: &str, fields: &str) -> String {
    format!(
        "#[derive(CacheKey)]\n#[cache_key(namespace = \"shop\"{args})]\npub struct {name} {{ {fields} }}\n\n"
    )
}

/// The crate before the change: every type of [`CHANGES`] as it was, an
/// `Unchanged` type and a `Gone` one.
fn before() -> String {
    let mut out = String::from(
        "use cache_key::{CacheKey, CacheTags, Criteria};\n\n\
         #[derive(Criteria)]\npub struct Page { #[criterion] pub page: u32 }\n\n\
         #[derive(CacheTags, Clone)]\npub struct Item { #[tag = \"item\"] pub id: u64 }\n\n",
    );
    for change in CHANGES {
        let (args, fields) = change.before;
        out += &query_type(change.name, args, fields);
    }
    out += &query_type(
        "Unchanged",
        "",
        &format!("{SHOP}, #[criterion] pub q: String"),
    );
    out += &query_type("Gone", "", SHOP);
    out
}

/// The crate after: every type of [`CHANGES`] changed and `schema` added to
/// its arguments (`""`, or a bump), `Page` with a second criterion,
/// `Unchanged` as it was, `Gone` removed and `Fresh` added.
fn changed(schema: &str) -> String {
    let mut out = String::from(
        "use cache_key::{CacheKey, CacheTags, Criteria};\n\n\
         #[derive(Criteria)]\npub struct Page { #[criterion] pub page: u32, #[criterion] pub per_page: u32 }\n\n\
         #[derive(CacheTags, Clone)]\npub struct Item { #[tag = \"item\"] pub id: u64 }\n\n",
    );
    for change in CHANGES {
        let (args, fields) = change.after;
        out += &query_type(change.name, &format!("{args}{schema}"), fields);
    }
    out += &query_type(
        "Unchanged",
        "",
        &format!("{SHOP}, #[criterion] pub q: String"),
    );
    out += &query_type("Fresh", "", SHOP);
    out
}

const LOCK_TEST: &str = r#"
#[cfg(test)]
#[test]
fn key_layouts_are_reviewed() {
    if let Err(error) = cache_key::registry::check_lock("cache-keys.lock") {
        panic!("{error}");
    }
}
"#;

struct Crate {
    root: PathBuf,
    target: PathBuf,
}

impl Crate {
    fn new() -> Crate {
        let base = Path::new(env!("CARGO_TARGET_TMPDIR")).join("layout-lock");
        let root = base.join("lock-crate");
        let _ = fs::remove_dir_all(&root);
        fs::create_dir_all(root.join("src")).unwrap();
        let cache_key = Path::new(env!("CARGO_MANIFEST_DIR")).join("cache-key");
        fs::write(
            root.join("Cargo.toml"),
            format!(
                "[package]\nname = \"lock-crate\"\nversion = \"0.0.0\"\nedition = \"2024\"\npublish = false\n\n\
                 [dependencies]\ncache-key = {{ path = {path:?} }}\n\n\
                 [dev-dependencies]\ncache-key = {{ path = {path:?}, features = [\"registry\"] }}\n\n\
                 [workspace]\n",
                path = cache_key.display().to_string()
            ),
        )
        .unwrap();
        // The workspace's versions, so the build needs no registry.
        fs::copy(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.lock"),
            root.join("Cargo.lock"),
        )
        .unwrap();
        Crate {
            root,
            target: base.join("target"),
        }
    }

    fn write(&self, types: &str) {
        fs::write(self.root.join("src/lib.rs"), format!("{types}{LOCK_TEST}")).unwrap();
    }

    fn lock(&self) -> Option<String> {
        fs::read_to_string(self.root.join("cache-keys.lock")).ok()
    }

    /// `cargo test` in the crate: whether it passed, and what it printed.
    fn test(&self, bless: bool) -> (bool, String) {
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let mut command = Command::new(cargo);
        command
            .args(["test", "--lib", "--offline", "--color", "never", "-q"])
            .current_dir(&self.root)
            .env("CARGO_TARGET_DIR", &self.target)
            .env_remove("CACHE_KEY_BLESS");
        if bless {
            command.env("CACHE_KEY_BLESS", "1");
        }
        let output = command.output().expect("cargo runs");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        if !output.status.success() {
            assert!(
                text.contains("key_layouts_are_reviewed"),
                "the crate must build; only its lock test may fail:\n{text}"
            );
        }
        (output.status.success(), text)
    }
}

#[test]
fn a_layout_change_fails_until_its_schema_is_bumped_or_it_is_recorded() {
    let krate = Crate::new();
    krate.write(&before());

    let (passed, out) = krate.test(false);
    assert!(
        !passed && out.contains("no key layout lock at cache-keys.lock"),
        "{out}"
    );
    assert!(out.contains("CACHE_KEY_BLESS=1 cargo test"), "{out}");
    assert_eq!(krate.lock(), None, "a check never writes the lock");

    let (passed, out) = krate.test(true);
    assert!(passed, "{out}");
    let recorded = krate.lock().expect("blessing writes the lock");
    assert!(
        recorded.contains(
            "[lock_crate::Normalized]\nnamespace = shop\noperation = normalized\nschema = 1\n\
             tenant shop: u32\ncriterion q = q: String\n"
        ),
        "{recorded}"
    );
    assert!(
        recorded.contains(
            "[lock_crate::GlobalTag]\nnamespace = shop\noperation = global_tag\nschema = 1\n\
             tenant shop: u32\ncriterion product = product: u64\ntag product = product\n"
        ),
        "{recorded}"
    );
    assert!(recorded.contains("[lock_crate::Ttl]\nnamespace = shop\noperation = ttl\nschema = 1\ntenant shop: u32\nvalue Vec<String>, ttl 300000 ms\nvalue_id = Vec<String>\n"), "{recorded}");

    let (passed, out) = krate.test(false);
    assert!(passed, "an unchanged layout passes: {out}");
    assert_eq!(krate.lock().as_deref(), Some(recorded.as_str()));

    // Every kind of change at once, the schemas as they were.
    krate.write(&changed(""));
    let (passed, out) = krate.test(false);
    assert!(!passed, "{out}");
    assert!(
        out.contains("17 query type(s) differ from the key layout lock cache-keys.lock"),
        "{out}"
    );
    for Change {
        name,
        report: lines,
        ..
    } in CHANGES
    {
        let report = report_of(&out, name);
        assert!(
            report.starts_with(&format!(
                "`lock_crate::{name}`: its key layout changed and its schema stayed 1:"
            )),
            "{name}: {report}"
        );
        assert!(
            report.contains(lines),
            "{name} must show\n{lines}\nin:\n{report}"
        );
        assert!(
            report.contains("either bump its schema, `#[cache_key(schema = 2)]`"),
            "{report}"
        );
        assert!(
            report.contains("expect a cold cache for this type"),
            "{report}"
        );
        assert!(
            report.contains("or, when every key keeps its meaning"),
            "{report}"
        );
    }
    assert!(
        out.contains("`lock_crate::Fresh` is new: review its layout"),
        "{out}"
    );
    assert!(out.contains("    + tenant shop: u32"), "{out}");
    assert!(
        out.contains("`lock_crate::Gone` is in the lock but not in this binary"),
        "{out}"
    );
    assert!(!out.contains("lock_crate::Unchanged`"), "{out}");
    assert_eq!(
        krate.lock().as_deref(),
        Some(recorded.as_str()),
        "a failing check leaves the lock"
    );

    // The same changes, each with its schema bumped: still a diff to record.
    krate.write(&changed(", schema = 2"));
    let (passed, out) = krate.test(false);
    assert!(!passed, "{out}");
    for Change { name, .. } in CHANGES {
        let report = report_of(&out, name);
        assert!(
            report.starts_with(&format!(
                "`lock_crate::{name}`: schema 1 -> 2, its entries written before are unreachable"
            )),
            "{name}: {report}"
        );
        assert!(report.contains("    - schema = 1\n"), "{report}");
        assert!(report.contains("    + schema = 2\n"), "{report}");
        assert!(
            report.contains("record it with CACHE_KEY_BLESS=1 cargo test"),
            "{report}"
        );
    }
    let (passed, out) = krate.test(true);
    assert!(passed, "{out}");
    let blessed = krate.lock().unwrap();
    assert!(blessed.contains("[lock_crate::Fresh]"), "{blessed}");
    assert!(!blessed.contains("[lock_crate::Gone]"), "{blessed}");
    let (passed, out) = krate.test(false);
    assert!(passed, "the re-blessed lock passes: {out}");
}

/// The report of one type in a failed check's output: from its first line to
/// the next blank line.
fn report_of<'a>(out: &'a str, name: &str) -> &'a str {
    let start = out
        .find(&format!("`lock_crate::{name}`: "))
        .unwrap_or_else(|| panic!("no report for {name} in:\n{out}"));
    let rest = &out[start..];
    &rest[..rest.find("\n\n").unwrap_or(rest.len())]
}
