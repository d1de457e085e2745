//! The web path on Redis is cancel-safe: `cancellation_moka.rs`'s calls,
//! each dropped at each point where it waits, on a real redis-server, and
//! no flight or open circuit left by any drop. Ignored by default (it
//! needs redis-server): `cargo test -- --include-ignored`; under `CI=true`
//! a missing server is a failure.

#[path = "../main.rs"]
#[allow(dead_code)] // the example's `main`, which the test does not run
mod axum_example;
mod cancellation;
#[allow(dead_code)] // each test file uses a part of the shared client
mod client;
#[path = "../../../tests/common/drop_at_wait.rs"]
mod drop_at_wait;
#[path = "../../../tests/common/redis_server.rs"]
#[allow(dead_code)] // the workspace's helper: this test starts one server
mod redis_server;

use axum_example::Library;
use cache_key::redis::AsyncRedisCache;
use cancellation::{Waits, each_call_dropped_at_each_wait};

#[tokio::test]
#[ignore = "needs redis-server: apt-get install redis-server, then cargo test -- --include-ignored"]
async fn the_web_path_on_redis_dropped_at_each_wait_leaves_nothing_behind() {
    let Some(redis) = redis_server::Server::start(false) else {
        return;
    };
    let library = Library::with_redis(&redis.url()).await.expect("connects");
    let server = client::start(library).await;
    let nothing_left = |case: &str, cache: &AsyncRedisCache| {
        assert_eq!(cache.__map_sizes().flights, 0, "{case}: a flight left");
        assert!(!cache.pool().is_skipping(), "{case}: the circuit open");
    };
    let waits = each_call_dropped_at_each_wait(&server, nothing_left).await;
    println!("redis: {waits:?}");
    let Waits {
        respond,
        not_modified,
        public,
        invalidate,
        get,
        insert,
    } = waits;
    // Every call talks to Redis: each waits at least once.
    let all = [respond, not_modified, public, invalidate, get, insert];
    assert!(all.iter().all(|&waits| waits > 0), "{all:?}");
}
