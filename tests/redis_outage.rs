//! Redis out, the service up: what the README's outage table promises, on a
//! real `redis-server` reached through a proxy that breaks like a network
//! (or the server itself killed or stopped), through both drivers, with and
//! without a level in process.
//!
//! - `get_or_load` answers from the origin, one origin call per key under 8
//!   concurrent callers, and stores nothing; once the circuit is open, an
//!   outage adds no timeout to a call (the added p99 is printed).
//! - A stopped server: every call answers within the call's bound.
//! - A restart between two calls costs callers no error.
//! - An invalidation that could not reach Redis is an error and is sent
//!   again before this process reads anything: 0 stale reads after recovery
//!   in the process whose bump failed; another process reads the old entry
//!   until then, as the README says, and not after.
//! - The fail-safe serves from the level in process during an outage only
//!   what no invalidation this process knows of has ended.
//!
//! Ignored by default; run with `cargo test -- --include-ignored`.

mod common;
#[path = "common/library_search.rs"]
mod library_search;
#[allow(dead_code)]
#[path = "common/tier.rs"]
mod tier;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Barrier, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use cache_key::cache::CacheErrorKind;
use cache_key::redis::{FailSafe, FailurePolicy};
use common::redis_server::{Proxy, Server};
use library_search::{Book, dune, search};
use tier::{Address, DRIVERS, Options, Tier};

/// The call bound of the default `Timeouts`.
const CALL: Duration = Duration::from_millis(500);

fn messiah() -> Vec<Book> {
    vec![Book {
        title: "Dune Messiah".to_owned(),
        year: 1969,
        subtitle: None,
    }]
}

/// An origin whose answer can change, counting its calls; each call takes
/// `delay`, so that concurrent callers overlap.
struct Origin {
    answer: Mutex<Vec<Book>>,
    calls: AtomicUsize,
    delay: Duration,
}

impl Origin {
    fn new(delay: Duration) -> Self {
        Origin {
            answer: Mutex::new(dune()),
            calls: AtomicUsize::new(0),
            delay,
        }
    }

    fn call(&self) -> Result<Vec<Book>, String> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        thread::sleep(self.delay);
        Ok(self.answer.lock().unwrap().clone())
    }

    fn set(&self, books: Vec<Book>) {
        *self.answer.lock().unwrap() = books;
    }

    fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }
}

/// What breaks between the cache and Redis.
#[derive(Debug, Clone, Copy)]
enum Fault {
    /// The server killed with SIGKILL (restarted, empty, to recover).
    Killed,
    /// The server stopped with SIGSTOP: connections open, no answer.
    Stopped,
    /// Connections closed and new ones refused: nobody listens.
    Refused,
    /// The network silent: bytes held both ways, nothing closed.
    Blackholed,
}

impl Fault {
    fn start(self, server: &mut Server, proxy: &Proxy) {
        match self {
            Fault::Killed => server.stop(),
            Fault::Stopped => server.pause(),
            Fault::Refused => {
                proxy.refuse();
                proxy.drop_connections();
            }
            Fault::Blackholed => proxy.freeze(),
        }
    }

    fn end(self, server: &mut Server, proxy: &Proxy) {
        match self {
            Fault::Killed => server.restart(),
            Fault::Stopped => server.resume(),
            Fault::Refused => proxy.accept(),
            Fault::Blackholed => {
                // What piled up is dropped with the connections, as after a
                // long partition.
                proxy.drop_connections();
                proxy.thaw();
            }
        }
    }
}

/// Runs `call` on 8 threads at once; their answers, and each one's time.
fn eight_at_once<T: Send>(call: impl Fn() -> T + Sync) -> Vec<(T, Duration)> {
    let barrier = Barrier::new(8);
    thread::scope(|scope| {
        let calls: Vec<_> = (0..8)
            .map(|_| {
                scope.spawn(|| {
                    barrier.wait();
                    let started = Instant::now();
                    let answer = call();
                    (answer, started.elapsed())
                })
            })
            .collect();
        calls.into_iter().map(|call| call.join().unwrap()).collect()
    })
}

