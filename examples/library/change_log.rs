//! Scenario 6: invalidation from the commit log. The catalog lives in a
//! PostgreSQL of the example's own (started with `initdb` in a temporary
//! directory, on a free loopback port, stopped at the end); searches by
//! author go through a `MokaCache` as in scenario 5, and a `ChangeLog`
//! (crate `cache-key-pg`) follows the database's logical replication. Book
//! 42 is retitled with plain SQL, not through the service: the consumer
//! bumps its tag, and the searches holding it miss.

use std::sync::Arc;
use std::time::Duration;

use cache_key::MemoryGenerations;
use cache_key::cache::MokaCache;
use cache_key_pg::{ChangeLog, ChangeMap, Lsn, Options, ReplicationConfig};
use tokio_postgres::NoTls;

// The tests' cluster starter: the example uses no fault of it.
#[allow(dead_code)]
#[path = "../../cache-key-pg/tests/common/postgres.rs"]
mod postgres;

use crate::scenarios::{
    ALEPH, ALEPH_RETITLED, BOOKS, ByAuthor, FindOutcome, Result, Step, Title, search_authors,
};

/// The map: a row of `books` is the book tagged `book` = `books.id`.
pub fn map() -> ChangeMap {
    ChangeMap::new()
        .namespace::<ByAuthor>()
        .table("books", |row, bumps| {
            bumps.push(Title::tag_scope_book::<ByAuthor>(&row.get::<u32>("id")?)?);
            Ok(())
        })
        .expect("one table, named once")
}

/// The searches before and after the SQL edit; `None` when PostgreSQL is
/// not installed (the scenario is skipped).
pub fn run() -> Result<Option<Vec<FindOutcome>>> {
    let Some(server) = postgres::Postgres::start() else {
        return Ok(None);
    };
    let runtime = tokio::runtime::Runtime::new()?;
    let db = runtime.block_on(async {
        let (db, connection) = tokio_postgres::connect(&server.url(), NoTls).await?;
        tokio::spawn(connection);
        db.batch_execute(
            "CREATE TABLE books (id integer PRIMARY KEY, title text NOT NULL, author text NOT NULL)",
        )
        .await?;
        for (id, title, author, ..) in BOOKS.into_iter().chain([ALEPH]) {
            db.execute(
                "INSERT INTO books VALUES ($1, $2, $3)",
                &[&(id as i32), &title, &author],
            )
            .await?;
        }
        Ok::<_, tokio_postgres::Error>(db)
    })?;

    let store = Arc::new(MemoryGenerations::new());
    let config = ReplicationConfig::new(
        "127.0.0.1",
        "postgres",
        "",
        "postgres",
        "library",
        "library",
    )
    .with_port(server.port());
    let log = Arc::new(ChangeLog::new(config, map(), Options::default())?);
    let consumer = {
        let (log, store) = (log.clone(), store.clone());
        runtime.spawn(async move { log.run(&*store).await })
    };
    // The consumer makes its slot, then bumps the namespace (what committed
    // before the slot's start is never sent): the searches begin after
    // that bump, which would otherwise miss them all at any later step.
    // Every change after the slot's start is sent.
    runtime.block_on(async {
        let started = tokio::time::Instant::now();
        while log.stats().namespace_bumps() == 0 {
            if started.elapsed() > Duration::from_secs(60) {
                return Err("the consumer did not make its slot in 60 s");
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Ok(())
    })?;

    let cache = MokaCache::new(store, 1_000);
    let by_author = |author: &str| -> Result<Vec<Title>> {
        let rows = runtime.block_on(db.query(
            "SELECT id, title FROM books WHERE author LIKE '%' || $1 || '%' ORDER BY id",
            &[&author],
        ))?;
        Ok(rows
            .iter()
            .map(|row| Title {
                id: row.get::<_, i32>(0) as u32,
                title: row.get(1),
            })
            .collect())
    };
    let search = |step: Step| search_authors(&cache, step, by_author);
    let mut outcomes = search(Step::First)?;
    outcomes.extend(search(Step::Again)?);
    // Another program's edit, in plain SQL; then the position after it,
    // which the consumer has applied once the edit's bumps returned.
    let at = runtime.block_on(async {
        db.execute(
            "UPDATE books SET title = $1 WHERE id = $2",
            &[&ALEPH_RETITLED, &(ALEPH.0 as i32)],
        )
        .await?;
        let row = db
            .query_one("SELECT pg_current_wal_lsn()::text", &[])
            .await?;
        Ok::<_, tokio_postgres::Error>(row.get::<_, String>(0))
    })?;
    let at = Lsn::parse(&at).map_err(|error| error.0)?;
    let mut applied = log.applied();
    runtime
        .block_on(async {
            tokio::time::timeout(Duration::from_secs(30), applied.wait_for(at)).await
        })
        .map_err(|_| "the consumer did not apply the edit in 30 s")??;
    outcomes.extend(search(Step::Bumped)?);
    consumer.abort();
    Ok(Some(outcomes))
}
