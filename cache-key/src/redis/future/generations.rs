//! [`AsyncRedisGenerations`]: [`RedisGenerations`] on an
//! [`AsyncRedisPool`], read and bumped without blocking.

use std::future::Future;

use ::redis::{Cmd, Value, cmd};

use super::pool::AsyncRedisPool;
use crate::generation::{
    AsyncGenerationStore, Counter, Counters, GenerationError, GenerationScope, GenerationSum,
};
use crate::redis::batch::Exchange;
use crate::redis::counters::{CounterExchange, CounterSource, Topology};
use crate::redis::generations::RedisGenerations;
use crate::redis::sweep::walk::{self, SweepDriver};
use crate::redis::sweep::{self, SweepOptions, SweepReport};
use crate::redis::tags::{ClockRead, TagCheck};
use crate::tag::{TagClock, Tags};

/// [`RedisGenerations`] on an [`AsyncRedisPool`] (feature `redis-async`):
/// the counters read and bumped without blocking, with the same protocol,
/// so that sync and async processes share one Redis and see each other's
/// bumps.
///
/// ```no_run
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// use cache_key::{CacheKey, Scopes, generation::AsyncGenerationStore};
/// use cache_key::redis::{AsyncRedisGenerations, AsyncRedisPool};
///
/// #[derive(CacheKey)]
/// #[cache_key(namespace = "library", operation = "list", hash_tag)]
/// struct BranchList { #[tenant] branch: u32, #[criterion] page: u32 }
///
/// let generations = AsyncRedisGenerations::new(AsyncRedisPool::connect("redis://127.0.0.1/").await?);
/// let query = BranchList { branch: 2, page: 1 };
/// let key = generations.key_for(&query).await?;
/// generations.invalidate(&BranchList::tenant_scope(&2)?).await?;
/// assert_ne!(generations.key_for(&query).await?, key);
/// # Ok(()) }
/// ```
pub type AsyncRedisGenerations = RedisGenerations<AsyncRedisPool>;

impl AsyncGenerationStore for AsyncRedisGenerations {
    fn read<'a>(
        &'a self,
        counters: Counters<'a>,
        sum: &'a mut GenerationSum,
    ) -> impl Future<Output = Result<(), GenerationError>> + Send + 'a {
        let mut exchange = CounterExchange::read(counters, self.source());
        async move {
            self.pool().run(&mut exchange).await?;
            exchange.add_to(sum);
            Ok(())
        }
    }

    fn bump<'a>(
        &'a self,
        counter: Counter<'a>,
    ) -> impl Future<Output = Result<(), GenerationError>> + Send + 'a {
        // Taken before the future is first polled: a bump dropped at any
        // point, even unsent, is pending (its outcome unknown to the caller).
        let bumping = self.source().bumping(counter);
        let mut exchange = CounterExchange::bump(counter, self.source());
        async move {
            let bumped = self.pool().run(&mut exchange).await;
            bumping.ended(&bumped);
            bumped
        }
    }

    fn tag_clock<'a>(
        &'a self,
        counters: Counters<'a>,
    ) -> impl Future<Output = Result<TagClock, GenerationError>> + Send + 'a {
        let mut clock = ClockRead::new(counters, self.topology());
        async move { self.pool().run(&mut clock).await }
    }

    fn tags_unchanged<'a>(
        &'a self,
        counters: Counters<'a>,
        tags: &'a Tags,
        since: TagClock,
    ) -> impl Future<Output = Result<bool, GenerationError>> + Send + 'a {
        let mut check = TagCheck::new(counters, tags, since, self.source());
        async move {
            match check.is_done() {
                true => Ok(check.unchanged()),
                false => self.pool().run(&mut check).await,
            }
        }
    }
}

impl AsyncRedisGenerations {
    /// Deletes the entries of `scope` nobody can read any more, as the
    /// blocking [`RedisGenerations::sweep`] does (the same walk, the same
    /// verdicts), without blocking the runtime's threads.
    pub async fn sweep(
        &self,
        scope: &GenerationScope,
        options: SweepOptions,
    ) -> Result<SweepReport, GenerationError> {
        walk::sweep(self, scope, options).await
    }
}

/// The async driver's I/O for the sweep.
impl SweepDriver for AsyncRedisGenerations {
    fn source(&self) -> &CounterSource {
        RedisGenerations::source(self)
    }

    async fn primaries(&self) -> Result<Vec<Option<u16>>, GenerationError> {
        if self.topology() == Topology::Server {
            return Ok(vec![None]);
        }
        let (command, routing) = sweep::cluster_slots();
        let slots =
            (self.pool().command(&command, Some(routing)).await).map_err(GenerationError::store)?;
        let primaries = sweep::primaries(slots).map_err(walk::unreadable)?;
        Ok(primaries.into_iter().map(Some).collect())
    }

    async fn on_primary(&self, slot: Option<u16>, command: Cmd) -> Result<Value, GenerationError> {
        let routing = slot.map(sweep::primary_of);
        (self.pool().command(&command, routing).await).map_err(GenerationError::store)
    }

    async fn unlink(&self, keys: &[String]) -> Result<u64, GenerationError> {
        let unlink = cmd("UNLINK").arg(keys).take();
        let reply = (self.pool().command(&unlink, None).await).map_err(GenerationError::store)?;
        ::redis::from_redis_value(reply).map_err(walk::unreadable)
    }

    fn exchange<X>(&self, exchange: &mut X) -> impl Future<Output = X::Output> + Send
    where
        X: Exchange + Send,
        X::Output: Send,
    {
        self.pool().run(exchange)
    }
}
