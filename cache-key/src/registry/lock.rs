//! The layout lock: [`check_lock`] compares the key layout of every
//! registered query type with a reviewed text file, so a change that re-keys
//! a type (or changes what its keys mean) shows in review and is decided on.

use std::collections::BTreeMap;
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

use super::entry::{Registered, all};
use crate::schema::Scope;

/// The environment variable that makes [`check_lock`] write the lock.
const BLESS_VAR: &str = "CACHE_KEY_BLESS";

const HEADER: &str = "\
# The key layout of every query type, checked by cache_key::registry::check_lock.
# A changed block changes that type's keys or what they mean: review it as code.
# Record a reviewed change with CACHE_KEY_BLESS=1 cargo test.
";

/// Compares the key layout of every query type registered in this binary
/// with the lock file at `path` (relative to the current directory, which
/// `cargo test` sets to the package's root).
///
/// A layout is what a type's keys are made of: namespace, operation,
/// schema, the tenant fields (names, types as written, order), every
/// criterion (name in the key, field, type, `trim`/`lowercase`/`with`),
/// flattened parts and their criteria, each tag (name, field, and whether
/// it is global: its counter), `global`, `hash_tag`, `max_len`, and for a
/// cached query (`value` and `ttl`) its value type, TTL, value id
/// (`CachedQuery::VALUE_ID`: a changed id leaves the entries written before
/// behind) and `value_tags`. The file holds one block per type, sorted by type path, so a
/// change is a small diff.
///
/// Call it from one test:
///
/// ```no_run
/// #[test]
/// fn key_layouts_are_reviewed() {
///     if let Err(error) = cache_key::registry::check_lock("cache-keys.lock") {
///         panic!("{error}");
///     }
/// }
/// ```
///
/// It fails when a type's layout differs from its block (saying what
/// changed and the two ways forward: bump `schema`, or re-record the lock
/// when every key keeps its meaning), when a type is not in the file or the
/// file has a type this binary does not, and when the file is missing. It
/// never writes the file, unless the environment variable
/// `CACHE_KEY_BLESS` is set (to anything but `0`): then it records the
/// layouts and returns `Ok`.
///
/// Generic query types are not registered, so not locked; a type's path is
/// [`core::any::type_name`]'s, which a compiler release could write
/// differently: every type then shows as removed and added at once.
pub fn check_lock(path: impl AsRef<Path>) -> Result<(), LockError> {
    let path = path.as_ref();
    let current = render_all(&all());
    if blessing() {
        let text = to_text(&current);
        let unchanged = std::fs::read_to_string(path).is_ok_and(|old| old == text);
        if !unchanged {
            std::fs::write(path, text).map_err(|error| LockError::io(path, error))?;
            eprintln!(
                "cache-key: recorded the layout of {} query types in {}",
                current.len(),
                path.display()
            );
        }
        return Ok(());
    }
    let text = std::fs::read_to_string(path).map_err(|error| LockError::io(path, error))?;
    let locked = parse(&text).map_err(|(line, text)| LockError {
        path: path.to_owned(),
        repr: Repr::Malformed { line, text },
    })?;
    let changes = compare(&locked, &current);
    if changes.is_empty() {
        Ok(())
    } else {
        Err(LockError {
            path: path.to_owned(),
            repr: Repr::Changed(changes),
        })
    }
}

fn blessing() -> bool {
    std::env::var_os(BLESS_VAR).is_some_and(|value| !value.is_empty() && value != "0")
}

/// Each type's block lines, by type path; two types of one path (local to
/// two blocks of one function) get `#2`, `#3`... in registration order.
type Blocks = BTreeMap<String, Vec<String>>;

fn render_all(registered: &[&Registered]) -> Blocks {
    let mut blocks = Blocks::new();
    for entry in registered {
        let type_path = entry.type_path();
        let mut path = type_path.to_owned();
        let mut n = 1;
        while blocks.contains_key(&path) {
            n += 1;
            path = format!("{type_path}#{n}");
        }
        blocks.insert(path, render(entry));
    }
    blocks
}

