//! Eager refresh (`get_or_refresh` with an `EagerRefresh`) on a
//! real server, through both drivers and on each layout (Redis alone, two
//! levels, tracked counters): a hit in the last part of its TTL is answered
//! at once and reloads its key once in the background, however many callers
//! hit it meanwhile, and the reloaded entry lives a TTL from then; a hit
//! before the window reloads nothing; an invalidation while a refresh runs
//! leaves its answer unreachable; a refresh whose origin fails or panics
//! leaves the value it would have replaced, and the next one runs.
//!
//! The origin of a refresh is held on a channel until the test lets it go,
//! so "answered at once" is shown by the order of events, not by a clock.
//!
//! Each test starts its own server and stops it by pid. Ignored by default;
//! run with `cargo test -- --include-ignored`.

mod common;
#[allow(dead_code)]
#[path = "common/library_search.rs"]
mod library_search;
#[allow(dead_code)]
#[path = "common/tier.rs"]
mod tier;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use cache_key::redis::{EagerRefresh, Tracking};
use common::redis_server::Server;
use library_search::{Book, Search, search};
use tier::{Address, DRIVERS, Options, Origin, Tier};

const TTL: Duration = Duration::from_secs(2);
/// Past a quarter of the TTL, a hit refreshes: the window is 1.5 s long.
const AFTER: f64 = 0.25;
/// Well inside the window, and well before the TTL ends.
const INTO_WINDOW: Duration = Duration::from_millis(700);

fn layouts() -> [(&'static str, Options); 3] {
    let eager = Options {
        ttl: Some(TTL),
        eager: Some(EagerRefresh::after(AFTER)),
        ..Options::default()
    };
    [
        ("redis", eager),
        (
            "two levels",
            Options {
                local: Some(1_000),
                ..eager
            },
        ),
        (
            "tracked",
            Options {
                local: Some(1_000),
                tracking: Some(Tracking::default()),
                ..eager
            },
        ),
    ]
}

/// A page of one book, told apart by its year.
fn version(year: u16) -> Vec<Book> {
    vec![Book {
        title: "Dune".to_owned(),
        year,
        subtitle: None,
    }]
}

/// Each tier of every layout and driver, empty, its subscription up if it
/// has one.
fn each_tier(server: &Server, body: impl Fn(&str, &dyn Tier)) {
    let address = Address::Server(server.url());
    for (layout, options) in layouts() {
        for driver in DRIVERS {
            server.flush();
            let tier = driver.tier(&address, options);
            if options.tracking.is_some() {
                tier::until_tracking(&*tier);
            }
            body(&format!("{layout}, {driver:?}"), &*tier);
        }
    }
}

/// Origins held until the test lets them go, and how many were called.
struct Held {
    calls: Arc<AtomicUsize>,
    release: Sender<()>,
    released: Arc<Mutex<Receiver<()>>>,
}

impl Held {
    fn new() -> Self {
        let (release, released) = channel();
        Held {
            calls: Arc::default(),
            release,
            released: Arc::new(Mutex::new(released)),
        }
    }

    /// An origin that counts its call, waits to be let go (at most 10 s),
    /// then answers `answer`.
    fn origin(&self, answer: Vec<Book>) -> Origin {
        let (calls, released) = (self.calls.clone(), self.released.clone());
        Box::new(move || {
            calls.fetch_add(1, Ordering::SeqCst);
            let _ = released
                .lock()
                .unwrap()
                .recv_timeout(Duration::from_secs(10));
            Ok(answer)
        })
    }

    fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }

    /// Lets the held origin answer.
    fn let_go(&self) {
        self.release.send(()).unwrap();
    }
}

/// The query, loaded with `version(1)` and then left until its hits are in
/// their refresh window.
fn loaded_into_window(tier: &dyn Tier) -> Search {
    let query = search(1, "Dune");
    tier.get_or_load(&query, &|| Ok(version(1))).unwrap();
    thread::sleep(INTO_WINDOW);
    query
}

/// Waits (at most 10 s) until `done` holds.
fn until(what: &str, done: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !done() {
        assert!(Instant::now() < deadline, "never: {what}");
        thread::sleep(Duration::from_millis(10));
    }
}

