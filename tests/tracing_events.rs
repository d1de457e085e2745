//! The typed caches' `tracing` events (feature `tracing`) and per-type
//! stats: every event names the query type, its namespace and operation,
//! and says what happened (an origin call, an error, a rejected entry and
//! why, an invalidation); no event ever holds a criterion or tenant value,
//! since log lines are read by more people than cached values are.
//!
//! Events are written by `tracing-subscriber`'s formatter, as a service's
//! logs would be, into a buffer the test reads. The Redis test starts its
//! own server and stops it by pid (ignored by default; run with
//! `cargo test -- --include-ignored`).

mod common;
#[allow(dead_code)]
#[path = "common/library_search.rs"]
mod library_search;

use std::io;
use std::sync::{Arc, Mutex};

use cache_key::cache::{CacheError, CachedQuery, MokaCache};
use cache_key::cache::{QueryCache, TypedCache};
use cache_key::generation::{GenerationStore, MemoryGenerations};
use cache_key::redis::{RedisCache, RedisGenerations, RedisPool};
use cache_key::{CacheKey, Scopes};
use common::redis_server::Server;
use library_search::{Search, dune};
use redis::Commands;
use tracing_subscriber::fmt::MakeWriter;

/// Values no event may show: a criterion with personal data, a tenant.
const TITLE: &str = "Jane Doe, jane.doe@example.com, SSN 123-45-6789";
const BRANCH: u32 = 90_417;

fn secret_search() -> Search {
    Search {
        branch: BRANCH,
        title: TITLE.to_owned(),
    }
}

/// Another query type of the same namespace, counted apart.
#[derive(CacheKey)]
#[cache_key(namespace = "library", operation = "loans", hash_tag)]
struct Loans {
    #[tenant]
    branch: u32,
    #[criterion]
    reader: String,
}

impl CachedQuery for Loans {
    type Value = u32;
    const VALUE_ID: &'static str = "u32";
    const TTL: std::time::Duration = std::time::Duration::from_secs(60);
}

/// The formatted events, shared with the subscriber's writer.
#[derive(Clone, Default)]
struct Logs(Arc<Mutex<Vec<u8>>>);

impl Logs {
    fn text(&self) -> String {
        String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
    }

    /// The lines that contain `needle`.
    fn lines_with(&self, needle: &str) -> Vec<String> {
        self.text()
            .lines()
            .filter(|line| line.contains(needle))
            .map(str::to_owned)
            .collect()
    }

    /// Runs `body` with every event on this thread formatted into the logs.
    fn capture<R>(&self, body: impl FnOnce() -> R) -> R {
        let subscriber = tracing_subscriber::fmt()
            .with_writer(self.clone())
            .with_max_level(tracing::Level::TRACE)
            .with_ansi(false)
            .without_time()
            .finish();
        tracing::subscriber::with_default(subscriber, body)
    }

    /// No event shows a criterion or the tenant, whole or in part.
    fn assert_no_values(&self) {
        let text = self.text();
        for secret in [TITLE, "Jane", "jane.doe", "123-45-6789", "Jane%20Doe"] {
            assert!(!text.contains(secret), "{secret:?} logged:\n{text}");
        }
        assert!(
            !text.contains(&BRANCH.to_string()),
            "the tenant logged:\n{text}"
        );
    }
}

