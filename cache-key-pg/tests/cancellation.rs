//! `ChangeLog::run` is cancel-safe: dropped at each point where it waits
//! (its k-th `Pending`), while it makes its slot and while it applies a
//! change, no change is lost. A change it was handed is applied, or read
//! again by the next `run`; a slot it made has its namespaces bumped, by
//! it or by the next `run`. On a real PostgreSQL and redis-server; ignored
//! by default: `cargo test -p cache-key-pg -- --include-ignored`.
//!
//! `run` never returns: the rounds stop once a dropped `run` itself did
//! what the round checks (the namespaces bumped, the change applied), so
//! every wait before that was a drop point. The dropped runs bump through
//! [`Queued`], so that a bump can be dropped before it is sent (on
//! loopback a bump's request is written before its first wait, and Redis
//! makes it whatever happens to its future): the second test then fails
//! when `apply` confirms before its bumps returned. `Applied::wait_for`,
//! dropped at each wait while the change it waits for is held back, leaves
//! the `Applied` it borrowed whole.

mod common;
#[path = "../../tests/common/drop_at_wait.rs"]
#[allow(dead_code)] // `run` never finishes: its rounds are this file's own
mod drop_at_wait;

use std::future::Future;
use std::sync::Arc;

use cache_key::generation::{
    AsyncGenerationStore, Counter, Counters, GenerationError, GenerationSum,
};
use cache_key::redis::AsyncRedisGenerations;
use cache_key_pg::{ChangeLog, Lsn};
use common::library::{
    Setup, applied, book, config, confirmed, counter, made_its_slot, map, options, slot_exists,
    store, streaming, wal_lsn,
};
use common::wait::until;
use drop_at_wait::dropped_at;

/// More rounds than `run` has waits before it streams and applies.
const MOST: usize = 500;

/// `AsyncRedisGenerations` whose bumps wait their turn before they are
/// sent (a pool's connection, say): a `run` dropped at that wait has sent
/// nothing, so confirming a change before its bump returned would lose it.
/// Then they wait until the gate is open: while it is shut, a change is
/// received and not yet applied.
struct Queued {
    store: Arc<AsyncRedisGenerations>,
    open: tokio::sync::watch::Receiver<bool>,
}

impl Queued {
    /// Bumps that take their turn, the gate always open.
    fn new(store: Arc<AsyncRedisGenerations>) -> Queued {
        Queued::gated(store, tokio::sync::watch::channel(true).1)
    }

    fn gated(
        store: Arc<AsyncRedisGenerations>,
        open: tokio::sync::watch::Receiver<bool>,
    ) -> Queued {
        Queued { store, open }
    }
}

#[allow(clippy::manual_async_fn, reason = "the trait's future is Send")]
impl AsyncGenerationStore for Queued {
    fn read<'a>(
        &'a self,
        counters: Counters<'a>,
        sum: &'a mut GenerationSum,
    ) -> impl Future<Output = Result<(), GenerationError>> + Send + 'a {
        self.store.read(counters, sum)
    }

    fn bump<'a>(
        &'a self,
        counter: Counter<'a>,
    ) -> impl Future<Output = Result<(), GenerationError>> + Send + 'a {
        async move {
            tokio::task::yield_now().await;
            let mut open = self.open.clone();
            open.wait_for(|open| *open).await.expect("the gate is kept");
            self.store.bump(counter).await
        }
    }
}

/// A consumer of `slot` with the tests' map.
fn consumer(setup: &Setup, slot: &str) -> Arc<ChangeLog> {
    let log = ChangeLog::new(config(&setup.postgres, slot), map(), options());
    Arc::new(log.expect("a consumer"))
}

/// `log` run again, on a task of its own, once it streams.
async fn resumed(
    setup: &Setup,
    log: &Arc<ChangeLog>,
    store: &Arc<AsyncRedisGenerations>,
    slot: &str,
) -> tokio::task::JoinHandle<()> {
    let (log, store) = (Arc::clone(log), Arc::clone(store));
    let task = tokio::spawn(async move {
        let error = log.run(&*store).await.map(|never| match never {});
        panic!("the resumed consumer stopped: {:?}", error.unwrap_err());
    });
    streaming(&setup.db, slot).await;
    task
}

/// Stops `task`'s consumer, and waits until its session ended.
async fn stop(setup: &Setup, task: tokio::task::JoinHandle<()>) {
    task.abort();
    assert!(task.await.unwrap_err().is_cancelled());
    sessions_ended(setup).await;
}

/// Waits until no replication session is open on PostgreSQL: a dropped
/// `run`'s goes on until its request (a slot being made) is done, and
/// holds its slot until then.
async fn sessions_ended(setup: &Setup) {
    let sql = "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'walsender'";
    until(async || {
        let open = setup
            .db
            .query_one(sql, &[])
            .await
            .expect("pg_stat_activity");
        match open.get::<_, i64>(0) {
            0 => Ok(()),
            open => Err(format!("{open} replication sessions open")),
        }
    })
    .await;
}

