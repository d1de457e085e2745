//! The first fill of a new entity on Redis: served when its tag's counter
//! exists before the fill starts (made by the consumer's bump of the
//! INSERT, or by invalidating the new entity's tag scope, for code without
//! a change log), stored but not served when it does not (the counter is
//! then made after the fill began, and the fill cannot be told from one
//! that raced a bump): the origin is asked again once.

mod common;

use std::sync::atomic::{AtomicU32, Ordering};

use cache_key::cache::AsyncQueryCache;
use cache_key::generation::AsyncGenerationStore;
use cache_key::redis::{AsyncRedisCache, AsyncRedisGenerations, AsyncRedisPool};
use common::library::{Search, Setup, Title, applied, book, store};

/// Searches branch 1 for `title` twice through `cache`: how many times the
/// origin (PostgreSQL) was asked.
async fn origin_calls(cache: &AsyncRedisCache, db: &tokio_postgres::Client, title: &str) -> u32 {
    let calls = AtomicU32::new(0);
    for _ in 0..2 {
        let answer = cache
            .get_or_load(&Search { branch: 1, title }, || async {
                calls.fetch_add(1, Ordering::Relaxed);
                let rows = db
                    .query(
                        "SELECT id, title FROM books WHERE branch = 1 AND title = $1",
                        &[&title],
                    )
                    .await?;
                Ok::<_, tokio_postgres::Error>(
                    rows.iter()
                        .map(|row| Title {
                            id: row.get::<_, i32>(0) as u32,
                            title: row.get(1),
                        })
                        .collect::<Vec<_>>(),
                )
            })
            .await
            .expect("a read through the cache");
        assert_eq!(answer.len(), 1, "{title}: {answer:?}");
    }
    calls.into_inner()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "starts PostgreSQL and redis-server: cargo test -- --include-ignored"]
async fn a_new_entitys_first_fill_is_served_once_its_counter_exists() {
    let Some(setup) = Setup::start().await else {
        return;
    };
    let pool = AsyncRedisPool::connect(setup.redis.url()).await.unwrap();
    let cache = AsyncRedisCache::new(AsyncRedisGenerations::new(pool));

    // The consumer bumps the INSERT's tag: its counter exists before the
    // first fill, which is then served.
    let (log, task) = setup.consumer("first").await;
    applied(&log, setup.insert(7, 1, "Sand").await).await;
    assert_eq!(origin_calls(&cache, &setup.db, "Sand").await, 1);

    // Without a change log, nothing makes book 8's counter: its first
    // fill is stored and not served.
    task.abort();
    let _ = task.await;
    setup.insert(8, 1, "Dune").await;
    assert_eq!(origin_calls(&cache, &setup.db, "Dune").await, 2);

    // Code without a change log makes the counter when it makes the
    // entity: an invalidation of the new entity's tag, which no entry holds.
    setup.insert(9, 1, "Solaris").await;
    store(&setup.redis)
        .await
        .invalidate(&book(1, 9))
        .await
        .unwrap();
    assert_eq!(origin_calls(&cache, &setup.db, "Solaris").await, 1);
}
