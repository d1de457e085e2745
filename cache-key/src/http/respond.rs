//! [`HttpCache`]: a typed async cache answering HTTP requests, and
//! [`CacheGenerations`], the read of the counters a `304` is decided by.

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum_core::body::Body;
use axum_core::response::Response;
use http::header::{CACHE_CONTROL, CONTENT_TYPE, ETAG, HeaderName, HeaderValue, VARY};
use http::{HeaderMap, StatusCode};
use serde::Serialize;

use super::etag::ETag;
use super::sharing::{Freshness, GlobalQuery, Sharing, cache_control};
use super::surrogate::{SurrogateKeys, surrogate_key};
use crate::cache::{AsyncQueryCache, AsyncTypedCache, CacheError, CachedQuery, Stats};
use crate::cache_key::CacheKey;
use crate::generation::{AsyncGenerationStore, GenerationScope};
use crate::schema::Scope;
use crate::tag::{TagScope, Tags};

/// Fastly's header of surrogate keys (space-separated).
const SURROGATE_KEY: HeaderName = HeaderName::from_static("surrogate-key");
/// Cloudflare's (comma-separated).
const CACHE_TAG: HeaderName = HeaderName::from_static("cache-tag");
/// RFC 9211: what the cache did for this response.
const CACHE_STATUS: HeaderName = HeaderName::from_static("cache-status");
/// Answered by the cache: its entry, another request's origin call, or
/// (a `304`) its counters.
const HIT: &str = "cache-key; hit";
/// This request called the origin.
const MISS: &str = "cache-key; fwd=miss";
/// This request called the origin, the counters unreadable (the backend
/// down): answered without the cache, and without an `ETag`.
const MISS_UNREADABLE: &str = "cache-key; fwd=miss; detail=counters-unreadable";

/// An async typed cache whose entries are named by a generation store that
/// can be read alone: what lets [`HttpCache`] answer a conditional request
/// from the counters, without the entry.
pub trait CacheGenerations: AsyncTypedCache {
    /// The store naming the cache's entries.
    type Store: AsyncGenerationStore;

    /// The store naming the cache's entries: a key it gives is the key the
    /// cache reads.
    fn generations(&self) -> &Self::Store;
}

#[cfg(feature = "moka")]
impl<S: AsyncGenerationStore> CacheGenerations for crate::cache::AsyncMokaCache<S> {
    type Store = S;

    fn generations(&self) -> &S {
        self.store()
    }
}

#[cfg(feature = "redis-async")]
impl CacheGenerations for crate::redis::AsyncRedisCache {
    type Store = crate::redis::AsyncRedisGenerations;

    fn generations(&self) -> &Self::Store {
        self.store()
    }
}

/// What a tag bump tells the service, to purge its CDN: the surrogate key
/// of the bumped scope.
type PurgeHook = Arc<dyn Fn(&str) + Send + Sync>;

