//! Read-your-writes by LSN: a writer that waits until the consumer applied
//! the WAL position after its commit reads its own write through the cache,
//! every time; a reader process racing the writes, with a cache of its
//! own, never reads an answer older than the position the consumer had
//! confirmed to PostgreSQL when its read began (the slot's
//! `confirmed_flush_lsn`, which the consumer raises only after the bumps
//! before it returned).

mod common;

use std::collections::HashMap;
use std::process::{Command, Stdio};
use std::time::Duration;

use cache_key::cache::AsyncQueryCache;
use cache_key::redis::{AsyncRedisCache, AsyncRedisGenerations, AsyncRedisPool};
use common::library::{Search, Setup, Title, spawn_consumer, store_at, streaming, wal_lsn};
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

/// Set in the reader process: `<pg port>,<redis port>`.
const READER_ENV: &str = "CACHE_KEY_PG_READER";

/// The reader process: reads branch 1's shelf through a cache of its own
/// until the writer is done, each answer judged against the versions
/// committed at or before the slot's confirmed position read before it.
/// Prints `READER reads=<n> stale=<n> <the first stale answers>`.
async fn reader(ports: &str) {
    let (pg, redis) = ports.split_once(',').expect("two ports");
    let url = format!("host=127.0.0.1 port={pg} user=postgres dbname=postgres");
    let (db, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    let cache = cache(format!("redis://127.0.0.1:{redis}/")).await;
    let (mut reads, mut stale) = (0u32, Vec::new());
    loop {
        let done: bool = db
            .query_one("SELECT done FROM control", &[])
            .await
            .unwrap()
            .get(0);
        if done {
            break;
        }
        let at: String = db
            .query_one(
                "SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = 'ryw'",
                &[],
            )
            .await
            .unwrap()
            .get(0);
        let answer = shelf(&cache, &db).await;
        // Each book's last version committed at or before `at`.
        let due: HashMap<u32, u32> = db
            .query(
                "SELECT id, max(version) FROM history WHERE lsn <= $1::text::pg_lsn GROUP BY id",
                &[&at],
            )
            .await
            .unwrap()
            .iter()
            .map(|row| (row.get::<_, i32>(0) as u32, row.get::<_, i32>(1) as u32))
            .collect();
        for title in &answer {
            let due = due.get(&title.id).copied().unwrap_or(0);
            if version_of(&title.title) < due {
                stale.push(format!("{}:{}<v{due}", title.id, title.title));
            }
        }
        reads += 1;
    }
    stale.truncate(5);
    println!(
        "READER reads={reads} stale={} {}",
        stale.len(),
        stale.join(" ")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "starts PostgreSQL and redis-server: cargo test -- --include-ignored"]
async fn a_writer_waiting_for_its_lsn_reads_its_write_and_no_reader_reads_older_than_confirmed() {
    if let Ok(ports) = std::env::var(READER_ENV) {
        return reader(&ports).await;
    }
    let Some(setup) = Setup::start().await else {
        return;
    };
    for id in 1..=BOOKS {
        setup.insert(id, 1, "v0").await;
    }
    setup
        .db
        .batch_execute(
            "CREATE TABLE history (id integer, version integer, lsn pg_lsn); \
             CREATE TABLE control (done boolean); INSERT INTO control VALUES (false)",
        )
        .await
        .unwrap();
    // The consumer reaches Redis through a proxy the writer's control
    // freezes: while frozen, no bump of its write can have returned.
    let proxy = Proxy::to(setup.redis.port());
    let (log, _task) = spawn_consumer(&setup.postgres, "ryw", store_at(proxy.url()).await);
    streaming(&setup.db, "ryw").await;

    // This test binary again, as the reader process.
    let reader = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "a_writer_waiting_for_its_lsn_reads_its_write_and_no_reader_reads_older_than_confirmed",
            "--include-ignored",
            "--nocapture",
        ])
        .env(
            READER_ENV,
            format!("{},{}", setup.postgres.port(), setup.redis.port()),
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();

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
        setup
            .db
            .execute(
                "INSERT INTO history VALUES ($1, $2, $3::text::pg_lsn)",
                &[&id, &(version as i32), &lsn.to_string()],
            )
            .await
            .unwrap();
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
    setup
        .db
        .batch_execute("UPDATE control SET done = true")
        .await
        .unwrap();
    let output = reader.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let report = stdout
        .lines()
        .find_map(|line| line.strip_prefix("READER "))
        .unwrap_or_else(|| panic!("no report from the reader: {stdout}"));
    let field = |name: &str| -> u32 {
        let text = report
            .split(' ')
            .find_map(|part| part.strip_prefix(name))
            .unwrap();
        text.parse().unwrap()
    };
    eprintln!(
        "{WRITES} writes: {waited_old} read their write's older answer after waiting for its LSN, \
         {unwaited_old} of {} without waiting; the reader process: {report}",
        WRITES / 2,
    );
    assert_eq!(waited_old, 0);
    assert!(unwaited_old > 0, "the control never read an older answer");
    assert!(field("reads=") > 50, "too few reads to judge: {report}");
    assert_eq!(
        field("stale="),
        0,
        "answers older than the confirmed position: {report}"
    );
}
