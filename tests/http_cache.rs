//! `cache_key::http::HttpCache` at its edges, called as a handler calls it
//! (the example's tests drive the common path over real HTTP): answers
//! tagged from their value, a public answer whose surrogate keys do not
//! fit, the purge hook per scope, and errors as responses.

use std::sync::{Arc, Mutex};

use cache_key::cache::{AsyncMokaCache, AsyncTypedCache, CacheError};
use cache_key::http::{Freshness, HttpCache, MAX_SURROGATE_KEYS, surrogate_key};
use cache_key::{CacheKey, CacheTags, GenerationScope, MemoryGenerations, Scopes};
use http::header::{CACHE_CONTROL, ETAG, IF_NONE_MATCH};
use http::{HeaderMap, HeaderValue, StatusCode};
use http_body_util::BodyExt;
use serde::Serialize;

#[derive(Clone, Debug, PartialEq, Serialize, CacheTags)]
struct Book {
    #[tag = "book"]
    id: u32,
    title: String,
}

/// Tags from its value: the books it found.
#[derive(CacheKey)]
#[cache_key(namespace = "library", operation = "search", value = Vec<Book>, ttl = "5m", value_tags)]
struct Search {
    #[tenant]
    branch: String,
    #[criterion]
    title: String,
}

/// Global, tagged by every book it lists.
#[derive(CacheKey)]
#[cache_key(
    namespace = "library",
    operation = "shelf",
    global = "a shelf is the same for every branch",
    value = Vec<u32>,
    ttl = "1m"
)]
struct Shelf {
    #[criterion]
    #[tag(name = "book", global = "a book is one across every branch")]
    books: Vec<u32>,
}

type Cache = HttpCache<AsyncMokaCache<MemoryGenerations>>;

fn cache() -> Cache {
    HttpCache::new(AsyncMokaCache::new(MemoryGenerations::new(), 1_000))
}

fn asking(tag: &HeaderValue) -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert(IF_NONE_MATCH, tag.clone());
    headers
}

async fn body(response: axum_core::response::Response) -> String {
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    String::from_utf8(bytes.to_vec()).unwrap()
}

#[tokio::test]
async fn an_answer_tagged_from_its_value_is_revalidated_through_the_cache() {
    let http = cache();
    let search = Search {
        branch: "2".into(),
        title: "Sand".into(),
    };
    let title = Arc::new(Mutex::new("The Book of Sand"));
    let origin = || {
        let title = *title.lock().unwrap();
        async move {
            Ok::<_, std::io::Error>(vec![Book {
                id: 3,
                title: title.into(),
            }])
        }
    };
    let first = http
        .respond(&HeaderMap::new(), &search, origin)
        .await
        .unwrap();
    let tag = first.headers()[ETAG].clone();
    assert_eq!(first.headers()[CACHE_CONTROL], "private, no-cache");

    // The tag covers the body: the 304 comes after a read of the cache,
    // never from the origin.
    let again = http.respond(&asking(&tag), &search, origin).await.unwrap();
    assert_eq!(again.status(), StatusCode::NOT_MODIFIED);
    let stats = http.stats_of::<Search>();
    assert_eq!((stats.loads, stats.hits), (1, 1));

    // Book 3 retitled: its tag's bump ends the answer, whose key is the same.
    *title.lock().unwrap() = "El libro de arena";
    let bump = Book::tag_scope_book::<Search>(&"2".to_owned(), &3).unwrap();
    http.invalidate(&bump).await.unwrap();
    let changed = http.respond(&asking(&tag), &search, origin).await.unwrap();
    assert_eq!(changed.status(), StatusCode::OK);
    assert_ne!(changed.headers()[ETAG], tag);
    assert!(body(changed).await.contains("El libro de arena"));
}

