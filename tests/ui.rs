//! Compile errors are part of the product: each file under `tests/ui/` is one
//! mistake a reviewer relies on the compiler to catch, with the exact message
//! (`.stderr`) a user sees.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*/*.rs");
    t.compile_fail("tests/ui/many_mistakes.rs");
}
