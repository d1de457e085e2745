//! [`RedisGenerations`] on a [`RedisPool`]: the counters read and bumped
//! blocking, and the sweep of old generations.

use std::future::{Future, ready};

use ::redis::{Cmd, Value, cmd};

use super::pool::RedisPool;
use crate::generation::{
    Counter, Counters, GenerationError, GenerationScope, GenerationStore, GenerationSum,
};
use crate::redis::batch::Exchange;
use crate::redis::counters::{CounterExchange, CounterSource, Topology};
use crate::redis::generations::RedisGenerations;
use crate::redis::sweep::walk::{self, SweepDriver};
use crate::redis::sweep::{self, SweepOptions, SweepReport};
use crate::redis::tags::{ClockRead, TagCheck};
use crate::redis::transport::classify;
use crate::tag::{TagClock, Tags};

/// The blocking driver: a [`GenerationStore`], and the sweep.
impl RedisGenerations {
    /// Deletes the entries of `scope` nobody can read any more: those whose
    /// generation is older than their query's current one, and, sweeping a
    /// tag's scope, those whose value's tags a bump of that tag ended.
    ///
    /// Each primary is walked with `SCAN` and the glob of the scope's
    /// namespace ([`KeyPattern::namespace`](crate::KeyPattern::namespace), glob-escaped), `batch` keys at a
    /// time; each key returned is decoded and kept only when the scope
    /// [`contains`](GenerationScope::contains) it (the exact test: a glob's
    /// `*` also matches `:`) and its generation is below the current
    /// generation of its namespace, tenant and operation (read from the
    /// counters, once per tenant and operation; for a key whose query is
    /// tagged, whose generation holds its tags' counters too, with the tags
    /// its entry records, `qtags`, read from the entry's first bytes). Those
    /// are deleted with `UNLINK`, one call per batch: memory stays bounded by
    /// the batch, however many keys there are. Counters (whose names are not
    /// keys) are never deleted.
    ///
    /// Sweeping a tag's scope ([`GenerationScope::tag_unchecked`], the
    /// derive's `tag_scope_*`) also reads the first bytes (`GETRANGE`) of
    /// each entry of the scope at its current generation, and deletes it when
    /// its value holds the tag
    /// ([`CachedQuery::VALUE_TAGS`](crate::cache::CachedQuery::VALUE_TAGS))
    /// and one of its tags was bumped since its fill began (their counters
    /// read as a strict read would): the entries that bump ended, which a
    /// read would refuse. The first bytes of a batch's entries are read in
    /// one round trip, and their tags' counters in another. Values that are
    /// not an envelope of this version, and query-tagged entries without
    /// `qtags` (written before wire format 4), are left alone.
    ///
    /// An entry written during the sweep under a generation read before a
    /// bump may survive it: give entries a time to live, the primary answer
    /// to old generations, and sweep to reclaim memory sooner. `SCAN` walks
    /// the whole key space of each primary whatever the scope.
    pub fn sweep(
        &self,
        scope: &GenerationScope,
        options: SweepOptions,
    ) -> Result<SweepReport, GenerationError> {
        walk::ready_now(walk::sweep(self, scope, options))
    }
}

/// The blocking driver's I/O for the sweep: each future is ready at once.
impl SweepDriver for RedisGenerations {
    fn source(&self) -> &CounterSource {
        RedisGenerations::source(self)
    }

    fn primaries(&self) -> impl Future<Output = Result<Vec<Option<u16>>, GenerationError>> + Send {
        let primaries = || {
            if self.topology() == Topology::Server {
                return Ok(vec![None]);
            }
            let (command, routing) = sweep::cluster_slots();
            let mut connection = self.pool().get().map_err(GenerationError::store)?;
            let slots = connection
                .route(&command, routing)
                .map_err(|error| self.failed(error))?;
            let primaries = sweep::primaries(slots).map_err(|error| self.failed(error))?;
            Ok(primaries.into_iter().map(Some).collect())
        };
        ready(primaries())
    }

    fn on_primary(
        &self,
        slot: Option<u16>,
        command: Cmd,
    ) -> impl Future<Output = Result<Value, GenerationError>> + Send {
        let reply = || {
            let mut connection = self.pool().get().map_err(GenerationError::store)?;
            match slot {
                Some(slot) => connection.route(&command, sweep::primary_of(slot)),
                None => command.query(&mut connection),
            }
            .map_err(|error| self.failed(error))
        };
        ready(reply())
    }

    fn unlink(&self, keys: &[String]) -> impl Future<Output = Result<u64, GenerationError>> + Send {
        let unlinked = || {
            let mut connection = self.pool().get().map_err(GenerationError::store)?;
            (cmd("UNLINK").arg(keys).query(&mut connection)).map_err(|error| self.failed(error))
        };
        ready(unlinked())
    }

    fn exchange<X>(&self, exchange: &mut X) -> impl Future<Output = X::Output> + Send
    where
        X: Exchange + Send,
        X::Output: Send,
    {
        ready(self.pool().run(exchange))
    }
}

impl RedisGenerations {
    /// A command's failure, as the store reports it.
    fn failed(&self, error: ::redis::RedisError) -> GenerationError {
        GenerationError::store(classify(error, self.pool().timeouts().call()))
    }
}

impl GenerationStore for RedisGenerations<RedisPool> {
    fn read(&self, counters: Counters<'_>, sum: &mut GenerationSum) -> Result<(), GenerationError> {
        let mut exchange = CounterExchange::read(counters, self.source());
        self.pool().run(&mut exchange)?;
        exchange.add_to(sum);
        Ok(())
    }

    fn bump(&self, counter: Counter<'_>) -> Result<(), GenerationError> {
        let bumping = self.source().bumping(counter);
        let mut exchange = CounterExchange::bump(counter, self.source());
        let bumped = self.pool().run(&mut exchange);
        bumping.ended(&bumped);
        bumped
    }

    fn tag_clock(&self, counters: Counters<'_>) -> Result<TagClock, GenerationError> {
        self.pool()
            .run(&mut ClockRead::new(counters, self.topology()))
    }

    fn tags_unchanged(
        &self,
        counters: Counters<'_>,
        tags: &Tags,
        since: TagClock,
    ) -> Result<bool, GenerationError> {
        let mut check = TagCheck::new(counters, tags, since, self.source());
        match check.is_done() {
            true => Ok(check.unchanged()),
            false => self.pool().run(&mut check),
        }
    }
}
