//! Tracked counters (`RedisGenerations::tracked`), opt-in, on real
//! servers and through both drivers: a hit in process with its counters kept
//! here makes no round trip at all; another process's bump reaches a
//! tracked cache within a bound measured here (printed, and asserted loosely
//! enough not to flake on a loaded machine), on a server and across a
//! three-primary cluster's bus; a subscription that drops, goes silent
//! behind a frozen proxy, or loses its cluster node to `SIGKILL`, fails
//! closed within its heartbeats: reads go back to Redis (and fail while
//! Redis cannot be reached), never a stale answer for longer, until another
//! subscription is up.
//!
//! Each test starts its own servers and stops them by pid. Ignored by
//! default; run with `cargo test -- --include-ignored`.

mod common;
#[path = "common/library_search.rs"]
mod library_search;
#[allow(dead_code)]
#[path = "common/tier.rs"]
mod tier;

use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use cache_key::GenerationScope;
use cache_key::redis::{FailSafe, Tracking};
use common::redis_server::{Cluster, Proxy, Server, command_calls, key_slot, reset_command_calls};
use library_search::{dune, search};
use tier::{Address, DRIVERS, Options, Tier, generation, until_tracking};

const HEARTBEAT: Duration = Duration::from_millis(100);

fn tracked() -> Options {
    tracked_with(HEARTBEAT)
}

fn tracked_with(heartbeat: Duration) -> Options {
    Options {
        local: Some(1_000),
        tracking: Some(Tracking::default().with_heartbeat(heartbeat)),
        ..Options::default()
    }
}

#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn a_tracked_hit_in_process_makes_no_round_trip() {
    let Some(server) = Server::start(false) else {
        return;
    };
    let address = Address::Server(server.url());
    for driver in DRIVERS {
        server.flush();
        // A heartbeat of a second: a `PING` answered later than the
        // heartbeat (a loaded machine) rightly stops the counters' use,
        // and these hits would then go to Redis.
        let tier = driver.tier(&address, tracked_with(Duration::from_secs(1)));
        until_tracking(&*tier);
        let query = search(1, "Dune");
        tier.insert(&query, &dune()).unwrap();
        let mut admin = server.connect();
        let warm = until_hits_send_nothing(&*tier, &query, &mut admin, 100);
        assert!(warm, "{driver:?}: every hit went to Redis");
        let hits = tier.stats().local_hits;
        reset_command_calls(&mut admin);
        for _ in 0..10 {
            assert_eq!(tier.get(&query).unwrap(), Some(dune()));
        }
        let calls = command_calls(&mut admin);
        assert_eq!(sent(&calls), 0, "{driver:?}: {calls:?}");
        assert_eq!(tier.stats().local_hits, hits + 10);
        // A load whose entry is here is the same hit: no round trip, no origin.
        reset_command_calls(&mut admin);
        let loaded = tier.get_or_load(&query, &|| Err("the origin was called".to_owned()));
        assert_eq!(loaded.unwrap(), dune(), "{driver:?}");
        let calls = command_calls(&mut admin);
        assert_eq!(sent(&calls), 0, "{driver:?}: {calls:?}");
        assert_eq!(tier.stats().local_hits, hits + 11);
        // A bump through this very cache is seen at once.
        tier.invalidate_tenant(1).unwrap();
        assert_eq!(tier.get(&query).unwrap(), None, "{driver:?}");
    }
}

#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn a_tracked_entry_past_its_ttl_is_no_hit_but_kept_for_the_fail_safe() {
    let Some(server) = Server::start(false) else {
        return;
    };
    let address = Address::Server(server.url());
    let ttl = Duration::from_millis(300);
    for driver in DRIVERS {
        server.flush();
        let tier = driver.tier(
            &address,
            Options {
                ttl: Some(ttl),
                // Kept past its TTL, here and in Redis, for the fail-safe.
                fail_safe: Some(FailSafe::new(Duration::from_secs(10))),
                ..tracked()
            },
        );
        until_tracking(&*tier);
        let query = search(1, "Dune");
        tier.insert(&query, &dune()).unwrap();
        let mut admin = server.connect();
        // Within the TTL.
        let warm = until_hits_send_nothing(&*tier, &query, &mut admin, 20);
        assert!(warm, "{driver:?}: every hit went to Redis");
        // Well past the TTL and the coarse clock's tick: no longer a hit, but
        // still kept for the fail-safe.
        thread::sleep(ttl + Duration::from_millis(100));
        assert_eq!(tier.get(&query).unwrap(), None, "{driver:?}");
        let down = tier.get_or_load(&query, &|| Err("catalog down".to_owned()));
        assert_eq!(down.unwrap(), dune(), "{driver:?}");
        assert_eq!(tier.stats().stale, 1, "{driver:?}");
    }
}

