//! The library catalog as a web service on the crate's web path: axum in
//! front, `cache_key::http::HttpCache` answering each handler from a typed
//! async cache (moka in process, or Redis), SQLite behind it, and every key
//! derived from the authenticated branch and the request.
//!
//! ```text
//! cargo run -p cache-key-example-axum --example axum                        # moka, 127.0.0.1:3000
//! cargo run -p cache-key-example-axum --example axum -- 127.0.0.1:8080 redis://127.0.0.1/
//! ```
//!
//! - `GET /books?title=...` a branch's search (tenant-scoped: `private`;
//!   its answer tagged with the books it holds);
//! - `GET /books/{id}` one book of the branch (tagged `book` by its query:
//!   a conditional GET is answered `304` from the counters alone);
//! - `PUT /books/{id}` retitles a book and bumps its tag, and its author's;
//! - `GET /me/loans` the member's own loans (a compound tenant: branch, member);
//! - `GET /authors/{name}` an author's books in every branch (global:
//!   `public`, with surrogate keys; a bump calls the purge hook);
//! - `GET /metrics` the caches' counters for Prometheus.
//!
//! The branch and the member come from `Authorization: Bearer <token>`,
//! checked by a middleware that puts them in the request's extensions;
//! the handlers read them from there (`Extension`), never from a header.
//! `examples/axum/tests/` start the same app on free ports and drive it
//! over real HTTP.

use std::error::Error;
use std::fmt::{self, Display};
use std::num::NonZeroU32;
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Extension, Json, Router};
use cache_key::cache::{AsyncMokaCache, AsyncQueryCache, AsyncTypedCache, CacheError};
use cache_key::http::{CacheGenerations, HttpCache};
use cache_key::metrics::Metered;
use cache_key::redis::{AsyncRedisCache, AsyncRedisGenerations, AsyncRedisPool};
use cache_key::{CacheKey, CacheTags, Criteria, CriterionValue, MemoryGenerations, TenantValue};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use rusqlite::{Connection, OptionalExtension, params};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::json;

/// The bearer tokens the service accepts, and the member (in a branch)
/// each one authenticates. A real service verifies a session or a signed
/// token; the key only needs what that check yields.
pub const TOKENS: [(&str, Member); 4] = [
    (
        "central-token",
        Member {
            branch: BranchId(1),
            member: MemberId(11),
        },
    ),
    (
        "bahcelievler-token",
        Member {
            branch: BranchId(2),
            member: MemberId(21),
        },
    ),
    (
        "bahcelievler-2-token",
        Member {
            branch: BranchId(2),
            member: MemberId(22),
        },
    ),
    (
        "kadikoy-token",
        Member {
            branch: BranchId(3),
            member: MemberId(31),
        },
    ),
];

/// A branch: the tenant. Each branch sees only the books it holds.
#[derive(CriterionValue, TenantValue, Clone, Copy, Debug, PartialEq, Eq)]
pub struct BranchId(pub u32);

/// A member of a branch: the second part of a per-user answer's tenant.
#[derive(CriterionValue, TenantValue, Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemberId(pub u32);

/// Who the request authenticated as: set in the request's extensions by
/// [`authenticate`], read by the handlers with `Extension<Member>`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Member {
    pub branch: BranchId,
    pub member: MemberId,
}

/// The auth layer: a known bearer token puts its [`Member`] in the
/// request's extensions; anything else is refused with 401 before a
/// handler (and so the cache) runs.
async fn authenticate(mut request: Request, next: Next) -> Response {
    let token = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "));
    match TOKENS.iter().find(|(known, _)| Some(*known) == token) {
        Some(&(_, member)) => {
            request.extensions_mut().insert(member);
            next.run(request).await
        }
        None => (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, "Bearer")],
            Json(json!({ "error": "a known bearer token is required" })),
        )
            .into_response(),
    }
}

/// Pagination, flattened into the parameters by serde and into the key's
/// criteria by the derive. Absent fields take their default before the key
/// is made, so `?page=1` and no page share an entry.
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

/// `sort=title_asc` or `sort=year_desc`, in the query string and in the key.
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

/// A book as the service shows it. Tagged `book` by its id: a search's
/// answer is served only while none of the books it holds was bumped.
#[derive(Serialize, Deserialize, CacheTags, Clone, Debug, PartialEq)]
pub struct Book {
    #[tag = "book"]
    pub id: u32,
    pub title: String,
    pub author: String,
    pub year: u32,
}

/// A search in one branch's books. Built as `Search { branch, params }`
/// from the authenticated member: a forgotten tenant is a missing field.
#[derive(CacheKey, Debug)]
#[cache_key(namespace = "library", operation = "search", value = Vec<Book>, ttl = "5m", value_tags)]
pub struct Search {
    #[tenant]
    pub branch: BranchId,
    #[criterion(flatten)]
    pub params: SearchParams,
}

