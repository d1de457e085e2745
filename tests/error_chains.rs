//! Every error prints each cause once: its own text says what failed at
//! its layer, and the cause is reachable through `source()` only, so a
//! chain printer (`anyhow`'s `{:#}`, `tracing`'s error fields) never
//! repeats a message. One test per error type, each on errors caused for
//! real: empty tenants, wrong tenant values, an origin that fails, and
//! against a real `redis-server` (ignored by default; `cargo test --
//! --include-ignored`) a refused connection, a stopped server, a server out
//! of memory, a counter key holding a word, a value JSON cannot hold.

mod common;

use std::error::Error;
use std::time::Duration;

use cache_key::cache::QueryCache;
use cache_key::cache::{BackendErrorKind, CacheError, CacheErrorKind, CachedQuery, MokaCache};
use cache_key::generation::GenerationErrorKind;
use cache_key::redis::{FailurePolicy, RedisCache, RedisGenerations, RedisPool, Timeouts};
use cache_key::{CacheKey, GenerationScope, GenerationStore, KeyError, MemoryGenerations, decode};
use common::redis_server::{Server, free_port};
use serde::{Deserialize, Serialize};

#[derive(Clone, CacheKey)]
#[cache_key(namespace = "shop", operation = "prices", value = Vec<f64>, ttl = "1m")]
struct Prices {
    #[tenant]
    shop: String,
    #[criterion]
    page: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Book {
    title: String,
}

#[derive(Clone, CacheKey)]
#[cache_key(namespace = "library", operation = "search", value = Vec<Book>, ttl = "1m")]
struct Search {
    #[tenant]
    branch: String,
    #[criterion]
    title: String,
}

fn prices(shop: &str) -> Prices {
    Prices {
        shop: shop.to_owned(),
        page: 1,
    }
}

/// The texts of `error` and of each source below it, as a chain printer
/// writes them, after checking that no text repeats the one below it.
fn chain(error: &dyn Error) -> Vec<String> {
    let mut texts = vec![error.to_string()];
    let mut next = error.source();
    while let Some(cause) = next {
        texts.push(cause.to_string());
        next = cause.source();
    }
    for pair in texts.windows(2) {
        assert!(!pair[0].is_empty(), "an empty message in {texts:?}");
        assert!(
            !pair[0].contains(&pair[1]),
            "{:?} repeats its cause {:?}: {texts:?}",
            pair[0],
            pair[1]
        );
    }
    // Each message once, whatever its place.
    for (i, text) in texts.iter().enumerate() {
        assert!(
            texts[i + 1..].iter().all(|other| other != text),
            "{text:?} twice in {texts:?}"
        );
    }
    texts
}

#[test]
fn a_key_error_is_one_message() {
    let error = Prices::cache_key(&prices(""), 1).unwrap_err();
    assert!(matches!(error, KeyError::EmptyTenant { .. }));
    assert_eq!(chain(&error).len(), 1);
}

#[test]
fn a_decode_error_is_one_message() {
    let error = decode("library:s1").unwrap_err();
    assert_eq!(chain(&error).len(), 1, "{error}");
}

#[test]
fn a_generation_error_prints_each_cause_once() {
    let store = MemoryGenerations::new();
    // An empty tenant: the key error, as it is.
    let error = store.key_for(&prices("")).unwrap_err();
    assert_eq!(error.kind(), GenerationErrorKind::Key);
    assert_eq!(chain(&error), [error.key_error().unwrap().to_string()]);
    // Tenant values that do not fit the query type: one message.
    let error = GenerationScope::tenant_unchecked::<Prices>(&[&"a", &"b"]).unwrap_err();
    assert_eq!(error.kind(), GenerationErrorKind::TenantValues);
    assert_eq!(chain(&error).len(), 1);
}

#[test]
fn a_cache_error_prints_each_cause_once() {
    let cache = MokaCache::new(MemoryGenerations::new(), 100);
    let error = cache.get(&prices("")).unwrap_err();
    let texts = chain(&error);
    assert_eq!(texts.len(), 1, "{texts:?}");

    let failed = cache
        .get_or_load(&prices("s1"), || {
            Err::<Vec<f64>, _>(std::io::Error::other("the database is down"))
        })
        .unwrap_err();
    assert_eq!(failed.kind(), CacheErrorKind::Origin);
    assert_eq!(
        chain(&failed),
        ["the origin failed", "the database is down"]
    );
}

/// A cache whose calls give up after 200 ms, and return Redis's failures.
fn strict_cache(url: &str) -> RedisCache {
    let timeouts = Timeouts::default().with_call(Duration::from_millis(200));
    let pool = RedisPool::builder().timeouts(timeouts).open(url).unwrap();
    RedisCache::new(RedisGenerations::new(pool)).with_failure_policy(FailurePolicy::ReturnError)
}

#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn a_backend_error_prints_each_cause_once() {
    // Nothing listens: connections are refused.
    let nobody = format!("redis://127.0.0.1:{}/", free_port());
    let cache = strict_cache(&nobody);
    let error = cache.get(&prices("s1")).unwrap_err();
    assert_eq!(error.kind(), CacheErrorKind::Unavailable, "{error}");
    let texts = chain(&error);
    assert_eq!(texts[0], "the generation store failed", "{texts:?}");
    assert!(
        texts.len() >= 3,
        "the store, the backend, its cause: {texts:?}"
    );

