//! The web path on moka is cancel-safe: each public async call of
//! `cache_key::http::HttpCache` (`respond`, `respond_public`, a `304`,
//! `invalidate`, `get`) and of the `Metered` layer under it, dropped at
//! each point where it waits (a handler whose client hung up), leaves
//! nothing behind: `/metrics` agreeing with the cache's counters and with
//! the origin calls made, a bump's purge not lost; and the next call
//! answers. On the example's service (SQLite origin, real HTTP for
//! `/metrics`); `cancellation_redis.rs` is the same on Redis.

#[path = "../main.rs"]
#[allow(dead_code)] // the example's `main`, which the test does not run
mod axum_example;
mod cancellation;
#[allow(dead_code)] // each test file uses a part of the shared client
mod client;
#[path = "../../../tests/common/drop_at_wait.rs"]
mod drop_at_wait;

use axum_example::Library;
use cancellation::each_call_dropped_at_each_wait;

#[tokio::test]
async fn the_web_path_on_moka_dropped_at_each_wait_leaves_nothing_behind() {
    let server = client::start(Library::with_moka().unwrap()).await;
    // Nothing of moka's to look into: the calls after each drop answer.
    let waits = each_call_dropped_at_each_wait(&server, |_, _| {}).await;
    println!("moka: {waits:?}");
    // Counters in process: only the origin waits (SQLite's task); the
    // calls that read counters alone finish at their first poll.
    assert!(waits.respond > 0 && waits.public > 0, "{waits:?}");
    let counters_only = [
        waits.not_modified,
        waits.invalidate,
        waits.get,
        waits.insert,
    ];
    assert_eq!(counters_only, [0; 4], "{waits:?}");
}