/// One book of a branch, tagged by its id: retitling it makes the key new,
/// so a conditional GET is decided by the counters alone.
#[derive(CacheKey, Debug)]
#[cache_key(namespace = "library", operation = "book", value = Option<Book>, ttl = "5m")]
pub struct BookPage {
    #[tenant]
    pub branch: BranchId,
    #[criterion]
    #[tag = "book"]
    pub id: u32,
}

/// A member's own loans: the tenant is compound (branch, then member), so
/// the key, the `ETag` and the entry are the member's, and a bump of the
/// branch still ends them.
#[derive(CacheKey, Debug)]
#[cache_key(namespace = "library", operation = "loans", value = Vec<Book>, ttl = "1m")]
pub struct Loans {
    #[tenant]
    pub branch: BranchId,
    #[tenant]
    pub member: MemberId,
}

/// An author's books in every branch: the same answer for everyone, so it
/// may be sent `public` and kept by a CDN, purged by its `author` tag.
#[derive(CacheKey, Debug)]
#[cache_key(
    namespace = "library",
    operation = "author",
    global = "the catalog of authors is one for every branch",
    value = Vec<Title>,
    ttl = "10m"
)]
pub struct AuthorPage {
    #[criterion]
    #[tag(name = "author", global = "an author is one across every branch")]
    pub author: String,
}

/// A title in the global catalog.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Title {
    pub title: String,
    pub year: u32,
}

/// A failure of SQLite or of its task.
#[derive(Debug)]
pub struct DbError(String);

impl Display for DbError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SQLite: {}", self.0)
    }
}

impl Error for DbError {}

/// The typed async caches the service can run on: every query type above,
/// with the counters readable alone (for `304`s).
pub trait LibraryCache:
    CacheGenerations
    + AsyncQueryCache<Search>
    + AsyncQueryCache<BookPage>
    + AsyncQueryCache<Loans>
    + AsyncQueryCache<AuthorPage>
    + Send
    + Sync
    + 'static
{
}

impl<C> LibraryCache for C where
    C: CacheGenerations
        + AsyncQueryCache<Search>
        + AsyncQueryCache<BookPage>
        + AsyncQueryCache<Loans>
        + AsyncQueryCache<AuthorPage>
        + Send
        + Sync
        + 'static
{
}

/// The state: the database, the cache in front of it, and what the test
/// and `/metrics` read.
pub struct Library<C> {
    db: Arc<Mutex<Connection>>,
    /// The answers: HTTP semantics around a measured typed cache.
    pub http: HttpCache<Metered<C>>,
    origin_calls: AtomicU64,
    /// The surrogate keys the purge hook was called with, in order.
    pub purged: Arc<Mutex<Vec<String>>>,
    metrics: PrometheusHandle,
}

/// The cache in process: moka, counters in `MemoryGenerations`.
pub type MokaBackend = AsyncMokaCache<MemoryGenerations>;

impl Library<MokaBackend> {
    /// The catalog with a moka cache.
    pub fn with_moka() -> rusqlite::Result<Self> {
        Self::open(AsyncMokaCache::new(MemoryGenerations::new(), 10_000))
    }
}

impl Library<AsyncRedisCache> {
    /// The catalog with a Redis cache (counters and answers in the Redis at
    /// `url`), shared by every process of the service.
    pub async fn with_redis(url: &str) -> Result<Self, Box<dyn Error>> {
        let pool = AsyncRedisPool::connect(url).await?;
        let cache = AsyncRedisCache::new(AsyncRedisGenerations::new(pool));
        Ok(Self::open(cache)?)
    }
}

/// The process's Prometheus recorder: the `metrics` facade has one.
fn prometheus() -> PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE
        .get_or_init(|| {
            PrometheusBuilder::new()
                .install_recorder()
                .expect("no other metrics recorder is installed")
        })
        .clone()
}

