//! The library catalog as a web service: axum in front, a moka cache between it
//! and SQLite, and every cache key derived from the authenticated branch and
//! the query string.
//!
//! ```text
//! cargo run -p cache-key-example-axum --example axum                   # serves on 127.0.0.1:3000
//! cargo run -p cache-key-example-axum --example axum -- 127.0.0.1:8080
//! ```
//!
//! `examples/axum/tests/axum.rs` starts the same app on a free port and checks
//! it over HTTP. A package of its own: axum, tokio and hyper are built only
//! for it.

use std::error::Error;
use std::fmt::Display;
use std::num::NonZeroU32;
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use axum::extract::{FromRequestParts, Query, State};
use axum::http::request::Parts;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use cache_key::{CacheKey, Criteria, CriterionValue, Key, TenantValue};
use moka::future::Cache;
use rusqlite::{Connection, params};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::json;

/// The invalidation generation of every key; bumping it empties the cache.
const GENERATION: u64 = 1;

/// The bearer tokens the service accepts, and the branch each one
/// authenticates. A real service verifies a session or a signed token; the
/// key only needs the branch that check yields.
pub const TOKENS: [(&str, u32); 3] = [
    ("central-token", 1),
    ("bahcelievler-token", 2),
    ("kadikoy-token", 3),
];

/// A branch: the tenant. Each branch sees only the books it holds.
#[derive(CriterionValue, TenantValue, Clone, Copy, Debug)]
pub struct BranchId(pub u32);

/// The branch the request authenticated as, from `Authorization: Bearer
/// <token>`. Without a known token the request is refused with 401 before the
/// handler runs, so it never reads the cache.
pub struct Auth {
    pub branch: BranchId,
}

impl<S: Send + Sync> FromRequestParts<S> for Auth {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Response> {
        let token = parts
            .headers
            .get(header::AUTHORIZATION)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.strip_prefix("Bearer "));
        match TOKENS.iter().find(|(known, _)| Some(*known) == token) {
            Some(&(_, branch)) => Ok(Auth {
                branch: BranchId(branch),
            }),
            None => Err((
                StatusCode::UNAUTHORIZED,
                [(header::WWW_AUTHENTICATE, "Bearer")],
                Json(json!({ "error": "a known bearer token is required" })),
            )
                .into_response()),
        }
    }
}

/// Pagination, shared by every list endpoint: flattened into the parameters by
/// serde and into the key's criteria by the derive. Absent fields take their
/// default before the key is made, so `?page=1` and no page share an entry.
#[derive(Deserialize, Criteria, Clone, Copy, Debug)]
#[serde(default)]
pub struct Page {
    #[serde(deserialize_with = "from_text")]
    #[criterion]
    pub page: NonZeroU32,
    #[serde(deserialize_with = "from_text")]
    #[criterion]
    pub per_page: NonZeroU32,
}

impl Default for Page {
    fn default() -> Self {
        Page {
            page: NonZeroU32::MIN,
            per_page: NonZeroU32::new(20).unwrap(),
        }
    }
}

/// Parses a number from query-string text. Serde hands the fields of a
/// `#[serde(flatten)]`ed struct over as strings, which a plain `u32` refuses.
fn from_text<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: FromStr<Err: Display>,
{
    String::deserialize(deserializer)?
        .parse()
        .map_err(serde::de::Error::custom)
}

/// `sort=title_asc` or `sort=year_desc`, in the query string and in the key:
/// the derive reads serde's `rename_all`, so the names are written once.
#[derive(Deserialize, CriterionValue, Clone, Copy, Debug, Default)]
#[serde(rename_all = "snake_case")]
pub enum Sort {
    #[default]
    TitleAsc,
    YearDesc,
}

/// `GET /books?title=...&author=...&sort=...&page=...&per_page=...`
#[derive(Deserialize, Criteria, Debug)]
pub struct SearchParams {
    #[criterion]
    pub title: Option<String>,
    #[criterion]
    pub author: Option<String>,
    #[serde(default)]
    #[criterion]
    pub sort: Sort,
    #[serde(flatten)]
    #[criterion(flatten)]
    pub page: Page,
}

/// A search in one branch's books. Built as `Search { branch: auth.branch,
/// params }`: a forgotten tenant is a missing field, a compile error.
#[derive(CacheKey, Debug)]
#[cache_key(namespace = "library", operation = "search")]
pub struct Search {
    #[tenant]
    pub branch: BranchId,
    #[criterion(flatten)]
    pub params: SearchParams,
}

#[derive(Serialize, Debug)]
pub struct Book {
    pub title: String,
    pub author: String,
    pub year: u32,
}

/// The response: the books, the key they are cached under, and where they
/// came from (`"cache"` or `"sqlite"`).
#[derive(Serialize)]
struct Answer<'a> {
    source: &'static str,
    key: &'a str,
    books: &'a [Book],
}

/// The state: the database, the cache in front of it, and two counters.
pub struct Library {
    db: Arc<Mutex<Connection>>,
    cache: Cache<Key, Arc<[Book]>>,
    lookups: AtomicU64,
    origin_calls: AtomicU64,
}