    let Some(server) = Server::start(false) else {
        return;
    };
    let cache = strict_cache(&server.url());
    cache
        .insert(
            &search("Dune"),
            vec![Book {
                title: "Dune".into(),
            }],
        )
        .unwrap();

    // Stopped: the call's time bound passes, and says so.
    server.pause();
    let error = cache.get(&search("Dune")).unwrap_err();
    server.resume();
    assert_eq!(error.kind(), CacheErrorKind::Timeout, "{error}");
    let backend = error.backend_error().unwrap();
    assert_eq!(backend.kind(), BackendErrorKind::Timeout);
    let texts = chain(&error);
    assert!(
        texts.iter().any(|text| text.contains("within 200ms")),
        "{texts:?}"
    );

    // Out of memory: Redis refuses the entry's SET.
    let mut admin = server.connect();
    for (name, value) in [("maxmemory-policy", "noeviction"), ("maxmemory", "1")] {
        let () = redis::cmd("CONFIG")
            .arg("SET")
            .arg(name)
            .arg(value)
            .query(&mut admin)
            .unwrap();
    }
    let error = cache
        .insert(
            &search("Dune"),
            vec![Book {
                title: "Dune".into(),
            }],
        )
        .unwrap_err();
    assert_eq!(error.kind(), CacheErrorKind::Backend, "{error}");
    let texts = chain(&error);
    assert_eq!(texts[0], "Redis answered with an error", "{texts:?}");
    assert!(texts[1].contains("OOM"), "{texts:?}");
    let () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory")
        .arg("0")
        .query(&mut admin)
        .unwrap();

    // A counter key holding a word.
    let () = redis::cmd("SET")
        .arg("library:g:t{x}")
        .arg("seven")
        .query(&mut admin)
        .unwrap();
    let error = cache.get(&Search {
        branch: "x".into(),
        title: "Dune".into(),
    });
    let error = error.unwrap_err();
    let texts = chain(&error);
    assert_eq!(texts[0], "the generation store failed", "{texts:?}");
    assert!(texts[1].contains("not a generation counter"), "{texts:?}");

    // A value JSON cannot hold.
    let error = cache.insert(&prices("s1"), vec![f64::NAN]).unwrap_err();
    assert_eq!(error.kind(), CacheErrorKind::Unstorable);
    let texts = chain(&error);
    assert_eq!(texts[0], "the value cannot be cached as JSON", "{texts:?}");
    assert!(texts[1].contains("NaN"), "{texts:?}");
    assert!(matches!(error, CacheError::Unstorable(_)));
    let _ = <Search as CachedQuery>::TTL;
}

fn search(title: &str) -> Search {
    Search {
        branch: "b1".into(),
        title: title.into(),
    }
}