#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn a_hit_in_its_window_is_answered_at_once_and_reloaded_once() {
    let Some(server) = Server::start(false) else {
        return;
    };
    each_tier(&server, |case, tier| {
        let query = search(1, "Dune");
        let loaded = Instant::now();
        tier.get_or_load(&query, &|| Ok(version(1))).unwrap();
        let held = Held::new();

        // Before the window: a hit, and no refresh.
        let answer = tier.get_or_refresh(&query, held.origin(version(9)));
        assert_eq!(answer.unwrap(), version(1), "{case}");
        thread::sleep(Duration::from_millis(100));
        assert_eq!(held.calls(), 0, "{case}: refreshed too early");

        // In the window: eight callers at once, each answered with the
        // value at hand while the one refresh's origin is held.
        thread::sleep(INTO_WINDOW.saturating_sub(loaded.elapsed()));
        thread::scope(|scope| {
            for _ in 0..8 {
                scope.spawn(|| {
                    let answer = tier.get_or_refresh(&query, held.origin(version(2)));
                    assert_eq!(answer.unwrap(), version(1), "{case}");
                });
            }
        });
        until("the refresh's origin is called", || held.calls() == 1);
        thread::sleep(Duration::from_millis(200));
        assert_eq!(held.calls(), 1, "{case}: more than one refresh");
        let let_go = Instant::now();
        held.let_go();
        until("the refreshed value is read", || {
            tier.get(&query).unwrap() == Some(version(2))
        });
        assert_eq!(tier.stats().loads, 2, "{case}");

        // It lives a TTL from its refresh: past the first value's end, and
        // before its own (checked only if this machine got there in time).
        thread::sleep((TTL + Duration::from_millis(100)).saturating_sub(loaded.elapsed()));
        let read = tier.get(&query).unwrap();
        if let_go.elapsed() < TTL - Duration::from_millis(200) {
            assert_eq!(
                read,
                Some(version(2)),
                "{case}: the refresh gave no new TTL"
            );
        }
    });
}

#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn an_invalidation_while_a_refresh_runs_leaves_its_answer_unreachable() {
    let Some(server) = Server::start(false) else {
        return;
    };
    each_tier(&server, |case, tier| {
        let query = loaded_into_window(tier);
        let held = Held::new();
        let answer = tier.get_or_refresh(&query, held.origin(version(2)));
        assert_eq!(answer.unwrap(), version(1), "{case}");
        until("the refresh's origin is called", || held.calls() == 1);
        tier.invalidate_tenant(1).unwrap();
        held.let_go();
        // The refresh stores its answer under the key named before the
        // bump: no read finds it.
        let watched = Instant::now();
        while watched.elapsed() < Duration::from_millis(500) {
            assert_eq!(tier.get(&query).unwrap(), None, "{case}");
            thread::sleep(Duration::from_millis(20));
        }
        let answer = tier.get_or_load(&query, &|| Ok(version(3)));
        assert_eq!(answer.unwrap(), version(3), "{case}");
    });
}

#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn a_refresh_that_fails_or_panics_leaves_the_value_and_the_next_one_runs() {
    let Some(server) = Server::start(false) else {
        return;
    };
    each_tier(&server, |case, tier| {
        let query = loaded_into_window(tier);
        let errors = tier.stats().errors;
        let failing: Origin = Box::new(|| Err("catalog down".to_owned()));
        assert_eq!(tier.get_or_refresh(&query, failing).unwrap(), version(1));
        until("the failed refresh is counted", || {
            tier.stats().errors > errors
        });
        assert_eq!(tier.get(&query).unwrap(), Some(version(1)), "{case}");

        let loads = tier.stats().loads;
        let panicking: Origin = Box::new(|| panic!("an origin bug, in a refresh"));
        assert_eq!(tier.get_or_refresh(&query, panicking).unwrap(), version(1));
        until("the panicking refresh is under way", || {
            tier.stats().loads > loads
        });
        assert_eq!(tier.get(&query).unwrap(), Some(version(1)), "{case}");

        // The refresh after them runs: nothing of theirs was left held.
        let held = Held::new();
        held.let_go();
        until("a refresh after them is called", || {
            // The value at hand, or the refresh's once an earlier turn's
            // refresh finished after this loop last looked at its origin.
            let answer = tier
                .get_or_refresh(&query, held.origin(version(2)))
                .unwrap();
            assert!([version(1), version(2)].contains(&answer), "{case}");
            thread::sleep(Duration::from_millis(20));
            held.calls() > 0
        });
        until("the refreshed value is read", || {
            tier.get(&query).unwrap() == Some(version(2))
        });
    });
}