#[tokio::test]
async fn a_public_answer_whose_keys_do_not_fit_is_sent_private() {
    let http = cache();
    let origin = || async { Ok::<_, std::io::Error>(vec![1]) };
    let few = Shelf { books: vec![1, 2] };
    let public = http
        .respond_public(&HeaderMap::new(), &few, origin)
        .await
        .unwrap();
    assert_eq!(
        public.headers()[CACHE_CONTROL],
        "public, max-age=0, s-maxage=60"
    );
    assert_eq!(
        public.headers()["surrogate-key"],
        "library library/shelf library@book=1 library@book=2"
    );
    assert_eq!(
        public.headers()["cache-tag"],
        "library,library/shelf,library@book=1,library@book=2"
    );

    // The namespace's and the operation's keys, and one per book: one over.
    let many = Shelf {
        books: (1..=MAX_SURROGATE_KEYS as u32 - 1).collect(),
    };
    let private = http
        .respond_public(&HeaderMap::new(), &many, origin)
        .await
        .unwrap();
    assert_eq!(private.headers()[CACHE_CONTROL], "private, no-cache");
    assert!(private.headers().get("surrogate-key").is_none());
    assert!(private.headers().get("cache-tag").is_none());
    // Kept for the TTL, where the service chose it: private stays private.
    let kept = cache().with_freshness(Freshness::Ttl);
    let shelf = kept
        .respond_public(&HeaderMap::new(), &few, origin)
        .await
        .unwrap();
    assert_eq!(
        shelf.headers()[CACHE_CONTROL],
        "public, max-age=60, s-maxage=60"
    );
    let search = Search {
        branch: "2".into(),
        title: "Sand".into(),
    };
    let books = || async { Ok::<_, std::io::Error>(Vec::new()) };
    let mine = kept
        .respond(&HeaderMap::new(), &search, books)
        .await
        .unwrap();
    assert_eq!(mine.headers()[CACHE_CONTROL], "private, max-age=300");
    // Exactly at the limit: public.
    let most = Shelf {
        books: (1..=MAX_SURROGATE_KEYS as u32 - 2).collect(),
    };
    let fits = http
        .respond_public(&HeaderMap::new(), &most, origin)
        .await
        .unwrap();
    assert!(
        fits.headers()[CACHE_CONTROL]
            .to_str()
            .unwrap()
            .starts_with("public")
    );
}

#[tokio::test]
async fn a_bump_purges_the_keys_public_answers_carry_and_no_tenants() {
    let purged = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&purged);
    let http = cache().with_purge(move |key: &str| log.lock().unwrap().push(key.to_owned()));
    let shelf = Shelf { books: vec![7, 8] };
    let origin = || async { Ok::<_, std::io::Error>(vec![7]) };
    let answer = http
        .respond_public(&HeaderMap::new(), &shelf, origin)
        .await
        .unwrap();
    let sent: Vec<String> = answer.headers()["surrogate-key"]
        .to_str()
        .unwrap()
        .split(' ')
        .map(str::to_owned)
        .collect();

    let scopes = [
        Search::tenant_scope(&"2".to_owned()).unwrap(),
        Search::operation_scope(&"2".to_owned()).unwrap(),
        Book::tag_scope_book::<Search>(&"2".to_owned(), &7).unwrap(),
        GenerationScope::namespace::<Shelf>(),
        Shelf::operation_scope(()).unwrap(),
        Shelf::tag_scope_book(&7).unwrap(),
    ];
    for scope in &scopes {
        http.invalidate(scope).await.unwrap();
    }
    // The tenant's scopes call nothing; each other scope its key, one the
    // answer was sent with.
    let purged = purged.lock().unwrap().clone();
    assert_eq!(purged, ["library", "library/shelf", "library@book=7"]);
    for key in &purged {
        assert!(sent.contains(key), "{key} in {sent:?}");
    }
    assert_eq!(surrogate_key(&scopes[5]).as_deref(), Some("library@book=7"));
}

