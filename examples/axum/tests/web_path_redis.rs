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

use axum_example::Library;

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
    let Some(redis) = redis_server::Server::start(false) else {
        return;
    };
    let library = Library::with_redis(&redis.url()).await.expect("connects");
    let server = client::start(library).await;
    let counter = std::sync::Mutex::new(redis.connect());
    let entry_reads = || gets(&mut counter.lock().unwrap());
    web_path::scenario(&server, entry_reads).await;
    web_path::metrics_agree(&server).await;
}
