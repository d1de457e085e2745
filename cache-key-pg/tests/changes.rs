//! Committed row changes bump their entities' tags, against a real
//! PostgreSQL (logical replication, `pgoutput`) and a real redis-server:
//! inserted, updated (the tag's own columns changed: the old entity and the
//! new one), deleted, truncated, in one transaction and in many; a
//! transaction rolled back bumps nothing; a change the map cannot read
//! stops the consumer with its table and column.

mod common;

use cache_key::GenerationScope;
use cache_key_pg::{ChangeLog, ChangeMap, ErrorKind, RowErrorKind};
use common::library::{
    Search, Setup, applied, book, config, counter, options, store, streaming, wal_lsn,
};
use common::redis_server::Server;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "starts PostgreSQL and redis-server: cargo test -- --include-ignored"]
async fn each_committed_change_bumps_the_tags_of_its_old_and_new_rows() {
    let Some(setup) = Setup::start().await else {
        return;
    };
    let (redis, db) = (&setup.redis, &setup.db);
    let (log, _task) = setup.consumer("shelf").await;

    // Insert, two rows in one transaction: each book's counter is made.
    db.batch_execute(
        "INSERT INTO books (id, branch, title) VALUES (1, 1, 'Ficciones'), (2, 1, 'Aleph')",
    )
    .await
    .unwrap();
    applied(&log, wal_lsn(db).await).await;
    let (one, two) = (counter(redis, &book(1, 1)), counter(redis, &book(1, 2)));
    assert!(one.is_some() && two.is_some(), "{one:?} {two:?}");
    let namespace = counter(redis, &GenerationScope::namespace::<Search>());
    assert!(
        namespace.is_some(),
        "a new slot bumps the declared namespace"
    );

    // An update of a column no tag reads: that book only.
    db.batch_execute("UPDATE books SET title = 'El Aleph' WHERE id = 2")
        .await
        .unwrap();
    applied(&log, wal_lsn(db).await).await;
    assert_eq!(counter(redis, &book(1, 1)), one);
    let two_retitled = counter(redis, &book(1, 2));
    assert!(two_retitled > two, "{two_retitled:?} > {two:?}");

    // The tag's tenant column changed: book 2 of branch 1 and of branch 2.
    db.batch_execute("UPDATE books SET branch = 2 WHERE id = 2")
        .await
        .unwrap();
    applied(&log, wal_lsn(db).await).await;
    assert!(counter(redis, &book(1, 2)) > two_retitled);
    let moved = counter(redis, &book(2, 2));
    assert!(moved.is_some());

    // The tag's id column changed: book 1 and book 10.
    let before = counter(redis, &book(1, 1));
    db.batch_execute("UPDATE books SET id = 10 WHERE id = 1")
        .await
        .unwrap();
    applied(&log, wal_lsn(db).await).await;
    assert!(counter(redis, &book(1, 1)) > before);
    let ten = counter(redis, &book(1, 10));
    assert!(ten.is_some());

    // A delete: the deleted row's book.
    db.batch_execute("DELETE FROM books WHERE id = 10")
        .await
        .unwrap();
    applied(&log, wal_lsn(db).await).await;
    assert!(counter(redis, &book(1, 10)) > ten);

    // Rolled back: never sent, never bumped; the next commit is.
    db.batch_execute(
        "BEGIN; INSERT INTO books (id, branch, title) VALUES (99, 1, 'Never'); ROLLBACK",
    )
    .await
    .unwrap();
    db.batch_execute("INSERT INTO books (id, branch, title) VALUES (3, 1, 'Sand')")
        .await
        .unwrap();
    applied(&log, wal_lsn(db).await).await;
    assert_eq!(counter(redis, &book(1, 99)), None);
    assert!(counter(redis, &book(1, 3)).is_some());

    // Many transactions, one row each: every one bumped.
    for id in 100..150i32 {
        db.execute(
            "INSERT INTO books (id, branch, title) VALUES ($1, 3, 'Many')",
            &[&id],
        )
        .await
        .unwrap();
    }
    applied(&log, wal_lsn(db).await).await;
    let missing: Vec<u32> = (100..150u32)
        .filter(|&id| counter(redis, &book(3, id)).is_none())
        .collect();
    assert!(missing.is_empty(), "books never bumped: {missing:?}");

    // A truncate names no row: the declared namespace ends.
    let namespace = counter(redis, &GenerationScope::namespace::<Search>());
    db.batch_execute("TRUNCATE books").await.unwrap();
    applied(&log, wal_lsn(db).await).await;
    assert!(counter(redis, &GenerationScope::namespace::<Search>()) > namespace);

    let stats = log.stats();
    assert_eq!(stats.slots_made(), 1);
    assert_eq!(stats.failed_bumps(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "starts PostgreSQL and redis-server: cargo test -- --include-ignored"]
async fn an_old_row_without_the_tenant_column_stops_the_consumer_naming_it() {
    let Some(setup) = Setup::start().await else {
        return;
    };
    let (redis, db) = (&setup.redis, &setup.db);
    // The default replica identity: an UPDATE logs no old `branch`.
    db.batch_execute("ALTER TABLE books REPLICA IDENTITY DEFAULT")
        .await
        .unwrap();
    let (log, task) = setup.consumer("narrow").await;
    db.batch_execute("INSERT INTO books (id, branch, title) VALUES (1, 1, 'Ficciones')")
        .await
        .unwrap();
    applied(&log, wal_lsn(db).await).await;
    let namespace = counter(redis, &GenerationScope::namespace::<Search>());
    let position = log.applied().lsn();

    db.batch_execute("UPDATE books SET branch = 2 WHERE id = 1")
        .await
        .unwrap();
    let error = tokio::time::timeout(std::time::Duration::from_secs(60), task)
        .await
        .expect("the consumer stops")
        .unwrap();
    assert_eq!(
        error.kind(),
        &ErrorKind::Row {
            table: "public.books".into()
        }
    );
    let row = std::error::Error::source(&error)
        .and_then(|source| source.downcast_ref::<cache_key_pg::RowError>())
        .expect("the row error as the source");
    assert_eq!(row.column(), Some("branch"));
    assert!(matches!(row.kind(), RowErrorKind::NarrowReplicaIdentity(_)));
    // Not skipped: nothing confirmed past it, and the namespace ended.
    assert_eq!(log.applied().lsn(), position);
    assert!(counter(redis, &GenerationScope::namespace::<Search>()) > namespace);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "starts PostgreSQL and redis-server: cargo test -- --include-ignored"]
async fn a_published_table_the_map_does_not_name_is_an_error() {
    let Some(setup) = Setup::start().await else {
        return;
    };
    let (postgres, redis, db) = (&setup.postgres, &setup.redis, &setup.db);
    db.batch_execute(
        "CREATE TABLE loans (id integer PRIMARY KEY); \
         CREATE PUBLICATION books_changes FOR TABLE books, loans",
    )
    .await
    .unwrap();
    let log = ChangeLog::new(
        config(postgres, "unmapped"),
        common::library::map(),
        options(),
    )
    .unwrap();
    let store = store(redis).await;
    let running = tokio::spawn(async move { log.run(&*store).await.map(|never| match never {}) });
    streaming(db, "unmapped").await;
    db.batch_execute("INSERT INTO loans VALUES (1)")
        .await
        .unwrap();
    let error = tokio::time::timeout(std::time::Duration::from_secs(60), running)
        .await
        .expect("the consumer stops")
        .unwrap()
        .unwrap_err();
    assert_eq!(error.kind(), &ErrorKind::Unmapped("public.loans".into()));

    // And a publication that leaves a mapped table out is refused at once.
    db.batch_execute(
        "CREATE TABLE shelves (id integer PRIMARY KEY); CREATE PUBLICATION other FOR TABLE shelves",
    )
    .await
    .unwrap();
    let map = ChangeMap::new()
        .namespace::<Search>()
        .table("books", |_, _| Ok(()))
        .unwrap();
    let mut config = config(postgres, "other");
    config.publication = "other".into();
    let log = ChangeLog::new(config, map, options()).unwrap();
    let error = log
        .run(&*store_for(redis).await)
        .await
        .map(|never| match never {})
        .unwrap_err();
    assert!(matches!(error.kind(), ErrorKind::Publication(_)), "{error}");
}

async fn store_for(redis: &Server) -> std::sync::Arc<cache_key::redis::AsyncRedisGenerations> {
    store(redis).await
}
