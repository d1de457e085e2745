//! `examples/axum/main.rs` served on a loopback port and asked over real HTTP: the
//! seed's collision and tenant leak do not happen, a request without a known
//! token never reaches the cache, and one query in any parameter order is one
//! cache entry.

#[path = "../main.rs"]
#[allow(dead_code)] // the example's `main`, which the test does not run
mod axum_example;

use std::sync::Arc;

use axum::body::Bytes;
use axum::http::{Request, StatusCode, header};
use axum_example::{Library, app};
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde::Deserialize;

/// Branch 1's token.
const CENTRAL: &str = "central-token";
/// Branch 2's token.
const BAHCELIEVLER: &str = "bahcelievler-token";
/// Branch 3's token.
const KADIKOY: &str = "kadikoy-token";

/// The app on `127.0.0.1:<free port>`, with its own database, cache and
/// counters, and an HTTP client for it.
struct Server {
    url: String,
    library: Arc<Library>,
    client: Client<HttpConnector, Empty<Bytes>>,
}

async fn start() -> Server {
    let library = Arc::new(Library::open().expect("the catalog opens"));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a free loopback port");
    let url = format!("http://{}/books", listener.local_addr().unwrap());
    let app = app(Arc::clone(&library));
    tokio::spawn(async move { axum::serve(listener, app).await });
    Server {
        url,
        library,
        client: Client::builder(TokioExecutor::new()).build_http(),
    }
}

/// A `200` response of `GET /books`.
#[derive(Deserialize, Debug)]
struct Answer {
    source: String,
    key: String,
    books: Vec<Book>,
}

#[derive(Deserialize, Debug)]
struct Book {
    title: String,
}

impl Answer {
    fn titles(&self) -> Vec<&str> {
        self.books.iter().map(|book| book.title.as_str()).collect()
    }
}

impl Server {
    /// `GET /books?{query}` with the given `Authorization` header, if any.
    async fn get(&self, authorization: Option<&str>, query: &str) -> (StatusCode, Bytes) {
        let mut request = Request::get(format!("{}?{query}", self.url));
        if let Some(value) = authorization {
            request = request.header(header::AUTHORIZATION, value);
        }
        let response = self
            .client
            .request(request.body(Empty::new()).unwrap())
            .await
            .expect("the server answers");
        let status = response.status();
        let body = response.into_body().collect().await.unwrap().to_bytes();
        (status, body)
    }

    /// `GET /books?{query}` as the branch of `token`, which must succeed.
    async fn search(&self, token: &str, query: &str) -> Answer {
        let (status, body) = self.get(Some(&format!("Bearer {token}")), query).await;
        assert_eq!(
            status,
            StatusCode::OK,
            "?{query}: {}",
            String::from_utf8_lossy(&body)
        );
        serde_json::from_slice(&body).expect("a JSON answer")
    }
}

#[tokio::test]
async fn a_separator_inside_a_value_does_not_make_two_searches_one() {
    let server = start().await;
    // The seed's hand-written key, `search:{title}:{author}` with spaces
    // removed, is `search:Sand:Borges` for both searches: the second one would
    // be served the first one's answer. Each branch runs them in turn.
    let cases: [(&str, &[&str], &[&str]); 2] = [
        (BAHCELIEVLER, &["The Book of Sand"], &[]),
        (CENTRAL, &[], &["Sand: Borges Selection"]),
    ];
    for (token, by_title_and_author, by_title) in cases {
        let first = server.search(token, "title=Sand&author=Borges").await;
        let second = server.search(token, "title=Sand%3A%20Borges").await;
        assert_eq!(first.titles(), by_title_and_author, "{token}");
        assert_eq!(second.titles(), by_title, "{token}");
        assert_eq!(second.source, "sqlite", "{token}: {second:?}");
        assert_ne!(first.key, second.key);
    }
    assert_eq!(server.library.origin_calls(), 4);
}

#[tokio::test]
async fn each_branch_is_served_its_own_books() {
    let server = start().await;
    let query = "page=1&per_page=2";
    let bahcelievler = server.search(BAHCELIEVLER, query).await;
    let kadikoy = server.search(KADIKOY, query).await;
    assert_eq!(bahcelievler.titles(), ["The Book of Sand", "Yaban"]);
    // The seed's `list:page:{page}` served branch 2's page to branch 3 here.
    assert_eq!(kadikoy.titles(), ["Motherland Hotel", "Silent House"]);
    assert_eq!(kadikoy.source, "sqlite", "{kadikoy:?}");
    assert_ne!(bahcelievler.key, kadikoy.key);
    assert_eq!(server.library.origin_calls(), 2);

    // Both entries stay: branch 2 asking again hits its own.
    let again = server.search(BAHCELIEVLER, query).await;
    assert_eq!(again.source, "cache");
    assert_eq!(again.titles(), ["The Book of Sand", "Yaban"]);
    assert_eq!(server.library.origin_calls(), 2);
}

#[tokio::test]
async fn a_request_without_a_known_token_is_refused_before_the_cache() {
    let server = start().await;
    // The entry an unauthenticated request for the same query would find.
    let warm = server.search(BAHCELIEVLER, "title=Sand").await;
    assert_eq!(warm.source, "sqlite");
    let lookups = server.library.lookups();
    let origin_calls = server.library.origin_calls();

    for authorization in [
        None,
        Some("Bearer unknown-token"),
        Some("Bearer "),
        Some(BAHCELIEVLER), // no scheme
        Some("Basic YmFoY2VsaWV2bGVyLXRva2Vu"),
    ] {
        let (status, body) = server.get(authorization, "title=Sand").await;
        assert_eq!(
            status,
            StatusCode::UNAUTHORIZED,
            "{authorization:?}: {}",
            String::from_utf8_lossy(&body)
        );
    }
    assert_eq!(server.library.lookups(), lookups);
    assert_eq!(server.library.origin_calls(), origin_calls);
}

#[tokio::test]
async fn one_query_in_any_parameter_order_is_one_entry() {
    let server = start().await;
    let first = server.search(BAHCELIEVLER, "title=Sand&page=1").await;
    assert_eq!(first.source, "sqlite");
    assert_eq!(first.titles(), ["The Book of Sand"]);

    let reordered = server.search(BAHCELIEVLER, "page=1&title=Sand").await;
    assert_eq!(reordered.source, "cache", "{reordered:?}");
    assert_eq!(reordered.key, first.key);
    assert_eq!(reordered.titles(), first.titles());
    assert_eq!(server.library.origin_calls(), 1);

    // Defaults are filled in before the key is made: an absent parameter and
    // its default value spelled out are one query too.
    for query in ["title=Sand", "sort=title_asc&per_page=20&title=Sand&page=1"] {
        let answer = server.search(BAHCELIEVLER, query).await;
        assert_eq!(answer.source, "cache", "?{query}: {answer:?}");
        assert_eq!(answer.key, first.key);
    }
    assert_eq!(server.library.origin_calls(), 1);
}

#[test]
fn query_types_have_key_spaces_of_their_own() {
    cache_key::registry::check().unwrap();
}
