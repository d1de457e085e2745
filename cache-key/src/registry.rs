//! The registry of every `#[derive(CacheKey)]` type linked into the binary:
//! [`check`] finds distinct types that share a key space, and
//! [`check_lock`] compares every type's key layout with a reviewed lock file.
//!
//! It needs cache-key's `registry` feature, meant for the tests that call
//! these: `cache-key = { version = "0.1", features = ["registry"] }` in
//! `[dev-dependencies]`. Builds without it register nothing.
//!
//! Two query types in one namespace with one operation write keys that differ
//! only by their criteria: a `books::Search` and a `members::Search` (whose
//! default operation is `search` for both) asked with the same criteria share
//! a key, and one type's cached answers are served to the other. Nothing in
//! either type shows it, so the derive registers each type here (at link
//! time, across crates) and one test asks:
//!
//! ```text
//! #[test]
//! fn query_types_have_key_spaces_of_their_own() {
//!     cache_key::registry::check().unwrap();
//! }
//! ```
//!
//! `check` returns every pair it finds, each with both types' paths:
//!
//! ```
//! if let Err(shared) = cache_key::registry::check() {
//!     for (first, second) in shared.pairs() {
//!         println!("{} and {} share a key space", first.type_path(), second.type_path());
//!     }
//! }
//! ```
//!
//! Generic query types (with type or const parameters) are not registered:
//! the registry holds concrete types only.
//!
//! It is a test, not a check on first use in debug builds: the registry is
//! the whole binary's, so a check inside `cache_key()` would fail a call for
//! a clash between two other types, and would cost every call an atomic
//! load to run once.

use std::fmt;

mod entry;
mod lock;

pub use self::entry::{Registered, all};
pub use self::lock::{LockChange, LockError, check_lock};

/// `Ok` when no two distinct registered types share a namespace and an
/// operation; otherwise every such pair.
pub fn check() -> Result<(), SharedKeySpaces> {
    let all = all();
    let mut pairs = Vec::new();
    for (i, first) in all.iter().enumerate() {
        for second in &all[i + 1..] {
            let same_space = first.schema.namespace() == second.schema.namespace()
                && first.schema.operation() == second.schema.operation();
            if same_space {
                pairs.push((**first, **second));
            }
        }
    }
    if pairs.is_empty() {
        Ok(())
    } else {
        Err(SharedKeySpaces { pairs })
    }
}

/// The pairs of distinct query types that share a namespace and an
/// operation, from [`check`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SharedKeySpaces {
    pairs: Vec<(Registered, Registered)>,
}

impl SharedKeySpaces {
    /// Each pair, the types in type-path order.
    pub fn pairs(&self) -> &[(Registered, Registered)] {
        &self.pairs
    }
}

impl fmt::Display for SharedKeySpaces {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} pair(s) of query types share a key space: the same criteria would give both the same key, and one type's cached answers would be served to the other",
            self.pairs.len()
        )?;
        for (first, second) in &self.pairs {
            write!(
                f,
                "\n- `{}` and `{}` both use namespace `{}`, operation `{}`: set `#[cache_key(operation = \"...\")]` on one of them",
                first.type_path(),
                second.type_path(),
                first.schema.namespace(),
                first.schema.operation(),
            )?;
        }
        Ok(())
    }
}

impl std::error::Error for SharedKeySpaces {}
