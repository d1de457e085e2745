//! Commit → bump applied, on loopback: single-row INSERTs committed at 1,
//! 100 and 5,000 changes/s into a PostgreSQL of our own, a `ChangeLog`
//! bumping each book's tag in a redis-server of our own. A change's time is
//! from its COMMIT returning to the writer until a subscriber of
//! `cache-key:counters` (where the counter script publishes every counter
//! it writes) hears its book's counter: the bump applied, plus one pub/sub
//! delivery. Beside it, in the same run, a bare `invalidate` round trip,
//! and what the slot keeps while the consumer is down: WAL retained for
//! 100,000 changes, and the time to catch up.
//!
//! `cargo bench -p cache-key-pg --bench commit_to_bump`; figures in
//! BENCHMARKS.md ("Invalidation from the commit log").

#[path = "../tests/common/mod.rs"]
mod common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cache_key::generation::AsyncGenerationStore;
use common::library::{Setup, book, sql, store};

/// When each counter was first heard of, by name.
type Heard = Arc<Mutex<HashMap<String, Instant>>>;

fn listen(url: String) -> Heard {
    let heard: Heard = Arc::default();
    let keep = heard.clone();
    let mut connection = redis::Client::open(url).unwrap().get_connection().unwrap();
    std::thread::spawn(move || {
        let mut pubsub = connection.as_pubsub();
        pubsub.subscribe("cache-key:counters").unwrap();
        while let Ok(message) = pubsub.get_message() {
            let at = Instant::now();
            let name: String = message.get_payload().unwrap();
            keep.lock().unwrap().entry(name).or_insert(at);
        }
    });
    heard
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// Commits `rate` single-row changes a second for `seconds`, over
/// `writers` connections; each change's time to its bump.
async fn run(setup: &Setup, heard: &Heard, first_id: i32, rate: u32, seconds: u32, writers: u32) {
    let per_writer = rate / writers;
    let total = per_writer * seconds;
    let mut tasks = Vec::new();
    for writer in 0..writers {
        let db = sql(&setup.postgres).await;
        tasks.push(tokio::spawn(async move {
            let mut committed = Vec::with_capacity(total as usize);
            let mut tick = tokio::time::interval(Duration::from_secs(1) / per_writer);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
            for n in 0..total {
                tick.tick().await;
                let id = first_id + (writer * total + n) as i32;
                db.execute(
                    "INSERT INTO books (id, branch, title) VALUES ($1, 1, 'b')",
                    &[&id],
                )
                .await
                .unwrap();
                committed.push((id, Instant::now()));
            }
            committed
        }));
    }
    let mut committed = Vec::new();
    for task in tasks {
        committed.extend(task.await.unwrap());
    }
    // Every bump heard, or 30 s.
    let deadline = Instant::now() + Duration::from_secs(30);
    let names: Vec<(String, Instant)> = committed
        .iter()
        .map(|&(id, at)| (book(1, id as u32).counter().name(), at))
        .collect();
    loop {
        let all = {
            let heard = heard.lock().unwrap();
            names.iter().all(|(name, _)| heard.contains_key(name))
        };
        if all || Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let heard = heard.lock().unwrap();
    let mut times: Vec<Duration> = names
        .iter()
        .filter_map(|(name, at)| {
            heard
                .get(name)
                .map(|heard| heard.saturating_duration_since(*at))
        })
        .collect();
    times.sort();
    println!(
        "{rate:>5} changes/s: {} changes, {} bumps heard; commit → bump p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        names.len(),
        times.len(),
        percentile(&times, 0.5).as_secs_f64() * 1e3,
        percentile(&times, 0.99).as_secs_f64() * 1e3,
        times.last().unwrap().as_secs_f64() * 1e3,
    );
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let setup = Setup::start()
        .await
        .expect("postgres and redis-server installed");
    let heard = listen(setup.redis.url());
    let (log, task) = setup.consumer("bench").await;

    // A bump alone, on the same server: its round trip.
    let bumps = store(&setup.redis).await;
    let mut alone = Vec::new();
    for id in 1..=2_000u32 {
        let started = Instant::now();
        bumps.invalidate(&book(2, id)).await.unwrap();
        alone.push(started.elapsed());
    }
    alone.sort();
    println!(
        "a bump alone: p50 {:.3} ms, p99 {:.3} ms",
        percentile(&alone, 0.5).as_secs_f64() * 1e3,
        percentile(&alone, 0.99).as_secs_f64() * 1e3
    );

    run(&setup, &heard, 1, 1, 30, 1).await;
    run(&setup, &heard, 1_000, 100, 10, 1).await;
    run(&setup, &heard, 100_000, 5_000, 5, 4).await;

    // Down: what the slot keeps.
    task.abort();
    let _ = task.await;
    let applied = log.applied().lsn();
    let retained = |db: tokio_postgres::Client| async move {
        let row = db
            .query_one(
                "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn)::bigint \
                 FROM pg_replication_slots WHERE slot_name = 'bench'",
                &[],
            )
            .await
            .unwrap();
        row.get::<_, i64>(0)
    };
    let before = retained(sql(&setup.postgres).await).await;
    setup
        .db
        .batch_execute(
            "INSERT INTO books (id, branch, title) \
             SELECT g, 1, 'down' FROM generate_series(1000000, 1099999) g",
        )
        .await
        .unwrap();
    for id in 1_100_000..1_100_100 {
        setup.insert(id, 1, "down").await;
    }
    let after = retained(sql(&setup.postgres).await).await;
    println!(
        "consumer down (applied {applied}): the slot retains {:.1} MiB of WAL for 100,100 changes \
         (100,000 in one transaction, 100 in their own), {:.1} MiB before",
        after as f64 / (1 << 20) as f64,
        before as f64 / (1 << 20) as f64
    );
    let started = Instant::now();
    let (log, _task) = setup.consumer("bench").await;
    let end = common::library::wal_lsn(&setup.db).await;
    common::library::applied(&log, end).await;
    println!(
        "back up: caught up in {:.2} s, {} bumps ({} transactions)",
        started.elapsed().as_secs_f64(),
        log.stats().bumps(),
        log.stats().transactions()
    );
}
