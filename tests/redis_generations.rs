//! `RedisGenerations` against real servers, through both drivers (the
//! blocking store on a `RedisPool`, the async one on an `AsyncRedisPool`
//! driven from the test's threads): counters named by the format, stamped
//! with their server's run id and read in one `EVALSHA`, the bump model with
//! counters lost midway (deleted, flushed, the server restarted), a stopped
//! server as an error, the sweep of older generations, the race (0 stale
//! reads), and all of it on a three-primary Redis Cluster with counters and
//! entries on different nodes.
//!
//! Each test starts its own servers (`tests/common/redis_server.rs`) and
//! stops them by pid when done, also when it fails. The tests are ignored by
//! default; run them with `cargo test -- --include-ignored`. Without
//! `redis-server` on `PATH` they are skipped with a message, except under CI
//! (`CI=true`), where that is a failure.

mod common;
#[allow(dead_code)]
#[path = "common/library_search.rs"]
mod library_search;
#[allow(dead_code)]
#[path = "common/tier.rs"]
mod tier;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

use cache_key::generation::GenerationErrorKind;
use cache_key::redis::{RedisGenerations, RedisPool, SweepOptions};
use cache_key::{CacheKey, GenerationScope, GenerationStore, Key, Scopes, decode};
use common::generations::{
    Bump, Entries, Feed, Instance, Issues, ORGS, Op, Pages, Pulls, REPOS, Rng, Trending, race,
    run_model,
};
use common::redis_server::{Cluster, Server, command_calls, key_slot, reset_command_calls};
use redis::{Commands, ConnectionLike};
use tier::{Address, DRIVERS, generations};

/// The blocking store on `server`.
fn blocking(server: &Server) -> RedisGenerations {
    RedisGenerations::new(RedisPool::open(server.url()).expect("a pool"))
}

fn address(server: &Server) -> Address {
    Address::Server(server.url())
}

/// Every key `SCAN` finds on one server.
fn all_keys(connection: &mut redis::Connection) -> BTreeSet<String> {
    connection
        .scan::<String>()
        .expect("SCAN")
        .collect::<Result<_, _>>()
        .expect("SCAN")
}

/// A mixed sequence of the model's steps, the same for every run.
fn model_ops(len: usize, lose: bool) -> Vec<Op> {
    let mut rng = Rng::new(7);
    let instances = Instance::all().len() as u64;
    let (orgs, repos) = (ORGS.len() as u64, REPOS.len() as u64);
    (0..len)
        .map(|_| {
            let org = rng.below(orgs) as usize;
            let repo = rng.below(repos) as usize;
            match rng.below(16) {
                0..=5 => Op::Read(rng.below(instances) as usize),
                6 if lose => Op::Lose(rng.below(1000) as usize),
                7 => Op::Bump(Bump::Namespace {
                    wiki: rng.below(2) == 0,
                }),
                8 => Op::Bump(Bump::Org { org }),
                9 => Op::Bump(Bump::FeedOrg { org }),
                10 => Op::Bump(Bump::Repo { org, repo }),
                11 => Op::Bump(Bump::RepoOf { org, repo }),
                12 => Op::Bump(Bump::IssuesOf { org, repo }),
                13 => Op::Bump(Bump::PullsOf { org, repo }),
                14 => Op::Bump(Bump::Trending),
                _ => Op::Bump(Bump::PagesOf { org }),
            }
        })
        .collect()
}

#[derive(CacheKey)]
#[cache_key(namespace = "library", operation = "list", hash_tag)]
struct BranchList {
    #[tenant]
    branch: u32,
    #[criterion]
    page: u32,
}

/// A counter's value and the instance id it is stamped with.
fn stamped(text: &str) -> (u64, String) {
    let (value, stamp) = text.split_once(':').expect("`<value>:<instance id>`");
    (value.parse().unwrap(), stamp.to_owned())
}