/// A typed async cache `C` answering HTTP requests: a handler's answer in one
/// call, with the HTTP semantics its key's generation gives.
///
/// - **`ETag`**: strong, a digest of the query's key at its current
///   generation ([`ETag`]), read **before** the answer, so a tag is never
///   newer than the body it is sent with.
/// - **`304 Not Modified`**: a request whose `If-None-Match` holds that
///   tag is answered after reading the counters only: no entry read, no
///   origin call. (For a query type with tags from its value,
///   `#[cache_key(value_tags)]`, the tag also covers the body, and the
///   `304` comes after the cache's read; so does the `304` to `*`, which
///   matches any answer that exists, and none when the origin fails.)
/// - **`Cache-Control`**: `private` for every tenant-scoped query type,
///   decided by the type; `public` only through
///   [`respond_public`](Self::respond_public), which takes
///   [`GlobalQuery`] types alone (a tenant-scoped one does not compile).
/// - **`Vary: Authorization, Cookie`** on a tenant-scoped answer: a
///   browser shared by two users asks again rather than reuse one's answer
///   for the other.
/// - **`Cache-Status`** (RFC 9211): `cache-key; hit` when the cache
///   answered (its entry, its counters for a `304`, or another request's
///   origin call), `cache-key; fwd=miss` when this request called the
///   origin, with `detail=counters-unreadable` when the backend was down.
/// - **Surrogate keys** (`Surrogate-Key`, `Cache-Tag`) on a `public`
///   answer, and a purge hook ([`with_purge`](Self::with_purge)) that a bump
///   through [`invalidate`](AsyncTypedCache::invalidate) calls with the
///   bumped scope's key.
///
/// ```
/// use axum_core::response::Response;
/// use cache_key::{CacheKey, MemoryGenerations};
/// use cache_key::cache::{AsyncMokaCache, CacheError};
/// use cache_key::http::HttpCache;
/// use http::HeaderMap;
///
/// #[derive(CacheKey)]
/// #[cache_key(namespace = "shop", operation = "price", value = u64, ttl = "1m")]
/// struct Price { #[tenant] shop: u32, #[criterion] product: u64 }
///
/// async fn price(
///     http: &HttpCache<AsyncMokaCache<MemoryGenerations>>,
///     headers: &HeaderMap, // the request's
///     query: Price,        // from the path, and the tenant the auth layer set
/// ) -> Result<Response, CacheError<std::io::Error>> {
///     http.respond(headers, &query, || async { Ok(1999) }).await // your database here
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let http = HttpCache::new(AsyncMokaCache::new(MemoryGenerations::new(), 10_000));
/// let answer = price(&http, &HeaderMap::new(), Price { shop: 7, product: 42 }).await?;
/// assert_eq!(answer.headers()["cache-control"], "private, no-cache");
///
/// // The browser asks again with the tag it got: the counters answer.
/// let mut headers = HeaderMap::new();
/// headers.insert("if-none-match", answer.headers()["etag"].clone());
/// let again = price(&http, &headers, Price { shop: 7, product: 42 }).await?;
/// assert_eq!(again.status(), 304);
/// # Ok(()) }
/// ```
pub struct HttpCache<C> {
    cache: C,
    freshness: Freshness,
    purge: Option<PurgeHook>,
}

impl<C: fmt::Debug> fmt::Debug for HttpCache<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpCache")
            .field("cache", &self.cache)
            .field("freshness", &self.freshness)
            .field("purge", &self.purge.is_some())
            .finish()
    }
}

impl<C> HttpCache<C> {
    /// Answers from `cache`, every answer revalidated by its clients
    /// ([`Freshness::Revalidate`]).
    pub fn new(cache: C) -> Self {
        HttpCache {
            cache,
            freshness: Freshness::default(),
            purge: None,
        }
    }

    /// How long clients keep an answer before they ask again.
    pub fn with_freshness(mut self, freshness: Freshness) -> Self {
        self.freshness = freshness;
        self
    }

    /// Calls `purge` with the surrogate key of every scope bumped through
    /// this cache ([`invalidate`](AsyncTypedCache::invalidate)) that a
    /// `public` answer can be in (a namespace, a global operation, a
    /// global tag), after the bump returned: a CDN that purges then and
    /// asks again gets the new answer, never the old one again. Bumps made
    /// elsewhere (another process, the cache itself) do not call it: their
    /// key is [`surrogate_key`](super::surrogate_key)`(&scope)`.
    /// An `invalidate` dropped before its bump returned calls it too, at
    /// the drop: the bump may be made, or pending (the Redis cache makes it
    /// before its next read), and a purge too many costs the CDN one miss.
    pub fn with_purge(mut self, purge: impl Fn(&str) + Send + Sync + 'static) -> Self {
        self.purge = Some(Arc::new(purge));
        self
    }

    /// The typed cache the answers come from.
    pub fn cache(&self) -> &C {
        &self.cache
    }
}