impl Library {
    /// An in-memory database with the catalog of `examples/library/scenarios.rs`.
    pub fn open() -> rusqlite::Result<Self> {
        let conn = Connection::open_in_memory()?;
        conn.execute_batch(
            "CREATE TABLE books (
                 book_id   INTEGER PRIMARY KEY,
                 title     TEXT NOT NULL,
                 author    TEXT NOT NULL,
                 year      INTEGER NOT NULL,
                 branch_id INTEGER NOT NULL
             );
             INSERT INTO books VALUES
                 (1, 'Blindness', 'José Saramago', 1995, 1),
                 (2, 'The Disconnected', 'Oğuz Atay', 1972, 1),
                 (3, 'The Book of Sand', 'Jorge Luis Borges', 1975, 2),
                 (4, 'Yaban', 'Yakup Kadri', 1932, 2),
                 (5, 'Silent House', 'Orhan Pamuk', 1983, 3),
                 (6, 'Motherland Hotel', 'Yusuf Atılgan', 1973, 3),
                 (7, 'Sand: Borges Selection', 'Anthology', 2010, 1);",
        )?;
        Ok(Library {
            db: Arc::new(Mutex::new(conn)),
            cache: Cache::new(10_000),
            lookups: AtomicU64::new(0),
            origin_calls: AtomicU64::new(0),
        })
    }

    /// How many requests consulted the cache.
    pub fn lookups(&self) -> u64 {
        self.lookups.load(Ordering::SeqCst)
    }

    /// How many times SQLite was queried.
    pub fn origin_calls(&self) -> u64 {
        self.origin_calls.load(Ordering::SeqCst)
    }

    /// Runs the search in SQLite: called on a miss only, once per key however
    /// many requests miss it at the same time.
    async fn read(&self, search: Search) -> Result<Arc<[Book]>, String> {
        self.origin_calls.fetch_add(1, Ordering::SeqCst);
        let db = Arc::clone(&self.db);
        let read = tokio::task::spawn_blocking(move || {
            // A panic while reading leaves nothing half-written: the lock is still good.
            let conn = db.lock().unwrap_or_else(PoisonError::into_inner);
            read_books(&conn, &search)
        });
        match read.await {
            Ok(Ok(books)) => Ok(books.into()),
            Ok(Err(e)) => Err(format!("SQLite: {e}")),
            Err(e) => Err(format!("the SQLite task: {e}")),
        }
    }
}

/// The SQL reads the same `Search` the key is derived from, so the key and the
/// query cannot disagree about what was asked.
fn read_books(conn: &Connection, search: &Search) -> rusqlite::Result<Vec<Book>> {
    let params = &search.params;
    let order = match params.sort {
        Sort::TitleAsc => "title, book_id",
        Sort::YearDesc => "year DESC, book_id",
    };
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT title, author, year FROM books
         WHERE branch_id = ?1 AND title LIKE '%' || ?2 || '%' AND author LIKE '%' || ?3 || '%'
         ORDER BY {order} LIMIT ?4 OFFSET ?5"
    ))?;
    let per_page = i64::from(params.page.per_page.get());
    let offset = i64::from(params.page.page.get() - 1) * per_page;
    let rows = stmt.query_map(
        params![
            search.branch.0,
            params.title.as_deref().unwrap_or(""),
            params.author.as_deref().unwrap_or(""),
            per_page,
            offset,
        ],
        |row| {
            Ok(Book {
                title: row.get(0)?,
                author: row.get(1)?,
                year: row.get(2)?,
            })
        },
    )?;
    rows.collect()
}

async fn search_books(
    State(library): State<Arc<Library>>,
    auth: Auth,
    Query(params): Query<SearchParams>,
) -> Result<Response, Response> {
    let search = Search {
        branch: auth.branch,
        params,
    };
    let key = search.cache_key(GENERATION).map_err(internal_error)?;
    library.lookups.fetch_add(1, Ordering::SeqCst);
    let entry = library
        .cache
        .entry(key.clone())
        .or_try_insert_with(library.read(search))
        .await
        .map_err(internal_error)?;
    let answer = Answer {
        // Fresh: this request ran the query. Otherwise the value was cached,
        // or another request's query was running and this one waited for it.
        source: if entry.is_fresh() { "sqlite" } else { "cache" },
        key: key.as_str(),
        books: entry.value(),
    };
    Ok(Json(answer).into_response())
}

/// 500, with the detail on the server's stderr rather than in the response.
fn internal_error(detail: impl Display) -> Response {
    eprintln!("internal error: {detail}");
    (
        StatusCode::INTERNAL_SERVER_ERROR,
        Json(json!({ "error": "internal error" })),
    )
        .into_response()
}

/// The service: `GET /books`.
pub fn app(library: Arc<Library>) -> Router {
    Router::new()
        .route("/books", get(search_books))
        .with_state(library)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:3000".into());
    let library = Arc::new(Library::open()?);
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    let url = format!("http://{}/books", listener.local_addr()?);
    println!("Serving the library catalog on {url} (Ctrl-C stops it). Try:");
    println!();
    for (token, query) in [
        ("bahcelievler-token", "title=Sand&author=Borges"),
        ("bahcelievler-token", "title=Sand%3A%20Borges"),
        ("kadikoy-token", "sort=year_desc&per_page=1&page=2"),
    ] {
        println!("  curl -H 'Authorization: Bearer {token}' '{url}?{query}'");
    }
    println!("  curl -i '{url}'    # no token: 401");
    axum::serve(listener, app(library))
        .with_graceful_shutdown(async {
            tokio::signal::ctrl_c().await.ok();
        })
        .await?;
    Ok(())
}