#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn counters_are_keys_named_by_the_format_read_in_one_round_trip() {
    let Some(server) = Server::start(false) else {
        return;
    };
    for driver in DRIVERS {
        server.flush();
        let store = generations(driver, &address(&server));
        let mut admin = server.connect();
        let query = BranchList { branch: 2, page: 1 };

        let key = store.key_for(&query).unwrap();
        let counters = ["library:g", "library:g:t{2}", "library:g:t{2}:list"];
        assert_eq!(
            all_keys(&mut admin),
            counters.iter().map(|name| name.to_string()).collect()
        );
        // Each started at the server's clock, in microseconds since 2020,
        // stamped with the instance id of the server that wrote it.
        let texts: Vec<String> = admin.mget(&counters).unwrap();
        let values: Vec<u64> = texts.iter().map(|text| stamped(text).0).collect();
        assert!(
            texts
                .iter()
                .all(|text| stamped(text).1 == server.instance_id())
        );
        let (seconds, _): (u64, u64) = redis::cmd("TIME").query(&mut admin).unwrap();
        for value in &values {
            let started = value / 1_000_000 + 1_577_836_800;
            assert!(started <= seconds && seconds - started < 60, "{value}");
        }
        assert_eq!(
            decode(key.as_str()).unwrap().generation(),
            values.iter().sum::<u64>()
        );
        // Counter names are never keys: a pattern of the namespace does not match them.
        let pattern = cache_key::KeyPattern::namespace("library");
        assert!(counters.iter().all(|name| !pattern.matches(name)));

        store
            .invalidate(&BranchList::tenant_scope(&2u32).unwrap())
            .unwrap();
        let bumped: String = admin.get("library:g:t{2}").unwrap();
        let bumped = stamped(&bumped).0;
        // One more, or the clock if that is more: the time of the bump.
        assert!(bumped > values[1], "a bump raises its counter");
        let (seconds, _): (u64, u64) = redis::cmd("TIME").query(&mut admin).unwrap();
        let at = bumped / 1_000_000 + 1_577_836_800;
        assert!(at <= seconds && seconds - at < 60, "{bumped}");
        assert_eq!(
            store.generation_for(&query).unwrap(),
            values.iter().sum::<u64>() - values[1] + bumped
        );

        // A read of known counters: one plain MGET, on a connection that
        // learned its server's run id when it opened, and its checks that
        // the connection still reaches that process and that it is a
        // primary (CLIENT GETNAME, WAIT 0 0), in the same pipeline.
        reset_command_calls(&mut admin);
        for page in 1..=10 {
            store.key_for(&BranchList { branch: 2, page }).unwrap();
        }
        let calls = command_calls(&mut admin);
        let read = [("mget", 10), ("client|getname", 10), ("wait", 10)];
        assert_eq!(calls, read.map(|(name, n)| (name.to_owned(), n)).into());

        // A new tenant: its two counters are made at the clock in one
        // script call after the read.
        reset_command_calls(&mut admin);
        store.key_for(&BranchList { branch: 3, page: 1 }).unwrap();
        let calls = command_calls(&mut admin);
        assert_eq!(calls.get("mget"), Some(&1), "{calls:?}");
        assert_eq!(calls.get("evalsha"), Some(&1), "{calls:?}");
    }
}