/// One type's layout, a line per fact.
fn render(entry: &Registered) -> Vec<String> {
    let schema = &entry.schema;
    let mut lines = vec![
        format!("namespace = {}", schema.namespace()),
        format!("operation = {}", schema.operation()),
        format!("schema = {}", schema.schema()),
    ];
    if let Scope::Global { .. } = schema.scope() {
        lines.push("global".to_owned());
    }
    let mut flattened = schema.flattened().iter();
    for line in entry.layout.lines() {
        // The derive writes the flattened fields in the schema's order; their
        // criteria are the schema's (`Criteria::NAMES`), known only here.
        if line.starts_with("flatten ")
            && let Some(part) = flattened.next()
        {
            lines.push(format!("{line} ({})", part.criteria().join(", ")));
        } else {
            lines.push(line.to_owned());
        }
    }
    if schema.hash_tag() {
        lines.push("hash_tag".to_owned());
    }
    if let Some(max) = schema.max_len() {
        lines.push(format!("max_len = {max}"));
    }
    lines
}

fn to_text(blocks: &Blocks) -> String {
    let mut out = String::from(HEADER);
    for (path, lines) in blocks {
        out.push('\n');
        out.push_str(&format!("[{path}]\n"));
        for line in lines {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// The blocks of a lock file, or the first line that is neither a comment,
/// a blank, a `[type]` header nor a line inside a block.
fn parse(text: &str) -> Result<Blocks, (usize, String)> {
    let mut blocks = Blocks::new();
    let mut current: Option<&mut Vec<String>> = None;
    for (number, line) in text.lines().enumerate() {
        let line = line.trim_end();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if let Some(path) = line
            .strip_prefix('[')
            .and_then(|rest| rest.strip_suffix(']'))
        {
            if blocks.contains_key(path) {
                return Err((number + 1, line.to_owned()));
            }
            current = Some(blocks.entry(path.to_owned()).or_default());
            continue;
        }
        match current.as_mut() {
            Some(lines) => lines.push(line.to_owned()),
            None => return Err((number + 1, line.to_owned())),
        }
    }
    Ok(blocks)
}

fn compare(locked: &Blocks, current: &Blocks) -> Vec<LockChange> {
    let mut changes = Vec::new();
    let paths: std::collections::BTreeSet<&String> = locked.keys().chain(current.keys()).collect();
    for path in paths {
        match (locked.get(path), current.get(path)) {
            (Some(before), Some(after)) if before != after => changes.push(LockChange::Changed {
                type_path: path.clone(),
                schema_before: schema_of(before),
                schema_after: schema_of(after).unwrap_or_default(),
                before: before.clone(),
                after: after.clone(),
            }),
            (Some(_), None) => changes.push(LockChange::Removed {
                type_path: path.clone(),
            }),
            (None, Some(after)) => changes.push(LockChange::Added {
                type_path: path.clone(),
                layout: after.clone(),
            }),
            _ => {}
        }
    }
    changes
}

fn schema_of(lines: &[String]) -> Option<u32> {
    lines
        .iter()
        .find_map(|line| line.strip_prefix("schema = "))
        .and_then(|n| n.parse().ok())
}

/// How a type's layout differs from its block in the lock file.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum LockChange {
    /// A type this binary registers that the lock has no block for.
    Added {
        /// The type's path.
        type_path: String,
        /// Its layout, as the lock would record it.
        layout: Vec<String>,
    },
    /// A type in the lock that this binary does not register: removed,
    /// renamed, moved, or made generic.
    Removed {
        /// The type's path, as the lock has it.
        type_path: String,
    },
    /// A type whose layout differs from its block.
    Changed {
        /// The type's path.
        type_path: String,
        /// The `schema` the lock records, if its block has one.
        schema_before: Option<u32>,
        /// The type's `schema` now.
        schema_after: u32,
        /// The block in the lock.
        before: Vec<String>,
        /// The layout now.
        after: Vec<String>,
    },
}

impl LockChange {
    /// The path of the type that changed.
    pub fn type_path(&self) -> &str {
        match self {
            LockChange::Added { type_path, .. }
            | LockChange::Removed { type_path }
            | LockChange::Changed { type_path, .. } => type_path,
        }
    }
}

impl fmt::Display for LockChange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LockChange::Added { type_path, layout } => {
                writeln!(
                    f,
                    "`{type_path}` is new: review its layout and record it with {BLESS_VAR}=1 cargo test"
                )?;
                for line in layout {
                    writeln!(f, "    + {line}")?;
                }
                Ok(())
            }
            LockChange::Removed { type_path } => writeln!(
                f,
                "`{type_path}` is in the lock but not in this binary (removed, renamed, moved or made generic): \
                 its entries are unreachable; record that with {BLESS_VAR}=1 cargo test"
            ),
            LockChange::Changed {
                type_path,
                schema_before,
                schema_after,
                before,
                after,
            } => {
                if *schema_before == Some(*schema_after) {
                    writeln!(
                        f,
                        "`{type_path}`: its key layout changed and its schema stayed {schema_after}:"
                    )?;
                } else {
                    let before = schema_before.map_or("none".to_owned(), |n| n.to_string());
                    writeln!(
                        f,
                        "`{type_path}`: schema {before} -> {schema_after}, its entries written before are unreachable (expect a cold cache for this type at deploy):"
                    )?;
                }
                for (tag, line) in diff(before, after) {
                    writeln!(f, "    {tag} {line}")?;
                }
                if *schema_before == Some(*schema_after) {
                    writeln!(
                        f,
                        "  either bump its schema, `#[cache_key(schema = {})]`: every old entry becomes unreachable, \
                         expect a cold cache for this type (its traffic on the origin) at deploy;",
                        schema_after.saturating_add(1)
                    )?;
                    writeln!(
                        f,
                        "  or, when every key keeps its meaning (the same answer for the same bytes), record the new layout with {BLESS_VAR}=1 cargo test"
                    )
                } else {
                    writeln!(f, "  record it with {BLESS_VAR}=1 cargo test")
                }
            }
        }
    }
}