/// A tier with the cache's own default: a failure of Redis answered around.
fn degrading() -> Options {
    Options {
        failure_policy: Some(FailurePolicy::CallOrigin),
        ..Options::default()
    }
}

fn p99(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[(times.len() * 99 / 100).min(times.len() - 1)]
}

#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn an_outage_is_answered_by_the_origin_once_per_key_and_stores_nothing() {
    let Some(mut server) = Server::start(false) else {
        return;
    };
    let proxy = Proxy::to(server.port());
    let address = Address::Server(proxy.url());
    let query = search(1, "Dune");
    for fault in [
        Fault::Killed,
        Fault::Stopped,
        Fault::Refused,
        Fault::Blackholed,
    ] {
        for driver in DRIVERS {
            for local in [None, Some(1_000)] {
                let case = format!("{fault:?} {driver:?} local {local:?}");
                server.flush();
                let tier = driver.tier(
                    &address,
                    Options {
                        local,
                        ..degrading()
                    },
                );
                let origin = Origin::new(Duration::from_millis(100));
                assert_eq!(tier.get_or_load(&query, &|| origin.call()).unwrap(), dune());
                let healthy: Vec<Duration> = (0..50)
                    .map(|_| {
                        let started = Instant::now();
                        tier.get_or_load(&query, &|| origin.call()).unwrap();
                        started.elapsed()
                    })
                    .collect();

                fault.start(&mut server, &proxy);
                origin.set(messiah());
                let before = origin.calls();
                let answers = eight_at_once(|| tier.get_or_load(&query, &|| origin.call()));
                for (answer, took) in &answers {
                    assert_eq!(answer.as_ref().unwrap(), &messiah(), "{case}");
                    // One call bound for the read, the origin's 100 ms.
                    assert!(
                        *took < CALL + Duration::from_millis(600),
                        "{case}: {took:?}"
                    );
                }
                assert_eq!(
                    origin.calls() - before,
                    1,
                    "{case}: one origin call per key"
                );

                // The circuit open: no call waits on Redis any more.
                let open: Vec<Duration> = (0..50)
                    .map(|_| {
                        let started = Instant::now();
                        let answer = tier.get_or_load(&query, &|| Ok(messiah())).unwrap();
                        assert_eq!(answer, messiah(), "{case}");
                        started.elapsed()
                    })
                    .collect();
                let (healthy, open) = (p99(healthy), p99(open));
                eprintln!("{case}: p99 {healthy:?} healthy, {open:?} with the circuit open");
                assert!(open < CALL / 2, "{case}: {open:?} with the circuit open");
                let stats = tier.stats();
                assert!(stats.degraded >= 50, "{case}: {stats:?}");
                assert_eq!(stats.errors, 0, "{case}: {stats:?}");

                fault.end(&mut server, &proxy);
                // Back: nothing was stored meanwhile (the entry of before,
                // or none after a restart without files).
                let deadline = Instant::now() + Duration::from_secs(10);
                let stored = loop {
                    let stats = tier.stats();
                    let read = tier.get(&query).unwrap();
                    if tier.stats().degraded == stats.degraded {
                        break read;
                    }
                    assert!(Instant::now() < deadline, "{case}: Redis never came back");
                    thread::sleep(Duration::from_millis(50));
                };
                let expected = match fault {
                    Fault::Killed => None,
                    _ => Some(dune()),
                };
                assert_eq!(stored, expected, "{case}: nothing stored during the outage");
            }
        }
    }
}

