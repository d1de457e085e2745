//! Read-your-writes by LSN: a writer that waits until the consumer applied
//! the WAL position after its commit reads its own write through the cache,
//! every time; a reader racing the writes, with a cache of its own, never
//! reads an answer older than the position the consumer had applied when
//! its read began.

mod common;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cache_key::cache::AsyncQueryCache;
use cache_key::redis::{AsyncRedisCache, AsyncRedisGenerations, AsyncRedisPool};
use cache_key_pg::{Applied, Lsn};
use common::library::{Search, Setup, Title, spawn_consumer, sql, store_at, streaming, wal_lsn};
use common::redis_server::Proxy;

/// Books 1 to 5 of branch 1, each retitled `v<n>` by the writer.
const BOOKS: i32 = 5;
const WRITES: u32 = 300;

async fn cache(url: String) -> AsyncRedisCache {
    let pool = AsyncRedisPool::connect(url).await.expect("a pool");
    AsyncRedisCache::new(AsyncRedisGenerations::new(pool))
}

/// Branch 1's books, as the cache serves them (from PostgreSQL on a miss).
async fn shelf(cache: &AsyncRedisCache, db: &tokio_postgres::Client) -> Vec<Title> {
    let query = Search {
        branch: 1,
        title: "",
    };
    cache
        .get_or_load(&query, || async {
            let rows = db
                .query(
                    "SELECT id, title FROM books WHERE branch = 1 ORDER BY id",
                    &[],
                )
                .await?;
            Ok::<_, tokio_postgres::Error>(
                rows.iter()
                    .map(|row| Title {
                        id: row.get::<_, i32>(0) as u32,
                        title: row.get(1),
                    })
                    .collect(),
            )
        })
        .await
        .expect("a read through the cache")
}

/// The version in a title `v<n>` (0 for the first title).
fn version_of(title: &str) -> u32 {
    title
        .strip_prefix('v')
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "starts PostgreSQL and redis-server: cargo test -- --include-ignored"]
async fn a_writer_waiting_for_its_lsn_reads_its_write_and_no_reader_reads_older_than_applied() {
    let Some(setup) = Setup::start().await else {
        return;
    };
    for id in 1..=BOOKS {
        setup.insert(id, 1, "v0").await;
    }
    // The consumer reaches Redis through a proxy the writer's control
    // freezes: while frozen, no bump of its write can have returned.
    let proxy = Proxy::to(setup.redis.port());
    let (log, _task) = spawn_consumer(&setup.postgres, "ryw", store_at(proxy.url()).await);
    streaming(&setup.db, "ryw").await;
    // Each write: the book, its version, the WAL position after its commit.
    let history: Arc<Mutex<Vec<(Lsn, u32, u32)>>> = Arc::default();
    let done = Arc::new(AtomicBool::new(false));

    let reader = {
        let (history, done) = (history.clone(), done.clone());
        let applied: Applied = log.applied();
        let (cache, db) = (cache(setup.redis.url()).await, sql(&setup.postgres).await);
        tokio::spawn(async move {
            let (mut reads, mut stale) = (0u32, Vec::new());
            while !done.load(Ordering::Relaxed) {
                let at = applied.lsn();
                let answer = shelf(&cache, &db).await;
                // Each book's last version committed at or before `at`.
                let mut due: HashMap<u32, u32> = HashMap::new();
                for &(lsn, id, version) in history.lock().unwrap().iter() {
                    if lsn <= at {
                        let due = due.entry(id).or_default();
                        *due = (*due).max(version);
                    }
                }
                for title in &answer {
                    let due = due.get(&title.id).copied().unwrap_or(0);
                    if version_of(&title.title) < due {
                        stale.push((title.id, title.title.clone(), due));
                    }
                }
                reads += 1;
            }
            (reads, stale)
        })
    };

    let cache = cache(setup.redis.url()).await;
    let mut applied = log.applied();
    let (mut unwaited_old, mut waited_old) = (0u32, 0u32);
    for version in 1..=WRITES {
        let id = 1 + (version as i32 % BOOKS);
        // Every other write is a control: read at once, the consumer's
        // bumps held back, to show what reading without waiting risks.
        let control = version % 2 == 0;
        if control {
            proxy.freeze();
        }
        setup
            .db
            .execute(
                "UPDATE books SET title = $2 WHERE id = $1",
                &[&id, &format!("v{version}")],
            )
            .await
            .unwrap();
        let lsn = wal_lsn(&setup.db).await;
        history.lock().unwrap().push((lsn, id as u32, version));
        let mine = |answer: Vec<Title>| {
            let title = answer
                .into_iter()
                .find(|t| t.id == id as u32)
                .expect("the book");
            version_of(&title.title) == version
        };
        if control {
            if !mine(shelf(&cache, &setup.db).await) {
                unwaited_old += 1;
            }
            proxy.thaw();
        }
        tokio::time::timeout(Duration::from_secs(60), applied.wait_for(lsn))
            .await
            .expect("applied within 60 s")
            .unwrap();
        if !mine(shelf(&cache, &setup.db).await) {
            waited_old += 1;
        }
    }
    done.store(true, Ordering::Relaxed);
    let (reads, stale) = reader.await.unwrap();
    eprintln!(
        "{WRITES} writes: {waited_old} read their write's older answer after waiting for its LSN, \
         {unwaited_old} of {} without waiting; the reader: {reads} reads, {} stale",
        WRITES / 2,
        stale.len()
    );
    assert_eq!(waited_old, 0);
    assert!(unwaited_old > 0, "the control never read an older answer");
    assert!(reads > 50, "too few reads to judge: {reads}");
    assert!(
        stale.is_empty(),
        "answers older than the applied position: {stale:?}"
    );
}
