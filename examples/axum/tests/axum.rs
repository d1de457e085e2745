//! `examples/axum/main.rs` served on a loopback port and asked over real HTTP:
//! the seed's collision and tenant leak do not happen, a request without a
//! known token never reaches the cache, and one query in any parameter order
//! is one cache entry.

#[path = "../main.rs"]
#[allow(dead_code)] // the example's `main`, which the test does not run
mod axum_example;
#[allow(dead_code)] // each test file uses a part of the shared client
mod client;

use axum::http::StatusCode;
use axum_example::{Library, Search};
use cache_key::cache::AsyncTypedCache;
use client::{BAHCELIEVLER, CENTRAL, KADIKOY, start};

#[tokio::test]
async fn a_separator_inside_a_value_does_not_make_two_searches_one() {
    let server = start(Library::with_moka().unwrap()).await;
    // The seed's hand-written key, `search:{title}:{author}` with spaces
    // removed, is `search:Sand:Borges` for both searches: the second one would
    // be served the first one's answer. Each branch runs them in turn.
    let cases: [(&str, &[&str], &[&str]); 2] = [
        (BAHCELIEVLER, &["The Book of Sand"], &[]),
        (CENTRAL, &[], &["Sand: Borges Selection"]),
    ];
    for (token, by_title_and_author, by_title) in cases {
        let first = server.ok(token, "/books?title=Sand&author=Borges").await;
        let second = server.ok(token, "/books?title=Sand%3A%20Borges").await;
        assert_eq!(first.titles(), by_title_and_author, "{token}");
        assert_eq!(second.titles(), by_title, "{token}");
        assert_ne!(first.header("etag"), second.header("etag"));
    }
    // Each of the four searches asked SQLite: none was served another's answer.
    assert_eq!(server.library.origin_calls(), 4);
}

#[tokio::test]
async fn each_branch_is_served_its_own_books() {
    let server = start(Library::with_moka().unwrap()).await;
    let query = "/books?page=1&per_page=2";
    let bahcelievler = server.ok(BAHCELIEVLER, query).await;
    let kadikoy = server.ok(KADIKOY, query).await;
    assert_eq!(bahcelievler.titles(), ["The Book of Sand", "Yaban"]);
    // The seed's `list:page:{page}` served branch 2's page to branch 3 here.
    assert_eq!(kadikoy.titles(), ["Ficciones", "Motherland Hotel"]);
    assert_ne!(bahcelievler.header("etag"), kadikoy.header("etag"));
    assert_eq!(server.library.origin_calls(), 2);

    // Both entries stay: branch 2 asking again hits its own.
    let again = server.ok(BAHCELIEVLER, query).await;
    assert_eq!(again.titles(), ["The Book of Sand", "Yaban"]);
    assert_eq!(again.header("etag"), bahcelievler.header("etag"));
    assert_eq!(server.library.origin_calls(), 2);
    // Branch 3's tag names branch 3's answer: branch 2 sending it gets its own.
    let crossed = server
        .get(Some(BAHCELIEVLER), query, Some(kadikoy.header("etag")))
        .await;
    assert_eq!(crossed.status, StatusCode::OK);
    assert_eq!(crossed.titles(), ["The Book of Sand", "Yaban"]);
}

#[tokio::test]
async fn a_request_without_a_known_token_is_refused_before_the_cache() {
    let server = start(Library::with_moka().unwrap()).await;
    // The entry an unauthenticated request for the same query would find.
    server.ok(BAHCELIEVLER, "/books?title=Sand").await;
    let stats = server.library.http.stats();
    let origin_calls = server.library.origin_calls();

    let bearer = |token: &str| format!("Bearer {token}");
    for authorization in [
        None,
        Some(bearer("unknown-token")),
        Some(bearer("")),
        Some(BAHCELIEVLER.to_owned()), // no scheme
        Some("Basic YmFoY2VsaWV2bGVyLXRva2Vu".to_owned()),
    ] {
        let mut headers = Vec::new();
        if let Some(value) = &authorization {
            headers.push((axum::http::header::AUTHORIZATION, value.as_str()));
        }
        let reply = server
            .send(axum::http::Method::GET, "/books?title=Sand", &headers, "")
            .await;
        assert_eq!(reply.status, StatusCode::UNAUTHORIZED, "{authorization:?}");
    }
    // No read of the cache, no origin call.
    assert_eq!(server.library.http.stats(), stats);
    assert_eq!(server.library.origin_calls(), origin_calls);
}

#[tokio::test]
async fn one_query_in_any_parameter_order_is_one_entry() {
    let server = start(Library::with_moka().unwrap()).await;
    let first = server.ok(BAHCELIEVLER, "/books?title=Sand&page=1").await;
    assert_eq!(first.titles(), ["The Book of Sand"]);

    let reordered = server.ok(BAHCELIEVLER, "/books?page=1&title=Sand").await;
    assert_eq!(reordered.header("etag"), first.header("etag"));
    assert_eq!(reordered.titles(), first.titles());
    assert_eq!(server.library.origin_calls(), 1);

    // Defaults are filled in before the key is made: an absent parameter and
    // its default value spelled out are one query too.
    for query in [
        "/books?title=Sand",
        "/books?sort=title_asc&per_page=20&title=Sand&page=1",
    ] {
        let answer = server.ok(BAHCELIEVLER, query).await;
        assert_eq!(answer.header("etag"), first.header("etag"), "{query}");
    }
    assert_eq!(server.library.origin_calls(), 1);
    let stats = server.library.http.stats_of::<Search>();
    assert_eq!((stats.misses, stats.hits), (1, 3));
}

#[test]
fn query_types_have_key_spaces_of_their_own() {
    cache_key::registry::check().unwrap();
}