#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn a_stopped_server_answers_every_call_within_its_bound() {
    let Some(server) = Server::start(false) else {
        return;
    };
    let address = Address::Server(server.url());
    let query = search(1, "Dune");
    for driver in DRIVERS {
        for policy in [FailurePolicy::CallOrigin, FailurePolicy::ReturnError] {
            let case = format!("{driver:?} {policy:?}");
            let tier = driver.tier(
                &address,
                Options {
                    failure_policy: Some(policy),
                    ..Options::default()
                },
            );
            tier.insert(&query, &dune()).unwrap();
            server.pause();
            let mut slowest = Duration::ZERO;
            for _ in 0..3 {
                let started = Instant::now();
                let get = tier.get(&query);
                let load = tier.get_or_load(&query, &|| Ok(messiah()));
                slowest = slowest.max(started.elapsed() / 2);
                match policy {
                    FailurePolicy::CallOrigin => {
                        assert_eq!(get.unwrap(), None, "{case}");
                        assert_eq!(load.unwrap(), messiah(), "{case}");
                    }
                    _ => {
                        let kind = load.unwrap_err().kind();
                        assert!(
                            matches!(kind, CacheErrorKind::Timeout | CacheErrorKind::Unavailable),
                            "{case}: {kind:?}"
                        );
                        assert!(get.is_err(), "{case}");
                    }
                }
            }
            server.resume();
            eprintln!("{case}: the slowest call took {slowest:?} (bound {CALL:?})");
            // The bound, and room for a busy machine's scheduling.
            assert!(slowest < CALL + CALL / 2, "{case}: {slowest:?}");
            until_back(&*tier, &query);
        }
    }
}

#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn a_restart_between_two_calls_costs_no_error() {
    let Some(mut server) = Server::start(false) else {
        return;
    };
    let address = Address::Server(server.url());
    for driver in DRIVERS {
        let tier = driver.tier(
            &address,
            Options {
                failure_policy: Some(FailurePolicy::ReturnError),
                ..Options::default()
            },
        );
        // Several connections open and idle in the pool.
        let query = search(1, "Dune");
        eight_at_once(|| tier.get_or_load(&query, &|| Ok(dune())).unwrap());
        for round in 0..3 {
            server.restart();
            for _ in 0..8 {
                let answer = tier.get_or_load(&query, &|| Ok(dune()));
                assert_eq!(answer.unwrap(), dune(), "{driver:?} after restart {round}");
            }
            let answers = eight_at_once(|| tier.get(&query));
            for (answer, _) in answers {
                assert_eq!(answer.unwrap(), Some(dune()), "{driver:?}");
            }
        }
        let stats = tier.stats();
        assert_eq!(
            (stats.errors, stats.degraded),
            (0, 0),
            "{driver:?}: {stats:?}"
        );
    }
}

/// Polls `tier` until Redis answers it again (its circuit's wait over).
fn until_back(tier: &dyn Tier, query: &library_search::Search) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let degraded = tier.stats().degraded;
        let _ = tier.get(query);
        if tier.stats().degraded == degraded {
            return;
        }
        assert!(Instant::now() < deadline, "Redis never came back");
        thread::sleep(Duration::from_millis(50));
    }
}

#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn an_invalidation_that_failed_is_sent_again_before_anything_is_read() {
    let Some(server) = Server::start(false) else {
        return;
    };
    let query = search(1, "Dune");
    for driver in DRIVERS {
        for local in [None, Some(1_000)] {
            let case = format!("{driver:?} local {local:?}");
            server.flush();
            // This process reaches Redis through a proxy that will refuse
            // it; another process reaches it directly.
            let proxy = Proxy::to(server.port());
            let options = Options {
                local,
                ..degrading()
            };
            let here = driver.tier(&Address::Server(proxy.url()), options);
            let other = driver.tier(&Address::Server(server.url()), options);
            let origin = Origin::new(Duration::ZERO);
            assert_eq!(here.get_or_load(&query, &|| origin.call()).unwrap(), dune());
            assert_eq!(other.get(&query).unwrap(), Some(dune()));

            proxy.refuse();
            proxy.drop_connections();
            origin.set(messiah());
            let bump = here.invalidate_tenant(1);
            assert!(
                bump.is_err(),
                "{case}: the invalidation failed, and says so"
            );
            // Meanwhile: this process answers from the origin; the other
            // still reads the entry the failed bump would have ended, as
            // the README says it may until this process is back.
            assert_eq!(
                here.get_or_load(&query, &|| origin.call()).unwrap(),
                messiah()
            );
            assert_eq!(other.get(&query).unwrap(), Some(dune()), "{case}");

            proxy.accept();
            until_back(&*here, &query);
            for _ in 0..20 {
                let read = here.get_or_load(&query, &|| origin.call()).unwrap();
                assert_eq!(read, messiah(), "{case}: stale after recovery");
                assert_eq!(other.get(&query).unwrap(), Some(messiah()), "{case}");
            }
            assert_eq!(here.stats().errors, 0, "{case}");
        }
    }
}

