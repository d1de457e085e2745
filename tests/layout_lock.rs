//! `cache_key::registry::check_lock` on a real crate: a package written under
//! the target directory, with one query type per kind of layout change, built
//! and tested with cargo as a user's crate is. Its first build compiles
//! cache-key in a target directory of its own (as trybuild does); the later
//! ones recompile the small crate only.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The query types before the change. Each type but `Unchanged` and `Gone`
/// gets one kind of layout change in [`CHANGED`].
const BEFORE: &str = r#"
use cache_key::{CacheKey, Criteria};

#[derive(Criteria)]
pub struct Page { #[criterion] pub page: u32 }

#[derive(CacheKey)]
#[cache_key(namespace = "shop")]
pub struct NewCriterion { #[tenant] pub shop: u32, #[criterion] pub q: String }

#[derive(CacheKey)]
#[cache_key(namespace = "shop")]
pub struct RenamedCriterion { #[tenant] pub shop: u32, #[criterion] pub q: String }

#[derive(CacheKey)]
#[cache_key(namespace = "shop")]
pub struct Normalized { #[tenant] pub shop: u32, #[criterion] pub q: String }

#[derive(CacheKey)]
#[cache_key(namespace = "shop")]
pub struct TenantType { #[tenant] pub shop: u32, #[criterion] pub q: String }

#[derive(CacheKey)]
#[cache_key(namespace = "shop")]
pub struct CompoundOrder { #[tenant] pub org: String, #[tenant] pub repo: String }

#[derive(CacheKey)]
#[cache_key(namespace = "shop")]
pub struct RenameAll { #[tenant] pub shop: u32, #[criterion] pub year_from: u16 }

#[derive(CacheKey)]
#[cache_key(namespace = "shop")]
pub struct Flattened { #[tenant] pub shop: u32, #[criterion(flatten)] pub page: Page }

#[derive(CacheKey)]
#[cache_key(namespace = "shop")]
pub struct HashTag { #[tenant] pub shop: u32 }

#[derive(CacheKey)]
#[cache_key(namespace = "shop")]
pub struct MaxLen { #[tenant] pub shop: u32 }

#[derive(CacheKey)]
#[cache_key(namespace = "shop", value = Vec<String>, ttl = "5m")]
pub struct ValueType { #[tenant] pub shop: u32 }

#[derive(CacheKey)]
#[cache_key(namespace = "shop", value = Vec<String>, ttl = "5m")]
pub struct Ttl { #[tenant] pub shop: u32 }

#[derive(CacheKey)]
#[cache_key(namespace = "shop")]
pub struct Unchanged { #[tenant] pub shop: u32, #[criterion] pub q: String }

#[derive(CacheKey)]
#[cache_key(namespace = "shop")]
pub struct Gone { #[tenant] pub shop: u32 }
"#;

/// Every type of [`BEFORE`] with one change (`SCHEMA` stands for the schema
/// attribute: nothing, or a bump), `Gone` removed and `Fresh` added.
const CHANGED: &str = r#"
use cache_key::{CacheKey, Criteria};

#[derive(Criteria)]
pub struct Page { #[criterion] pub page: u32, #[criterion] pub per_page: u32 }

#[derive(CacheKey)]
#[cache_key(namespace = "shop" SCHEMA)]
pub struct NewCriterion { #[tenant] pub shop: u32, #[criterion] pub q: String, #[criterion] pub page: u32 }

#[derive(CacheKey)]
#[cache_key(namespace = "shop" SCHEMA)]
pub struct RenamedCriterion { #[tenant] pub shop: u32, #[criterion(rename = "query")] pub q: String }

#[derive(CacheKey)]
#[cache_key(namespace = "shop" SCHEMA)]
pub struct Normalized { #[tenant] pub shop: u32, #[criterion(trim, lowercase)] pub q: String }

#[derive(CacheKey)]
#[cache_key(namespace = "shop" SCHEMA)]
pub struct TenantType { #[tenant] pub shop: u64, #[criterion] pub q: String }

#[derive(CacheKey)]
#[cache_key(namespace = "shop" SCHEMA)]
pub struct CompoundOrder { #[tenant] pub repo: String, #[tenant] pub org: String }

#[derive(CacheKey)]
#[cache_key(namespace = "shop", rename_all = "camelCase" SCHEMA)]
pub struct RenameAll { #[tenant] pub shop: u32, #[criterion] pub year_from: u16 }

#[derive(CacheKey)]
#[cache_key(namespace = "shop" SCHEMA)]
pub struct Flattened { #[tenant] pub shop: u32, #[criterion(flatten)] pub page: Page }

#[derive(CacheKey)]
#[cache_key(namespace = "shop", hash_tag SCHEMA)]
pub struct HashTag { #[tenant] pub shop: u32 }

#[derive(CacheKey)]
#[cache_key(namespace = "shop", max_len = 250 SCHEMA)]
pub struct MaxLen { #[tenant] pub shop: u32 }

#[derive(CacheKey)]
#[cache_key(namespace = "shop", value = Vec<u64>, ttl = "5m" SCHEMA)]
pub struct ValueType { #[tenant] pub shop: u32 }

#[derive(CacheKey)]
#[cache_key(namespace = "shop", value = Vec<String>, ttl = "10m" SCHEMA)]
pub struct Ttl { #[tenant] pub shop: u32 }

#[derive(CacheKey)]
#[cache_key(namespace = "shop")]
pub struct Unchanged { #[tenant] pub shop: u32, #[criterion] pub q: String }

#[derive(CacheKey)]
#[cache_key(namespace = "shop")]
pub struct Fresh { #[tenant] pub shop: u32 }
"#;

const LOCK_TEST: &str = r#"
#[cfg(test)]
#[test]
fn key_layouts_are_reviewed() {
    if let Err(error) = cache_key::registry::check_lock("cache-keys.lock") {
        panic!("{error}");
    }
}
"#;

/// The changed types, each with a line its report must show.
const EXPECTED: &[(&str, &str)] = &[
    ("NewCriterion", "    + criterion page = page: u32"),
    (
        "RenamedCriterion",
        "    - criterion q = q: String\n    + criterion query = q: String",
    ),
    (
        "Normalized",
        "    + criterion q = q: String, trim, lowercase",
    ),
    (
        "TenantType",
        "    - tenant shop: u32\n    + tenant shop: u64",
    ),
    (
        "CompoundOrder",
        "    - tenant org: String\n      tenant repo: String\n    + tenant org: String",
    ),
    ("RenameAll", "    + criterion yearFrom = year_from: u16"),
    (
        "Flattened",
        "    - flatten page: Page (page)\n    + flatten page: Page (page, per_page)",
    ),
    ("HashTag", "    + hash_tag"),
    ("MaxLen", "    + max_len = 250"),
    (
        "ValueType",
        "    - value Vec<String>, ttl 300000 ms\n    + value Vec<u64>, ttl 300000 ms",
    ),
    ("Ttl", "    + value Vec<String>, ttl 600000 ms"),
];

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
                 [dependencies]\ncache-key = {{ path = {:?} }}\n\n[workspace]\n",
                cache_key.display().to_string()
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
    krate.write(BEFORE);

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
    assert!(recorded.contains("[lock_crate::Ttl]\nnamespace = shop\noperation = ttl\nschema = 1\ntenant shop: u32\nvalue Vec<String>, ttl 300000 ms\n"), "{recorded}");

    let (passed, out) = krate.test(false);
    assert!(passed, "an unchanged layout passes: {out}");
    assert_eq!(krate.lock().as_deref(), Some(recorded.as_str()));

    // Every kind of change at once, the schemas as they were.
    krate.write(&CHANGED.replace(" SCHEMA", ""));
    let (passed, out) = krate.test(false);
    assert!(!passed, "{out}");
    assert!(
        out.contains("13 query type(s) differ from the key layout lock cache-keys.lock"),
        "{out}"
    );
    for (name, lines) in EXPECTED {
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
    krate.write(&CHANGED.replace(" SCHEMA", ", schema = 2"));
    let (passed, out) = krate.test(false);
    assert!(!passed, "{out}");
    for (name, _) in EXPECTED {
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