#[tokio::test]
async fn a_key_longer_than_a_cdn_takes_is_sent_and_purged_as_its_digest() {
    #[derive(CacheKey)]
    #[cache_key(
        namespace = "library",
        operation = "subject",
        global = "subjects are one list for every branch",
        value = u32,
        ttl = "1m"
    )]
    struct Subject {
        #[criterion]
        #[tag(name = "subject", global = "a subject is one across every branch")]
        name: String,
    }
    let purged = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&purged);
    let http = cache().with_purge(move |key: &str| log.lock().unwrap().push(key.to_owned()));
    let name = "history of ".repeat(40);
    let query = Subject { name: name.clone() };
    let origin = || async { Ok::<_, std::io::Error>(1) };
    let answer = http
        .respond_public(&HeaderMap::new(), &query, origin)
        .await
        .unwrap();
    let sent = answer.headers()["surrogate-key"]
        .to_str()
        .unwrap()
        .to_owned();
    let digest = sent.split(' ').nth(2).unwrap().to_owned();
    assert!(digest.starts_with("ck~") && digest.len() == 35, "{sent}");
    http.invalidate(&Subject::tag_scope_subject(&name).unwrap())
        .await
        .unwrap();
    assert_eq!(*purged.lock().unwrap(), [digest]);
}

#[tokio::test]
async fn errors_are_responses_without_their_detail() {
    let http = cache();
    let search = Search {
        branch: "2".into(),
        title: "Sand".into(),
    };
    let failing = || async { Err::<Vec<Book>, _>(std::io::Error::other("password=hunter2")) };
    let error = http
        .respond(&HeaderMap::new(), &search, failing)
        .await
        .unwrap_err();
    let response = axum_core::response::IntoResponse::into_response(error);
    assert_eq!(response.status(), StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(response.headers()[CACHE_CONTROL], "no-store");
    assert_eq!(
        body(response).await,
        r#"{"error":"the data source failed"}"#
    );

    // An empty tenant names no key: a bug of the service, never an answer.
    let nobody = Search {
        branch: String::new(),
        title: "Sand".into(),
    };
    let origin = || async { Ok::<_, std::io::Error>(Vec::new()) };
    let error: CacheError<std::io::Error> = http
        .respond(&HeaderMap::new(), &nobody, origin)
        .await
        .unwrap_err();
    let response = axum_core::response::IntoResponse::into_response(error);
    assert_eq!(response.status(), StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(body(response).await, r#"{"error":"internal error"}"#);
}

#[tokio::test]
async fn if_none_match_star_is_answered_304_only_once_an_answer_exists() {
    let http = cache();
    let shelf = Shelf { books: vec![1, 2] };
    let star = HeaderValue::from_static("*");

    // No answer yet and the origin fails: `*` matches no representation,
    // so the failure is the response, never a 304 from the counters.
    let failing = || async { Err::<Vec<u32>, _>(std::io::Error::other("no such shelf")) };
    let error = http
        .respond_public(&asking(&star), &shelf, failing)
        .await
        .unwrap_err();
    assert!(matches!(error, CacheError::Origin(_)), "{error:?}");

    // The origin answers: a representation exists, so `*` is a 304, after
    // the cache's read (here the origin's call: the failed one and this).
    let origin = || async { Ok::<_, std::io::Error>(vec![1, 2]) };
    let answered = http
        .respond_public(&asking(&star), &shelf, origin)
        .await
        .unwrap();
    assert_eq!(answered.status(), StatusCode::NOT_MODIFIED);
    assert!(answered.headers().contains_key(ETAG));
    assert_eq!(http.stats_of::<Shelf>().loads, 2);

    // Stored now: `*` is a 304 from the entry, without the origin.
    let again = http
        .respond_public(&asking(&star), &shelf, failing)
        .await
        .unwrap();
    assert_eq!(again.status(), StatusCode::NOT_MODIFIED);
    assert_eq!(http.stats_of::<Shelf>().loads, 2);
}
