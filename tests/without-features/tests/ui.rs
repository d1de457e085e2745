//! Each case under `tests/ui/` names a type (or, `registry_off`, a module)
//! that cache-key has behind a feature this package leaves off: the error
//! must name that feature. Each
//! case under `tests/pass/` is a type of the user's own that only shares a
//! name with those types: it must build and run.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
    t.pass("tests/pass/*.rs");
}
