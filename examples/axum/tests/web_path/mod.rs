//! The web path end to end, over real HTTP, on any of the example's caches:
//! a cached GET, a hit, a `304` from the counters alone, an edit that bumps
//! a tag, `private` on every tenant-scoped route, surrogate keys on the
//! global one, and `/metrics` agreeing with the cache's counters.

use axum::http::{Method, StatusCode, header};
use cache_key::cache::{AsyncTypedCache, Stats};
use cache_key::http::{MAX_SURROGATE_HEADER_LEN, MAX_SURROGATE_KEY_LEN, MAX_SURROGATE_KEYS};

use crate::axum_example::{BookPage, LibraryCache};
use crate::client::{BAHCELIEVLER, BAHCELIEVLER_2, CENTRAL, KADIKOY, Reply, Server};

/// Runs the scenario; `entry_reads` counts the reads of entries the cache
/// made so far, where the backend sees them (moka: the cache's counted
/// reads; Redis: the server's `GET`s).
pub async fn scenario<C: LibraryCache>(server: &Server<C>, entry_reads: impl Fn() -> u64) {
    let book = "/books/3";
    let stats = || server.library.http.stats_of::<BookPage>();

    // A cached GET: the origin once.
    let first = server.ok(BAHCELIEVLER, book).await;
    assert_eq!(first.json()["title"], "The Book of Sand");
    let tag = first.header(header::ETAG).to_owned();
    assert!(tag.starts_with('"') && tag.len() == 34, "{tag}");
    assert_eq!(server.library.origin_calls(), 1);
    assert_eq!(first.header("cache-status"), "cache-key; fwd=miss");

    // The repeat is a hit: the same tag, no origin call.
    let reads = entry_reads();
    let again = server.ok(BAHCELIEVLER, book).await;
    assert_eq!(again.body, first.body);
    assert_eq!(again.header(header::ETAG), tag);
    assert_eq!(again.header("cache-status"), "cache-key; hit");
    assert_eq!(server.library.origin_calls(), 1);
    assert_eq!(stats().hits, 1);
    assert!(entry_reads() > reads, "a hit reads its entry");

    // A conditional GET with that tag: 304 from the counters alone.
    let (reads, before) = (entry_reads(), stats());
    let revalidated = server.get(Some(BAHCELIEVLER), book, Some(&tag)).await;
    assert_eq!(revalidated.status, StatusCode::NOT_MODIFIED);
    assert!(revalidated.body.is_empty());
    assert_eq!(revalidated.header(header::ETAG), tag);
    assert_eq!(revalidated.header("cache-status"), "cache-key; hit");
    assert_eq!(
        revalidated.header(header::CACHE_CONTROL),
        "private, no-cache"
    );
    assert_eq!(server.library.origin_calls(), 1, "no origin call");
    assert_eq!(entry_reads(), reads, "no entry read");
    assert_eq!(stats(), before, "the cache was not read");

    // The public author page, before the edit.
    let author = "/authors/Jorge%20Luis%20Borges";
    let public = server.get(None, author, None).await;
    assert_eq!(public.status, StatusCode::OK);
    assert_eq!(public.titles(), ["Ficciones", "The Book of Sand"]);
    assert_eq!(
        public.header(header::CACHE_CONTROL),
        "public, max-age=0, s-maxage=600"
    );
    assert!(public.headers.get(header::VARY).is_none());
    let surrogate = surrogate_keys(&public);
    assert_eq!(
        surrogate,
        [
            "library",
            "library/author",
            "library@author=Jorge%20Luis%20Borges"
        ]
    );

    // An edit bumps the book's tag (and its author's): the old tag is 200
    // with the new body, and a new tag.
    let bearer = format!("Bearer {BAHCELIEVLER}");
    let edit = server
        .send(
            Method::PUT,
            book,
            &[
                (header::AUTHORIZATION, bearer.as_str()),
                (header::CONTENT_TYPE, "application/json"),
            ],
            r#"{"title": "El libro de arena"}"#,
        )
        .await;
    assert_eq!(edit.status, StatusCode::NO_CONTENT);
    let changed = server.get(Some(BAHCELIEVLER), book, Some(&tag)).await;
    assert_eq!(changed.status, StatusCode::OK);
    assert_eq!(changed.json()["title"], "El libro de arena");
    assert_eq!(changed.header("cache-status"), "cache-key; fwd=miss");
    let new_tag = changed.header(header::ETAG).to_owned();
    assert_ne!(new_tag, tag);
    assert_eq!(server.library.origin_calls(), 3);
    let current = server.get(Some(BAHCELIEVLER), book, Some(&new_tag)).await;
    assert_eq!(current.status, StatusCode::NOT_MODIFIED);

    // The bump called the purge hook with the author page's own key.
    let purged = server.library.purged.lock().unwrap().clone();
    assert_eq!(purged, ["library@author=Jorge%20Luis%20Borges"]);
    assert!(surrogate.contains(&purged[0]));
    let public_again = server
        .get(None, author, Some(public.header(header::ETAG)))
        .await;
    assert_eq!(public_again.status, StatusCode::OK);
    assert_eq!(public_again.titles(), ["Ficciones", "El libro de arena"]);

    // Every tenant-scoped route is private, for every member, 200 or 304.
    for token in [CENTRAL, BAHCELIEVLER, BAHCELIEVLER_2, KADIKOY] {
        for path in ["/books?title=a", "/books/3", "/books/5", "/me/loans"] {
            let reply = server.ok(token, path).await;
            let tag = reply.header(header::ETAG).to_owned();
            let repeat = server.get(Some(token), path, Some(&tag)).await;
            assert_eq!(repeat.status, StatusCode::NOT_MODIFIED, "{token} {path}");
            for reply in [&reply, &repeat] {
                let control = reply.header(header::CACHE_CONTROL);
                assert!(control.starts_with("private"), "{token} {path}: {control}");
                assert!(!control.contains("public"), "{token} {path}: {control}");
                assert_eq!(reply.header(header::VARY), "Authorization, Cookie");
                assert!(reply.headers.get("surrogate-key").is_none());
                assert!(reply.headers.get("cache-tag").is_none());
            }
        }
    }

    // Per-user answers: each member of branch 2 gets their own loans, and
    // one member's tag is nothing to the other.
    let mine = server.ok(BAHCELIEVLER, "/me/loans").await;
    let theirs = server.ok(BAHCELIEVLER_2, "/me/loans").await;
    assert_eq!(mine.titles(), ["El libro de arena"]);
    assert_eq!(theirs.titles(), ["Yaban"]);
    let crossed = server
        .get(
            Some(BAHCELIEVLER_2),
            "/me/loans",
            Some(mine.header(header::ETAG)),
        )
        .await;
    assert_eq!(crossed.status, StatusCode::OK);
    assert_eq!(crossed.titles(), ["Yaban"]);
}