/// The lines of `before` and `after` in order, each marked ` ` (both), `-`
/// (the lock only) or `+` (now only), by their longest common subsequence,
/// so a reordering shows where it happened.
fn diff<'a>(before: &'a [String], after: &'a [String]) -> Vec<(char, &'a str)> {
    let (n, m) = (before.len(), after.len());
    // common[i][j]: the longest common subsequence of before[i..], after[j..].
    let mut common = vec![vec![0usize; m + 1]; n + 1];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            common[i][j] = if before[i] == after[j] {
                common[i + 1][j + 1] + 1
            } else {
                common[i + 1][j].max(common[i][j + 1])
            };
        }
    }
    let (mut i, mut j, mut out) = (0, 0, Vec::new());
    while i < n || j < m {
        if i < n && j < m && before[i] == after[j] {
            out.push((' ', before[i].as_str()));
            (i, j) = (i + 1, j + 1);
        } else if i < n && (j == m || common[i + 1][j] >= common[i][j + 1]) {
            out.push(('-', before[i].as_str()));
            i += 1;
        } else {
            out.push(('+', after[j].as_str()));
            j += 1;
        }
    }
    out
}

/// Why [`check_lock`] failed: the lock is missing, unreadable or malformed,
/// or layouts differ from it ([`changes`](Self::changes)).
#[derive(Debug)]
pub struct LockError {
    path: PathBuf,
    repr: Repr,
}

#[derive(Debug)]
enum Repr {
    Io(io::Error),
    Malformed { line: usize, text: String },
    Changed(Vec<LockChange>),
}

impl LockError {
    fn io(path: &Path, error: io::Error) -> Self {
        LockError {
            path: path.to_owned(),
            repr: Repr::Io(error),
        }
    }

    /// The lock file's path, as given.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Each type whose layout differs from the lock, in type-path order;
    /// empty when the file itself could not be read.
    pub fn changes(&self) -> &[LockChange] {
        match &self.repr {
            Repr::Changed(changes) => changes,
            _ => &[],
        }
    }
}

impl fmt::Display for LockError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let path = self.path.display();
        match &self.repr {
            Repr::Io(error) if error.kind() == io::ErrorKind::NotFound => write!(
                f,
                "no key layout lock at {path}: create it with {BLESS_VAR}=1 cargo test, review it and commit it"
            ),
            Repr::Io(error) => write!(f, "the key layout lock {path} could not be read: {error}"),
            Repr::Malformed { line, text } => write!(
                f,
                "the key layout lock {path} is malformed at line {line} (`{text}`): expected `[type path]` or a line of its block; \
                 re-create it with {BLESS_VAR}=1 cargo test"
            ),
            Repr::Changed(changes) => {
                writeln!(
                    f,
                    "{} query type(s) differ from the key layout lock {path}:",
                    changes.len()
                )?;
                for change in changes {
                    write!(f, "\n{change}")?;
                }
                Ok(())
            }
        }
    }
}

impl std::error::Error for LockError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.repr {
            Repr::Io(error) => Some(error),
            _ => None,
        }
    }
}