/// A process that meets a server it has not seen learns it first: its run
/// id (when a connection opens), then loads that server's own counter
/// script to raise counters another process wrote.
#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn a_new_server_is_learned_once_and_its_counters_of_another_raised() {
    let Some(mut server) = Server::start(false) else {
        return;
    };
    for driver in DRIVERS {
        server.flush();
        let store = generations(driver, &address(&server));
        let query = BranchList { branch: 2, page: 1 };
        let mut admin = server.connect();
        reset_command_calls(&mut admin);
        let first = store.generation_for(&query).unwrap();
        let calls = command_calls(&mut admin);
        // INFO: the instance id, when the connection opened; MGET: the
        // read; EVAL: that server's script loaded and checked (two INFOs
        // inside: server and replication); EVALSHA: the counters made (a
        // write, which checks the instance id again).
        assert_eq!(calls.get("mget"), Some(&1), "{calls:?}");
        assert_eq!(calls.get("eval"), Some(&1), "{calls:?}");
        assert_eq!(calls.get("evalsha"), Some(&1), "{calls:?}");
        assert_eq!(calls.get("info"), Some(&5), "{calls:?}");

        // Counters written by another process (or before counters carried
        // theirs) are raised to the clock before they are used.
        let () = admin.set("library:g:t{2}", "5:0123abcd").unwrap();
        let () = admin.set("library:g", "7").unwrap();
        let raised = store.generation_for(&query).unwrap();
        assert!(raised > first, "{first} then {raised}");
        let texts: Vec<String> = admin.mget(&["library:g", "library:g:t{2}"]).unwrap();
        assert!(
            texts
                .iter()
                .all(|text| stamped(text).1 == server.instance_id())
        );
        assert_eq!(store.generation_for(&query).unwrap(), raised, "raised once");
        if driver == DRIVERS[0] {
            server.restart();
        }
    }
}

/// Commands the store and the test sent, without the test's own
/// bookkeeping (`INFO`, `TIME`, `SCAN`, `CLUSTER`) and the
/// counter script's `MGET`.
fn round_trips(calls: &BTreeMap<String, u64>) -> u64 {
    calls
        .iter()
        .filter(|(name, _)| {
            !["info", "time", "scan", "cluster|keyslot", "mget"].contains(&name.as_str())
        })
        .map(|(_, calls)| calls)
        .sum()
}

/// Deletes one of the model's counters, chosen by `n`, or (one time in
/// eight) every key of the server.
fn lose_counter(connection: &mut impl ConnectionLike, server_keys: Vec<String>, n: usize) {
    let counters: Vec<String> = server_keys
        .into_iter()
        .filter(|key| key.contains(":g"))
        .filter(|key| decode(key).is_err())
        .collect();
    if n.is_multiple_of(8) || counters.is_empty() {
        let () = redis::cmd("FLUSHALL").query(connection).unwrap();
    } else {
        let _: u64 = connection.del(&counters[n % counters.len()]).unwrap();
    }
}

#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn lost_counters_never_bring_an_old_generation_back() {
    let Some(mut server) = Server::start(false) else {
        return;
    };
    for driver in DRIVERS {
        let store = generations(driver, &address(&server));
        let mut admin = server.connect();
        let ops = model_ops(400, true);
        let lost = ops.iter().filter(|op| matches!(op, Op::Lose(_))).count();
        assert!(lost > 10);
        let reads = run_model(&store, &ops, |n| {
            let keys = all_keys(&mut admin).into_iter().collect();
            lose_counter(&mut admin, keys, n);
        })
        .unwrap();
        assert!(reads > 400);

        // A restart without persistence loses every counter at once.
        let before: Vec<u64> = Instance::all()
            .iter()
            .map(|instance| instance.generation(&store).unwrap())
            .collect();
        server.restart();
        let store = generations(driver, &address(&server));
        for (instance, before) in Instance::all().iter().zip(before) {
            let after = instance.generation(&store).unwrap();
            assert!(after > before, "{instance:?}: {before} then {after}");
        }
    }
}

#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn a_stopped_server_is_an_error_never_a_generation() {
    let Some(mut server) = Server::start(false) else {
        return;
    };
    for driver in DRIVERS {
        let store = generations(driver, &address(&server));
        let query = BranchList { branch: 2, page: 1 };
        let before = store.generation_for(&query).unwrap();
        store
            .invalidate(&BranchList::tenant_scope(&2u32).unwrap())
            .unwrap();

        server.stop();
        for _ in 0..3 {
            let errors = [
                store.generation_for(&query).map(|_| ()),
                store.key_for(&query).map(|_| ()),
                store.invalidate(&BranchList::tenant_scope(&2u32).unwrap()),
                store.invalidate_namespace::<BranchList>(),
            ];
            for error in errors {
                let error = error.expect_err("no generation without Redis");
                assert_eq!(error.kind(), GenerationErrorKind::Store, "{error:?}");
                let backend = error.backend_error().expect("the backend's failure");
                // Refused, or (the async client reconnecting) not in time.
                assert!(backend.is_unreachable(), "{backend}");
                assert_eq!(error.to_string(), "the generation store failed");
            }
        }

        // Back, empty: counters start again at the clock, above the old ones,
        // read by the same store once its connections are made again.
        server.restart();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let after = loop {
            match store.generation_for(&query) {
                Ok(after) => break after,
                Err(error) => assert!(std::time::Instant::now() < deadline, "{error}"),
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        };
        assert!(after > before + 1);
    }
}

