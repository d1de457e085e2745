//! Nothing but the web guide's Rust examples (`docs/web.md`), run as doc
//! tests with this package's axum (the `cache-key` crate depends on
//! `axum-core` alone, so its own doc tests cannot use axum's extractors).

/// The web guide's Rust examples, run as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../../docs/web.md")]
pub struct WebGuideDoctests;