impl<C: CacheGenerations> HttpCache<C> {
    /// `query`'s answer as a response, `Cache-Control: private`: `304` when
    /// the request (`headers`) holds its current `ETag`, after reading the
    /// counters alone; otherwise `200` with the JSON of the answer, from the
    /// cache or from `origin` (called once per key in the process however
    /// many requests miss it at once, see
    /// [`AsyncQueryCache::get_or_load`]).
    ///
    /// When the counters cannot be read (the cache's backend is down) the
    /// answer still comes from the cache's own path (its origin, during an
    /// outage), sent without an `ETag`. An error is the cache's
    /// ([`CacheError`] is a response too: `?` in an axum handler).
    ///
    /// Cancel-safe (a client that hung up): dropped at any wait, it leaves
    /// the cache as its own calls do when dropped (no flight; the next
    /// request of the key loads it), and the origin call in progress is
    /// dropped with it.
    pub fn respond<'a, Q, E, F, Fut>(
        &'a self,
        headers: &'a HeaderMap,
        query: &'a Q,
        origin: F,
    ) -> impl Future<Output = Result<Response, CacheError<E>>> + Send + 'a
    where
        C: AsyncQueryCache<Q>,
        Q: CachedQuery<Value: Serialize> + Sync,
        E: Send + Sync + 'static,
        F: FnOnce() -> Fut + Send + 'a,
        Fut: Future<Output = Result<Q::Value, E>> + Send + 'a,
    {
        self.answer(headers, query, origin, Sharing::Private)
    }

    /// [`respond`](Self::respond) for a global query, `Cache-Control:
    /// public`: shared caches keep it for the query type's TTL
    /// (`s-maxage`), and it carries its surrogate keys (`Surrogate-Key`,
    /// `Cache-Tag`: its namespace, its operation and its global tags,
    /// from the query and, with `value_tags`, from the answer) for a purge
    /// when one of them is bumped. An answer whose keys exceed the CDNs'
    /// limits (more than [`MAX_SURROGATE_KEYS`](super::MAX_SURROGATE_KEYS),
    /// or a header over [`MAX_SURROGATE_HEADER_LEN`](super::MAX_SURROGATE_HEADER_LEN))
    /// is sent `private`, never public with a key missing.
    ///
    /// Only a [`GlobalQuery`]: a tenant-scoped query type does not compile.
    ///
    /// Cancel-safe, as [`respond`](Self::respond) is.
    pub fn respond_public<'a, Q, E, F, Fut>(
        &'a self,
        headers: &'a HeaderMap,
        query: &'a Q,
        origin: F,
    ) -> impl Future<Output = Result<Response, CacheError<E>>> + Send + 'a
    where
        C: AsyncQueryCache<Q>,
        Q: GlobalQuery<Value: Serialize> + Sync,
        E: Send + Sync + 'static,
        F: FnOnce() -> Fut + Send + 'a,
        Fut: Future<Output = Result<Q::Value, E>> + Send + 'a,
    {
        self.answer(headers, query, origin, Sharing::Public)
    }

    async fn answer<'a, Q, E, F, Fut>(
        &'a self,
        headers: &'a HeaderMap,
        query: &'a Q,
        origin: F,
        sharing: Sharing,
    ) -> Result<Response, CacheError<E>>
    where
        C: AsyncQueryCache<Q>,
        Q: CachedQuery<Value: Serialize> + Sync,
        E: Send + Sync + 'static,
        F: FnOnce() -> Fut + Send + 'a,
        Fut: Future<Output = Result<Q::Value, E>> + Send + 'a,
    {
        // The key is read before the answer: a bump in between pairs an old
        // tag with a newer body (the next request is a 200), never an old
        // body with a newer tag (which would be revalidated forever).
        // On an error, the cache's own path below reports an invalid key,
        // or answers around an unreachable backend.
        let key = self.cache.generations().key_for(query).await.ok();
        let tag = key
            .as_ref()
            .filter(|_| !Q::VALUE_TAGS)
            .map(|key| ETag::of(Q::VALUE_ID, key.as_str(), b""));
        let mut surrogate = (sharing == Sharing::Public).then(|| {
            let schema = &Q::KEY_SCHEMA;
            SurrogateKeys::of_operation(schema.namespace(), schema.operation())
        });
        if let Some(keys) = &mut surrogate {
            let mut tags = Tags::new();
            // An empty tag value fails here and in the cache's read alike:
            // the answer is then the cache's error.
            if query.write_query_tags(&mut tags).is_ok() {
                push_global_tags::<Q>(keys, &tags);
            }
        }
        // A tag the request lists: answered from the counters alone. (`*`
        // is answered below, once an answer is known to exist.)
        if let Some(tag) = &tag
            && tag.listed(headers)
        {
            #[cfg(feature = "metrics")]
            not_modified::<Q>();
            return Ok(self.not_modified::<Q>(tag, sharing, surrogate.as_ref(), HIT));
        }
        // Whether this request's call ran the origin (else a hit, or
        // another request's origin call it waited for).
        let ran = AtomicBool::new(false);
        let counted = || {
            ran.store(true, Ordering::Relaxed);
            origin()
        };
        let value = self.cache.get_or_load(query, counted).await?;
        let status = match (ran.load(Ordering::Relaxed), &key) {
            (false, _) => HIT,
            (true, Some(_)) => MISS,
            (true, None) => MISS_UNREADABLE,
        };
        let body =
            serde_json::to_vec(&value).map_err(|error| CacheError::Unstorable(error.into()))?;
        let tag = match (tag, &key) {
            (Some(tag), _) => Some(tag),
            // Tags from the value: the tag covers the body too.
            (None, Some(key)) => Some(ETag::of(Q::VALUE_ID, key.as_str(), &body)),
            (None, None) => None,
        };
        if let Some(keys) = &mut surrogate
            && Q::VALUE_TAGS
        {
            let mut tags = Tags::new();
            if Q::write_value_tags(&value, &mut tags).is_ok() {
                push_global_tags::<Q>(keys, &tags);
            } else {
                // Tags that cannot be taken: not shared (no purge could reach it).
                surrogate = None;
            }
        }
        // The answer exists: `If-None-Match: *` matches it, as does a tag
        // that covers the body (tags from the value).
        if let Some(tag) = &tag
            && key.is_some()
            && tag.matches(headers)
        {
            #[cfg(feature = "metrics")]
            not_modified::<Q>();
            return Ok(self.not_modified::<Q>(tag, sharing, surrogate.as_ref(), status));
        }
        let sharing = shared_if_fits(sharing, surrogate.as_ref());
        let mut response = Response::new(Body::from(body));
        let headers = response.headers_mut();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        headers.insert(CACHE_STATUS, HeaderValue::from_static(status));
        self.describe::<Q>(headers, tag.as_ref(), sharing, surrogate.as_ref());
        Ok(response)
    }

    /// A `304` with the headers its `200` would have had.
    fn not_modified<Q: CachedQuery + ?Sized>(
        &self,
        tag: &ETag,
        sharing: Sharing,
        surrogate: Option<&SurrogateKeys>,
        status: &'static str,
    ) -> Response {
        let sharing = shared_if_fits(sharing, surrogate);
        let mut response = Response::new(Body::empty());
        *response.status_mut() = StatusCode::NOT_MODIFIED;
        let headers = response.headers_mut();
        headers.insert(CACHE_STATUS, HeaderValue::from_static(status));
        self.describe::<Q>(headers, Some(tag), sharing, surrogate);
        response
    }

    /// `ETag`, `Cache-Control` and, on a `public` answer, its surrogate keys.
    fn describe<Q: CachedQuery + ?Sized>(
        &self,
        headers: &mut HeaderMap,
        tag: Option<&ETag>,
        sharing: Sharing,
        surrogate: Option<&SurrogateKeys>,
    ) {
        if let Some(tag) = tag.and_then(|tag| HeaderValue::from_str(tag.as_str()).ok()) {
            headers.insert(ETAG, tag);
        }
        let control = cache_control::<Q>(sharing, self.freshness);
        if let Ok(control) = HeaderValue::from_str(&control) {
            headers.insert(CACHE_CONTROL, control);
        }
        // A tenant's answer depends on who asks: a browser shared by two
        // users never reuses one's answer for the other without asking.
        if matches!(Q::KEY_SCHEMA.scope(), Scope::Tenant { .. }) {
            headers.insert(VARY, HeaderValue::from_static("Authorization, Cookie"));
        }
        if let (Sharing::Public, Some(keys)) = (sharing, surrogate) {
            // Escaped text: always a valid header value.
            for (name, separator) in [(SURROGATE_KEY, " "), (CACHE_TAG, ",")] {
                if let Ok(value) = HeaderValue::from_str(&keys.joined(separator)) {
                    headers.insert(name, value);
                }
            }
        }
    }
}