#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn a_counter_holding_something_else_is_an_error() {
    let Some(server) = Server::start(false) else {
        return;
    };
    for driver in DRIVERS {
        let store = generations(driver, &address(&server));
        let query = BranchList { branch: 2, page: 1 };
        let () = server.connect().set("library:g:t{2}", "seven").unwrap();
        let error = store.generation_for(&query).unwrap_err();
        assert_eq!(error.to_string(), "the generation store failed");
        assert_eq!(
            error.store_error().unwrap().to_string(),
            "`library:g:t{2}` holds \"seven\", not a generation counter (a non-negative integer)"
        );
        let error = store
            .invalidate(&BranchList::tenant_scope(&2u32).unwrap())
            .unwrap_err();
        let held = error.store_error().unwrap().to_string();
        assert!(held.contains("`library:g:t{2}`"), "{held}");
        // Another Redis type under a counter's name: the same.
        let _: u64 = server.connect().del("library:g:t{2}").unwrap();
        let _: u64 = server.connect().rpush("library:g:t{2}", "x").unwrap();
        let error = store.generation_for(&query).unwrap_err();
        let held = error.store_error().unwrap().to_string();
        assert!(held.contains("not a generation counter"), "{held}");
        let _: u64 = server.connect().del("library:g:t{2}").unwrap();
    }
}

/// Writes one entry per query of the model (two pages for the compound
/// tenants) under its current key; returns the keys.
fn write_entries<S: GenerationStore>(store: &S, connection: &mut impl ConnectionLike) -> Vec<Key> {
    let mut keys = Vec::new();
    for org in ORGS {
        for repo in REPOS {
            for page in [1, 2] {
                keys.push(store.key_for(&Issues { org, repo, page }).unwrap());
                keys.push(store.key_for(&Pulls { org, repo, page }).unwrap());
            }
        }
        keys.push(store.key_for(&Feed { org }).unwrap());
        keys.push(store.key_for(&Pages { org }).unwrap());
    }
    keys.push(store.key_for(&Trending { page: 1 }).unwrap());
    for key in &keys {
        let () = connection.set(key, "entry").unwrap();
    }
    keys
}

/// Sweeps `scope` and checks that exactly the keys of the scope whose
/// generation is below their query's current one went, and nothing else
/// (counters included).
fn check_sweep(
    store: &RedisGenerations,
    scope: &GenerationScope,
    keys_before: &BTreeSet<String>,
    keys_after: impl FnOnce() -> BTreeSet<String>,
) -> u64 {
    let current: BTreeMap<String, u64> = Instance::all()
        .iter()
        .map(|instance| {
            let (namespace, operation, tenant) = identity_of(instance);
            (
                format!("{namespace}|{tenant}|{operation}"),
                instance.generation(store).unwrap(),
            )
        })
        .collect();
    let doomed: BTreeSet<String> = keys_before
        .iter()
        .filter(|key| {
            let Ok(decoded) = decode(key) else {
                return false;
            };
            let id = format!(
                "{}|{}|{}",
                decoded.namespace(),
                decoded.tenant().parts().join(","),
                decoded.operation()
            );
            scope.contains(&decoded) && decoded.generation() < current[&id]
        })
        .cloned()
        .collect();
    assert!(!doomed.is_empty());
    let report = store
        .sweep(scope, SweepOptions::default().batch(3))
        .unwrap();
    assert_eq!(report.deleted, doomed.len() as u64, "{report:?}");
    let expected: BTreeSet<String> = keys_before.difference(&doomed).cloned().collect();
    assert_eq!(keys_after(), expected);
    report.deleted
}

