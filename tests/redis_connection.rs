//! The pools' own connections to one server (`RedisPool`'s and
//! `AsyncRedisPool`'s: they speak RESP2 on a socket of their own and read
//! replies from their own buffer), on a real `redis-server`: the URL's
//! user, password and database; a URL they cannot serve refused when the
//! pool is made; your own commands answered exactly as the `redis` crate's
//! own connection answers them, small and large, pipelined, in a
//! transaction, refused; and an async pool's tasks on one connection.
//!
//! Each test starts its own server (`tests/common/redis_server.rs`) and
//! stops it by pid. Ignored by default; run them with `cargo test --
//! --include-ignored`. Without `redis-server` they are skipped with a
//! message, except under CI (`CI=true`), where that is a failure.

mod common;
#[path = "common/library_search.rs"]
mod library_search;

use std::error::Error;

use cache_key::Scopes;
use cache_key::cache::{AsyncQueryCache, AsyncTypedCache, QueryCache, TypedCache};
use cache_key::redis::{
    AsyncRedisCache, AsyncRedisGenerations, AsyncRedisPool, PooledConnection, RedisCache,
    RedisGenerations, RedisPool,
};
use common::async_runtime::runtime;
use common::redis_server::Server;
use library_search::{Search, dune, search};
use redis::{Cmd, ConnectionLike, ErrorKind, Pipeline, RedisResult, Value};
use tokio::runtime::Runtime;

/// Commands of your own on a pool's connection, either driver's.
enum Ours {
    Blocking(Box<PooledConnection>),
    Async(Runtime, AsyncRedisPool),
}

impl Ours {
    fn of(server: &Server) -> [Ours; 2] {
        let blocking = RedisPool::open(server.url()).unwrap().get().unwrap();
        let runtime = runtime();
        let pool = runtime
            .block_on(AsyncRedisPool::connect(server.url()))
            .unwrap();
        [
            Ours::Blocking(Box::new(blocking)),
            Ours::Async(runtime, pool),
        ]
    }

    fn name(&self) -> &'static str {
        match self {
            Ours::Blocking(_) => "blocking",
            Ours::Async(..) => "async",
        }
    }

    fn query<T: redis::FromRedisValue>(&mut self, command: &Cmd) -> RedisResult<T> {
        match self {
            Ours::Blocking(connection) => command.query(&mut **connection),
            Ours::Async(runtime, pool) => runtime.block_on(command.query_async(pool)),
        }
    }

    fn query_pipeline<T: redis::FromRedisValue>(&mut self, pipeline: &Pipeline) -> RedisResult<T> {
        match self {
            Ours::Blocking(connection) => pipeline.query(&mut **connection),
            Ours::Async(runtime, pool) => runtime.block_on(pipeline.query_async(pool)),
        }
    }
}

/// `error` and every error under it, as one line.
fn chain(error: &dyn Error) -> String {
    let mut line = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        line.push_str(": ");
        line.push_str(&cause.to_string());
        source = cause.source();
    }
    line
}

/// How many keys database `db` holds.
fn keys_in(server: &Server, db: i64) -> i64 {
    let mut connection = server.connect();
    let () = redis::cmd("SELECT").arg(db).query(&mut connection).unwrap();
    redis::cmd("DBSIZE").query(&mut connection).unwrap()
}

