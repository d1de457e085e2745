//! Generation stores read without blocking (feature `redis-async`):
//! [`AsyncGenerationStore`], and [`AsyncRedisGenerations`] on the `redis`
//! crate's async connections.

use std::future::Future;

use ::redis::aio::ConnectionLike;
use ::redis::{Script, Value, cmd};

use super::redis::{COUNTER_SCRIPT, check_count, counter_value, not_a_counter};
use super::{
    Counter, Counters, GenerationError, GenerationScope, GenerationStore, GenerationSum,
    MemoryGenerations,
};
use crate::CacheKey;
use crate::schema::Scope;

/// A [`GenerationStore`] whose reads and bumps are futures, for async code
/// (an axum handler, say) that must not block its runtime's threads on a
/// Redis round trip.
///
/// It keeps the same promise: **a counter never goes back**, and a counter
/// it cannot read is an error, never 0. Implemented by
/// [`AsyncRedisGenerations`] (counters in Redis, shared by every process)
/// and by [`MemoryGenerations`] (in process: its reads never wait, so its
/// futures are ready at once).
pub trait AsyncGenerationStore: Sync {
    /// Adds the current value of each of `counters` to `sum`, in order, as
    /// [`GenerationStore::read`] does.
    fn read<'a>(
        &'a self,
        counters: Counters<'a>,
        sum: &'a mut GenerationSum,
    ) -> impl Future<Output = Result<(), GenerationError>> + Send + 'a;

    /// Increases `counter`, as [`GenerationStore::bump`] does.
    fn bump<'a>(
        &'a self,
        counter: Counter<'a>,
    ) -> impl Future<Output = Result<(), GenerationError>> + Send + 'a;

    /// `query`'s generation: the sum of its counters.
    fn generation_for<'a, Q>(
        &'a self,
        query: &'a Q,
    ) -> impl Future<Output = Result<u64, GenerationError>> + Send + 'a
    where
        Self: Sized,
        Q: CacheKey + Sync + ?Sized,
    {
        async move {
            let schema = Q::KEY_SCHEMA;
            let global = matches!(schema.scope(), Scope::Global { .. });
            let mut tenant = String::new();
            query.write_tenant(&mut tenant)?;
            let counters = Counters::new(
                schema.namespace(),
                (!global).then_some(tenant.as_str()),
                schema.operation(),
            );
            let mut sum = GenerationSum::default();
            self.read(counters, &mut sum).await?;
            sum.finish(&counters)
        }
    }

    /// Bumps `scope`'s counter: every key in the scope becomes unreachable.
    fn invalidate<'a>(
        &'a self,
        scope: &'a GenerationScope,
    ) -> impl Future<Output = Result<(), GenerationError>> + Send + 'a
    where
        Self: Sized,
    {
        self.bump(scope.counter())
    }
}

impl AsyncGenerationStore for MemoryGenerations {
    fn read<'a>(
        &'a self,
        counters: Counters<'a>,
        sum: &'a mut GenerationSum,
    ) -> impl Future<Output = Result<(), GenerationError>> + Send + 'a {
        std::future::ready(GenerationStore::read(self, counters, sum))
    }

    fn bump<'a>(
        &'a self,
        counter: Counter<'a>,
    ) -> impl Future<Output = Result<(), GenerationError>> + Send + 'a {
        std::future::ready(GenerationStore::bump(self, counter))
    }
}

/// A store shared by several owners (caches in several tasks).
impl<S: AsyncGenerationStore + Send> AsyncGenerationStore for std::sync::Arc<S> {
    fn read<'a>(
        &'a self,
        counters: Counters<'a>,
        sum: &'a mut GenerationSum,
    ) -> impl Future<Output = Result<(), GenerationError>> + Send + 'a {
        (**self).read(counters, sum)
    }

    fn bump<'a>(
        &'a self,
        counter: Counter<'a>,
    ) -> impl Future<Output = Result<(), GenerationError>> + Send + 'a {
        (**self).bump(counter)
    }
}

/// Generation counters in Redis or a Redis Cluster, read and bumped on the
/// `redis` crate's async connections (feature `redis-async`): the async twin
/// of [`RedisGenerations`](crate::RedisGenerations), with the same counters
/// (names, the `SET NX` at the server's clock then `INCRBY` script), so the
/// two can share one Redis and see each other's bumps.
///
/// `C` is any cheap-to-clone async connection: a
/// [`MultiplexedConnection`](::redis::aio::MultiplexedConnection), a
/// `ConnectionManager` (the `redis` crate's `connection-manager` feature,
/// which reconnects), or a
/// [`cluster_async::ClusterConnection`](::redis::cluster_async::ClusterConnection).
/// Each call clones it, so concurrent reads are pipelined on one socket
/// instead of waiting for each other.
#[derive(Clone)]
pub struct AsyncRedisGenerations<C> {
    connection: C,
    script: Script,
}

impl<C> AsyncRedisGenerations<C>
where
    C: ConnectionLike + Clone + Send + Sync,
{
    /// A store keeping its counters through `connection`.
    pub fn new(connection: C) -> Self {
        AsyncRedisGenerations {
            connection,
            script: Script::new(COUNTER_SCRIPT),
        }
    }

    /// A clone of the store's connection, for the cache's own commands.
    pub fn connection(&self) -> C {
        self.connection.clone()
    }

    /// Runs the counter script on `name` (creates it at the server's clock
    /// if missing, adds `by`) and returns the value.
    async fn run_script(
        &self,
        connection: &mut C,
        name: &str,
        by: u64,
    ) -> Result<u64, GenerationError> {
        let value: i64 = self
            .script
            .key(name)
            .arg(by)
            .invoke_async(connection)
            .await
            .map_err(GenerationError::store)?;
        u64::try_from(value).map_err(|_| not_a_counter(name, value.to_string()))
    }
}

impl<C> AsyncGenerationStore for AsyncRedisGenerations<C>
where
    C: ConnectionLike + Clone + Send + Sync,
{
    fn read<'a>(
        &'a self,
        counters: Counters<'a>,
        sum: &'a mut GenerationSum,
    ) -> impl Future<Output = Result<(), GenerationError>> + Send + 'a {
        let names: Vec<String> = counters.iter().map(|counter| counter.name()).collect();
        async move {
            let mut connection = self.connection.clone();
            let values: Vec<Value> = cmd("MGET")
                .arg(&names)
                .query_async(&mut connection)
                .await
                .map_err(GenerationError::store)?;
            check_count(&names, &values)?;
            for (name, value) in names.iter().zip(&values) {
                let value = match counter_value(name, value)? {
                    Some(value) => value,
                    // First use, or a lost counter: made at the server's
                    // clock, above any value it had (see `RedisGenerations`).
                    None => self.run_script(&mut connection, name, 0).await?,
                };
                sum.add(value);
            }
            Ok(())
        }
    }

    fn bump<'a>(
        &'a self,
        counter: Counter<'a>,
    ) -> impl Future<Output = Result<(), GenerationError>> + Send + 'a {
        let name = counter.name();
        async move {
            let mut connection = self.connection.clone();
            self.run_script(&mut connection, &name, 1).await.map(drop)
        }
    }
}
