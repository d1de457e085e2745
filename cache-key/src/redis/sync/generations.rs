//! [`RedisGenerations`] on a [`RedisPool`]: the counters read and bumped
//! blocking, and the sweep of old generations.

use ::redis::{Cmd, cmd};

use super::pool::RedisPool;
use crate::decode::DecodedKey;
use crate::generation::{
    Counter, Counters, GenerationError, GenerationScope, GenerationStore, GenerationSum,
};
use crate::pattern::KeyPattern;
use crate::redis::counters::{CounterExchange, Topology};
use crate::redis::envelope::{HeaderTags, header_tags};
use crate::redis::generations::RedisGenerations;
use crate::redis::sweep::{self, Current, SweepOptions, SweepReport};
use crate::redis::tags::{ClockRead, TagCheck};
use crate::redis::transport::classify;
use crate::tag::{TagClock, TagScope, Tags};

/// The blocking driver: a [`GenerationStore`], and the sweep.
impl RedisGenerations {
    /// Deletes the entries of `scope` nobody can read any more: those whose
    /// generation is older than their query's current one, and, sweeping a
    /// tag's scope, those whose value's tags a bump of that tag ended.
    ///
    /// Each primary is walked with `SCAN` and the glob of the scope's
    /// namespace ([`KeyPattern::namespace`], glob-escaped), `batch` keys at a
    /// time; each key returned is decoded and kept only when the scope
    /// [`contains`](GenerationScope::contains) it (the exact test: a glob's
    /// `*` also matches `:`) and its generation is below the current
    /// generation of its namespace, tenant and operation (read from the
    /// counters, once per tenant and operation). Those are deleted with
    /// `UNLINK`, one call per batch: memory stays bounded by the batch,
    /// however many keys there are. Counters (whose names are not keys) are
    /// never deleted.
    ///
    /// Sweeping a tag's scope ([`GenerationScope::tag_unchecked`], the
    /// derive's `tag_scope_*`) also reads the first bytes (`GETRANGE`) of
    /// each entry of the scope at its current generation, and deletes it when
    /// its value holds the tag
    /// ([`CachedQuery::VALUE_TAGS`](crate::cache::CachedQuery::VALUE_TAGS))
    /// and one of its tags was bumped since its fill began (their counters
    /// read as a strict read would, one round trip per such entry): the
    /// entries that bump ended, which a read would refuse. Values that are
    /// not an envelope of this version are left alone. An entry whose
    /// *query* is tagged holds that tag in its generation, which its key
    /// does not split by counter: a bump of it leaves the entry to its time
    /// to live.
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
        let glob = KeyPattern::namespace(scope.counter().namespace()).glob();
        let failed = |error| GenerationError::store(classify(error, self.pool().timeouts().call()));
        let primaries = self.primaries()?;
        let mut report = SweepReport {
            primaries: primaries.len(),
            ..SweepReport::default()
        };
        let mut current = Current::default();
        let swept_tag = scope.counter().tag();
        for primary in primaries {
            let mut cursor = 0;
            loop {
                let scan = sweep::scan(cursor, &glob, options.batch_size());
                let mut connection = self.pool().get().map_err(GenerationError::store)?;
                let reply = match primary {
                    Some(slot) => connection.route(&scan, sweep::primary_of(slot)),
                    None => scan.query(&mut connection),
                };
                drop(connection);
                let (next, keys): (u64, Vec<String>) =
                    ::redis::from_redis_value(reply.map_err(failed)?)
                        .map_err(|error| failed(error.into()))?;
                let mut doomed = Vec::new();
                for key in keys {
                    report.scanned += 1;
                    let Some(decoded) = sweep::in_scope(scope, &key) else {
                        continue;
                    };
                    report.in_scope += 1;
                    let now = current.of(&decoded, |counters| self.generation(counters))?;
                    if decoded.generation() < now {
                        doomed.push(key);
                    } else if let Some(tag) = swept_tag
                        && self.holds_a_bumped_tag(&key, &decoded, tag)?
                    {
                        report.by_tag += 1;
                        doomed.push(key);
                    }
                }
                if !doomed.is_empty() {
                    let deleted: u64 = cmd("UNLINK")
                        .arg(&doomed)
                        .query(&mut self.pool().get().map_err(GenerationError::store)?)
                        .map_err(failed)?;
                    report.deleted += deleted;
                }
                if next == 0 {
                    break;
                }
                cursor = next;
            }
        }
        Ok(report)
    }

    /// Whether the entry under `key` (decoded: `decoded`) holds `tag` among
    /// its value's tags, one of which was bumped since its fill began: what a
    /// strict read would find and refuse. An entry that is not an envelope
    /// of this version (another Redis type, a foreign value) is left alone.
    fn holds_a_bumped_tag(
        &self,
        key: &str,
        decoded: &DecodedKey,
        tag: (TagScope, &str),
    ) -> Result<bool, GenerationError> {
        let failed = |error| GenerationError::store(classify(error, self.pool().timeouts().call()));
        let mut connection = self.pool().get().map_err(GenerationError::store)?;
        let mut read = |command: Cmd| -> Result<Option<Vec<u8>>, GenerationError> {
            match command.query::<Vec<u8>>(&mut connection) {
                Ok(bytes) => Ok(Some(bytes)),
                Err(error) if error.code() == Some("WRONGTYPE") => Ok(None),
                Err(error) => Err(failed(error)),
            }
        };
        let Some(prefix) = read(sweep::entry_prefix(key))? else {
            return Ok(false);
        };
        let stamp = match header_tags(&prefix, prefix.len() < sweep::HEADER_BYTES) {
            HeaderTags::Found(stamp) => stamp,
            HeaderTags::Truncated => match read(cmd("GET").arg(key).take())? {
                Some(whole) => match header_tags(&whole, true) {
                    HeaderTags::Found(stamp) => stamp,
                    HeaderTags::Truncated | HeaderTags::Foreign => None,
                },
                None => None,
            },
            HeaderTags::Foreign => None,
        };
        drop(connection);
        let Some(stamp) = stamp.filter(|stamp| sweep::holds(stamp, tag)) else {
            return Ok(false);
        };
        let tenant = sweep::tenant_of(decoded);
        let counters = Counters::new(decoded.namespace(), tenant.as_deref(), decoded.operation());
        Ok(!self.tags_unchanged(counters, &stamp.tags, stamp.since)?)
    }

    /// One slot of each primary of a cluster; one `None` for a server.
    fn primaries(&self) -> Result<Vec<Option<u16>>, GenerationError> {
        if self.topology() == Topology::Server {
            return Ok(vec![None]);
        }
        let failed = |error| GenerationError::store(classify(error, self.pool().timeouts().call()));
        let (command, routing) = sweep::cluster_slots();
        let mut connection = self.pool().get().map_err(GenerationError::store)?;
        let slots = connection.route(&command, routing).map_err(failed)?;
        let primaries = sweep::primaries(slots).map_err(failed)?;
        Ok(primaries.into_iter().map(Some).collect())
    }

    fn generation(&self, counters: Counters<'_>) -> Result<u64, GenerationError> {
        let mut sum = GenerationSum::default();
        self.read(counters, &mut sum)?;
        sum.finish(&counters)
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
        let mut exchange = CounterExchange::bump(counter, self.source());
        let bumped = self.pool().run(&mut exchange);
        self.source().bumped(counter, bumped.is_ok());
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
