//! Tag counters' lives, against a real `redis-server` (ignored by default:
//! `cargo test -- --include-ignored`). With a lifetime
//! (`RedisGenerations::with_tag_lifetime`): every tag counter a bump or a
//! read writes gets it, the namespace, tenant and operation counters beside
//! it in the same script call never do, a store lengthens the counters of
//! its entry's tags to the entry's own time, and an entry whose tag's
//! counter is gone is a miss, never served. And a counter made by the read
//! that finds an entry (a new entity's first fill) is counted in `Stats`.

mod common;

use std::time::Duration;

use cache_key::cache::{MokaCache, QueryCache, TypedCache};
use cache_key::redis::{RedisCache, RedisGenerations, RedisPool};
use cache_key::{CacheKey, CacheTags, GenerationScope, GenerationStore, MemoryGenerations, Scopes};
use common::redis_server::Server;
use serde::{Deserialize, Serialize};

/// A product page: its key's generation sums its product's tag counter.
#[derive(CacheKey)]
#[cache_key(namespace = "shop", operation = "product", value = String, ttl = "60s")]
struct ProductPage {
    #[tenant]
    shop: u32,
    #[criterion]
    #[tag = "product"]
    id: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, CacheTags)]
struct Line {
    #[tag = "product"]
    id: u64,
}

/// A search: its answer's products are its value's tags.
#[derive(CacheKey)]
#[cache_key(namespace = "shop", operation = "search", value = Vec<Line>, ttl = "60s", value_tags)]
struct Search<'a> {
    #[tenant]
    shop: u32,
    #[criterion]
    text: &'a str,
}

const LIFETIME: Duration = Duration::from_secs(90);

fn pttl(server: &Server, scope: &GenerationScope) -> i64 {
    redis::cmd("PTTL")
        .arg(scope.counter().name())
        .query(&mut server.connect())
        .expect("PTTL")
}

fn store(server: &Server) -> RedisGenerations {
    RedisGenerations::new(RedisPool::open(server.url()).unwrap()).with_tag_lifetime(LIFETIME)
}

#[test]
#[ignore = "starts a redis-server: cargo test -- --include-ignored"]
fn a_tag_counter_lives_its_lifetime_and_no_other_counter_gets_one() {
    let Some(server) = Server::start(false) else {
        return;
    };
    let lives = |ttl: i64| ttl > 0 && ttl <= LIFETIME.as_millis() as i64;
    let generations = store(&server);

    // A read of a query-tagged key raises its missing counters in one call:
    // the product's gets the lifetime, the namespace's and tenant's do not.
    generations
        .key_for(&ProductPage { shop: 7, id: 42 })
        .unwrap();
    let product = ProductPage::tag_scope_product(&7, &42).unwrap();
    assert!(
        lives(pttl(&server, &product)),
        "{}",
        pttl(&server, &product)
    );
    assert_eq!(
        pttl(&server, &GenerationScope::namespace::<ProductPage>()),
        -1
    );
    assert_eq!(pttl(&server, &ProductPage::tenant_scope(&7).unwrap()), -1);
    assert_eq!(
        pttl(&server, &ProductPage::operation_scope(&7).unwrap()),
        -1
    );

    // A bump sets it again; a bump of a tenant keeps none.
    let other = ProductPage::tag_scope_product(&7, &43).unwrap();
    generations.invalidate(&other).unwrap();
    assert!(lives(pttl(&server, &other)));
    generations
        .invalidate(&ProductPage::tenant_scope(&7).unwrap())
        .unwrap();
    assert_eq!(pttl(&server, &ProductPage::tenant_scope(&7).unwrap()), -1);

    // A value's tags checked on a hit are raised with it too.
    let cache = RedisCache::new(store(&server));
    let search = Search {
        shop: 7,
        text: "lamp",
    };
    for _ in 0..2 {
        let answer = cache.get_or_load(&search, || Ok::<_, std::io::Error>(vec![Line { id: 44 }]));
        assert_eq!(answer.unwrap(), [Line { id: 44 }]);
    }
    let tag = Line::tag_scope_product::<Search>(&7, &44).unwrap();
    assert!(lives(pttl(&server, &tag)), "{}", pttl(&server, &tag));

    // Without a lifetime, as before: kept.
    let plain = RedisGenerations::new(RedisPool::open(server.url()).unwrap());
    let kept = ProductPage::tag_scope_product(&7, &45).unwrap();
    plain.invalidate(&kept).unwrap();
    assert_eq!(pttl(&server, &kept), -1);
}

