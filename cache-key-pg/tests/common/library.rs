//! The tests' library: a `books` table whose rows are the entity `book`
//! inside the tenant `branch`, its map, and a PostgreSQL, a redis-server
//! and a consumer of their own.

use std::sync::Arc;
use std::time::Duration;

use cache_key::redis::{AsyncRedisGenerations, AsyncRedisPool};
use cache_key::{CacheKey, CacheTags, GenerationScope};
use cache_key_pg::{ChangeLog, ChangeMap, Lsn, Options, ReplicationConfig};
use serde::{Deserialize, Serialize};
use tokio_postgres::NoTls;

use super::postgres::Postgres;
use super::redis_server::Server;
use super::wait::until;

/// A book as a search returns it: tagged with its id, inside its branch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, CacheTags)]
pub struct Title {
    #[tag = "book"]
    pub id: u32,
    pub title: String,
}

/// A search of one branch's books, its answers tagged with the books they
/// hold.
#[derive(CacheKey)]
#[cache_key(namespace = "shelf", operation = "search", value = Vec<Title>, ttl = "10m", value_tags)]
pub struct Search<'a> {
    #[tenant]
    pub branch: u32,
    #[criterion]
    pub title: &'a str,
}

pub const SCHEMA: &str = "
    CREATE TABLE books (
        id integer PRIMARY KEY,
        branch integer NOT NULL,
        title text NOT NULL,
        -- the writer's Redis clock before its commit, for the history checks
        clock bigint NOT NULL DEFAULT 0
    );
    -- An UPDATE or DELETE logs the whole old row: the old branch is a tag's tenant.
    ALTER TABLE books REPLICA IDENTITY FULL;
";

/// `books`: a row is the entity `book` = `id` in the tenant `branch`.
pub fn map() -> ChangeMap {
    ChangeMap::new()
        .namespace::<Search>()
        .table("books", |row, bumps| {
            let branch = row.get::<u32>("branch")?;
            bumps.push(Title::tag_scope_book::<Search>(
                &branch,
                &row.get::<u32>("id")?,
            )?);
            Ok(())
        })
        .expect("a valid map")
}

/// Book `id` of `branch`'s tag scope.
pub fn book(branch: u32, id: u32) -> GenerationScope {
    Title::tag_scope_book::<Search>(&branch, &id).expect("a tag scope")
}

/// The replication config of slot `slot` on `postgres`.
pub fn config(postgres: &Postgres, slot: &str) -> ReplicationConfig {
    ReplicationConfig::new(
        "127.0.0.1",
        "postgres",
        "",
        "postgres",
        slot,
        "books_changes",
    )
    .with_port(postgres.port())
    .with_status_interval(Duration::from_millis(100))
    .with_wakeup_interval(Duration::from_secs(1))
}

/// Options for tests: quick retries.
pub fn options() -> Options {
    Options {
        retry_min: Duration::from_millis(20),
        retry_max: Duration::from_millis(500),
        ..Options::default()
    }
}

/// An SQL connection to `postgres`.
pub async fn sql(postgres: &Postgres) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(&postgres.url(), NoTls)
        .await
        .expect("an SQL connection");
    tokio::spawn(connection);
    client
}

/// The WAL position now: after a commit returned, at or past its end.
pub async fn wal_lsn(sql: &tokio_postgres::Client) -> Lsn {
    let row = sql
        .query_one("SELECT pg_current_wal_lsn()::text", &[])
        .await
        .expect("pg_current_wal_lsn");
    Lsn::parse(row.get::<_, &str>(0)).expect("an LSN")
}

/// The value of `scope`'s counter in Redis, `None` when it does not exist.
pub fn counter(redis: &Server, scope: &GenerationScope) -> Option<u64> {
    let value: Option<String> = redis::cmd("GET")
        .arg(scope.counter().name())
        .query(&mut redis.connect())
        .expect("GET a counter");
    let value = value?;
    let digits = value.split(':').next().unwrap_or_default();
    Some(digits.parse().expect("a counter's digits"))
}

/// The Redis server's clock as the counters write it: microseconds since
/// 2020-01-01.
pub fn redis_clock(redis: &Server) -> u64 {
    let (seconds, micros): (u64, u64) = redis::cmd("TIME")
        .query(&mut redis.connect())
        .expect("TIME");
    (seconds - 1_577_836_800) * 1_000_000 + micros
}

/// A consumer's generation store on `redis`.
pub async fn store(redis: &Server) -> Arc<AsyncRedisGenerations> {
    store_at(redis.url()).await
}

/// A consumer's generation store on the Redis at `url`.
pub async fn store_at(url: String) -> Arc<AsyncRedisGenerations> {
    let pool = AsyncRedisPool::connect(url).await.expect("a pool");
    Arc::new(AsyncRedisGenerations::new(pool))
}

/// A consumer of slot `slot` with the tests' map, running on its own task.
pub fn spawn_consumer(
    postgres: &Postgres,
    slot: &str,
    store: Arc<AsyncRedisGenerations>,
) -> (Arc<ChangeLog>, tokio::task::JoinHandle<cache_key_pg::Error>) {
    spawn_consumer_with(postgres, slot, store, options())
}