impl<C: LibraryCache> Library<C> {
    /// An in-memory database with the catalog of `examples/library/scenarios.rs`,
    /// answered through `cache`.
    pub fn open(cache: C) -> rusqlite::Result<Self> {
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
                 (7, 'Sand: Borges Selection', 'Anthology', 2010, 1),
                 (8, 'Ficciones', 'Jorge Luis Borges', 1944, 3);
             CREATE TABLE loans (book_id INTEGER NOT NULL, member_id INTEGER NOT NULL);
             INSERT INTO loans VALUES (3, 21), (4, 22);",
        )?;
        let purged = Arc::new(Mutex::new(Vec::new()));
        let log = Arc::clone(&purged);
        // A real service sends the CDN's purge request here (Fastly's
        // `POST /service/{id}/purge/{key}`, Cloudflare's purge by tag).
        let http = HttpCache::new(Metered::new(cache)).with_purge(move |key: &str| {
            eprintln!("purge surrogate key {key}");
            log.lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(key.to_owned());
        });
        Ok(Library {
            db: Arc::new(Mutex::new(conn)),
            http,
            origin_calls: AtomicU64::new(0),
            purged,
            metrics: prometheus(),
        })
    }

    /// How many times SQLite was asked for an answer.
    pub fn origin_calls(&self) -> u64 {
        self.origin_calls.load(Ordering::SeqCst)
    }

    /// Runs `read` on the database in a blocking task: an origin call.
    async fn query<T, F>(&self, read: F) -> Result<T, DbError>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
    {
        self.origin_calls.fetch_add(1, Ordering::SeqCst);
        self.write(read).await
    }

    /// Book `id` if `branch` holds it: an origin call.
    pub async fn book(&self, branch: BranchId, id: u32) -> Result<Option<Book>, DbError> {
        self.query(move |conn| {
            conn.query_row(
                "SELECT book_id, title, author, year FROM books WHERE book_id = ?1 AND branch_id = ?2",
                params![id, branch.0],
                book_row,
            )
            .optional()
        })
        .await
    }

    /// The books `search` finds: an origin call.
    pub async fn search(&self, search: Arc<Search>) -> Result<Vec<Book>, DbError> {
        self.query(move |conn| read_search(conn, &search)).await
    }

    /// Runs `f` on the database in a blocking task, not counted as an
    /// origin call: the edits' writes.
    pub async fn write<T, F>(&self, f: F) -> Result<T, DbError>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
    {
        let db = Arc::clone(&self.db);
        let task = tokio::task::spawn_blocking(move || {
            // A panic while reading leaves nothing half-written: the lock is still good.
            f(&db.lock().unwrap_or_else(PoisonError::into_inner))
        });
        match task.await {
            Ok(result) => result.map_err(|e| DbError(e.to_string())),
            Err(e) => Err(DbError(format!("the task: {e}"))),
        }
    }
}

/// A row of `books` as a [`Book`].
fn book_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<Book> {
    Ok(Book {
        id: row.get(0)?,
        title: row.get(1)?,
        author: row.get(2)?,
        year: row.get(3)?,
    })
}

/// The SQL reads the same `Search` the key is derived from, so the key and
/// the query cannot disagree about what was asked.
fn read_search(conn: &Connection, search: &Search) -> rusqlite::Result<Vec<Book>> {
    let params = &search.params;
    let order = match params.sort {
        Sort::TitleAsc => "title, book_id",
        Sort::YearDesc => "year DESC, book_id",
    };
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT book_id, title, author, year FROM books
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
        book_row,
    )?;
    rows.collect()
}

/// The titles of `author`'s books, oldest first: the author page's answer.
pub fn read_titles(conn: &Connection, author: &str) -> rusqlite::Result<Vec<Title>> {
    let mut stmt = conn
        .prepare_cached("SELECT title, year FROM books WHERE author = ?1 ORDER BY year, book_id")?;
    let rows = stmt.query_map(params![author], |row| {
        Ok(Title {
            title: row.get(0)?,
            year: row.get(1)?,
        })
    })?;
    rows.collect()
}

type Answer = Result<Response, CacheError<DbError>>;

/// `GET /books?...`: the handler builds the query, the cache answers it.
async fn search_books<C: LibraryCache>(
    State(library): State<Arc<Library<C>>>,
    Extension(member): Extension<Member>,
    Query(params): Query<SearchParams>,
    headers: HeaderMap,
) -> Answer {
    let search = Arc::new(Search {
        branch: member.branch,
        params,
    });
    let origin = || library.search(Arc::clone(&search));
    library.http.respond(&headers, &*search, origin).await
}

/// `GET /books/{id}`: one book of the member's branch (`null` when the
/// branch does not hold it).
async fn get_book<C: LibraryCache>(
    State(library): State<Arc<Library<C>>>,
    Extension(member): Extension<Member>,
    Path(id): Path<u32>,
    headers: HeaderMap,
) -> Answer {
    let query = BookPage {
        branch: member.branch,
        id,
    };
    let origin = || library.book(member.branch, id);
    library.http.respond(&headers, &query, origin).await
}

/// `GET /me/loans`: the member's own loans, a per-user answer.
async fn my_loans<C: LibraryCache>(
    State(library): State<Arc<Library<C>>>,
    Extension(member): Extension<Member>,
    headers: HeaderMap,
) -> Answer {
    let query = Loans {
        branch: member.branch,
        member: member.member,
    };
    let origin = || {
        library.query(move |conn| {
            let mut stmt = conn.prepare_cached(
                "SELECT b.book_id, b.title, b.author, b.year FROM loans l
                 JOIN books b ON b.book_id = l.book_id
                 WHERE l.member_id = ?1 AND b.branch_id = ?2 ORDER BY b.book_id",
            )?;
            let rows = stmt.query_map(params![member.member.0, member.branch.0], book_row)?;
            rows.collect()
        })
    };
    library.http.respond(&headers, &query, origin).await
}

