//! The web path on the example's Redis cache (`cargo run ... -- ADDR
//! redis://...`), over real HTTP, against a redis-server of its own: the
//! `304` is counted at the server, which sees no `GET` of an entry for it.
//! Ignored by default (it needs redis-server): `cargo test -- --include-ignored`;
//! under `CI=true` a missing server is a failure.

#[path = "../main.rs"]
#[allow(dead_code)] // the example's `main`, which the test does not run
mod axum_example;
#[allow(dead_code)] // each test file uses a part of the shared client
mod client;
#[path = "../../../tests/common/redis_server.rs"]
#[allow(dead_code)] // the workspace's helper: this test starts one server
mod redis_server;
mod web_path;

use axum::http::header;
use axum_example::{BookPage, Library};
use cache_key::cache::AsyncTypedCache;

/// How many `GET`s the server has answered (`INFO commandstats`): the
/// typed cache reads an entry with `GET`, and its counters without.
fn gets(connection: &mut redis::Connection) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(connection)
        .expect("INFO commandstats");
    info.lines()
        .find_map(|line| line.strip_prefix("cmdstat_get:calls="))
        .map_or(0, |rest| {
            let calls = rest.split(',').next().unwrap_or_default();
            calls.parse().expect("a count of calls")
        })
}

#[tokio::test]
#[ignore = "needs redis-server: apt-get install redis-server, then cargo test -- --include-ignored"]
async fn a_handler_on_redis_cached_revalidated_invalidated_and_measured() {
    let Some(mut redis) = redis_server::Server::start(false) else {
        return;
    };
    let library = Library::with_redis(&redis.url()).await.expect("connects");
    let server = client::start(library).await;
    let counter = std::sync::Mutex::new(redis.connect());
    let entry_reads = || gets(&mut counter.lock().unwrap());
    web_path::scenario(&server, entry_reads).await;
    web_path::metrics_agree(&server).await;

    // Redis gone: the service still answers, from the origin, without an
    // ETag (nothing vouches for it), and the outage shows in the metrics.
    redis.stop();
    let degraded = server.library.http.stats_of::<BookPage>().degraded;
    let origin_calls = server.library.origin_calls();
    let reply = server.ok(client::BAHCELIEVLER, "/books/4").await;
    assert_eq!(reply.json()["title"], "Yaban");
    assert!(
        reply.headers.get(header::ETAG).is_none(),
        "{:?}",
        reply.headers
    );
    assert_eq!(
        reply.header("cache-status"),
        "cache-key; fwd=miss; detail=counters-unreadable"
    );
    assert_eq!(reply.header(header::CACHE_CONTROL), "private, no-cache");
    assert_eq!(server.library.origin_calls(), origin_calls + 1);
    assert!(server.library.http.stats_of::<BookPage>().degraded > degraded);
    web_path::metrics_agree(&server).await;
}
