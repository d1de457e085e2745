//! Requests per second and latency of one handler four ways, side by side
//! in one run, on loopback, each bounded in time: the example's `GET
//! /books/{id}` through `HttpCache` (a hit), the same with `If-None-Match`
//! (a `304` from the counters), the same handler without a cache (SQLite
//! every time), and a plain `moka` handler keyed by hand (no ETag, no
//! invalidation, no metrics).
//!
//! ```text
//! cargo bench -p cache-key-example-axum --bench web        # WEB_BENCH_SECS=2 per round, 3 rounds
//! ```
//!
//! The load generator is here: `CONNECTIONS` tasks, each sending its next
//! request when the last one answered, on keep-alive connections (hyper's
//! client); each request's time is recorded and the percentiles read from
//! the sorted times of a round. With redis-server installed, the book page
//! is also measured on the example's Redis cache, against that cache called
//! without `HttpCache`. Server and client share the machine's cores:
//! the numbers compare the handlers, they are not a server's capacity.

#[path = "../main.rs"]
#[allow(dead_code)] // the example's `main`, which the bench does not run
mod axum_example;
#[path = "../../../tests/common/redis_server.rs"]
#[allow(dead_code)] // the workspace's helper: the bench starts one server
mod redis_server;

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{Request, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum_example::{BookPage, BranchId, Library, MokaBackend, Search, SearchParams, app};
use cache_key::cache::AsyncQueryCache;
use cache_key::redis::AsyncRedisCache;
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

/// Concurrent requests in flight.
const CONNECTIONS: usize = 16;
/// Rounds of every scenario, interleaved, so that drift on a shared
/// machine is spread over all of them.
const ROUNDS: usize = 3;
const TOKEN: &str = "Bearer bahcelievler-token";

/// The bench's own two handlers beside the example's: the state.
struct Raw {
    library: Arc<Library<MokaBackend>>,
    /// Keyed by hand, as a handler without this crate would.
    moka: moka::future::Cache<String, Arc<Vec<u8>>>,
}

/// `GET /raw/books/{id}`: the origin every time.
async fn uncached(State(raw): State<Arc<Raw>>, Path(id): Path<u32>) -> Response {
    match raw.library.book(BranchId(2), id).await {
        Ok(book) => json(serde_json::to_vec(&book).unwrap()),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

/// `GET /raw/books?title=...`: the search, the origin every time.
async fn uncached_search(
    State(raw): State<Arc<Raw>>,
    Query(params): Query<SearchParams>,
) -> Response {
    let search = Arc::new(Search {
        branch: BranchId(2),
        params,
    });
    match raw.library.search(search).await {
        Ok(books) => json(serde_json::to_vec(&books).unwrap()),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

/// `GET /moka/books?title=...`: the search in a plain moka cache, keyed by
/// hand (the title alone: the other parameters are the bench's defaults).
async fn hand_keyed_search(
    State(raw): State<Arc<Raw>>,
    Query(params): Query<SearchParams>,
) -> Response {
    let key = format!("search:2:{}", params.title.as_deref().unwrap_or(""));
    let search = Arc::new(Search {
        branch: BranchId(2),
        params,
    });
    let load = async {
        let books = raw.library.search(search).await?;
        Ok::<_, axum_example::DbError>(Arc::new(serde_json::to_vec(&books).unwrap()))
    };
    match raw.moka.try_get_with(key, load).await {
        Ok(body) => json(body.as_ref().clone()),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

/// `GET /moka/books/{id}`: a plain moka cache of the JSON, keyed by hand.
async fn hand_keyed(State(raw): State<Arc<Raw>>, Path(id): Path<u32>) -> Response {
    let key = format!("book:2:{id}");
    let load = async {
        let book = raw.library.book(BranchId(2), id).await?;
        Ok::<_, axum_example::DbError>(Arc::new(serde_json::to_vec(&book).unwrap()))
    };
    match raw.moka.try_get_with(key, load).await {
        Ok(body) => json(body.as_ref().clone()),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

fn json(body: Vec<u8>) -> Response {
    ([(header::CONTENT_TYPE, "application/json")], body).into_response()
}

/// The `ETag` of `GET url` (which fills the cache).
async fn etag(client: &Client<HttpConnector, Empty<Bytes>>, url: &str) -> String {
    let request = Request::get(url).header(header::AUTHORIZATION, TOKEN);
    let response = client.request(request.body(Empty::new()).unwrap()).await;
    let response = response.expect("the server answers");
    response.headers()[header::ETAG]
        .to_str()
        .unwrap()
        .to_owned()
}

/// `GET /plain/books/{id}` on Redis: the typed cache's `get_or_load` and
/// the JSON, without `HttpCache` (no `ETag`, no second counter read).
async fn plain_redis(
    State(library): State<Arc<Library<AsyncRedisCache>>>,
    Path(id): Path<u32>,
) -> Response {
    let query = BookPage {
        branch: BranchId(2),
        id,
    };
    let origin = || library.book(BranchId(2), id);
    match library.http.cache().get_or_load(&query, origin).await {
        Ok(book) => json(serde_json::to_vec(&book).unwrap()),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

/// One scenario: its name, its URL, and the `If-None-Match` it sends.
struct Scenario {
    name: &'static str,
    url: String,
    if_none_match: Option<String>,
    expect: StatusCode,
}

impl Scenario {
    /// A scenario sending `if_none_match`, answered 304 when it is sent.
    fn new(name: &'static str, url: String, if_none_match: Option<String>) -> Self {
        let expect = match if_none_match {
            Some(_) => StatusCode::NOT_MODIFIED,
            None => StatusCode::OK,
        };
        Scenario {
            name,
            url,
            if_none_match,
            expect,
        }
    }
}

/// What a round of a scenario measured.
struct Round {
    requests: usize,
    rps: f64,
    p50: Duration,
    p99: Duration,
}

async fn round(
    client: &Client<HttpConnector, Empty<Bytes>>,
    scenario: &Scenario,
    duration: Duration,
) -> Round {
    let deadline = Instant::now() + duration;
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..CONNECTIONS {
        let client = client.clone();
        let uri = scenario.url.clone();
        let tag = scenario.if_none_match.clone();
        let expect = scenario.expect;
        tasks.push(tokio::spawn(async move {
            let mut times = Vec::new();
            while Instant::now() < deadline {
                let mut request = Request::get(&uri).header(header::AUTHORIZATION, TOKEN);
                if let Some(tag) = &tag {
                    request = request.header(header::IF_NONE_MATCH, tag);
                }
                let sent = Instant::now();
                let response = client.request(request.body(Empty::new()).unwrap()).await;
                let response = response.expect("the server answers");
                assert_eq!(response.status(), expect);
                response.into_body().collect().await.unwrap();
                times.push(sent.elapsed());
            }
            times
        }));
    }
    let mut times = Vec::new();
    for task in tasks {
        times.extend(task.await.unwrap());
    }
    let elapsed = started.elapsed();
    times.sort_unstable();
    let at = |q: f64| times[((times.len() - 1) as f64 * q) as usize];
    Round {
        requests: times.len(),
        rps: times.len() as f64 / elapsed.as_secs_f64(),
        p50: at(0.50),
        p99: at(0.99),
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let seconds: f64 = std::env::var("WEB_BENCH_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2.0);
    let duration = Duration::from_secs_f64(seconds);
    let library = Arc::new(Library::with_moka().expect("the catalog opens"));
    // A branch of 20,000 books, so that a search costs its origin a scan
    // (a few ms), as a real one would; the book page stays a primary-key read.
    library
        .write(|conn| {
            conn.execute(
                "INSERT INTO books (title, author, year, branch_id)
                 WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 20000)
                 SELECT 'Volume ' || i, 'Author ' || (i % 500), 1900 + i % 120, 2 FROM n",
                [],
            )
        })
        .await
        .expect("the books are added");
    let raw = Arc::new(Raw {
        library: Arc::clone(&library),
        moka: moka::future::Cache::new(10_000),
    });
    let router = app(Arc::clone(&library)).merge(
        Router::new()
            .route("/raw/books/{id}", get(uncached))
            .route("/moka/books/{id}", get(hand_keyed))
            .route("/raw/books", get(uncached_search))
            .route("/moka/books", get(hand_keyed_search))
            .with_state(raw),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, router).await });
    let client = Client::builder(TokioExecutor::new())
        .pool_max_idle_per_host(CONNECTIONS)
        .build_http();

    let at = |path: &str| format!("{base}{path}");
    let book_tag = etag(&client, &at("/books/3")).await;
    let search = "/books?title=Volume%2019&per_page=20";
    let search_tag = etag(&client, &at(search)).await;
    let mut scenarios = vec![
        Scenario::new("book: HttpCache hit (200)", at("/books/3"), None),
        Scenario::new("book: HttpCache 304", at("/books/3"), Some(book_tag)),
        Scenario::new("book: no cache (SQLite)", at("/raw/books/3"), None),
        Scenario::new("book: moka keyed by hand", at("/moka/books/3"), None),
        Scenario::new("search: HttpCache hit (200)", at(search), None),
        Scenario::new("search: HttpCache 304", at(search), Some(search_tag)),
        Scenario::new(
            "search: no cache (SQLite)",
            at(&format!("/raw{search}")),
            None,
        ),
        Scenario::new(
            "search: moka keyed by hand",
            at(&format!("/moka{search}")),
            None,
        ),
    ];
    // On Redis too, when redis-server is installed: the same app on a
    // server of its own, and the same cache called without `HttpCache`.
    let redis = redis_server::Server::start(false);
    if let Some(redis) = &redis {
        let library = Library::with_redis(&redis.url()).await.expect("connects");
        let library = Arc::new(library);
        let router = app(Arc::clone(&library)).merge(
            Router::new()
                .route("/plain/books/{id}", get(plain_redis))
                .with_state(library),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, router).await });
        let book = format!("{base}/books/3");
        let tag = etag(&client, &book).await;
        scenarios.extend([
            Scenario::new("Redis book: HttpCache hit (200)", book.clone(), None),
            Scenario::new("Redis book: HttpCache 304", book, Some(tag)),
            Scenario::new(
                "Redis book: the typed cache alone",
                format!("{base}/plain/books/3"),
                None,
            ),
        ]);
    }
    let mut results: Vec<Vec<Round>> = scenarios.iter().map(|_| Vec::new()).collect();
    // A short warm-up of every scenario, not counted.
    for scenario in &scenarios {
        round(&client, scenario, Duration::from_millis(200)).await;
    }
    for _ in 0..ROUNDS {
        for (scenario, rounds) in scenarios.iter().zip(&mut results) {
            rounds.push(round(&client, scenario, duration).await);
        }
    }
    println!(
        "{CONNECTIONS} concurrent requests, {ROUNDS} rounds of {seconds} s per scenario; the median round by requests/s:"
    );
    println!("| handler | requests/s | p50 | p99 | requests |");
    println!("| --- | ---: | ---: | ---: | ---: |");
    for (scenario, mut rounds) in scenarios.iter().zip(results) {
        rounds.sort_by(|a, b| a.rps.total_cmp(&b.rps));
        let median = &rounds[rounds.len() / 2];
        println!(
            "| {} | {:.0} | {:.0} µs | {:.0} µs | {} |",
            scenario.name,
            median.rps,
            median.p50.as_secs_f64() * 1e6,
            median.p99.as_secs_f64() * 1e6,
            median.requests,
        );
    }
}