/// Reads `query`'s `dune()` from `tier` until a hit sends nothing, at most
/// `tries` times; whether one did. The counters' first read raises them to
/// the clock, a write whose message comes back to this very cache and drops
/// them: the read after it goes to Redis once, and from then on nothing does.
fn until_hits_send_nothing(
    tier: &dyn Tier,
    query: &library_search::Search,
    admin: &mut redis::Connection,
    tries: usize,
) -> bool {
    for _ in 0..tries {
        reset_command_calls(admin);
        assert_eq!(tier.get(query).unwrap(), Some(dune()));
        if sent(&command_calls(admin)) == 0 {
            return true;
        }
        thread::sleep(Duration::from_millis(10));
    }
    false
}

/// Commands the server ran, all names together.
/// The commands the cache's own connections sent, of those the server
/// counted: all but `PING`, which only the tracking listener sends here
/// (its heartbeat, on a connection of its own; the pool's probes run only
/// while its circuit is open).
fn sent(calls: &std::collections::BTreeMap<String, u64>) -> u64 {
    (calls.iter())
        .filter(|(command, _)| command.as_str() != "ping")
        .map(|(_, count)| count)
        .sum()
}

/// Percentile `p` of `sorted` durations.
fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn another_processes_bump_is_seen_within_the_measured_bound() {
    let Some(server) = Server::start(false) else {
        return;
    };
    let address = Address::Server(server.url());
    for driver in DRIVERS {
        server.flush();
        let writer = driver.tier(&address, Options::default());
        let reader = driver.tier(&address, tracked());
        until_tracking(&*reader);
        seen_within_the_bound(&*writer, &*reader, &search(1, "Dune"));
    }
}

/// On a cluster the counters live on every primary, and the subscription
/// on one: a bump's message goes from the counter's primary to the
/// subscriber's over the cluster bus.
#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn on_a_cluster_a_bump_on_another_primary_is_seen_within_the_measured_bound() {
    let Some(cluster) = Cluster::start() else {
        return;
    };
    let address = Address::Cluster(cluster.urls());
    for driver in DRIVERS {
        for node in cluster.nodes() {
            node.flush();
        }
        let writer = driver.tier(&address, Options::default());
        let reader = driver.tier(&address, tracked());
        until_tracking(&*reader);
        let listening = subscribed_node(&cluster);
        let mut node = cluster.nodes()[0].connect();
        let query = (1..100)
            .map(|branch| search(branch, "Dune"))
            .find(|query| {
                let counter = GenerationScope::tenant_of(query).unwrap().counter().name();
                cluster.owner(key_slot(&mut node, &counter)) != listening
            })
            .expect("a tenant whose counters another primary holds");
        seen_within_the_bound(&*writer, &*reader, &query);
    }
}

/// The port of the cluster's node holding the subscription, among those
/// running, once it is the only one (a dropped reader's listener leaves
/// within a heartbeat or so).
fn subscribed_node(cluster: &Cluster) -> u16 {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let listening: Vec<u16> = cluster
            .nodes()
            .iter()
            .flat_map(|node| {
                let clients: String = match node.try_connect() {
                    Ok(mut connection) => redis::cmd("CLIENT")
                        .arg("LIST")
                        .arg("TYPE")
                        .arg("pubsub")
                        .query(&mut connection)
                        .unwrap(),
                    Err(_) => String::new(),
                };
                let port = node.port();
                clients.lines().map(move |_| port).collect::<Vec<_>>()
            })
            .collect();
        if let [port] = listening[..] {
            return port;
        }
        assert!(
            Instant::now() < deadline,
            "not one subscription: {listening:?}"
        );
        thread::sleep(Duration::from_millis(20));
    }
}