/// `sharing`, or `Private` when a public answer's surrogate keys are
/// missing or exceed the limits.
fn shared_if_fits(sharing: Sharing, surrogate: Option<&SurrogateKeys>) -> Sharing {
    match surrogate {
        Some(keys) if sharing == Sharing::Public && keys.fit() => Sharing::Public,
        _ => Sharing::Private,
    }
}

/// Adds `tags`' global tags to `keys` (a global query has no others).
fn push_global_tags<Q: CacheKey + ?Sized>(keys: &mut SurrogateKeys, tags: &Tags) {
    for (scope, tag) in tags.iter() {
        if scope == TagScope::Global {
            keys.push_tag(Q::KEY_SCHEMA.namespace(), tag);
        }
    }
}

#[cfg(feature = "metrics")]
fn not_modified<Q: CacheKey + ?Sized>() {
    let schema = &Q::KEY_SCHEMA;
    metrics::counter!(
        "cache_key_http_not_modified_total",
        "namespace" => schema.namespace(),
        "operation" => schema.operation(),
    )
    .increment(1);
}

/// The purge of a bump's surrogate key, made when dropped: once the bump
/// returned, or where its call was dropped, the bump then made or pending
/// (a purge too many costs the CDN a miss; one lost, a stale page).
struct Purge<'a> {
    hook: Option<&'a PurgeHook>,
    scope: &'a GenerationScope,
}

