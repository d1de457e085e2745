//! Each case under `tests/ui/` names a type (or, `registry_off`, a module)
//! that cache-key has behind a feature this package leaves off: the error
//! must name that feature. (The user's own types that only share those
//! names are `tests/own_types.rs`.)

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
}