fn identity_of(instance: &Instance) -> (&'static str, &'static str, String) {
    let (org, repo) = (ORGS[instance.org], REPOS[instance.repo]);
    use common::generations::Kind;
    match instance.kind {
        Kind::Issues => ("forge", "issues", format!("{org},{repo}")),
        Kind::Pulls => ("forge", "pulls", format!("{org},{repo}")),
        Kind::Feed => ("forge", "feed", org.to_owned()),
        Kind::Trending => ("forge", "trending", String::new()),
        Kind::Pages => ("wiki", "pages", org.to_owned()),
    }
}

#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn a_sweep_deletes_the_older_generations_of_its_scope_only() {
    let Some(server) = Server::start(false) else {
        return;
    };
    let store = blocking(&server);
    let mut admin = server.connect();
    write_entries(&store, &mut admin);
    store.invalidate(&Bump::Org { org: 0 }.scope()).unwrap();
    write_entries(&store, &mut admin);
    store
        .invalidate(&Bump::IssuesOf { org: 0, repo: 0 }.scope())
        .unwrap();
    store.invalidate(&Bump::Org { org: 2 }.scope()).unwrap();
    write_entries(&store, &mut admin);

    // The organization `acme`: its older entries go; `acme*`'s stay for now.
    let org = Bump::Org { org: 0 }.scope();
    let before = all_keys(&mut admin);
    let deleted = check_sweep(&store, &org, &before, || all_keys(&mut admin));
    // Issues of acme/rocket: two older generations of two pages; acme/x:y
    // and the pulls: one of two pages each; Feed: one.
    assert_eq!(deleted, 2 * 2 + 3 * 2 + 1);
    // Sweeping again finds nothing more.
    let report = store.sweep(&org, SweepOptions::default()).unwrap();
    assert_eq!((report.primaries, report.deleted), (1, 0));

    // The whole namespace: `acme*`'s older entries too, never wiki's.
    let before = all_keys(&mut admin);
    let namespace = GenerationScope::namespace::<Issues>();
    check_sweep(&store, &namespace, &before, || all_keys(&mut admin));
}

/// Entries in Redis, through a connection of their own.
struct RedisEntries(Mutex<redis::Connection>);

impl Entries for RedisEntries {
    fn lookup(&self, key: &str) -> Option<u64> {
        self.0.lock().unwrap().get(key).expect("GET")
    }

    fn insert(&self, key: &str, value: u64) {
        let () = self.0.lock().unwrap().set(key, value).expect("SET");
    }
}

#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn processes_reading_writing_and_bumping_never_read_stale() {
    let Some(server) = Server::start(false) else {
        return;
    };
    for driver in DRIVERS {
        // Each thread has its own store and connections, as separate
        // processes would.
        let connect = || {
            (
                generations(driver, &address(&server)),
                RedisEntries(Mutex::new(server.connect())),
            )
        };
        let report = race(connect, 3, 600, 120);
        assert_eq!(report.reads, 1800);
        assert!(report.hits > 0 && report.misses > 0, "{report:?}");
        assert_eq!(report.stale, 0, "{driver:?}: {report:?}");
    }
}