/// [`spawn_consumer`] with `options`.
pub fn spawn_consumer_with(
    postgres: &Postgres,
    slot: &str,
    store: Arc<AsyncRedisGenerations>,
    options: Options,
) -> (Arc<ChangeLog>, tokio::task::JoinHandle<cache_key_pg::Error>) {
    let log = ChangeLog::new(config(postgres, slot), map(), options);
    let log = Arc::new(log.expect("a consumer"));
    let running = log.clone();
    let task = tokio::spawn(async move {
        match running.run(&*store).await {
            Ok(never) => match never {},
            Err(error) => error,
        }
    });
    (log, task)
}

/// Waits until `log` applied `lsn`; a failure after 60 s (the consumer is
/// stuck), never a pass.
pub async fn applied(log: &ChangeLog, lsn: Lsn) {
    let mut applied = log.applied();
    tokio::time::timeout(Duration::from_secs(60), applied.wait_for(lsn))
        .await
        .unwrap_or_else(|_| {
            panic!(
                "the consumer did not apply {lsn} in 60 s (at {})",
                log.applied().lsn()
            )
        })
        .expect("the consumer runs");
}

/// Whether slot `slot` exists.
pub async fn slot_exists(sql: &tokio_postgres::Client, slot: &str) -> bool {
    let rows = sql
        .query(
            "SELECT 1 FROM pg_replication_slots WHERE slot_name = $1",
            &[&slot],
        )
        .await
        .expect("pg_replication_slots");
    !rows.is_empty()
}

/// Waits until slot `slot`'s confirmed position reaches `lsn`: every change
/// before it was applied by some consumer (nothing is confirmed before its
/// bumps), and the next consumer of the slot starts there.
pub async fn confirmed(db: &tokio_postgres::Client, slot: &str, lsn: Lsn) {
    until(async || {
        let row = db
            .query_opt(
                "SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1",
                &[&slot],
            )
            .await
            .expect("pg_replication_slots");
        // No row, or NULL, while the slot is being made.
        let at = row.and_then(|row| Lsn::parse(row.get::<_, Option<&str>>(0)?).ok());
        match at.is_some_and(|at| at >= lsn) {
            true => Ok(()),
            false => Err(format!("slot {slot} confirmed at {at:?}, not {lsn}")),
        }
    })
    .await
}

/// Waits until a consumer streams from slot `slot`: a change committed
/// after this is sent to it. A walsender holds the slot: the consumer's SQL
/// session holds it too, for a moment, while it copies the staging slot to
/// it (`pg_copy_logical_replication_slot`), and that is not streaming.
pub async fn streaming(sql: &tokio_postgres::Client, slot: &str) {
    until(async || {
        let rows = sql
            .query(
                "SELECT 1 FROM pg_replication_slots s JOIN pg_stat_activity a \
                 ON a.pid = s.active_pid \
                 WHERE s.slot_name = $1 AND a.backend_type = 'walsender'",
                &[&slot],
            )
            .await
            .expect("pg_replication_slots");
        match rows.is_empty() {
            true => Err(format!("slot {slot} not streaming")),
            false => Ok(()),
        }
    })
    .await
}

/// Waits until a new consumer made its slot and bumped its namespaces: a
/// bump landing in the middle of a test would end its entries. (The slot
/// gets its name only after that bump, so a test that waited for it to
/// stream already waited for the bump; this says so in one place.)
pub async fn made_its_slot(log: &ChangeLog) {
    until(async || match log.stats().namespace_bumps() {
        0 => Err(format!("the consumer made no slot: {:?}", log.stats())),
        _ => Ok(()),
    })
    .await
}

/// A PostgreSQL with the `books` table, a redis-server, and an SQL
/// connection; `None` (the test skipped, after saying why) when either
/// server is not installed, a failure under CI.
pub struct Setup {
    pub postgres: Postgres,
    pub redis: Server,
    pub db: tokio_postgres::Client,
}

impl Setup {
    pub async fn start() -> Option<Setup> {
        if !super::redis_server::redis_installed() {
            return None;
        }
        let postgres = Postgres::start()?;
        let redis = Server::start(false).expect("redis-server");
        let db = sql(&postgres).await;
        db.batch_execute(SCHEMA).await.expect("the schema");
        Some(Setup {
            postgres,
            redis,
            db,
        })
    }

    /// A consumer of slot `slot` on a task of its own, once it streams.
    pub async fn consumer(
        &self,
        slot: &str,
    ) -> (Arc<ChangeLog>, tokio::task::JoinHandle<cache_key_pg::Error>) {
        self.consumer_with(slot, options()).await
    }

    /// [`consumer`](Self::consumer) with `options`.
    pub async fn consumer_with(
        &self,
        slot: &str,
        options: Options,
    ) -> (Arc<ChangeLog>, tokio::task::JoinHandle<cache_key_pg::Error>) {
        let store = store(&self.redis).await;
        let consumer = spawn_consumer_with(&self.postgres, slot, store, options);
        streaming(&self.db, slot).await;
        made_its_slot(&consumer.0).await;
        consumer
    }

    /// Inserts book `id` of `branch`, committed, and returns the WAL
    /// position after it.
    pub async fn insert(&self, id: i32, branch: i32, title: &str) -> Lsn {
        self.db
            .execute(
                "INSERT INTO books (id, branch, title) VALUES ($1, $2, $3)",
                &[&id, &branch, &title],
            )
            .await
            .expect("an insert");
        wal_lsn(&self.db).await
    }
}