/// On a cluster, the primary holding the subscription killed (`SIGKILL`):
/// the reader is strict at once, then subscribes through another primary
/// and is tracked again, bumps reaching it there.
#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn on_a_cluster_a_killed_subscriber_fails_closed_then_tracking_moves_on() {
    for driver in DRIVERS {
        let Some(mut cluster) = Cluster::start() else {
            return;
        };
        // The subscriber holds no counter of the query, so that the query is
        // still read once it is gone; the listener subscribes through the
        // first node it is given.
        let (subscriber, query) = {
            let mut node = cluster.nodes()[0].connect();
            let mut owner = |counter: String| cluster.owner(key_slot(&mut node, &counter));
            let namespace = GenerationScope::namespace::<library_search::Search>();
            let namespace = owner(namespace.counter().name());
            let subscriber = cluster
                .nodes()
                .iter()
                .map(Server::port)
                .find(|&port| port != namespace)
                .unwrap();
            let query = (1..100)
                .map(|branch| search(branch, "Dune"))
                .find(|query| {
                    let tenant = GenerationScope::tenant_of(query).unwrap();
                    owner(tenant.counter().name()) != subscriber
                })
                .expect("a tenant another primary holds");
            (subscriber, query)
        };
        let mut urls = cluster.urls();
        let first = urls
            .iter()
            .position(|url| url.contains(&format!(":{subscriber}/")));
        urls.swap(0, first.unwrap());
        let address = Address::Cluster(urls);
        let writer = driver.tier(&address, Options::default());
        let reader = driver.tier(&address, tracked());
        until_tracking(&*reader);
        assert_eq!(subscribed_node(&cluster), subscriber);
        writer.insert(&query, &dune()).unwrap();
        assert_eq!(reader.get(&query).unwrap(), Some(dune()));
        let before = generation(&*reader, &query);

        cluster.node_mut(subscriber).stop();
        // The bump's message goes nowhere.
        strict_once_dropped(&*writer, &*reader, &query, before);

        until_tracking(&*reader);
        assert_ne!(subscribed_node(&cluster), subscriber);
        let mut alive: Vec<redis::Connection> = cluster
            .nodes()
            .iter()
            .filter(|node| node.port() != subscriber)
            .map(Server::connect)
            .collect();
        reader.get_or_load(&query, &|| Ok(dune())).unwrap();
        let mut round_trips = || {
            alive.iter_mut().for_each(reset_command_calls);
            assert_eq!(reader.get(&query).unwrap(), Some(dune()));
            alive
                .iter_mut()
                .map(|node| sent(&command_calls(node)))
                .sum::<u64>()
        };
        let deadline = Instant::now() + Duration::from_secs(5);
        while round_trips() > 0 {
            assert!(Instant::now() < deadline, "{driver:?}: never tracked again");
            thread::sleep(Duration::from_millis(10));
        }
        writer.invalidate_tenant(query.branch).unwrap();
        let bumped = Instant::now();
        while reader.get(&query).unwrap().is_some() {
            assert!(
                bumped.elapsed() < Duration::from_millis(500),
                "{driver:?}: the old value served past the bound"
            );
        }
    }
}

/// Bumps `query`'s tenant once `reader`'s subscription dropped: the drop is
/// seen at once (the connection closes), so the reader is strict again and
/// reads the new generation (past `before`) from Redis within two
/// heartbeats, and the old value no more.
fn strict_once_dropped(
    writer: &dyn Tier,
    reader: &dyn Tier,
    query: &library_search::Search,
    before: u64,
) {
    writer.invalidate_tenant(query.branch).unwrap();
    let bumped = Instant::now();
    while generation(reader, query) == before {
        assert!(
            bumped.elapsed() < HEARTBEAT * 2,
            "{:?}: stale after the drop",
            reader.driver()
        );
    }
    assert_eq!(reader.get(query).unwrap(), None);
}

/// 100 bumps of `query`'s tenant by `writer`, each timed from its return
/// until `reader` (tracked) sees the new generation, while two threads keep
/// the reader busy with other tenants: printed, and asserted below a loose
/// bound.
fn seen_within_the_bound(writer: &dyn Tier, reader: &dyn Tier, query: &library_search::Search) {
    let driver = reader.driver();
    let stop = AtomicBool::new(false);
    let mut delays = Vec::new();
    thread::scope(|scope| {
        for branch in [query.branch + 1_000, query.branch + 1_001] {
            let stop = &stop;
            scope.spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let _ = reader.get_or_load(&search(branch, "Dune"), &|| Ok(dune()));
                }
            });
        }
        for _ in 0..100 {
            let before = generation(reader, query);
            writer.invalidate_tenant(query.branch).unwrap();
            let bumped = Instant::now();
            let deadline = bumped + Duration::from_secs(5);
            while generation(reader, query) == before {
                assert!(Instant::now() < deadline, "{driver:?}: never seen");
            }
            delays.push(bumped.elapsed());
        }
        stop.store(true, Ordering::Relaxed);
    });
    delays.sort();
    let (p50, p99, max) = (
        percentile(&delays, 0.5),
        percentile(&delays, 0.99),
        delays[delays.len() - 1],
    );
    println!(
        "{driver:?}: a bump seen by a tracked reader after p50 {p50:?}, p99 {p99:?}, max {max:?}"
    );
    // Loose: the message's trip on loopback, on a loaded 2-core machine.
    assert!(max < Duration::from_millis(500), "{driver:?}: {max:?}");
}

/// Hits until one makes no round trip: the counters kept, the entry
/// confirmed at their generation.
fn until_warm(tier: &dyn Tier, query: &library_search::Search, admin: &mut redis::Connection) {
    for _ in 0..100 {
        reset_command_calls(admin);
        assert_eq!(tier.get(query).unwrap(), Some(dune()));
        if sent(&command_calls(admin)) == 0 {
            return;
        }
        thread::sleep(Duration::from_millis(10));
    }
    panic!("every hit went to Redis");
}