#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn the_urls_user_password_and_database_are_the_pools() {
    let Some(server) = Server::start(false) else {
        return;
    };
    // Commands and keys, and of the channels (none by default since Redis
    // 7) the one bumps publish on: what `RedisPool`'s docs ask of a user.
    let () = redis::cmd("ACL")
        .arg(
            &[
                "SETUSER",
                "cache",
                "on",
                ">s3cret",
                "~*",
                "&cache-key:counters",
                "+@all",
            ][..],
        )
        .query(&mut server.connect())
        .unwrap();
    let url = |password: &str| format!("redis://cache:{password}@127.0.0.1:{}/3", server.port());

    let pool = RedisPool::open(url("s3cret")).unwrap();
    let cache = RedisCache::new(RedisGenerations::new(pool.clone()));
    let query = search(2, "Dune");
    let loaded = cache.get_or_load(&query, || Ok::<_, std::convert::Infallible>(dune()));
    assert_eq!(loaded.unwrap(), dune());
    assert_eq!(cache.get(&query).unwrap(), Some(dune()), "a strict hit");
    cache
        .invalidate(&Search::tenant_scope(&2).unwrap())
        .unwrap();
    assert_eq!(cache.get(&query).unwrap(), None, "invalidated");
    assert_eq!(cache.stats().degraded, 0, "{:?}", cache.stats());

    let mut connection = pool.get().unwrap();
    let whoami: String = redis::cmd("ACL")
        .arg("WHOAMI")
        .query(&mut connection)
        .unwrap();
    assert_eq!(whoami, "cache");
    assert_eq!(connection.get_db(), 3);
    assert!(keys_in(&server, 3) >= 2, "the entry and its counters");
    assert_eq!(keys_in(&server, 0), 0);

    // A wrong password: no connection, with what Redis said, and a read
    // that goes without the cache (the default failure policy).
    let refused = RedisPool::open(url("wrong")).unwrap();
    let error = refused.get().unwrap_err();
    assert!(chain(&error).contains("credentials"), "{}", chain(&error));
    let cache = RedisCache::new(RedisGenerations::new(refused));
    assert_eq!(cache.get(&search(3, "Dune")).unwrap(), None);
    assert_eq!(cache.stats().degraded, 1, "{:?}", cache.stats());

    // The same for the async pool, in database 4.
    let runtime = runtime();
    let url = |password: &str| format!("redis://cache:{password}@127.0.0.1:{}/4", server.port());
    runtime.block_on(async {
        let mut pool = AsyncRedisPool::connect(url("s3cret")).await.unwrap();
        let cache = AsyncRedisCache::new(AsyncRedisGenerations::new(pool.clone()));
        let query = search(2, "Dune");
        let loaded = cache.get_or_load(&query, || async {
            Ok::<_, std::convert::Infallible>(dune())
        });
        assert_eq!(loaded.await.unwrap(), dune());
        assert_eq!(
            cache.get(&query).await.unwrap(),
            Some(dune()),
            "a strict hit"
        );
        let tenant = Search::tenant_scope(&2).unwrap();
        cache.invalidate(&tenant).await.unwrap();
        assert_eq!(cache.get(&query).await.unwrap(), None, "invalidated");
        assert_eq!(cache.stats().degraded, 0, "{:?}", cache.stats());
        let whoami: String = (redis::cmd("ACL").arg("WHOAMI"))
            .query_async(&mut pool)
            .await
            .unwrap();
        assert_eq!(whoami, "cache");
        assert_eq!(redis::aio::ConnectionLike::get_db(&pool), 4);

        let refused = AsyncRedisPool::connect(url("wrong")).await.unwrap();
        let cache = AsyncRedisCache::new(AsyncRedisGenerations::new(refused.clone()));
        assert_eq!(cache.get(&search(3, "Dune")).await.unwrap(), None);
        assert_eq!(cache.stats().degraded, 1, "{:?}", cache.stats());
        let error = redis::cmd("PING")
            .query_async::<Value>(&mut refused.clone())
            .await
            .unwrap_err();
        assert!(chain(&error).contains("credentials"), "{}", chain(&error));
    });
    assert!(keys_in(&server, 4) >= 2, "the entry and its counters");
}

#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn a_url_the_pool_cannot_serve_is_refused_when_it_is_made() {
    let Some(server) = Server::start(false) else {
        return;
    };
    let resp3 = format!("redis://127.0.0.1:{}/?protocol=resp3", server.port());
    let error = RedisPool::open(resp3.as_str()).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::InvalidClientConfig);
    assert!(error.to_string().contains("protocol=resp3"), "{error}");
    let connected = runtime().block_on(AsyncRedisPool::connect(resp3.as_str()));
    let error = connected.unwrap_err();
    assert_eq!(error.kind(), ErrorKind::InvalidClientConfig);
    assert!(error.to_string().contains("protocol=resp3"), "{error}");
    // A TLS URL too (by the `redis` crate when its TLS feature is off, as
    // here; by the pool's own check when another crate turned it on).
    let tls = format!("rediss://127.0.0.1:{}/", server.port());
    let refused = [
        RedisPool::open(tls.as_str()).unwrap_err(),
        runtime()
            .block_on(AsyncRedisPool::connect(tls.as_str()))
            .unwrap_err(),
    ];
    for error in refused {
        assert_eq!(error.kind(), ErrorKind::InvalidClientConfig);
        assert!(error.to_string().contains("TLS"), "{error}");
    }
    // The same server by a plain URL is served.
    for mut ours in Ours::of(&server) {
        let pong: String = ours.query(&redis::cmd("PING")).unwrap();
        assert_eq!(pong, "PONG", "{}", ours.name());
    }
}

