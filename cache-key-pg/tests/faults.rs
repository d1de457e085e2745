//! The consumer under real faults: killed with `SIGKILL` at random points
//! while writes go on (then no change's bump is missing, checked against
//! the rows the database holds), killed after making its slot and before
//! its namespaces' bumps landed (Redis refusing writes), PostgreSQL
//! crashed and restarted, Redis down for 10 s while changes commit, the
//! slot dropped behind its back.

mod common;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use cache_key::GenerationScope;
use common::library::{
    Search, Setup, applied, book, confirmed, counter, slot_exists, sql, streaming, wal_lsn,
};
use common::wait::until;

type Sql = dyn tokio_postgres::types::ToSql + Sync;

/// Set in the consumer process the kill test starts: `<pg port>,<redis port>`.
const CONSUMER_ENV: &str = "CACHE_KEY_PG_CONSUMER";

/// A consumer process, killed (`SIGKILL`, by its pid) when dropped, also
/// when a test fails: it would retry a gone PostgreSQL forever.
struct Consumer(Child);

impl Consumer {
    fn kill(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for Consumer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A consumer in a process of its own: this test binary again, running
/// only [`consumer_process`] with [`CONSUMER_ENV`] set.
fn spawn_process(setup: &Setup) -> Consumer {
    let child = Command::new(std::env::current_exe().expect("the test binary"))
        .args([
            "--exact",
            "consumer_process",
            // It is ignored by default, as every test here.
            "--include-ignored",
            "--nocapture",
        ])
        .env(
            CONSUMER_ENV,
            format!("{},{}", setup.postgres.port(), setup.redis.port()),
        )
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("a consumer process");
    Consumer(child)
}

/// With [`CONSUMER_ENV`]: the consumer process of the kill test, following
/// slot `killed` until killed. Alone: a consumer in a process of its own
/// applies a commit made after it started.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "starts PostgreSQL and redis-server: cargo test -- --include-ignored"]
async fn consumer_process() {
    if let Ok(ports) = std::env::var(CONSUMER_ENV) {
        let (pg, redis) = ports.split_once(',').expect("two ports");
        let url = format!("redis://127.0.0.1:{redis}/");
        let pool = cache_key::redis::AsyncRedisPool::connect(url)
            .await
            .unwrap();
        let store = cache_key::redis::AsyncRedisGenerations::new(pool);
        let config = cache_key_pg::ReplicationConfig::new(
            "127.0.0.1",
            "postgres",
            "",
            "postgres",
            "killed",
            "books_changes",
        )
        .with_port(pg.parse().unwrap())
        // Each confirmation sent at once: one sent before its bumps
        // returned would be on the server when a kill lands.
        .with_status_interval(Duration::from_millis(1));
        let log = cache_key_pg::ChangeLog::new(
            config,
            common::library::map(),
            common::library::options(),
        )
        .unwrap();
        let error = log
            .run(&store)
            .await
            .map(|never| match never {})
            .unwrap_err();
        panic!("the consumer stopped: {error}");
    }
    let Some(setup) = Setup::start().await else {
        return;
    };
    let mut child = spawn_process(&setup);
    streaming(&setup.db, "killed").await;
    confirmed(&setup.db, "killed", setup.insert(1, 1, "Ficciones").await).await;
    assert!(counter(&setup.redis, &book(1, 1)).is_some());
    child.kill();
}

/// A small xorshift, seeded from the clock (printed, to replay a failure).
struct Random(u64);

impl Random {
    fn new() -> Self {
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64
            | 1;
        eprintln!("seed {seed}");
        Random(seed)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "starts PostgreSQL and redis-server: cargo test -- --include-ignored"]
async fn killed_twenty_times_while_writes_go_on_no_bump_is_missing() {
    let Some(setup) = Setup::start().await else {
        return;
    };
    let mut child = spawn_process(&setup);
    streaming(&setup.db, "killed").await;

    // The writer: each transaction inserts a row or retitles one, its
    // `clock` column the Redis clock read before it commits; a few roll
    // back. Each row's last change is then checked: its book's counter is
    // above that clock, so a bump of it ran after that commit.
    let mut writer_db = sql(&setup.postgres).await;
    let redis_url = setup.redis.url();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writing = stop.clone();
    let writer = tokio::spawn(async move {
        let mut redis = redis::Client::open(redis_url)
            .unwrap()
            .get_connection()
            .unwrap();
        let mut random = Random::new();
        let (mut committed, mut rolled_back) = (0u32, Vec::new());
        let mut next = 1i32;
        while !writing.load(std::sync::atomic::Ordering::Relaxed) {
            let (seconds, micros): (i64, i64) = redis::cmd("TIME").query(&mut redis).unwrap();
            let clock = (seconds - 1_577_836_800) * 1_000_000 + micros;
            let transaction = writer_db.transaction().await.unwrap();
            match random.below(10) {
                0 => {
                    let id = 1_000_000 + next;
                    next += 1;
                    transaction
                        .execute(
                            "INSERT INTO books VALUES ($1, 9, 'rolled back', $2)",
                            &[&id as &Sql, &clock],
                        )
                        .await
                        .unwrap();
                    transaction.rollback().await.unwrap();
                    rolled_back.push(id as u32);
                    continue;
                }
                1..=3 if next > 1 => {
                    let id = 1 + random.below(next as u64 - 1) as i32;
                    transaction
                        .execute(
                            "UPDATE books SET title = title || '+', clock = $2 WHERE id = $1",
                            &[&id as &Sql, &clock],
                        )
                        .await
                        .unwrap();
                }
                _ => {
                    transaction
                        .execute(
                            "INSERT INTO books VALUES ($1, $1 % 5, 'new', $2)",
                            &[&next as &Sql, &clock],
                        )
                        .await
                        .unwrap();
                    next += 1;
                }
            }
            transaction.commit().await.unwrap();
            committed += 1;
        }
        (committed, rolled_back)
    });

    let mut random = Random::new();
    for _ in 0..20 {
        tokio::time::sleep(Duration::from_millis(50 + random.below(400))).await;
        child.kill();
        child = spawn_process(&setup);
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let (committed, rolled_back) = writer.await.unwrap();
    confirmed(&setup.db, "killed", wal_lsn(&setup.db).await).await;
    child.kill();

    let rows = setup
        .db
        .query("SELECT id, branch, clock FROM books", &[])
        .await
        .unwrap();
    let mut missing = Vec::new();
    for row in &rows {
        let (id, branch, clock): (i32, i32, i64) = (row.get(0), row.get(1), row.get(2));
        let value = counter(&setup.redis, &book(branch as u32, id as u32));
        if value.is_none_or(|value| value <= clock as u64) {
            missing.push((id, value, clock));
        }
    }
    eprintln!(
        "{committed} transactions committed, {} rows checked, {} rolled back, 20 kills",
        rows.len(),
        rolled_back.len()
    );
    assert!(rows.len() > 100, "too few writes to judge: {}", rows.len());
    assert!(
        missing.is_empty(),
        "rows whose last change was never bumped: {missing:?}"
    );
    let bumped: Vec<u32> = (rolled_back.iter())
        .copied()
        .filter(|&id| counter(&setup.redis, &book(9, id)).is_some())
        .collect();
    assert!(bumped.is_empty(), "rolled-back rows bumped: {bumped:?}");
}

/// Redis refusing writes (`min-replicas-to-write` with no replica), or not.
fn refuse_writes(redis: &common::redis_server::Server, refuse: bool) {
    let () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("min-replicas-to-write")
        .arg(u8::from(refuse))
        .query(&mut redis.connect())
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "starts PostgreSQL and redis-server: cargo test -- --include-ignored"]
async fn killed_after_making_its_slot_before_its_namespace_bumps_the_next_consumer_makes_them() {
    let Some(setup) = Setup::start().await else {
        return;
    };
    let namespace = GenerationScope::namespace::<Search>();
    let before = counter(&setup.redis, &namespace);
    // Every bump fails: the consumer makes its slot, then retries the
    // namespaces' bumps until it is killed.
    refuse_writes(&setup.redis, true);
    let mut child = spawn_process(&setup);
    let made = until(async || {
        let rows = setup
            .db
            .query(
                "SELECT slot_name::text FROM pg_replication_slots WHERE slot_name LIKE 'killed%'",
                &[],
            )
            .await
            .unwrap();
        let names: Vec<String> = rows.iter().map(|row| row.get(0)).collect();
        match names.is_empty() {
            true => Err("no slot made".to_owned()),
            false => Ok(names),
        }
    })
    .await;
    child.kill();
    assert_eq!(counter(&setup.redis, &namespace), before, "slots {made:?}");
    // Committed before any slot of it was made, and never bumped.
    refuse_writes(&setup.redis, false);
    let _child = spawn_process(&setup);
    streaming(&setup.db, "killed").await;
    until(async || match counter(&setup.redis, &namespace) > before {
        true => Ok(()),
        false => Err(format!(
            "the namespace never bumped (slots when killed: {made:?})"
        )),
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "starts PostgreSQL and redis-server: cargo test -- --include-ignored"]
async fn a_staging_slot_left_beside_its_copy_is_dropped_without_a_bump() {
    let Some(setup) = Setup::start().await else {
        return;
    };
    // What a consumer stopped between the copy and the drop leaves (its
    // publication made before its slots, its namespaces bumped before the
    // copy).
    for step in [
        "CREATE PUBLICATION books_changes FOR TABLE books",
        "SELECT pg_create_logical_replication_slot('left_owed', 'pgoutput')",
        "SELECT pg_copy_logical_replication_slot('left_owed', 'left')",
    ] {
        setup.db.batch_execute(step).await.unwrap();
    }
    let store = common::library::store(&setup.redis).await;
    let (log, _task) = common::library::spawn_consumer(&setup.postgres, "left", store);
    applied(&log, setup.insert(1, 1, "Ficciones").await).await;
    assert!(counter(&setup.redis, &book(1, 1)).is_some());
    let stats = log.stats();
    assert_eq!(stats.namespace_bumps(), 0, "{stats:?}");
    assert_eq!(stats.slots_made(), 0, "{stats:?}");
    assert!(
        !slot_exists(&setup.db, "left_owed").await,
        "the staging slot was dropped"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "starts PostgreSQL and redis-server: cargo test -- --include-ignored"]
async fn redis_down_ten_seconds_the_bumps_arrive_after_it_returns() {
    let Some(mut setup) = Setup::start().await else {
        return;
    };
    let (log, _task) = setup.consumer("outage").await;
    applied(&log, setup.insert(1, 1, "before").await).await;

    setup.redis.stop();
    let down = Instant::now();
    for id in 2..12 {
        setup
            .db
            .execute(
                "INSERT INTO books (id, branch, title) VALUES ($1, 1, 'during')",
                &[&id],
            )
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(1_000)).await;
    }
    let last = wal_lsn(&setup.db).await;
    // Nothing confirmed past the changes whose bumps have not returned.
    assert!(log.applied().lsn() < last);
    assert!(down.elapsed() >= Duration::from_secs(10));
    setup.redis.restart();
    applied(&log, last).await;
    let missing: Vec<u32> = (2..12u32)
        .filter(|&id| counter(&setup.redis, &book(1, id)).is_none())
        .collect();
    assert!(missing.is_empty(), "never bumped: {missing:?}");
    assert!(log.stats().failed_bumps() > 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "starts PostgreSQL and redis-server: cargo test -- --include-ignored"]
async fn postgres_crashed_and_restarted_the_consumer_goes_on() {
    let Some(mut setup) = Setup::start().await else {
        return;
    };
    let (log, _task) = setup.consumer("crash").await;
    applied(&log, setup.insert(1, 1, "before").await).await;

    setup.postgres.crash_and_restart();
    let db = sql(&setup.postgres).await;
    db.batch_execute("INSERT INTO books (id, branch, title) VALUES (2, 1, 'after')")
        .await
        .unwrap();
    applied(&log, wal_lsn(&db).await).await;
    assert!(counter(&setup.redis, &book(1, 2)).is_some());
    assert!(log.stats().connections() >= 2);
    assert_eq!(log.stats().slots_made(), 1, "the slot survived the crash");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "starts PostgreSQL and redis-server: cargo test -- --include-ignored"]
async fn the_slot_dropped_behind_its_back_bumps_the_namespaces() {
    let Some(setup) = Setup::start().await else {
        return;
    };
    // Its sessions 1 s apart: the slot is dropped between two.
    let options = cache_key_pg::Options {
        retry_min: Duration::from_secs(1),
        ..common::library::options()
    };
    let (log, _task) = setup.consumer_with("dropped", options).await;
    let namespace = GenerationScope::namespace::<Search>();
    let before = counter(&setup.redis, &namespace);
    let made = log.stats().slots_made();

    // End the consumer's session (waiting until its walsender exited),
    // then drop the slot before the consumer opens another.
    setup
        .db
        .batch_execute(
            "SELECT pg_terminate_backend(active_pid, 10000) FROM pg_replication_slots \
             WHERE slot_name = 'dropped' AND active",
        )
        .await
        .unwrap();
    setup
        .db
        .batch_execute("SELECT pg_drop_replication_slot('dropped')")
        .await
        .unwrap();
    // Committed while no slot exists: never sent to anyone.
    setup.insert(1, 1, "unseen").await;
    streaming(&setup.db, "dropped").await;
    applied(&log, setup.insert(2, 1, "seen").await).await;
    assert_eq!(log.stats().slots_made(), made + 1, "{:?}", log.stats());
    assert!(
        counter(&setup.redis, &namespace) > before,
        "the namespace was bumped"
    );
    assert!(counter(&setup.redis, &book(1, 2)).is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "starts PostgreSQL and redis-server: cargo test -- --include-ignored"]
async fn a_slot_postgres_invalidated_while_the_consumer_was_down_is_made_anew() {
    let Some(setup) = Setup::start().await else {
        return;
    };
    let (log, task) = setup.consumer("lost").await;
    applied(&log, setup.insert(1, 1, "before").await).await;
    task.abort();
    let _ = task.await;

    // Down, while more WAL is written than the slot may keep: PostgreSQL
    // ends the slot at the next checkpoint (`wal_status` = 'lost').
    for sql in [
        "ALTER SYSTEM SET max_slot_wal_keep_size = '1MB'",
        "SELECT pg_reload_conf()",
    ] {
        setup.db.batch_execute(sql).await.unwrap();
    }
    setup.insert(2, 1, "unseen").await;
    let mut status = String::new();
    for round in 0..20 {
        let first = 1_000_000 + round * 20_000;
        setup
            .db
            .execute(
                "INSERT INTO books (id, branch, title) \
                 SELECT g, 2, 'filler' FROM generate_series($1::int, $1::int + 19999) g",
                &[&first],
            )
            .await
            .unwrap();
        for sql in ["SELECT pg_switch_wal()", "CHECKPOINT"] {
            setup.db.batch_execute(sql).await.unwrap();
        }
        status = setup
            .db
            .query_one(
                "SELECT coalesce(wal_status, '') FROM pg_replication_slots WHERE slot_name = 'lost'",
                &[],
            )
            .await
            .unwrap()
            .get(0);
        if status == "lost" {
            break;
        }
    }
    assert_eq!(status, "lost", "PostgreSQL kept the slot");
    let namespace = GenerationScope::namespace::<Search>();
    let before = counter(&setup.redis, &namespace);

    let (log, _task) = setup.consumer("lost").await;
    applied(&log, setup.insert(3, 1, "after").await).await;
    assert_eq!(log.stats().slots_made(), 1, "the lost slot was made anew");
    assert!(
        counter(&setup.redis, &namespace) > before,
        "the namespace was bumped"
    );
    assert!(counter(&setup.redis, &book(1, 3)).is_some());
}

/// Two consumers of one slot started together race to make its staging
/// slot (in the runs so far the second had made, bumped and failed nothing
/// by the end; one that fails retries, and one that finds the staging slot
/// owes its bumps and makes them too). Whichever streams bumped its namespaces
/// first: more bumps than one, never fewer; a change committed once it
/// streams is applied, and no staging slot is left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "starts PostgreSQL and redis-server: cargo test -- --include-ignored"]
async fn two_consumers_started_together_on_one_slot_bump_at_least_once_and_one_streams() {
    let Some(setup) = Setup::start().await else {
        return;
    };
    let namespace = GenerationScope::namespace::<Search>();
    let before = counter(&setup.redis, &namespace);
    let store = common::library::store(&setup.redis).await;
    let (a, _a) = common::library::spawn_consumer(&setup.postgres, "raced", store.clone());
    let (b, _b) = common::library::spawn_consumer(&setup.postgres, "raced", store);
    streaming(&setup.db, "raced").await;
    until(async || {
        let (a, b) = (a.stats(), b.stats());
        match a.namespace_bumps() + b.namespace_bumps() {
            0 => Err(format!("neither bumped its namespaces: {a:?}, {b:?}")),
            _ => Ok(()),
        }
    })
    .await;
    assert!(counter(&setup.redis, &namespace) > before);

    setup.insert(1, 1, "Pedro Páramo").await;
    until(async || match counter(&setup.redis, &book(1, 1)) {
        Some(_) => Ok(()),
        None => Err(format!(
            "book 1 not bumped: {:?}, {:?}",
            a.stats(),
            b.stats()
        )),
    })
    .await;
    until(async || match slot_exists(&setup.db, "raced_owed").await {
        false => Ok(()),
        true => Err("the staging slot raced_owed is left".to_owned()),
    })
    .await;
}