#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn another_processes_bump_ends_the_hits_in_process_and_spares_other_tenants() {
    let Some(server) = Server::start(false) else {
        return;
    };
    let address = Address::Server(server.url());
    for driver in DRIVERS {
        server.flush();
        let writer = driver.tier(&address, Options::default());
        let reader = driver.tier(&address, tracked());
        until_tracking(&*reader);
        let (bumped_query, other) = (search(1, "Dune"), search(2, "Dune"));
        let mut admin = server.connect();
        for query in [&bumped_query, &other] {
            writer.insert(query, &dune()).unwrap();
            until_warm(&*reader, query, &mut admin);
        }
        writer.invalidate_tenant(1).unwrap();
        let bumped = Instant::now();
        while reader.get(&bumped_query).unwrap().is_some() {
            assert!(
                bumped.elapsed() < Duration::from_millis(500),
                "{driver:?}: the old value served past the bound"
            );
        }
        // Once the bump is seen, the old value never comes back.
        for _ in 0..100 {
            assert_eq!(reader.get(&bumped_query).unwrap(), None, "{driver:?}");
        }
        // Another tenant's entry is confirmed again in process, with no
        // round trip.
        assert_eq!(reader.get(&other).unwrap(), Some(dune()));
        reset_command_calls(&mut admin);
        assert_eq!(reader.get(&other).unwrap(), Some(dune()));
        let calls = command_calls(&mut admin);
        assert_eq!(sent(&calls), 0, "{driver:?}: {calls:?}");
    }
}

#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn a_dropped_subscription_fails_closed_then_comes_back() {
    let Some(server) = Server::start(false) else {
        return;
    };
    let address = Address::Server(server.url());
    for driver in DRIVERS {
        server.flush();
        let writer = driver.tier(&address, Options::default());
        let reader = driver.tier(&address, tracked());
        until_tracking(&*reader);
        let query = search(1, "Dune");
        writer.insert(&query, &dune()).unwrap();
        assert_eq!(reader.get(&query).unwrap(), Some(dune()));
        let before = generation(&*reader, &query);

        let killed: u64 = redis::cmd("CLIENT")
            .arg("KILL")
            .arg("TYPE")
            .arg("pubsub")
            .query(&mut server.connect())
            .unwrap();
        assert!(killed >= 1);
        strict_once_dropped(&*writer, &*reader, &query, before);
        // Then the listener subscribes again, and tracking resumes.
        until_tracking(&*reader);
        let mut admin = server.connect();
        reader.get_or_load(&query, &|| Ok(dune())).unwrap();
        // Hits in process again: no round trip once the counters are kept.
        let warm = until_hits_send_nothing(&*reader, &query, &mut admin, 100);
        assert!(warm, "{driver:?}: every hit went to Redis");
    }
}

#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn a_silent_subscription_stops_being_trusted_within_two_heartbeats() {
    let Some(server) = Server::start(false) else {
        return;
    };
    // Long enough that a loaded machine's scheduling (tens of ms) is small
    // beside the heartbeat the bound is counted in.
    const HEARTBEAT: Duration = Duration::from_millis(500);
    for driver in DRIVERS {
        server.flush();
        // The reader reaches Redis through a proxy that can go silent; the
        // writer directly.
        let proxy = Proxy::to(server.port());
        let writer = driver.tier(&Address::Server(server.url()), Options::default());
        let reader = driver.tier(&Address::Server(proxy.url()), tracked_with(HEARTBEAT));
        until_tracking(&*reader);
        let query = search(1, "Dune");
        writer.insert(&query, &dune()).unwrap();
        assert_eq!(reader.get(&query).unwrap(), Some(dune()));
        assert_eq!(reader.get(&query).unwrap(), Some(dune()));

        proxy.freeze();
        writer.invalidate_tenant(1).unwrap();
        let bumped = Instant::now();
        // Stale answers may come until the heartbeats notice; then reads go
        // to Redis, which the frozen proxy never answers: errors, never the
        // old value.
        let mut last_stale = Duration::ZERO;
        while bumped.elapsed() < HEARTBEAT * 6 {
            if let Ok(Some(_)) = reader.get(&query) {
                last_stale = bumped.elapsed();
            }
        }
        println!("{driver:?}: stale answers for {last_stale:?} after a silent failure");
        assert!(
            last_stale < HEARTBEAT * 3,
            "{driver:?}: stale for {last_stale:?}"
        );
        assert!(!reader.is_tracking());
        proxy.thaw();
        until_tracking(&*reader);
        assert_eq!(reader.get(&query).unwrap(), None, "{driver:?}");
    }
}
