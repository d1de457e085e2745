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
//! the sorted times of a round. Server and client share the machine's cores:
//! the numbers compare the handlers, they are not a server's capacity.

#[path = "../main.rs"]
#[allow(dead_code)] // the example's `main`, which the bench does not run
mod axum_example;

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{Request, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum_example::{BranchId, Library, MokaBackend, Search, SearchParams, app};
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

/// One scenario: its name, its path, and the `If-None-Match` it sends.
struct Scenario {
    name: &'static str,
    path: &'static str,
    if_none_match: Option<String>,
    expect: StatusCode,
}

impl Scenario {
    /// A scenario sending `if_none_match`, answered 304 when it is sent.
    fn new(name: &'static str, path: &'static str, if_none_match: Option<String>) -> Self {
        let expect = match if_none_match {
            Some(_) => StatusCode::NOT_MODIFIED,
            None => StatusCode::OK,
        };
        Scenario {
            name,
            path,
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
    base: &str,
    scenario: &Scenario,
    duration: Duration,
) -> Round {
    let deadline = Instant::now() + duration;
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..CONNECTIONS {
        let client = client.clone();
        let uri = format!("{base}{}", scenario.path);
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

    // The tag the cached handler gives, for the 304s.
    let first = client
        .request(
            Request::get(format!("{base}/books/3"))
                .header(header::AUTHORIZATION, TOKEN)
                .body(Empty::new())
                .unwrap(),
        )
        .await
        .unwrap();
    let tag = first.headers()[header::ETAG].to_str().unwrap().to_owned();
    let search = "/books?title=Volume%2019&per_page=20";
    let found = client
        .request(
            Request::get(format!("{base}{search}"))
                .header(header::AUTHORIZATION, TOKEN)
                .body(Empty::new())
                .unwrap(),
        )
        .await
        .unwrap();
    let search_tag = found.headers()[header::ETAG].to_str().unwrap().to_owned();
    let raw_search = "/raw/books?title=Volume%2019&per_page=20";
    let moka_search = "/moka/books?title=Volume%2019&per_page=20";
    let scenarios = [
        Scenario::new("book: HttpCache hit (200)", "/books/3", None),
        Scenario::new("book: HttpCache 304", "/books/3", Some(tag)),
        Scenario::new("book: no cache (SQLite)", "/raw/books/3", None),
        Scenario::new("book: moka keyed by hand", "/moka/books/3", None),
        Scenario::new("search: HttpCache hit (200)", search, None),
        Scenario::new("search: HttpCache 304", search, Some(search_tag)),
        Scenario::new("search: no cache (SQLite)", raw_search, None),
        Scenario::new("search: moka keyed by hand", moka_search, None),
    ];
    let mut results: Vec<Vec<Round>> = scenarios.iter().map(|_| Vec::new()).collect();
    // A short warm-up of every scenario, not counted.
    for scenario in &scenarios {
        round(&client, &base, scenario, Duration::from_millis(200)).await;
    }
    for _ in 0..ROUNDS {
        for (scenario, rounds) in scenarios.iter().zip(&mut results) {
            rounds.push(round(&client, &base, scenario, duration).await);
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
