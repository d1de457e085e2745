//! Compile errors are part of the product: each file in this package's
//! folders is one mistake a reviewer relies on the compiler to catch, with
//! the exact message (`.stderr`) a user sees.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("*/*.rs");
    t.compile_fail("many_mistakes.rs");
}
