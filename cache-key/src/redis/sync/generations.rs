//! [`RedisGenerations`] on a [`RedisPool`]: the counters read and bumped
//! blocking, and the sweep of old generations.

use ::redis::cmd;

use super::pool::RedisPool;
use crate::decode::DecodedKey;
use crate::generation::{
    Counter, Counters, GenerationError, GenerationScope, GenerationStore, GenerationSum,
};
use crate::pattern::KeyPattern;
use crate::redis::counters::{CounterExchange, Topology};
use crate::redis::envelope::EntryTags;
use crate::redis::generations::RedisGenerations;
use crate::redis::sweep::{self, Current, HeaderRead, SweepOptions, SweepReport, Verdict};
use crate::redis::tags::{ClockRead, TagCheck, TagChecks};
use crate::redis::transport::classify;
use crate::tag::{TagClock, TagScope, Tags};

/// What the sweep makes of an entry from its tags: a verdict, or the check
/// of its value's tags' counters that decides (sent with the batch's others).
enum Judged {
    Verdict(Verdict),
    Check(Box<TagCheck>),
}

/// Counts `verdict` on `key` in `report`, and dooms the key when it is
/// deleted.
fn settle(report: &mut SweepReport, doomed: &mut Vec<String>, key: String, verdict: Verdict) {
    match verdict {
        Verdict::Keep => {}
        Verdict::Old => doomed.push(key),
        Verdict::EndedByTag => {
            report.by_tag += 1;
            doomed.push(key);
        }
    }
}

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
                // Entries their key does not judge: their tags decide, read
                // for the whole batch at once.
                let mut undecided = Vec::new();
                for key in keys {
                    report.scanned += 1;
                    let Some(decoded) = sweep::in_scope(scope, &key) else {
                        continue;
                    };
                    report.in_scope += 1;
                    let now = current.of(&decoded, |counters| self.generation(counters))?;
                    match sweep::verdict_by_key(decoded.generation(), now, swept_tag) {
                        Some(verdict) => settle(&mut report, &mut doomed, key, verdict),
                        None => undecided.push((key, decoded, now)),
                    }
                }
                if !undecided.is_empty() {
                    let names: Vec<&str> = undecided.iter().map(|(key, ..)| key.as_str()).collect();
                    let headers = self.pool().run(&mut HeaderRead::new(&names))?;
                    // The checks of the values' tags, the batch's together.
                    let (mut checking, mut checks) = (Vec::new(), Vec::new());
                    for ((key, decoded, now), tags) in undecided.into_iter().zip(headers) {
                        match self.judge(&decoded, now, swept_tag, tags)? {
                            Judged::Verdict(verdict) => {
                                settle(&mut report, &mut doomed, key, verdict);
                            }
                            Judged::Check(check) => {
                                checking.push(key);
                                checks.push(*check);
                            }
                        }
                    }
                    if !checks.is_empty() {
                        let unchanged = self.pool().run(&mut TagChecks::new(checks))?;
                        for (key, unchanged) in checking.into_iter().zip(unchanged) {
                            let verdict = match unchanged {
                                true => Verdict::Keep,
                                false => Verdict::EndedByTag,
                            };
                            settle(&mut report, &mut doomed, key, verdict);
                        }
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

    /// Whether the sweep deletes the entry of key `decoded`, which its key
    /// alone does not judge ([`sweep::verdict_by_key`]), `now` being the
    /// generation of its namespace, tenant and operation counters and `tags`
    /// its entry's (`None`: not an envelope of this version, kept). Above
    /// `now`: the key's query is tagged, and its entry's `qtags` name the
    /// counters to add (an entry without them is kept). When `swept_tag` is
    /// given (a tag's scope), an entry at its current generation whose value
    /// holds that tag is ended when one of its value's tags was bumped since
    /// its fill began, as a strict read would judge it.
    fn judge(
        &self,
        decoded: &DecodedKey,
        now: u64,
        swept_tag: Option<(TagScope, &str)>,
        tags: Option<EntryTags>,
    ) -> Result<Judged, GenerationError> {
        let Some(tags) = tags else {
            return Ok(Judged::Verdict(Verdict::Keep));
        };
        let generation = decoded.generation();
        let tenant = sweep::tenant_of(decoded);
        let counters = Counters::new(decoded.namespace(), tenant.as_deref(), decoded.operation());
        if generation > now {
            let Some(query_tags) = &tags.query else {
                return Ok(Judged::Verdict(Verdict::Keep));
            };
            if generation < self.generation(counters.with_tags(query_tags))? {
                return Ok(Judged::Verdict(Verdict::Old));
            }
        }
        let check = match (swept_tag, &tags.value) {
            (Some(tag), Some(stamp)) if sweep::holds(stamp, tag) => {
                TagCheck::new(counters, &stamp.tags, stamp.since, self.source())
            }
            _ => return Ok(Judged::Verdict(Verdict::Keep)),
        };
        Ok(match check.is_done() {
            true if check.unchanged() => Judged::Verdict(Verdict::Keep),
            true => Judged::Verdict(Verdict::EndedByTag),
            false => Judged::Check(Box::new(check)),
        })
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
