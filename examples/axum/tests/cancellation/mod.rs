//! The web path dropped at each wait: the calls and the checks shared by
//! `cancellation_moka.rs` and `cancellation_redis.rs` (a binary each, so
//! that `/metrics`, one recorder per process, counts one cache's calls).

use axum::http::{HeaderMap, StatusCode, header};
use cache_key::cache::{AsyncQueryCache, AsyncTypedCache};
use cache_key::http::surrogate_key;
use http_body_util::BodyExt;

use crate::axum_example::{AuthorPage, Book, BookPage, BranchId, LibraryCache, read_titles};
use crate::client::Server;
use crate::drop_at_wait::drop_at_each_wait;

/// More waits than any call here has.
const MOST: usize = 200;

/// How many waits each call had, dropped at each.
#[derive(Debug)]
pub struct Waits {
    pub respond: usize,
    pub not_modified: usize,
    pub public: usize,
    pub invalidate: usize,
    pub get: usize,
    pub insert: usize,
}

/// `/metrics` agrees with the cache's counters for the book page, and
/// counts every origin call this process made (`Library::origin_calls`),
/// dropped ones included. A series not yet written is 0.
async fn metrics_agree<C: LibraryCache>(server: &Server<C>, case: &str) {
    let samples = server.metrics().await;
    let book = |name: &str| {
        let series = format!("{name}{{namespace=\"library\",operation=\"book\"}}");
        samples.get(&series).copied().unwrap_or(0.0)
    };
    let stats = server.library.http.stats_of::<BookPage>();
    assert_eq!(
        book("cache_key_hits_total"),
        stats.hits as f64,
        "{case}: hits"
    );
    assert_eq!(
        book("cache_key_misses_total"),
        stats.misses as f64,
        "{case}: misses"
    );
    let origin_calls = server.library.origin_calls() as f64;
    assert_eq!(
        book("cache_key_origin_calls_total"),
        origin_calls,
        "{case}: origin calls"
    );
    let timed = book("cache_key_origin_duration_seconds_count");
    assert_eq!(timed, origin_calls, "{case}: origin calls timed");
}

/// `read`, then a wait: an origin that waits at least once, whether or not
/// SQLite's task finished before it was first polled.
async fn then_wait<T>(read: impl Future<Output = T>) -> T {
    let answer = read.await;
    tokio::task::yield_now().await;
    answer
}

/// The JSON of a response's body.
async fn json(response: axum::response::Response) -> serde_json::Value {
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    serde_json::from_slice(&bytes).unwrap()
}

