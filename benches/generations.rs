//! What reading the generation costs on a keyed read.
//!
//! In the process (timed, criterion): `MemoryGenerations::key_for(&query)`
//! (the query's counters read, then its key) against `query.cache_key(4)`
//! (a generation the caller already has), for three query shapes: the seed
//! search (2 criteria, a `&str` tenant, 3 counters), the branch list (1
//! criterion, a `String` tenant) and an issue list with a compound tenant
//! (organization and repository: 4 counters).
//!
//! In Redis (counted, not timed): requests per keyed read (`key_for`, then
//! the entry's `GET`) on one server and on a three-primary cluster, counted by
//! the servers themselves (`INFO commandstats`), when `redis-server` is
//! installed. Timing a network round trip on a shared machine says little;
//! their number is what a design changes.
//!
//! Times are the benchmark thread's **CPU time**
//! (`clock_gettime(CLOCK_THREAD_CPUTIME_ID)`), not wall-clock time: on a
//! shared machine a wall-clock sample also counts the time other processes
//! held the core, which swamped the difference measured here.
//!
//! Run with `cargo bench -p cache-key-benches --bench generations`; see BENCHMARKS.md.

#[allow(dead_code)]
#[path = "../tests/common/redis_server.rs"]
mod redis_server;

#[path = "common/cpu_time.rs"]
mod cpu_time;
#[path = "common/fixed_loop.rs"]
mod fixed_loop;

use std::hint::black_box;
use std::time::Duration;

use cache_key::redis::{RedisGenerations, RedisPool};
use cache_key::{CacheKey, GenerationStore, MemoryGenerations};
use cpu_time::ThreadCpuTime;
use criterion::Criterion;
use fixed_loop::bench;
use redis::Commands;

const GENERATION: u64 = 4;

/// The seed's two-criteria search (as in `benches/keys.rs`).
#[derive(CacheKey)]
#[cache_key(namespace = "library", operation = "search")]
struct Search<'a> {
    #[tenant]
    branch: &'a str,
    #[criterion]
    title: &'a str,
    #[criterion]
    author: Option<&'a str>,
}

/// The one-criterion list (as in `benches/keys.rs`).
#[derive(CacheKey)]
#[cache_key(namespace = "library", operation = "list", hash_tag)]
struct BranchList {
    #[tenant]
    branch: String,
    #[criterion]
    page: u32,
}

/// A compound tenant: the organization's counter, the repository's, the
/// operation's and the namespace's.
#[derive(CacheKey)]
#[cache_key(namespace = "forge", operation = "issues")]
struct Issues<'a> {
    #[tenant]
    org: &'a str,
    #[tenant]
    repo: &'a str,
    #[criterion]
    state: &'a str,
    #[criterion]
    page: u32,
}

fn search() -> Search<'static> {
    Search {
        branch: "branch-2",
        title: "Sand",
        author: Some("Borges"),
    }
}

fn list() -> BranchList {
    BranchList {
        branch: "branch-2".into(),
        page: 1,
    }
}

fn issues() -> Issues<'static> {
    Issues {
        org: "acme",
        repo: "rocket",
        state: "open",
        page: 1,
    }
}

macro_rules! case {
    ($c:ident, $store:ident, $name:literal, $query:expr) => {{
        let query = $query;
        // Same key but for the generation: only the lookup differs.
        let key = $store.key_for(&query).unwrap();
        let plain = query.cache_key(GENERATION).unwrap();
        assert_eq!(
            key.as_str().replacen(
                &format!(":g{}:", $store.generation_for(&query).unwrap()),
                ":g4:",
                1
            ),
            plain.as_str()
        );
        let mut group = $c.benchmark_group($name);
        bench(&mut group, $name, "cache_key", || {
            black_box(&query).cache_key(black_box(GENERATION)).unwrap()
        });
        bench(&mut group, $name, "memory_key_for", || {
            black_box(&$store).key_for(black_box(&query)).unwrap()
        });
        group.finish();
    }};
}

fn in_process(c: &mut Criterion<ThreadCpuTime>) {
    let store = MemoryGenerations::new();
    case!(c, store, "generation_search_2", search());
    case!(c, store, "generation_list_1", list());
    case!(c, store, "generation_compound", issues());
}

/// Requests the client sent, as the servers counted them since the last
/// reset: `INFO commandstats` also counts the commands a script runs
/// (`TIME`, `SET`, `INCRBY`), which are not requests.
fn requests(nodes: &mut [redis::Connection]) -> u64 {
    nodes
        .iter_mut()
        .map(|node| {
            redis_server::command_calls(node)
                .iter()
                .filter(|(name, _)| {
                    ["mget", "get", "evalsha", "eval", "script|load"].contains(&name.as_str())
                })
                .map(|(_, calls)| calls)
                .sum::<u64>()
        })
        .sum()
}

/// Requests per keyed read through `store`: the first read of a tenant
/// (its counters are created) and the next ones.
fn count(store: &RedisGenerations, nodes: &mut [redis::Connection], round: u32) -> (u64, u64) {
    let mut read = |branch: String| {
        for node in nodes.iter_mut() {
            redis_server::reset_command_calls(node);
        }
        let key = store.key_for(&BranchList { branch, page: 1 }).unwrap();
        let _: Option<String> = store.pool().get().unwrap().get(&key).unwrap();
        requests(nodes)
    };
    let first = read(format!("branch-{round}"));
    let next = read(format!("branch-{round}"));
    (first, next)
}

fn round_trips() {
    let Some(server) = redis_server::Server::start(false) else {
        println!("redis-server not installed: Redis requests not counted");
        return;
    };
    let store = RedisGenerations::new(RedisPool::open(server.url()).unwrap());
    let (first, next) = count(&store, &mut [server.connect()], 1);
    println!("redis, one server:   first keyed read of a tenant {first} requests, then {next}");
    drop(server);

    let Some(cluster) = redis_server::Cluster::start() else {
        return;
    };
    let store = RedisGenerations::new(RedisPool::open_cluster(cluster.urls()).unwrap());
    let mut nodes: Vec<_> = cluster
        .nodes()
        .iter()
        .map(redis_server::Server::connect)
        .collect();
    for round in 0..3 {
        let (first, next) = count(&store, &mut nodes, round);
        println!(
            "redis, 3 primaries:  first keyed read of tenant branch-{round} {first} requests, then {next}"
        );
    }
}

fn main() {
    let mut criterion = Criterion::default()
        .with_measurement(ThreadCpuTime)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(2))
        .sample_size(50)
        .configure_from_args();
    in_process(&mut criterion);
    criterion.final_summary();
    round_trips();
}
