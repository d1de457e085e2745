//! [`RedisCache`]: the typed cache in Redis or a Redis Cluster, on blocking
//! connections.

use std::convert::Infallible;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::cache::{CacheError, CachedQuery, invalidated};
use crate::generation::{GenerationError, GenerationScope, GenerationStore};
use crate::redis::cache::RedisCache;
use crate::redis::load::{Running, Step};

/// The blocking driver.
impl RedisCache {
    /// Bumps `scope`'s generation: its entries are never read again (and
    /// leave Redis by TTL, or by
    /// [`RedisGenerations::sweep`](crate::redis::RedisGenerations::sweep)).
    pub fn invalidate(&self, scope: &GenerationScope) -> Result<(), GenerationError> {
        let result = self.generations.invalidate(scope);
        invalidated(scope, &result);
        result
    }

    /// Invalidates every entry of `Q`'s namespace.
    pub fn invalidate_namespace<Q: CachedQuery + ?Sized>(&self) -> Result<(), GenerationError> {
        self.invalidate(&GenerationScope::namespace::<Q>())
    }

    /// `query`'s cached answer, if a valid one is stored at its current
    /// generation.
    pub fn get<Q>(&self, query: &Q) -> Result<Option<Q::Value>, CacheError<Infallible>>
    where
        Q: CachedQuery + ?Sized,
        Q::Value: DeserializeOwned,
    {
        if let Some(value) = self.state.tracked_hit(query) {
            return Ok(Some(value));
        }
        self.read(query)
    }

    /// [`get`](Self::get) through Redis: kept out of line, so that a hit in
    /// process does not set up the read's frame.
    #[inline(never)]
    fn read<Q>(&self, query: &Q) -> Result<Option<Q::Value>, CacheError<Infallible>>
    where
        Q: CachedQuery + ?Sized,
        Q::Value: DeserializeOwned,
    {
        let mut read = self.state.keyed_read(query)?;
        let read = self.pool().run(&mut read);
        self.state.count_read::<Q>(read)
    }

    /// Stores `value` as `query`'s answer at its current generation, for
    /// its type's TTL. A value JSON cannot hold as it is (a NaN or infinite
    /// float) is refused: [`CacheError::Unstorable`].
    pub fn insert<Q>(&self, query: &Q, value: &Q::Value) -> Result<(), CacheError<Infallible>>
    where
        Q: CachedQuery + ?Sized,
        Q::Value: Serialize + DeserializeOwned,
    {
        let mut insert = self.state.insert(query, value)?;
        let inserted = self.pool().run(&mut insert);
        inserted.inspect_err(|error| self.state.stats.of::<Q>().error(error))
    }

    /// `query`'s answer: from Redis, or from `origin`, called once per key
    /// in this process however many callers miss it at once, and stored
    /// under the key named **before** the call. An origin error reaches
    /// every caller waiting on that call and is not stored. A failed write is
    /// counted as an error and the answer still returned; a failed read is
    /// [`CacheError::Backend`] without asking the origin.
    pub fn get_or_load<Q, E, F>(&self, query: &Q, origin: F) -> Result<Q::Value, CacheError<E>>
    where
        Q: CachedQuery + ?Sized,
        Q::Value: Serialize + DeserializeOwned,
        E: Send + Sync + 'static,
        F: FnOnce() -> Result<Q::Value, E>,
    {
        if let Some(value) = self.state.tracked_hit(query) {
            return Ok(value);
        }
        self.load(query, origin)
    }

    /// [`get_or_load`](Self::get_or_load) through Redis, out of line as
    /// [`read`](Self::read) is.
    #[inline(never)]
    fn load<Q, E, F>(&self, query: &Q, origin: F) -> Result<Q::Value, CacheError<E>>
    where
        Q: CachedQuery + ?Sized,
        Q::Value: Serialize + DeserializeOwned,
        E: Send + Sync + 'static,
        F: FnOnce() -> Result<Q::Value, E>,
    {
        let mut running = Running::new(&self.state, query, self.pool());
        let mut origin = Some(origin);
        loop {
            match running.load.step() {
                Step::Send(batch) => running.load.receive(self.pool().send(batch)),
                // A blocking call cannot be given up: no soft timeout here.
                Step::Origin { .. } => {
                    let origin = origin.take().expect("a load asks its origin once");
                    let answer = origin();
                    running.load.origin(answer);
                }
                Step::Pause(pause) => running.load.resume(pause.block()),
                Step::Done(result) => return result,
            }
        }
    }
}