/// Commands of every reply kind and size, sent on a pool's connection
/// (each driver's) and on the `redis` crate's own: the same answers, in the
/// same order, the connection still in step after each (errors included).
#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn your_commands_on_a_pools_connections_are_answered_as_by_the_crates_own() {
    let Some(server) = Server::start(false) else {
        return;
    };
    for ours in Ours::of(&server) {
        server.flush();
        answered_as_by_the_crates_own(&server, ours);
    }
}

fn answered_as_by_the_crates_own(server: &Server, mut pooled: Ours) {
    let driver = pooled.name();
    let mut own = server.connect();

    // Three megabytes: the buffer grows past what it keeps, then shrinks.
    let large: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
    let () = redis::cmd("SET")
        .arg("large")
        .arg(&large)
        .query(&mut own)
        .unwrap();
    let () = redis::cmd("RPUSH")
        .arg("list")
        .arg(&["a", "", "c\r\nd"][..])
        .query(&mut own)
        .unwrap();

    let mut commands = vec![
        redis::cmd("PING"),
        redis::cmd("GET"),
        redis::cmd("GET"),
        redis::cmd("LRANGE"),
        redis::cmd("INCRBY"),
        redis::cmd("LPUSH"),
        redis::cmd("NOSUCHCOMMAND"),
        redis::cmd("GET"),
        redis::cmd("COMMAND"),
    ];
    commands[1].arg("large");
    commands[2].arg("absent");
    commands[3].arg("list").arg(0).arg(-1);
    commands[4].arg("n").arg(-7);
    commands[5].arg("large").arg("x"); // WRONGTYPE
    commands[6].arg(1);
    commands[7].arg("list"); // WRONGTYPE
    commands[8].arg("COUNT");
    for (i, command) in commands.iter().enumerate() {
        // `INCRBY` runs on both: each reads what the other left.
        let theirs: redis::RedisResult<Value> = command.query(&mut own);
        let ours: redis::RedisResult<Value> = pooled.query(command);
        match (theirs, ours) {
            (Ok(Value::Int(theirs)), Ok(Value::Int(ours))) if i == 4 => {
                assert_eq!(ours, theirs - 7, "{driver}")
            }
            (theirs, ours) => {
                assert_eq!(format!("{ours:?}"), format!("{theirs:?}"), "{driver}: {i}")
            }
        }
    }

    // A pipeline of a thousand replies, and a transaction in which one
    // command fails when it runs and one is refused when it is queued.
    let mut pipeline = redis::pipe();
    for i in 0..1000 {
        pipeline.cmd("ECHO").arg(i.to_string().repeat(i % 7));
    }
    pipeline.cmd("GET").arg("large");
    let theirs: Vec<Value> = pipeline.query(&mut own).unwrap();
    let ours: Vec<Value> = pooled.query_pipeline(&pipeline).unwrap();
    assert_eq!(ours, theirs, "{driver}");

    let mut runs_then_fails = redis::pipe();
    runs_then_fails
        .atomic()
        .cmd("SET")
        .arg("t")
        .arg("1")
        .cmd("LPUSH")
        .arg("t")
        .arg("x");
    let theirs: redis::RedisResult<Value> = runs_then_fails.query(&mut own);
    let ours: redis::RedisResult<Value> = pooled.query_pipeline(&runs_then_fails);
    assert_eq!(format!("{ours:?}"), format!("{theirs:?}"), "{driver}");
    let mut refused_when_queued = redis::pipe();
    refused_when_queued
        .atomic()
        .cmd("SET")
        .arg("u")
        .arg("1")
        .cmd("NOSUCHCOMMAND");
    let theirs: redis::RedisResult<Value> = refused_when_queued.query(&mut own);
    let ours: redis::RedisResult<Value> = pooled.query_pipeline(&refused_when_queued);
    assert!(theirs.is_err() && ours.is_err(), "{theirs:?} / {ours:?}");
    assert_eq!(
        ours.unwrap_err().kind(),
        theirs.unwrap_err().kind(),
        "{driver}: both refused as Redis said"
    );

    // Still in step: the next command reads its own reply.
    let large_again: Vec<u8> = pooled.query(redis::cmd("GET").arg("large")).unwrap();
    assert_eq!(large_again, large, "{driver}");
    if let Ours::Blocking(connection) = &pooled {
        assert!(connection.is_open());
    }
}

