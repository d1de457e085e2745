//! The sweep's walk, on either driver: each primary's keys `SCAN`ned a
//! batch at a time, each batch judged (its entries' first bytes and their
//! tags' counters read together) and its doomed keys `UNLINK`ed, on either
//! [`Driver`].

use ::redis::cmd;

use super::{Current, HeaderRead, SweepOptions, SweepReport, Verdict};
use crate::cache::BackendError;
use crate::decode::DecodedKey;
use crate::generation::{Counters, GenerationError, GenerationScope, GenerationSum};
use crate::pattern::KeyPattern;
use crate::redis::counters::{CounterExchange, CounterSource, Topology};
use crate::redis::driver::{Driver, exchange};
use crate::redis::envelope::EntryTags;
use crate::redis::sweep;
use crate::redis::tags::{TagCheck, TagChecks};
use crate::tag::TagScope;

/// Sweeps `scope` (see `RedisGenerations::sweep`), whose counters `source`
/// says where to find, on `driver`.
pub(crate) async fn sweep<D: Driver>(
    driver: &D,
    source: &CounterSource,
    scope: &GenerationScope,
    options: SweepOptions,
) -> Result<SweepReport, GenerationError> {
    let glob = KeyPattern::namespace(scope.counter().namespace()).glob();
    let primaries = primaries(driver, source.topology).await?;
    let mut report = SweepReport {
        primaries: primaries.len(),
        ..SweepReport::default()
    };
    let mut current = Current::default();
    let swept_tag = scope.counter().tag();
    for primary in primaries {
        let mut cursor = 0;
        loop {
            let scan = super::scan(cursor, &glob, options.batch_size());
            let routing = primary.map(sweep::primary_of);
            let reply = (driver.command(&scan, routing).await).map_err(GenerationError::store)?;
            let (next, keys): (u64, Vec<String>) =
                ::redis::from_redis_value(reply).map_err(unreadable)?;
            let mut doomed = Vec::new();
            // Entries their key does not judge: their tags decide, read for
            // the whole batch at once.
            let mut undecided = Vec::new();
            for key in keys {
                report.scanned += 1;
                let Some(decoded) = super::in_scope(scope, &key) else {
                    continue;
                };
                report.in_scope += 1;
                let id = Current::id(&decoded);
                let now = match current.get(&id) {
                    Some(now) => now,
                    None => {
                        let tenant = id.0.as_deref();
                        let counters = Counters::new(decoded.namespace(), tenant, &id.1);
                        let now = generation(driver, source, counters).await?;
                        current.remember(id, now);
                        now
                    }
                };
                match super::verdict_by_key(decoded.generation(), now, swept_tag) {
                    Some(verdict) => settle(&mut report, &mut doomed, key, verdict),
                    None => undecided.push((key, decoded, now)),
                }
            }
            if !undecided.is_empty() {
                let names: Vec<&str> = undecided.iter().map(|(key, ..)| key.as_str()).collect();
                let headers = exchange(driver, &mut HeaderRead::new(&names)).await?;
                // The checks of the values' tags, the batch's together.
                let (mut checking, mut checks) = (Vec::new(), Vec::new());
                for ((key, decoded, now), tags) in undecided.into_iter().zip(headers) {
                    match judge(driver, source, &decoded, now, swept_tag, tags).await? {
                        Judged::Verdict(verdict) => settle(&mut report, &mut doomed, key, verdict),
                        Judged::Check(check) => {
                            checking.push(key);
                            checks.push(*check);
                        }
                    }
                }
                if !checks.is_empty() {
                    let unchanged = exchange(driver, &mut TagChecks::new(checks)).await?;
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
                let unlink = cmd("UNLINK").arg(&doomed).take();
                let reply = driver.command(&unlink, None).await;
                let reply = reply.map_err(GenerationError::store)?;
                report.deleted += ::redis::from_redis_value::<u64>(reply).map_err(unreadable)?;
            }
            if next == 0 {
                break;
            }
            cursor = next;
        }
    }
    Ok(report)
}

/// One slot of each primary of a cluster; one `None` for a server.
async fn primaries<D: Driver>(
    driver: &D,
    topology: Topology,
) -> Result<Vec<Option<u16>>, GenerationError> {
    if topology == Topology::Server {
        return Ok(vec![None]);
    }
    let (command, routing) = sweep::cluster_slots();
    let slots = (driver.command(&command, Some(routing)).await).map_err(GenerationError::store)?;
    let primaries = sweep::primaries(slots).map_err(unreadable)?;
    Ok(primaries.into_iter().map(Some).collect())
}

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

/// What the sweep makes of the entry of key `decoded`, which its key alone
/// does not judge ([`super::verdict_by_key`]), `now` being the generation of
/// its namespace, tenant and operation counters and `tags` its entry's
/// (`None`: not an envelope of this version, kept). Above `now`: the key's
/// query is tagged, and its entry's `qtags` name the counters to add (an
/// entry without them is kept). When `swept_tag` is given (a tag's scope),
/// an entry at its current generation whose value holds that tag is ended
/// when one of its value's tags was bumped since its fill began, as a
/// strict read would judge it.
async fn judge<D: Driver>(
    driver: &D,
    source: &CounterSource,
    decoded: &DecodedKey,
    now: u64,
    swept_tag: Option<(TagScope, &str)>,
    tags: Option<EntryTags>,
) -> Result<Judged, GenerationError> {
    let Some(tags) = tags else {
        return Ok(Judged::Verdict(Verdict::Keep));
    };
    let generation_of_key = decoded.generation();
    let tenant = super::tenant_of(decoded);
    let counters = Counters::new(decoded.namespace(), tenant.as_deref(), decoded.operation());
    if generation_of_key > now {
        let Some(query_tags) = &tags.query else {
            return Ok(Judged::Verdict(Verdict::Keep));
        };
        if generation_of_key < generation(driver, source, counters.with_tags(query_tags)).await? {
            return Ok(Judged::Verdict(Verdict::Old));
        }
    }
    let check = match (swept_tag, &tags.value) {
        (Some(tag), Some(stamp)) if super::holds(stamp, tag) => {
            TagCheck::new(counters, &stamp.tags, stamp.since, source)
        }
        _ => return Ok(Judged::Verdict(Verdict::Keep)),
    };
    Ok(match check.is_done() {
        true if check.unchanged() => Judged::Verdict(Verdict::Keep),
        true => Judged::Verdict(Verdict::EndedByTag),
        false => Judged::Check(Box::new(check)),
    })
}

/// The generation `counters` sum to now.
async fn generation<D: Driver>(
    driver: &D,
    source: &CounterSource,
    counters: Counters<'_>,
) -> Result<u64, GenerationError> {
    let mut read = CounterExchange::read(counters, source);
    exchange(driver, &mut read).await?;
    let mut sum = GenerationSum::default();
    read.add_to(&mut sum);
    sum.finish(&counters)
}

/// A reply the sweep cannot read.
pub(crate) fn unreadable(error: impl std::fmt::Display) -> GenerationError {
    GenerationError::store(BackendError::protocol(error.to_string()))
}