#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn a_three_primary_cluster_keeps_counters_and_entries_apart_and_together() {
    let Some(cluster) = Cluster::start() else {
        return;
    };
    let store = RedisGenerations::new(RedisPool::open_cluster(cluster.urls()).unwrap());
    let mut entries = cluster.connect();
    let mut node = cluster.nodes()[0].connect();

    // Hash-tagged tenants: counters and entries share the tenant's slot,
    // while the namespace's counter lives wherever `library:g` hashes.
    let namespace_slot = key_slot(&mut node, "library:g");
    let namespace_owner = cluster.owner(namespace_slot);
    let mut elsewhere = 0;
    for branch in 1..=12u32 {
        let query = BranchList { branch, page: 1 };
        let key = store.key_for(&query).unwrap();
        let slot = key_slot(&mut node, key.as_str());
        for scope in [
            GenerationScope::tenant_of(&query).unwrap(),
            GenerationScope::operation_of(&query).unwrap(),
        ] {
            assert_eq!(key_slot(&mut node, &scope.counter().name()), slot);
        }
        if cluster.owner(slot) != namespace_owner {
            elsewhere += 1;
        }
        let () = entries.set(&key, branch).unwrap();
        store
            .invalidate(&BranchList::tenant_scope(&branch).unwrap())
            .unwrap();
        let new_key = store.key_for(&query).unwrap();
        assert_ne!(new_key, key);
        assert_eq!(key_slot(&mut node, new_key.as_str()), slot);
        let old: Option<u32> = entries.get(&key).unwrap();
        assert_eq!(
            old,
            Some(branch),
            "the old entry is still there, unreachable"
        );
    }
    assert!(
        elsewhere > 0,
        "some tenants live on another node than the namespace"
    );

    // The bump model over counters spread across the three primaries,
    // through both drivers.
    run_model(&store, &model_ops(150, false), |_| {}).unwrap();
    let urls = Address::Cluster(cluster.urls());
    run_model(
        &generations(DRIVERS[1], &urls),
        &model_ops(150, false),
        |_| {},
    )
    .unwrap();

    // A keyed read: one script call per slot (the namespace's counter, the
    // tenant's two), then the GET.
    let mut nodes: Vec<redis::Connection> = cluster.nodes().iter().map(Server::connect).collect();
    for node in &mut nodes {
        reset_command_calls(node);
    }
    let query = BranchList { branch: 1, page: 1 };
    let key = store.key_for(&query).unwrap();
    let _: Option<String> = entries.get(&key).unwrap();
    let calls: Vec<BTreeMap<String, u64>> = nodes.iter_mut().map(command_calls).collect();
    let count = |name: &str| {
        calls
            .iter()
            .filter_map(|calls| calls.get(name))
            .sum::<u64>()
    };
    assert_eq!((count("evalsha"), count("get")), (2, 1), "{calls:?}");
    assert_eq!(calls.iter().map(round_trips).sum::<u64>(), 3, "{calls:?}");

    // Sweeps walk every primary: entries of one query type spread over all.
    let mut written = BTreeSet::new();
    for _ in 0..2 {
        for org in ORGS {
            for repo in REPOS {
                for page in 1..=4 {
                    let key = store.key_for(&Issues { org, repo, page }).unwrap();
                    let () = entries.set(&key, "entry").unwrap();
                    written.insert(key.into_string());
                }
            }
        }
        store.invalidate_namespace::<Issues>().unwrap();
    }
    let on_nodes = |nodes: &mut Vec<redis::Connection>| -> Vec<BTreeSet<String>> {
        nodes
            .iter_mut()
            .map(|node| {
                all_keys(node)
                    .into_iter()
                    .filter(|key| written.contains(key))
                    .collect()
            })
            .collect()
    };
    let spread = on_nodes(&mut nodes);
    assert!(spread.iter().all(|keys| !keys.is_empty()), "{spread:?}");
    let report = store
        .sweep(
            &GenerationScope::namespace::<Issues>(),
            SweepOptions::default().batch(5),
        )
        .unwrap();
    assert_eq!(report.primaries, 3);
    assert_eq!(report.deleted, written.len() as u64);
    assert!(on_nodes(&mut nodes).iter().all(BTreeSet::is_empty));
    // Counters are never swept.
    assert!(store.generation_for(&query).is_ok());
    let counters: u64 = nodes
        .iter_mut()
        .map(|node| {
            all_keys(node)
                .iter()
                .filter(|key| decode(key).is_err())
                .count() as u64
        })
        .sum();
    assert!(counters > 20);
}
