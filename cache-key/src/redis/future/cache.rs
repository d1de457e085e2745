//! [`AsyncRedisCache`]: the typed cache in Redis or a Redis Cluster, on
//! async connections.

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;

use serde::Serialize;
use serde::de::DeserializeOwned;

use super::generations::AsyncRedisGenerations;
use crate::cache::{AsyncQueryCache, AsyncTypedCache, CacheError, CachedQuery, Stats, invalidated};
use crate::cache_key::CacheKey;
use crate::generation::{AsyncGenerationStore, GenerationScope};
use crate::redis::cache::RedisCache;
use crate::redis::driver;
use crate::redis::load::{self, Purpose};
use crate::redis::state::{EagerRefresh, FailSafe, SoftTimeout};

/// [`RedisCache`] on an [`AsyncRedisPool`](crate::redis::AsyncRedisPool)
/// (feature `redis-async`): the same entries, counters and guarantees, on
/// tokio; its futures are `Send`, for a multi-threaded runtime's tasks.
///
/// Every call is cancel-safe: a future dropped at any point where it waits
/// (a client that hung up, a `tokio::time::timeout`) leaves nothing behind.
/// Its single flight is handed to a waiter or removed, a load lock it held
/// is released from a task of its own, and an `invalidate` whose caller was
/// not told it returned is pending: sent again before the next batch.
///
/// ```
/// use cache_key::{CacheKey, Scopes};
/// use cache_key::cache::{AsyncQueryCache, AsyncTypedCache};
/// use cache_key::redis::{AsyncRedisCache, AsyncRedisGenerations, AsyncRedisPool};
/// use serde::{Deserialize, Serialize};
///
/// // The value: `Clone` for the cache, `Serialize` and `Deserialize` for Redis.
/// #[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
/// struct Book { title: String }
///
/// #[derive(CacheKey)]
/// #[cache_key(namespace = "library", operation = "search", value = Vec<Book>, ttl = "5m")]
/// struct Search { #[tenant] branch: u32, #[criterion] title: String }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let url = "redis://127.0.0.1/"; // or AsyncRedisPool::connect_cluster(nodes)
/// # let Some((_server, url)) = include!("../doctest_server.rs") else { return Ok(()) };
/// let pool = AsyncRedisPool::connect(url).await?;
/// let cache = AsyncRedisCache::new(AsyncRedisGenerations::new(pool));
///
/// let query = Search { branch: 2, title: "Dune".into() };
/// let books = cache
///     .get_or_load(&query, || async {
///         Ok::<_, std::io::Error>(vec![Book { title: "Dune".into() }]) // your database here
///     })
///     .await?;
/// assert_eq!(cache.get(&query).await?, Some(books));
/// cache.invalidate(&Search::tenant_scope(&2)?).await?; // branch 2, in every process
/// assert_eq!(cache.get(&query).await?, None);
/// # Ok(())
/// # }
/// ```
pub type AsyncRedisCache = RedisCache<AsyncRedisGenerations>;

/// Invalidation and counters, as futures.
impl AsyncTypedCache for AsyncRedisCache {
    /// Bumps `scope`'s generation: its entries are never read again (and
    /// leave Redis by TTL). A bump Redis did not confirm is an error, and
    /// is sent again before this cache or its store reads anything else.
    async fn invalidate(&self, scope: &GenerationScope) -> Result<(), CacheError> {
        let result = self.generations.invalidate(scope).await;
        invalidated(scope, &result);
        Ok(result?)
    }

    fn stats(&self) -> Stats {
        self.state.with_pending(self.state.stats.snapshot())
    }

    fn stats_of<Q: CacheKey + ?Sized>(&self) -> Stats {
        self.state.with_pending(self.state.stats.snapshot_of::<Q>())
    }
}

/// The typed calls as futures (see [`RedisCache`]'s blocking ones).
impl<Q> AsyncQueryCache<Q> for AsyncRedisCache
where
    Q: CachedQuery + Sync + ?Sized,
    Q::Value: Serialize + DeserializeOwned,
{
    async fn get(&self, query: &Q) -> Result<Option<Q::Value>, CacheError> {
        if let Some(stored) = self.state.tracked_hit(query) {
            return Ok(Some(stored.value));
        }
        // Boxed: the read's future is some 2 KB, which the caller's future
        // would otherwise hold, and copy, for a hit in process too; one
        // allocation beside a round trip is nothing.
        Box::pin(self.read(query)).await
    }

    async fn insert(&self, query: &Q, value: Q::Value) -> Result<(), CacheError> {
        let inserted = match self.state.insert(query, &value) {
            Ok(mut insert) => driver::exchange(self.pool(), &mut insert).await,
            Err(error) => Err(error.into()),
        };
        self.state.count_insert::<Q>(inserted)
    }

    async fn get_or_load<'a, E, F, Fut>(
        &'a self,
        query: &'a Q,
        origin: F,
    ) -> Result<Q::Value, CacheError<E>>
    where
        E: Send + Sync + 'static,
        F: FnOnce() -> Fut + Send + 'a,
        Fut: Future<Output = Result<Q::Value, E>> + Send + 'a,
    {
        if let Some(stored) = self.state.tracked_hit(query) {
            return Ok(stored.value);
        }
        // Boxed, as `get`'s read is.
        Box::pin(self.load(query, &mut Some(origin), Purpose::Load))
            .await
            .0
    }
}

