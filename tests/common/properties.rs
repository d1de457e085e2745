//! Running the property tests of the key format (`no_collisions`,
//! `one_query_one_key`, `model_agreement`, `decode_round_trip`).
//!
//! Every property runs [`CASES`] generated cases. The expected keys come from
//! the spec model (`spec_model`), not from the crate's code, and the
//! generators (`strategies`) lean on the characters that break naive key
//! builders: the separators `: & = , % { } *`, whitespace, control
//! characters, emoji, combining marks and text that already looks escaped.
//!
//! A failure prints the minimal (shrunk) input. Failures are not persisted to
//! `proptest-regressions/`: copy the printed input into a fixed `#[test]`.
//! `PROPTEST_CASES=N` does not lower the case count (it is fixed here), but
//! `PROPTEST_RNG_SEED` can be used to replay a run.

use std::fmt::Debug;

use cache_key::Key;
use proptest::prelude::*;
use proptest::test_runner::{TestCaseError, TestRunner};

use super::inputs::Input;
use super::spec_model::Canonical;

/// Cases per property.
pub const CASES: u32 = 10_000;

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: CASES,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// Runs `test` on `CASES` values of `strategy`; on failure, panics with the
/// minimal failing input.
pub fn check<S>(name: &str, strategy: S, test: impl Fn(S::Value) -> Result<(), TestCaseError>)
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
// Unused in the binaries that run no property, like the rest of `common`.
#[allow(unused_macros)]
macro_rules! ensure {
    ($condition:expr, $($message:tt)+) => {
        if !$condition {
            return Err(proptest::test_runner::TestCaseError::fail(format!($($message)+)));
        }
    };
}
#[allow(unused_imports)]
pub(crate) use ensure;

/// The input's canonical form, its key, and whether the key is summarized.
pub fn built(input: &Input) -> Result<(Canonical, Key, bool), TestCaseError> {
    let key = input
        .build()
        .map_err(|e| TestCaseError::fail(format!("no key: {e:?}")))?;
    let model = input.canonical();
    let summarized = model.summarized();
    Ok((model, key, summarized))
}