/// Current thread: the replication session's task runs only while `run`
/// waits, so that each of its round trips is a wait of `run`.
#[tokio::test]
#[ignore = "starts PostgreSQL and redis-server: cargo test -- --include-ignored"]
async fn a_run_dropped_at_each_wait_while_it_makes_its_slot_leaves_its_namespaces_owed() {
    let Some(setup) = Setup::start().await else {
        return;
    };
    let store = store(&setup.redis).await;
    let queued = Queued::new(Arc::clone(&store));
    let namespace = map().namespaces()[0].clone();
    for waits in 0..MOST {
        // A new slot each round: `run` makes it.
        let slot = format!("made_{waits}");
        let case = format!("run dropped at wait {waits}");
        let log = consumer(&setup, &slot);
        // A change from before the slot: only the namespace bump covers it.
        setup.insert(waits as i32 + 1, 1, "before the slot").await;
        let before = counter(&setup.redis, &namespace);
        let dropped = dropped_at(log.run(&queued), waits).await;
        assert!(dropped.is_none(), "{case}: run returned {dropped:?}");
        sessions_ended(&setup).await;
        let made = slot_exists(&setup.db, &slot).await;
        let bumped = counter(&setup.redis, &namespace) != before;

        // Resumed, the slot there or not, the namespace is bumped since
        // the round began, and a change after it is applied.
        let task = resumed(&setup, &log, &store, &slot).await;
        // Awaited, not read once: a slot shows active while it is being
        // made, before the resumed run bumps.
        until(async || match counter(&setup.redis, &namespace) {
            now if now != before => Ok(()),
            _ => Err(format!(
                "{case}: the namespace not bumped since the round began"
            )),
        })
        .await;
        let id = 10_000 + waits as i32;
        applied(&log, setup.insert(id, 1, "after the slot").await).await;
        assert!(
            counter(&setup.redis, &book(1, id as u32)).is_some(),
            "{case}"
        );
        stop(&setup, task).await;

        if made && bumped {
            println!("run made its slot and bumped its namespace in {waits} waits");
            return;
        }
    }
    panic!("run did not make its slot in {MOST} waits");
}

#[tokio::test]
#[ignore = "starts PostgreSQL and redis-server: cargo test -- --include-ignored"]
async fn a_run_dropped_at_each_wait_before_a_change_is_applied_reads_it_again() {
    let Some(setup) = Setup::start().await else {
        return;
    };
    let store = store(&setup.redis).await;
    let queued = Queued::new(Arc::clone(&store));
    let slot = "applying";
    let log = consumer(&setup, slot);
    // The slot made, and its namespaces bumped, before the rounds.
    let first = resumed(&setup, &log, &store, slot).await;
    confirmed(&setup.db, slot, wal_lsn(&setup.db).await).await;
    stop(&setup, first).await;
    for waits in 0..MOST {
        let case = format!("run dropped at wait {waits}");
        let id = waits as i32 + 1;
        let lsn = setup.insert(id, 2, "handed").await;
        // Confirmed by the dropped run: its change (the one committed since
        // the last run) was applied, so its bump returned.
        let at_start = log.applied().lsn();
        let dropped = dropped_at(log.run(&queued), waits).await;
        assert!(dropped.is_none(), "{case}: run returned {dropped:?}");
        sessions_ended(&setup).await;
        let advanced = log.applied().lsn() > at_start;
        let scope = book(2, id as u32);
        if advanced {
            let bumped = counter(&setup.redis, &scope).is_some();
            assert!(bumped, "{case}: confirmed, not bumped");
        }

        // Applied, or read again by the next run: never confirmed unbumped.
        let task = resumed(&setup, &log, &store, slot).await;
        applied(&log, lsn).await;
        assert!(
            counter(&setup.redis, &scope).is_some(),
            "{case}: the change lost"
        );
        // The next round's run reads its own change alone.
        confirmed(&setup.db, slot, lsn).await;
        stop(&setup, task).await;

        if advanced {
            println!("run applied a change in {waits} waits");
            return;
        }
    }
    panic!("run did not apply a change in {MOST} waits");
}

/// `Applied::wait_for` dropped at its first wait while the changes it waits
/// for are held back, then at each wait of a new one (each wait is the
/// applied position moving, here over three transactions) until one
/// finishes: a drop leaves the `Applied` it borrowed whole, and a wait made
/// once the changes were applied returns at once.
#[tokio::test]
#[ignore = "starts PostgreSQL and redis-server: cargo test -- --include-ignored"]
async fn a_wait_for_dropped_at_each_wait_leaves_its_applied_whole() {
    let Some(setup) = Setup::start().await else {
        return;
    };
    let (gate, open) = tokio::sync::watch::channel(true);
    let gated = Arc::new(Queued::gated(store(&setup.redis).await, open));
    let log = consumer(&setup, "watched");
    let task = {
        let (log, gated) = (Arc::clone(&log), Arc::clone(&gated));
        tokio::spawn(async move {
            let error = log.run(&*gated).await.map(|never| match never {});
            panic!("the consumer stopped: {:?}", error.unwrap_err());
        })
    };
    streaming(&setup.db, "watched").await;
    made_its_slot(&log).await;

    gate.send_replace(false);
    let mut lsn = Lsn(0);
    for id in 1..=3 {
        lsn = setup.insert(id, 1, "held back").await;
    }
    let mut applied = log.applied();
    // Shut, nothing moves the position: its one wait is its first.
    let dropped = dropped_at(applied.wait_for(lsn), 0).await;
    assert!(
        dropped.is_none(),
        "applied with its bumps held: {dropped:?}"
    );
    gate.send_replace(true);
    let mut waits = 0;
    let reached = loop {
        match dropped_at(applied.wait_for(lsn), waits).await {
            Some(reached) => break reached.expect("the consumer runs"),
            None => waits += 1,
        }
    };
    assert!(reached >= lsn, "{reached} before {lsn}");
    for id in 1..=3 {
        assert!(counter(&setup.redis, &book(1, id)).is_some(), "{id} bumped");
    }
    let again = dropped_at(applied.wait_for(lsn), 0).await;
    assert!(matches!(again, Some(Ok(at)) if at >= lsn), "{again:?}");
    stop(&setup, task).await;
}