/// How many connections the cache's pools have open to `server`: those
/// named `cache-key:<instance>` when they learned their server (a
/// connection another helper just closed may still be listed, unnamed).
fn clients(server: &Server) -> usize {
    let list: String = redis::cmd("CLIENT")
        .arg("LIST")
        .query(&mut server.connect())
        .unwrap();
    list.lines()
        .filter(|client| client.contains(" name=cache-key:"))
        .count()
}

/// Forty tasks at once on an async pool: every one answered, on the one
/// connection they all pipeline on, which stays open for the next calls.
#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn an_async_pools_tasks_share_one_connection() {
    let Some(server) = Server::start(false) else {
        return;
    };
    let runtime = runtime();
    let pool = runtime
        .block_on(AsyncRedisPool::connect(server.url()))
        .unwrap();
    let cache = AsyncRedisCache::new(AsyncRedisGenerations::new(pool));
    runtime.block_on(async {
        let query = search(2, "Dune");
        let loaded = cache.get_or_load(&query, || async {
            Ok::<_, std::convert::Infallible>(dune())
        });
        assert_eq!(loaded.await.unwrap(), dune());
        let reads = (0..40).map(|_| cache.get(&query));
        for read in futures_util::future::join_all(reads).await {
            assert_eq!(read.unwrap(), Some(dune()));
        }
    });
    let stats = cache.stats();
    assert_eq!((stats.degraded, stats.hits), (0, 40), "{stats:?}");
    assert_eq!(clients(&server), 1);
}

/// A call on the async pool's connection dropped once it is sent: its reply
/// is read and dropped, and the next call reads its own. The dropped call
/// is a `BLPOP` that Redis answers only when the test pushes to its list,
/// so it is still waiting when it is dropped.
#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn a_call_dropped_after_it_was_sent_leaves_the_connection_in_step() {
    let Some(server) = Server::start(false) else {
        return;
    };
    let runtime = runtime();
    let mut pool = runtime
        .block_on(AsyncRedisPool::connect(server.url()))
        .unwrap();
    let mut pusher = server.connect();
    runtime.block_on(async {
        let echo = |text: &str| redis::cmd("ECHO").arg(text).take();
        // Open: the next call is sent at its first poll.
        let first: String = echo("open").query_async(&mut pool).await.unwrap();
        assert_eq!(first, "open");
        for round in 0..5 {
            let blocked = redis::cmd("BLPOP").arg("held").arg(0).take();
            {
                // Dropped at the end of this block, after one poll.
                let mut call = std::pin::pin!(blocked.query_async::<Value>(&mut pool));
                let mut context = std::task::Context::from_waker(std::task::Waker::noop());
                assert!(call.as_mut().poll(&mut context).is_pending(), "{round}");
            }
            let _: i64 = redis::cmd("RPUSH")
                .arg("held")
                .arg(round)
                .query(&mut pusher)
                .unwrap();
            let own: String = echo(&format!("own {round}"))
                .query_async(&mut pool)
                .await
                .unwrap();
            assert_eq!(own, format!("own {round}"));
        }
    });
    let left: i64 = redis::cmd("LLEN").arg("held").query(&mut pusher).unwrap();
    assert_eq!(left, 0, "every BLPOP was answered");
    assert_eq!(clients(&server), 1, "the same connection");
}
