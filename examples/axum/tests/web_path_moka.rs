//! The web path on the example's default cache (moka, counters in
//! process), over real HTTP; a binary of its own, so that `/metrics` (one
//! recorder per process) counts this test's requests alone.

#[path = "../main.rs"]
#[allow(dead_code)] // the example's `main`, which the test does not run
mod axum_example;
#[allow(dead_code)] // each test file uses a part of the shared client
mod client;
mod web_path;

use axum_example::{BookPage, Library};
use cache_key::cache::AsyncTypedCache;

#[tokio::test]
async fn a_handler_cached_revalidated_invalidated_and_measured() {
    let server = client::start(Library::with_moka().unwrap()).await;
    let library = std::sync::Arc::clone(&server.library);
    // In process, every entry read is a counted read of the cache.
    let entry_reads = move || {
        let stats = library.http.stats_of::<BookPage>();
        stats.hits + stats.misses + stats.stale
    };
    web_path::scenario(&server, entry_reads).await;

    // 304s of the book page: the first, the one after the edit, and one per
    // member for `/books/3` and `/books/5`.
    let before = server.metrics().await;
    let series = "cache_key_http_not_modified_total{namespace=\"library\",operation=\"book\"}";
    let not_modified = before[series];
    assert_eq!(not_modified, 2.0 + 4.0 * 2.0);
    // Misses: branch 2's first read and its read after the edit, then
    // `/books/3` and `/books/5` for branches 1 and 3, `/books/5` for branch
    // 2's first member; hits: the repeat, then what branch 2 had read.
    let book = |name: &str| before[&format!("{name}{{namespace=\"library\",operation=\"book\"}}")];
    assert_eq!(book("cache_key_misses_total"), 7.0);
    assert_eq!(book("cache_key_hits_total"), 4.0);
    assert_eq!(book("cache_key_origin_calls_total"), 7.0);
    web_path::metrics_agree(&server).await;

    // One more 304 moves its counter by one, and nothing else.
    let reply = server.ok(client::KADIKOY, "/books/5").await;
    let tag = reply.header(axum::http::header::ETAG).to_owned();
    let stats = server.library.http.stats_of::<BookPage>();
    server
        .get(Some(client::KADIKOY), "/books/5", Some(&tag))
        .await;
    let after = server.metrics().await;
    assert_eq!(after[series], not_modified + 1.0);
    assert_eq!(server.library.http.stats_of::<BookPage>(), stats);
    web_path::metrics_agree(&server).await;
}