#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn the_fail_safe_serves_in_an_outage_only_what_no_known_invalidation_ended() {
    let Some(server) = Server::start(false) else {
        return;
    };
    let query = search(1, "Dune");
    let other_query = search(2, "Dune");
    for driver in DRIVERS {
        server.flush();
        let proxy = Proxy::to(server.port());
        let options = Options {
            local: Some(1_000),
            fail_safe: Some(FailSafe::new(Duration::from_secs(30))),
            ..degrading()
        };
        let tier = driver.tier(&Address::Server(proxy.url()), options);
        let origin = Origin::new(Duration::ZERO);
        for query in [&query, &other_query] {
            assert_eq!(tier.get_or_load(query, &|| origin.call()).unwrap(), dune());
        }

        proxy.refuse();
        proxy.drop_connections();
        origin.set(messiah());
        let calls = origin.calls();
        // Kept in process, nothing known to have ended it: served.
        let answer = tier.get_or_load(&query, &|| origin.call()).unwrap();
        assert_eq!(answer, dune(), "{driver:?}");
        assert_eq!(
            origin.calls(),
            calls,
            "{driver:?}: served without the origin"
        );
        assert_eq!(tier.get(&query).unwrap(), Some(dune()), "{driver:?}");
        assert!(tier.stats().stale >= 2, "{driver:?}");

        // This process invalidates branch 1 (and fails to tell Redis):
        // branch 1's value is no longer the fail-safe's; branch 2's is.
        assert!(tier.invalidate_tenant(1).is_err());
        let answer = tier.get_or_load(&query, &|| origin.call()).unwrap();
        assert_eq!(answer, messiah(), "{driver:?}: an invalidated value served");
        assert_eq!(tier.get(&query).unwrap(), None, "{driver:?}");
        let down = tier.get_or_load(&query, &|| Err("catalog down".to_owned()));
        assert!(down.is_err(), "{driver:?}: {down:?}");
        let answer = tier.get_or_load(&other_query, &|| origin.call()).unwrap();
        assert_eq!(answer, dune(), "{driver:?}: branch 2 was not invalidated");
        proxy.accept();
    }
}

#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn the_failure_hook_is_told_of_each_failure_a_call_answered_around() {
    use cache_key::cache::{CacheErrorKind, QueryCache};
    use cache_key::redis::{RedisCache, RedisGenerations, RedisPool};
    use std::sync::Arc;

    let Some(mut server) = Server::start(false) else {
        return;
    };
    let seen = Arc::new(Mutex::new(Vec::new()));
    let cache = RedisCache::new(RedisGenerations::new(
        RedisPool::open(server.url()).unwrap(),
    ))
    .with_failure_hook({
        let seen = seen.clone();
        move |failure| seen.lock().unwrap().push(failure.kind())
    });
    let query = search(1, "Dune");
    assert_eq!(
        cache
            .get_or_load(&query, || Ok::<_, String>(dune()))
            .unwrap(),
        dune()
    );
    assert!(seen.lock().unwrap().is_empty(), "nothing failed yet");
    server.stop();
    assert_eq!(
        cache
            .get_or_load(&query, || Ok::<_, String>(messiah()))
            .unwrap(),
        messiah()
    );
    assert_eq!(cache.get(&query).unwrap(), None);
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert!(
        seen.iter()
            .all(|kind| matches!(kind, CacheErrorKind::Unavailable | CacheErrorKind::Timeout)),
        "{seen:?}"
    );
}
