//! The web service path (feature `axum`): a handler's answer from an async
//! typed cache in one call, with the HTTP semantics the key's generation
//! gives.
//!
//! ```text
//! async fn book(State(app): State<Arc<App>>, Extension(branch): Extension<BranchId>,
//!               Path(id): Path<u64>, headers: HeaderMap) -> Result<Response, CacheError<DbError>> {
//!     let query = BookPage { branch, id };               // the key is derived from it
//!     app.http.respond(&headers, &query, || app.db.book(&query)).await
//! }
//! ```
//!
//! - The query is built by the handler from the request: its criteria from
//!   the path and the query string, its tenant from a **request
//!   extension** that the service's authentication layer set (axum's
//!   `Extension<T>`), never from a header the client writes.
//! - [`HttpCache::respond`] answers it: a strong [`ETag`] from the key at
//!   its generation; `304 Not Modified` after reading the counters alone
//!   when the request holds that tag; `Cache-Control: private` for every
//!   tenant-scoped type. [`HttpCache::respond_public`] takes global query
//!   types only ([`GlobalQuery`]) and adds surrogate keys for a CDN, which
//!   a bump through the cache purges ([`HttpCache::with_purge`]).
//! - [`CacheError`](crate::cache::CacheError) is an axum response
//!   (`IntoResponse`): `503` when the backend is down and nothing answered
//!   around it, `500` otherwise, the detail in the logs only.
//!
//! Built on `http` and `axum-core`, so the same responses serve any
//! framework on the `http` crate's types (hyper, tower services).
//!
//! # Answers per user
//!
//! An answer that depends on the user within a tenant (a member's loans in
//! a branch) is a query whose tenant is compound, `#[tenant] branch` then
//! `#[tenant] member`: its key and so its `ETag` are the member's own, a
//! bump of the branch's scope still ends it
//! (`Loans::tenant_scope_by_branch`), and it is `private` like every
//! tenant-scoped answer: no shared cache keeps it, and another user's
//! `If-None-Match` never matches it. Both values come from the
//! authentication layer's extension, never from the request's own text.

mod error_response;
mod etag;
mod respond;
mod sharing;
mod surrogate;

pub use self::etag::ETag;
pub use self::respond::{CacheGenerations, HttpCache};
pub use self::sharing::{Freshness, GlobalQuery, NoTenant};
pub use self::surrogate::{
    MAX_SURROGATE_HEADER_LEN, MAX_SURROGATE_KEY_LEN, MAX_SURROGATE_KEYS, surrogate_key,
};