/// Every call of the web path dropped at each of its waits on `server`'s
/// library; `nothing_left(case, cache)` checks what the backend may not
/// keep after a drop.
pub async fn each_call_dropped_at_each_wait<C: LibraryCache>(
    server: &Server<C>,
    nothing_left: impl Fn(&str, &C),
) -> Waits {
    let library = &*server.library;
    let http = &library.http;
    let no_headers = HeaderMap::new();
    let branch = BranchId(2);
    let sand = BookPage { branch, id: 3 };
    let after = async |what: &str, waits: usize| {
        let case = format!("{what} dropped at wait {waits}");
        nothing_left(&case, http.cache().inner());
        metrics_agree(server, &case).await;
        // Not stuck: a call of another key answers (its book: none).
        let other = BookPage {
            branch,
            id: 1_000 + waits as u32,
        };
        let answer = http.respond(&no_headers, &other, || library.book(branch, other.id));
        let answer = answer.await.unwrap();
        assert_eq!(answer.status(), StatusCode::OK, "{case}");
        assert_eq!(json(answer).await, serde_json::Value::Null, "{case}");
    };

    let respond = || http.respond(&no_headers, &sand, || then_wait(library.book(branch, 3)));
    let after_respond = async |waits| after("respond", waits).await;
    let respond_waits = drop_at_each_wait("respond", MOST, respond, after_respond).await;
    let answer = respond().await.unwrap();
    assert_eq!(answer.status(), StatusCode::OK);
    let tag = answer.headers()[header::ETAG].clone();
    assert_eq!(json(answer).await["title"], "The Book of Sand");

    let mut asking = HeaderMap::new();
    asking.insert(header::IF_NONE_MATCH, tag);
    let not_modified = || http.respond(&asking, &sand, || library.book(branch, 3));
    let after_304 = async |waits| after("a 304", waits).await;
    let not_modified_waits = drop_at_each_wait("a 304", MOST, not_modified, after_304).await;
    let answer = not_modified().await.unwrap();
    assert_eq!(answer.status(), StatusCode::NOT_MODIFIED);

    let get = || http.get(&sand);
    let after_get = async |waits| after("get", waits).await;
    let get_waits = drop_at_each_wait("get", MOST, get, after_get).await;
    let found = get().await.unwrap().expect("filled").expect("a book");
    assert_eq!(found.title, "The Book of Sand");

    // Stored whole or not at all: a hit of the book, or a miss.
    let yaban = BookPage { branch, id: 4 };
    let book = Some(Book {
        id: 4,
        title: "Yaban".into(),
        author: "Yakup Kadri".into(),
        year: 1932,
    });
    let insert = || http.insert(&yaban, book.clone());
    let after_insert = async |waits: usize| {
        after("insert", waits).await;
        let found = http.get(&yaban).await.unwrap();
        assert!(
            found.is_none() || found == Some(book.clone()),
            "insert dropped at wait {waits}: {found:?}"
        );
    };
    let insert_waits = drop_at_each_wait("insert", MOST, insert, after_insert).await;
    assert_eq!(http.get(&yaban).await.unwrap(), Some(book.clone()));

    // The public page of an author, and a bump of the author's tag: each
    // round retitles one of the author's books, then bumps.
    let author = "Jorge Luis Borges";
    let page = AuthorPage {
        author: author.to_owned(),
    };
    let titles = || then_wait(library.write(move |conn| read_titles(conn, author)));
    let public = || http.respond_public(&no_headers, &page, titles);
    let after_public = async |waits| after("respond_public", waits).await;
    let public_waits = drop_at_each_wait("respond_public", MOST, public, after_public).await;
    let answer = public().await.unwrap();
    assert_eq!(
        answer.headers()[header::CACHE_CONTROL]
            .to_str()
            .unwrap()
            .split(',')
            .next(),
        Some("public")
    );

    let retitle = async |round: usize| {
        let title = format!("Ficciones {round}");
        let written = library.write(move |conn| {
            conn.execute("UPDATE books SET title = ?1 WHERE book_id = 8", [title])
        });
        assert_eq!(written.await.unwrap(), 1);
    };
    let scope = AuthorPage::tag_scope_author(&author.to_owned()).unwrap();
    let key = surrogate_key(&scope).expect("a global tag has a surrogate key");
    let purges = || {
        library
            .purged
            .lock()
            .unwrap()
            .iter()
            .filter(|k| **k == key)
            .count()
    };
    retitle(0).await;
    let invalidate = || http.invalidate(&scope);
    let after_invalidate = async |waits: usize| {
        let case = format!("invalidate dropped at wait {waits}");
        // Bumped or pending (made before the next read), the CDN is told:
        // a purge now costs it a miss, a lost one serves the old page.
        assert_eq!(purges(), waits + 1, "{case}: its purge");
        let answer = public().await.unwrap();
        let listed = json(answer).await;
        assert_eq!(listed[0]["title"], format!("Ficciones {waits}"), "{case}");
        after("invalidate", waits).await;
        retitle(waits + 1).await;
    };
    let invalidate_waits =
        drop_at_each_wait("invalidate", MOST, invalidate, after_invalidate).await;
    invalidate().await.unwrap();
    assert_eq!(purges(), invalidate_waits + 2);
    let listed = json(public().await.unwrap()).await;
    assert_eq!(listed[0]["title"], format!("Ficciones {invalidate_waits}"));
    metrics_agree(server, "at the end").await;

    Waits {
        respond: respond_waits,
        not_modified: not_modified_waits,
        public: public_waits,
        invalidate: invalidate_waits,
        get: get_waits,
        insert: insert_waits,
    }
}