/// The surrogate keys of a public reply, checked against the CDNs' limits
/// and against each other (`Surrogate-Key` and `Cache-Tag` list the same).
fn surrogate_keys(reply: &Reply) -> Vec<String> {
    let fastly = reply.header("surrogate-key");
    let cloudflare = reply.header("cache-tag");
    assert!(fastly.len() <= MAX_SURROGATE_HEADER_LEN);
    assert!(cloudflare.len() <= MAX_SURROGATE_HEADER_LEN);
    let keys: Vec<String> = fastly.split(' ').map(str::to_owned).collect();
    assert_eq!(cloudflare.split(',').collect::<Vec<_>>(), keys);
    assert!(keys.len() <= MAX_SURROGATE_KEYS);
    for key in &keys {
        assert!(
            !key.is_empty() && key.len() <= MAX_SURROGATE_KEY_LEN,
            "{key}"
        );
    }
    keys
}

/// `/metrics` says what the cache's own counters say, for the book page.
pub async fn metrics_agree<C: LibraryCache>(server: &Server<C>) {
    let samples = server.metrics().await;
    let book = |name: &str| {
        let series = format!("{name}{{namespace=\"library\",operation=\"book\"}}");
        *samples
            .get(&series)
            .unwrap_or_else(|| panic!("{series} in /metrics"))
    };
    let stats: Stats = server.library.http.stats_of::<BookPage>();
    assert_eq!(book("cache_key_hits_total"), stats.hits as f64);
    assert_eq!(book("cache_key_misses_total"), stats.misses as f64);
    assert_eq!(book("cache_key_degraded_total"), stats.degraded as f64);
    assert_eq!(book("cache_key_origin_calls_total"), stats.loads as f64);
    assert_eq!(
        book("cache_key_origin_duration_seconds_count"),
        stats.loads as f64
    );
}
