//! [`RedisCache`]: the typed cache in Redis or a Redis Cluster, on blocking
//! connections.

use std::convert::Infallible;
use std::future::ready;
use std::sync::Arc;
use std::thread;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::cache::{CacheError, CachedQuery, QueryCache, Stats, TypedCache, invalidated};
use crate::cache_key::CacheKey;
use crate::generation::{GenerationScope, GenerationStore};
use crate::redis::cache::RedisCache;
use crate::redis::driver::ready_now;
use crate::redis::load::{self, Purpose};
use crate::redis::state::{EagerRefresh, FailSafe};

/// Invalidation and counters, blocking.
impl TypedCache for RedisCache {
    /// Bumps `scope`'s generation: its entries are never read again (and
    /// leave Redis by TTL, or by
    /// [`RedisGenerations::sweep`](crate::redis::RedisGenerations::sweep)).
    /// A bump Redis did not confirm is an error, and is sent again before
    /// this cache or its store reads anything else.
    fn invalidate(&self, scope: &GenerationScope) -> Result<(), CacheError> {
        let result = self.generations.invalidate(scope);
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

/// The typed calls, blocking. A value JSON cannot hold as it is (a NaN or
/// infinite float) is refused at insert ([`CacheError::Unstorable`]) and
/// served, never stored, by `get_or_load`; when Redis fails, the
/// [`FailurePolicy`](crate::redis::FailurePolicy) says what a call does.
impl<Q> QueryCache<Q> for RedisCache
where
    Q: CachedQuery + ?Sized,
    Q::Value: Serialize + DeserializeOwned,
{
    fn get(&self, query: &Q) -> Result<Option<Q::Value>, CacheError> {
        if let Some(stored) = self.state.tracked_hit(query) {
            return Ok(Some(stored.value));
        }
        self.read(query)
    }

    fn insert(&self, query: &Q, value: Q::Value) -> Result<(), CacheError> {
        let inserted = match self.state.insert(query, &value) {
            Ok(mut insert) => self.pool().run(&mut insert),
            Err(error) => Err(error.into()),
        };
        self.state.count_insert::<Q>(inserted)
    }

    fn get_or_load<E, F>(&self, query: &Q, origin: F) -> Result<Q::Value, CacheError<E>>
    where
        E: Send + Sync + 'static,
        F: FnOnce() -> Result<Q::Value, E>,
    {
        if let Some(stored) = self.state.tracked_hit(query) {
            return Ok(stored.value);
        }
        self.load(query, &mut Some(origin), Purpose::Load).0
    }
}

/// What only the blocking Redis cache has.
impl RedisCache {
    /// A read through Redis: kept out of line, so that a hit in process
    /// does not set up the read's frame.
    #[inline(never)]
    fn read<Q>(&self, query: &Q) -> Result<Option<Q::Value>, CacheError<Infallible>>
    where
        Q: CachedQuery + ?Sized,
        Q::Value: DeserializeOwned,
    {
        let mut read = self.state.keyed_read(query)?;
        let read = self.pool().run(&mut read);
        self.state.count_read(query, read)
    }

    /// Keeps entries [`FailSafe::max_stale`] past their TTL, and serves one
    /// of those, counted in [`Stats::stale`], when the origin fails (or,
    /// during an outage, see [the caching guide's outage table]). A value
    /// whose generation was bumped is never served: its key is one no read
    /// names any more. (A soft timeout is the async cache's: a blocking
    /// call in progress cannot be given up.)
    ///
    /// [the caching guide's outage table]: crate::redis#faults
    pub fn with_fail_safe(mut self, fail_safe: FailSafe) -> Self {
        self.state.fail_safe = Some(fail_safe);
        self
    }

    /// [`get_or_load`](QueryCache::get_or_load) for a key read often: a
    /// hit once `eager`'s fraction of its TTL has passed is answered at
    /// once and hands `origin` to one load of the key on a thread of its
    /// own, so that the key is reloaded before it expires rather than
    /// missed after; any other call is `get_or_load`. Hence the bounds: the
    /// refresh outlives the call, so it holds the cache (`self` is an
    /// `Arc`), a clone of the query and the origin. A hit reads the wall
    /// clock once more than `get_or_load`'s, to place itself in the window.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use cache_key::CacheKey;
    /// use cache_key::redis::{EagerRefresh, RedisCache, RedisGenerations, RedisPool};
    ///
    /// #[derive(Clone, CacheKey)]
    /// #[cache_key(namespace = "library", operation = "top", value = Vec<String>, ttl = "1m")]
    /// struct Top { #[tenant] branch: u32 }
    ///
    /// # let Some((_server, url)) = include!("../doctest_server.rs") else { return Ok(()) };
    /// let cache = Arc::new(RedisCache::new(RedisGenerations::new(RedisPool::open(url)?)));
    /// // Reloaded once 90% of its minute has passed, if it is read then.
    /// let eager = EagerRefresh::after(0.9);
    /// let top = cache.get_or_refresh(&Top { branch: 2 }, eager, || {
    ///     Ok::<_, std::io::Error>(vec!["Dune".to_owned()]) // your database here
    /// })?;
    /// assert_eq!(top, ["Dune"]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn get_or_refresh<Q, E, F>(
        self: &Arc<Self>,
        query: &Q,
        eager: EagerRefresh,
        origin: F,
    ) -> Result<Q::Value, CacheError<E>>
    where
        Q: CachedQuery + Clone + Send + 'static,
        Q::Value: Serialize + DeserializeOwned,
        E: Send + Sync + 'static,
        F: FnOnce() -> Result<Q::Value, E> + Send + 'static,
    {
        let mut origin = Some(origin);
        let (result, due) = match self.state.tracked_hit(query) {
            Some(stored) => {
                let due = self.state.refresh_due::<Q>(eager, stored.fresh_until);
                (Ok(stored.value), due)
            }
            None => self.load(query, &mut origin, Purpose::Refreshable(eager)),
        };
        if let (true, Some(origin)) = (due, origin) {
            self.refresh(query, eager, origin);
        }
        result
    }

    /// Starts an eager refresh of `query` on a thread of its own, unless
    /// one of its key runs or as many as the cache allows.
    fn refresh<Q, E, F>(self: &Arc<Self>, query: &Q, eager: EagerRefresh, origin: F)
    where
        Q: CachedQuery + Clone + Send + 'static,
        Q::Value: Serialize + DeserializeOwned,
        E: Send + Sync + 'static,
        F: FnOnce() -> Result<Q::Value, E> + Send + 'static,
    {
        let Some(refreshing) = self.start_refresh(query, eager) else {
            return;
        };
        let query = query.clone();
        // A thread that cannot start drops `refreshing`: no refresh.
        let _ = thread::Builder::new()
            .name("cache-key refresh".to_owned())
            .spawn(move || {
                // Its answer, or error (counted), is the next reads'.
                let _ = refreshing
                    .cache
                    .load(&query, &mut Some(origin), Purpose::Refresh(eager));
            });
    }

    /// `get_or_load` through Redis, out of line as
    /// [`read`](Self::read) is; and whether it ended in a hit due for an
    /// eager refresh (noted only for `get_or_refresh`'s).
    #[inline(never)]
    fn load<Q, E, F>(
        &self,
        query: &Q,
        origin: &mut Option<F>,
        purpose: Purpose,
    ) -> (Result<Q::Value, CacheError<E>>, bool)
    where
        Q: CachedQuery + ?Sized,
        Q::Value: Serialize + DeserializeOwned,
        E: Send + Sync + 'static,
        F: FnOnce() -> Result<Q::Value, E>,
    {
        // A blocking call cannot be given up: no soft timeout here.
        let call = |origin: F, _| ready(Some(origin()));
        ready_now(load::load(
            self.pool(),
            &self.state,
            query,
            purpose,
            origin,
            call,
        ))
    }
}