/// `GET /authors/{name}`: public, with surrogate keys.
async fn author_page<C: LibraryCache>(
    State(library): State<Arc<Library<C>>>,
    Path(author): Path<String>,
    headers: HeaderMap,
) -> Answer {
    let query = AuthorPage {
        author: author.clone(),
    };
    let origin = || library.query(move |conn| read_titles(conn, &author));
    library.http.respond_public(&headers, &query, origin).await
}

/// `PUT /books/{id}` with `{"title": "..."}`.
#[derive(Deserialize)]
pub struct Retitle {
    pub title: String,
}

/// Retitles a book of the member's branch, then bumps what shows it: the
/// book's tag in the branch (its page, and every search holding it) and
/// its author's global tag (the public author page, purged from the CDN).
async fn retitle<C: LibraryCache>(
    State(library): State<Arc<Library<C>>>,
    Extension(member): Extension<Member>,
    Path(id): Path<u32>,
    Json(edit): Json<Retitle>,
) -> Result<StatusCode, Response> {
    let branch = member.branch;
    let author = library
        .write(move |conn| {
            let author: Option<String> = conn
                .query_row(
                    "SELECT author FROM books WHERE book_id = ?1 AND branch_id = ?2",
                    params![id, branch.0],
                    |row| row.get(0),
                )
                .optional()?;
            if author.is_some() {
                conn.execute(
                    "UPDATE books SET title = ?1 WHERE book_id = ?2",
                    params![edit.title, id],
                )?;
            }
            Ok(author)
        })
        .await
        .map_err(|e| CacheError::Origin(Arc::new(e)).into_response())?;
    let Some(author) = author else {
        return Ok(StatusCode::NOT_FOUND);
    };
    // After the write: a read that starts after the bump sees the new title.
    let scopes = [
        BookPage::tag_scope_book(&branch, &id),
        AuthorPage::tag_scope_author(&author),
    ];
    for scope in scopes {
        let scope = scope.map_err(|e| CacheError::<DbError>::from(e).into_response())?;
        library
            .http
            .invalidate(&scope)
            .await
            .map_err(IntoResponse::into_response)?;
    }
    Ok(StatusCode::NO_CONTENT)
}

/// `GET /metrics`: the Prometheus text format.
async fn metrics<C: LibraryCache>(State(library): State<Arc<Library<C>>>) -> String {
    library.metrics.render()
}

/// The service: the authenticated routes behind [`authenticate`], the
/// public catalog and `/metrics` outside it.
pub fn app<C: LibraryCache>(library: Arc<Library<C>>) -> Router {
    let members = Router::new()
        .route("/books", get(search_books::<C>))
        .route("/books/{id}", get(get_book::<C>).put(retitle::<C>))
        .route("/me/loans", get(my_loans::<C>))
        .route_layer(middleware::from_fn(authenticate));
    Router::new()
        .merge(members)
        .route("/authors/{name}", get(author_page::<C>))
        .route("/metrics", get(metrics::<C>))
        .with_state(library)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    // The cache's `tracing` events (a Redis outage, each call answered
    // around it, invalidations) on stderr.
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .init();
    let mut args = std::env::args().skip(1);
    let addr = args.next().unwrap_or_else(|| "127.0.0.1:3000".into());
    let redis = args.next();
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    let url = format!("http://{}", listener.local_addr()?);
    let router = match &redis {
        Some(redis) => app(Arc::new(Library::with_redis(redis).await?)),
        None => app(Arc::new(Library::with_moka()?)),
    };
    let backend = redis.as_deref().unwrap_or("moka, in process");
    println!("Serving the library catalog on {url} (cache: {backend}; Ctrl-C stops it). Try:");
    println!();
    let auth = "-H 'Authorization: Bearer bahcelievler-token'";
    println!("  curl -i {auth} '{url}/books?title=Sand'");
    println!(
        "  curl -i {auth} '{url}/books/3'        # again with -H 'If-None-Match: <its ETag>': 304"
    );
    println!(
        "  curl -i -X PUT {auth} -H 'Content-Type: application/json' -d '{{\"title\":\"El libro de arena\"}}' '{url}/books/3'"
    );
    println!("  curl -i {auth} '{url}/me/loans'");
    println!("  curl -i '{url}/authors/Jorge%20Luis%20Borges'   # public, with surrogate keys");
    println!("  curl '{url}/metrics'");
    axum::serve(listener, router)
        .with_graceful_shutdown(async {
            tokio::signal::ctrl_c().await.ok();
        })
        .await?;
    Ok(())
}