#[test]
#[ignore = "starts a redis-server: cargo test -- --include-ignored"]
fn an_entry_whose_tag_counter_expired_is_a_miss() {
    let Some(server) = Server::start(false) else {
        return;
    };
    let cache = RedisCache::new(store(&server));
    let search = Search {
        shop: 1,
        text: "chair",
    };
    let mut calls = 0;
    let mut read = |title: u64| {
        cache
            .get_or_load(&search, || {
                calls += 1;
                Ok::<_, std::io::Error>(vec![Line { id: title }])
            })
            .unwrap()
    };
    read(5);
    read(5);
    read(5);
    // Served from the third read on (the second made the tag's counter).
    let tag = Line::tag_scope_product::<Search>(&1, &5).unwrap();
    let () = redis::cmd("DEL")
        .arg(tag.counter().name())
        .query(&mut server.connect())
        .unwrap();
    // The counter gone, as when its lifetime ends: the entry is not served.
    assert_eq!(read(6), [Line { id: 6 }]);
    assert_eq!(calls, 3);
}

#[test]
#[ignore = "starts a redis-server: cargo test -- --include-ignored"]
fn a_tag_counter_outlives_every_entry_stored_with_its_tag() {
    let Some(server) = Server::start(false) else {
        return;
    };
    // A lifetime far shorter than the entries' 60 s TTL: a store lengthens
    // the counters of the tags it holds to the entry's own time.
    let short = Duration::from_secs(2);
    let generations = RedisGenerations::new(RedisPool::open(server.url()).unwrap());
    let cache = RedisCache::new(generations.with_tag_lifetime(short));
    let outlives = |scope: &GenerationScope, what: &str| {
        let left = pttl(&server, scope);
        assert!(
            left > 50_000,
            "{what}: the counter lives {left} ms, the entry 60 s"
        );
    };

    // A query's tag, through a load and through an insert.
    let loaded = cache.get_or_load(&ProductPage { shop: 7, id: 42 }, || {
        Ok::<_, String>("Mug".to_owned())
    });
    assert_eq!(loaded.unwrap(), "Mug");
    outlives(
        &ProductPage::tag_scope_product(&7, &42).unwrap(),
        "query tag, loaded",
    );
    cache
        .insert(&ProductPage { shop: 7, id: 43 }, "Cup".to_owned())
        .unwrap();
    outlives(
        &ProductPage::tag_scope_product(&7, &43).unwrap(),
        "query tag, inserted",
    );

    // A value's tags, through a load and through an insert. A counter is
    // made when first read (the first fill's entry is then a miss): the
    // fill after it lengthens it, and its entry is served.
    let search = Search {
        shop: 7,
        text: "mug",
    };
    let lines = || Ok::<_, String>(vec![Line { id: 44 }, Line { id: 45 }]);
    cache.get_or_load(&search, lines).unwrap();
    assert_eq!(cache.get(&search).unwrap(), None, "its counters made now");
    cache.get_or_load(&search, lines).unwrap();
    for id in [44, 45] {
        let tag = Line::tag_scope_product::<Search>(&7, &id).unwrap();
        outlives(&tag, "value tag, loaded");
    }
    assert_eq!(cache.get(&search).unwrap(), lines().ok());
    let cup = Search {
        shop: 7,
        text: "cup",
    };
    cache.insert(&cup, vec![Line { id: 46 }]).unwrap();
    assert_eq!(cache.get(&cup).unwrap(), None, "its counter made now");
    cache.insert(&cup, vec![Line { id: 46 }]).unwrap();
    outlives(
        &Line::tag_scope_product::<Search>(&7, &46).unwrap(),
        "value tag, inserted",
    );
    assert_eq!(cache.get(&cup).unwrap(), Some(vec![Line { id: 46 }]));
}

#[test]
#[ignore = "starts a redis-server: cargo test -- --include-ignored"]
fn a_first_fill_no_read_can_serve_is_counted_as_a_new_tag_counter() {
    let Some(server) = Server::start(false) else {
        return;
    };
    let cache = RedisCache::new(RedisGenerations::new(
        RedisPool::open(server.url()).unwrap(),
    ));
    let search = Search {
        shop: 7,
        text: "mug",
    };
    let lines = || Ok::<_, String>(vec![Line { id: 44 }, Line { id: 45 }]);
    let counted = || cache.stats().rejected.new_tag_counter;

    // The first fill of products never seen: their counters are made by
    // the read that finds it, after its fill began: not served, counted.
    cache.get_or_load(&search, lines).unwrap();
    assert_eq!(cache.get(&search).unwrap(), None);
    assert_eq!(counted(), 1);
    // The fill after it is served.
    cache.get_or_load(&search, lines).unwrap();
    assert_eq!(cache.get(&search).unwrap(), lines().ok());
    // A bump of product 44 ends it too, and that is no new counter.
    let tag = Line::tag_scope_product::<Search>(&7, &44).unwrap();
    cache.invalidate(&tag).unwrap();
    assert_eq!(cache.get(&search).unwrap(), None);
    assert_eq!(counted(), 1, "a bump is not counted as a new counter");

    // In process, the counters are there from the start: the first fill
    // is served, and nothing is counted.
    let moka = MokaCache::new(MemoryGenerations::new(), 100);
    moka.get_or_load(&search, lines).unwrap();
    assert_eq!(moka.get(&search).unwrap(), lines().ok());
    assert_eq!(moka.stats().rejected.new_tag_counter, 0);
}