impl io::Write for Logs {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for Logs {
    type Writer = Logs;
    fn make_writer(&'a self) -> Logs {
        self.clone()
    }
}

/// Every line of `lines` names the query type, namespace and operation.
fn assert_names_search(lines: &[String]) {
    assert!(!lines.is_empty());
    for line in lines {
        assert!(line.contains("library_search::Search"), "{line}");
        assert!(line.contains("namespace=\"library\""), "{line}");
        assert!(line.contains("operation=\"search\""), "{line}");
    }
}

#[test]
fn moka_events_name_the_query_and_never_its_values() {
    let logs = Logs::default();
    let cache = MokaCache::new(MemoryGenerations::new(), 100);
    let query = secret_search();
    logs.capture(|| {
        let loaded = cache.get_or_load(&query, || Ok::<_, io::Error>(dune()));
        assert_eq!(loaded.unwrap(), dune());
        assert_eq!(cache.get(&query).unwrap(), Some(dune()));
        cache
            .invalidate(&Search::tenant_scope(&BRANCH).unwrap())
            .unwrap();
        let failed = cache.get_or_load(&query, || {
            Err::<Vec<_>, _>(io::Error::other("the catalogue is down"))
        });
        assert!(matches!(failed, Err(CacheError::Origin(_))), "{failed:?}");
    });

    let origin_calls = logs.lines_with("origin called");
    assert_eq!(origin_calls.len(), 2, "{}", logs.text());
    assert_names_search(&origin_calls);
    let errors = logs.lines_with("cache error");
    assert_eq!(errors.len(), 1, "{}", logs.text());
    assert_names_search(&errors);
    // The origin's own error is returned to the caller, who logs it if it
    // holds nothing private; the event says only where the failure was.
    assert!(
        errors[0].contains("error=the origin failed"),
        "{}",
        errors[0]
    );
    assert!(!errors[0].contains("catalogue"), "{}", errors[0]);
    let invalidated = logs.lines_with("invalidated");
    assert_eq!(invalidated.len(), 1, "{}", logs.text());
    assert!(invalidated[0].contains("namespace=\"library\""));
    assert!(
        invalidated[0].contains("scope=Tenant"),
        "{}",
        invalidated[0]
    );
    logs.assert_no_values();

    // Per type: the loans were never asked for.
    let search = cache.stats_of::<Search>();
    assert_eq!((search.hits, search.loads, search.errors), (1, 2, 1));
    assert_eq!(cache.stats_of::<Loans>(), Default::default());
    assert_eq!(cache.stats(), search);
}

#[test]
#[ignore = "starts a redis-server process: cargo test -- --include-ignored"]
fn redis_rejections_are_events_with_their_reason_and_counted_per_type() {
    let Some(server) = Server::start(false) else {
        return;
    };
    let pool = RedisPool::open(server.url()).unwrap();
    let cache = RedisCache::new(RedisGenerations::new(pool));
    let query = secret_search();
    let loans = Loans {
        branch: BRANCH,
        reader: "Jane Doe".to_owned(),
    };
    let key = cache.store().key_for(&query).unwrap();
    let mut admin = server.connect();

    let logs = Logs::default();
    logs.capture(|| {
        // Another program's list under the key, then bytes that are no
        // envelope: each is rejected, and the origin answers.
        let _: () = admin.rpush(key.as_str(), "not ours").unwrap();
        let loaded = cache.get_or_load(&query, || Ok::<_, io::Error>(dune()));
        assert_eq!(loaded.unwrap(), dune());
        let _: () = admin.del(key.as_str()).unwrap();
        let _: () = admin.set(key.as_str(), b"\xff\x00not json").unwrap();
        assert_eq!(cache.get(&query).unwrap(), None);
        cache.insert(&loans, 3).unwrap();
        assert_eq!(cache.get(&loans).unwrap(), Some(3));
    });

    let rejected = logs.lines_with("entry rejected");
    assert_eq!(rejected.len(), 2, "{}", logs.text());
    assert_names_search(&rejected);
    assert!(rejected[0].contains("reason=WrongType"), "{}", rejected[0]);
    assert!(
        rejected[1].contains("reason=Undecodable"),
        "{}",
        rejected[1]
    );
    assert!(logs.lines_with("Loans").is_empty(), "{}", logs.text());
    logs.assert_no_values();

    let search = cache.stats_of::<Search>();
    assert_eq!(search.rejected.wrong_type, 1, "{search:?}");
    assert_eq!(search.rejected.undecodable, 1, "{search:?}");
    assert_eq!(search.hits, 0, "{search:?}");
    let loans = cache.stats_of::<Loans>();
    assert_eq!((loans.hits, loans.rejected.total()), (1, 0), "{loans:?}");
    assert_eq!(cache.stats().hits, 1);
    assert_eq!(cache.stats().rejected.total(), 2);
    // The totals are the two types' counts summed.
    let counts = |s: &cache_key::cache::Stats| {
        [
            s.hits,
            s.local_hits,
            s.misses,
            s.loads,
            s.errors,
            s.rejected.total(),
        ]
    };
    let (total, search, loans) = (counts(&cache.stats()), counts(&search), counts(&loans));
    assert_eq!(total, std::array::from_fn(|i| search[i] + loans[i]));
    assert!(total[2] > 0 && total[3] > 0, "{total:?}");
}
