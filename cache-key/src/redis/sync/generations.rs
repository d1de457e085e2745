//! [`RedisGenerations`] on a [`RedisPool`]: the counters read and bumped
//! blocking, and the sweep of old generations.

use super::pool::RedisPool;
use crate::generation::{
    Counter, Counters, GenerationError, GenerationScope, GenerationStore, GenerationSum,
};
use crate::redis::driver::ready_now;
use crate::redis::generations::RedisGenerations;
use crate::redis::sweep::walk;
use crate::redis::sweep::{SweepOptions, SweepReport};
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
        ready_now(walk::sweep(self.pool(), self.source(), scope, options))
    }
}

impl GenerationStore for RedisGenerations<RedisPool> {
    fn read(&self, counters: Counters<'_>, sum: &mut GenerationSum) -> Result<(), GenerationError> {
        ready_now(self.read_counters(counters, sum))
    }

    fn bump(&self, counter: Counter<'_>) -> Result<(), GenerationError> {
        ready_now(self.bump_counter(counter))
    }

    fn tag_clock(&self, counters: Counters<'_>) -> Result<TagClock, GenerationError> {
        ready_now(self.read_tag_clock(counters))
    }

    fn tags_unchanged(
        &self,
        counters: Counters<'_>,
        tags: &Tags,
        since: TagClock,
    ) -> Result<bool, GenerationError> {
        ready_now(self.check_tags(counters, tags, since))
    }
}
