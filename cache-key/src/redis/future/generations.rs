//! [`AsyncRedisGenerations`]: [`RedisGenerations`] on an
//! [`AsyncRedisPool`], read and bumped without blocking.

use std::future::Future;

use super::pool::AsyncRedisPool;
use crate::generation::{
    AsyncGenerationStore, Counter, Counters, GenerationError, GenerationScope, GenerationSum,
};
use crate::redis::generations::RedisGenerations;
use crate::redis::sweep::walk;
use crate::redis::sweep::{SweepOptions, SweepReport};
use crate::tag::{TagClock, Tags};

/// [`RedisGenerations`] on an [`AsyncRedisPool`] (feature `redis-async`):
/// the counters read and bumped without blocking, with the same protocol,
/// so that sync and async processes share one Redis and see each other's
/// bumps.
///
/// Every call is cancel-safe: a read or a sweep dropped at any point where
/// it waits holds nothing; a bump whose caller was not told it returned
/// (its future dropped) is pending, sent
/// again before the next batch of this store or a cache made from it
/// ([`pending_invalidations`](RedisGenerations::pending_invalidations)).
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
        self.read_counters(counters, sum)
    }

    fn bump<'a>(
        &'a self,
        counter: Counter<'a>,
    ) -> impl Future<Output = Result<(), GenerationError>> + Send + 'a {
        self.bump_counter(counter)
    }

    fn tag_clock<'a>(
        &'a self,
        counters: Counters<'a>,
    ) -> impl Future<Output = Result<TagClock, GenerationError>> + Send + 'a {
        self.read_tag_clock(counters)
    }

    fn tags_unchanged<'a>(
        &'a self,
        counters: Counters<'a>,
        tags: &'a Tags,
        since: TagClock,
    ) -> impl Future<Output = Result<bool, GenerationError>> + Send + 'a {
        self.check_tags(counters, tags, since)
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
        walk::sweep(self.pool(), self.source(), scope, options).await
    }
}