impl Purge<'_> {
    /// No purge: the bump failed, nothing changed.
    fn disarm(mut self) {
        self.hook = None;
    }
}

impl Drop for Purge<'_> {
    fn drop(&mut self) {
        if let (Some(purge), Some(key)) = (self.hook, surrogate_key(self.scope)) {
            purge(&key);
        }
    }
}

/// Invalidation through the cache, then the purge hook (at the drop too,
/// for a call dropped before its bump returned); counters as the cache
/// keeps them.
#[allow(clippy::manual_async_fn, reason = "the future's Send is declared")]
impl<C: AsyncTypedCache + Send> AsyncTypedCache for HttpCache<C> {
    fn invalidate<'a>(
        &'a self,
        scope: &'a GenerationScope,
    ) -> impl Future<Output = Result<(), CacheError>> + Send + 'a {
        // Declared `Send` here, not inferred from an `async fn`: a handler
        // awaiting it is then `Send` for axum.
        async move {
            let purge = Purge {
                hook: self.purge.as_ref(),
                scope,
            };
            let bumped = self.cache.invalidate(scope).await;
            if bumped.is_err() {
                purge.disarm();
            }
            bumped
        }
    }

    fn stats(&self) -> Stats {
        self.cache.stats()
    }

    fn stats_of<Q: CacheKey + ?Sized>(&self) -> Stats {
        self.cache.stats_of::<Q>()
    }
}

/// The typed calls of the cache itself, for the code around the handlers:
/// cancel-safe as the cache's own are.
impl<C, Q> AsyncQueryCache<Q> for HttpCache<C>
where
    C: AsyncQueryCache<Q> + Send,
    Q: CachedQuery + Sync + ?Sized,
{
    fn get<'a>(
        &'a self,
        query: &'a Q,
    ) -> impl Future<Output = Result<Option<Q::Value>, CacheError>> + Send + 'a {
        self.cache.get(query)
    }

    fn insert<'a>(
        &'a self,
        query: &'a Q,
        value: Q::Value,
    ) -> impl Future<Output = Result<(), CacheError>> + Send + 'a {
        self.cache.insert(query, value)
    }

    fn get_or_load<'a, E, F, Fut>(
        &'a self,
        query: &'a Q,
        origin: F,
    ) -> impl Future<Output = Result<Q::Value, CacheError<E>>> + Send + 'a
    where
        E: Send + Sync + 'static,
        F: FnOnce() -> Fut + Send + 'a,
        Fut: Future<Output = Result<Q::Value, E>> + Send + 'a,
    {
        self.cache.get_or_load(query, origin)
    }
}

impl<C: CacheGenerations + Send> CacheGenerations for HttpCache<C> {
    type Store = C::Store;

    fn generations(&self) -> &C::Store {
        self.cache.generations()
    }
}