/// What only the async Redis cache has.
impl AsyncRedisCache {
    /// A read through Redis.
    async fn read<Q>(&self, query: &Q) -> Result<Option<Q::Value>, CacheError<Infallible>>
    where
        Q: CachedQuery + Sync + ?Sized,
        Q::Value: DeserializeOwned,
    {
        let mut read = self.state.keyed_read(query)?;
        let read = driver::exchange(self.pool(), &mut read).await;
        self.state.count_read(query, read)
    }

    /// Keeps entries [`FailSafe::max_stale`] past their TTL, and serves one
    /// of those, counted in [`Stats::stale`], when the origin fails, or,
    /// with a [soft timeout](FailSafe::with_soft_timeout), is slower than
    /// it (the origin's future is then dropped). A value whose generation
    /// was bumped is never served.
    pub fn with_fail_safe<S: SoftTimeout>(mut self, fail_safe: FailSafe<S>) -> Self {
        self.state.fail_safe = Some(FailSafe::new(fail_safe.max_stale()));
        self.state.soft_timeout = fail_safe.soft_timeout();
        self
    }

    /// [`get_or_load`](AsyncQueryCache::get_or_load) for a key read often, as
    /// [`RedisCache::get_or_refresh`](crate::redis::RedisCache::get_or_refresh):
    /// a hit once `eager`'s fraction of its TTL has passed is answered at
    /// once and hands `origin` to one load of the key in a task of its own,
    /// on the runtime the pool was connected on.
    pub async fn get_or_refresh<Q, E, F, Fut>(
        self: &Arc<Self>,
        query: &Q,
        eager: EagerRefresh,
        origin: F,
    ) -> Result<Q::Value, CacheError<E>>
    where
        Q: CachedQuery + Clone + Send + Sync + 'static,
        Q::Value: Serialize + DeserializeOwned,
        E: Send + Sync + 'static,
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = Result<Q::Value, E>> + Send + 'static,
    {
        let mut origin = Some(origin);
        let (result, due) = match self.state.tracked_hit(query) {
            Some(stored) => {
                let due = self.state.refresh_due::<Q>(eager, stored.fresh_until);
                (Ok(stored.value), due)
            }
            // Boxed, as `get_or_load`'s load is.
            None => {
                let purpose = Purpose::Refreshable(eager);
                Box::pin(self.load(query, &mut origin, purpose)).await
            }
        };
        if let (true, Some(origin)) = (due, origin) {
            self.refresh(query, eager, origin);
        }
        result
    }

    /// Starts an eager refresh of `query` in a task of its own, on the
    /// pool's runtime, unless one of its key runs or as many as `eager`
    /// allows do.
    fn refresh<Q, E, F, Fut>(self: &Arc<Self>, query: &Q, eager: EagerRefresh, origin: F)
    where
        Q: CachedQuery + Clone + Send + Sync + 'static,
        Q::Value: Serialize + DeserializeOwned,
        E: Send + Sync + 'static,
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = Result<Q::Value, E>> + Send + 'static,
    {
        let Some(refreshing) = self.start_refresh(query, eager) else {
            return;
        };
        let query = query.clone();
        self.pool().runtime().spawn(async move {
            let purpose = Purpose::Refresh(eager);
            // Its answer, or error (counted), is the next reads'.
            let _ = refreshing
                .cache
                .load(&query, &mut Some(origin), purpose)
                .await;
        });
    }

    /// `get_or_load` through Redis; and whether it ended in a hit due for an
    /// eager refresh (noted only for `get_or_refresh`'s).
    async fn load<Q, E, F, Fut>(
        &self,
        query: &Q,
        origin: &mut Option<F>,
        purpose: Purpose,
    ) -> (Result<Q::Value, CacheError<E>>, bool)
    where
        Q: CachedQuery + Sync + ?Sized,
        Q::Value: Serialize + DeserializeOwned,
        E: Send + Sync + 'static,
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<Q::Value, E>>,
    {
        // Past a soft timeout the origin's future is dropped: `None`.
        let call = |origin: F, soft_timeout| async move {
            match soft_timeout {
                None => Some(origin().await),
                Some(timeout) => tokio::time::timeout(timeout, origin()).await.ok(),
            }
        };
        load::load(self.pool(), &self.state, query, purpose, origin, call).await
    }
}
