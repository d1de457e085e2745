//! The sweep of old generations: its options, its report, and the commands
//! that walk each primary and judge what they return (`walk`: the walk
//! itself, on either driver).

pub(crate) mod walk;

use std::collections::HashMap;

use ::redis::cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr};
use ::redis::{Cmd, RedisResult, Value, cmd};

use super::batch::{Batch, Exchange, Replies, Sent};
use super::envelope::{EntryTags, HeaderTags, header_tags};
use crate::cache::BackendError;
use crate::decode::{DecodedKey, decode};
use crate::generation::{GenerationError, GenerationScope};
use crate::tag::{TagScope, TagStamp};
use cache_key_format::escape::push_escaped;

/// How a [sweep](super::RedisGenerations::sweep) walks the keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SweepOptions {
    batch: usize,
}

impl Default for SweepOptions {
    fn default() -> Self {
        SweepOptions { batch: 500 }
    }
}

impl SweepOptions {
    /// Keys asked for per `SCAN` call (its `COUNT`), and so the most keys
    /// held in memory and deleted by one `UNLINK`. Default 500.
    pub fn batch(mut self, batch: usize) -> Self {
        self.batch = batch.max(1);
        self
    }

    pub(crate) fn batch_size(&self) -> usize {
        self.batch
    }
}

/// What a [sweep](super::RedisGenerations::sweep) did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct SweepReport {
    /// Primaries scanned (1 for a single server).
    pub primaries: usize,
    /// Keys `SCAN` returned (with the namespace's glob).
    pub scanned: u64,
    /// Of these, keys in the scope.
    pub in_scope: u64,
    /// Of these, keys deleted: those of an older generation than their
    /// query's current one, and (sweeping a tag's scope) entries whose
    /// value holds the tag, bumped since their fill began.
    pub deleted: u64,
    /// Of the deleted, entries of the current generation deleted because
    /// their value holds the swept tag and a tag of theirs was bumped.
    pub by_tag: u64,
}

/// The most current generations a sweep remembers at once (one per tenant
/// and operation met); past it, it forgets them and reads them again.
const REMEMBERED: usize = 4096;

/// The current generations a sweep has read, by tenant and operation.
#[derive(Default)]
pub(crate) struct Current {
    known: HashMap<CurrentId, u64>,
}

/// What a current generation is known by: a key's tenant as keys write it
/// (`None` for a global key) and its operation.
pub(crate) type CurrentId = (Option<String>, String);

impl Current {
    /// What `key`'s current generation is known by.
    pub(crate) fn id(key: &DecodedKey) -> CurrentId {
        (tenant_of(key), key.operation().to_owned())
    }

    /// The generation read for `id`, if any.
    pub(crate) fn get(&self, id: &CurrentId) -> Option<u64> {
        self.known.get(id).copied()
    }

    /// Remembers `generation` for `id` (forgetting every other past
    /// [`REMEMBERED`]).
    pub(crate) fn remember(&mut self, id: CurrentId, generation: u64) {
        if self.known.len() >= REMEMBERED {
            self.known.clear();
        }
        self.known.insert(id, generation);
    }
}

/// `key`'s tenant as keys write it (escaped values joined by `,`), `None`
/// for a global key.
pub(crate) fn tenant_of(key: &DecodedKey) -> Option<String> {
    (!key.tenant().is_global()).then(|| {
        let mut tenant = String::new();
        for (i, part) in key.tenant().parts().iter().enumerate() {
            if i > 0 {
                tenant.push(',');
            }
            push_escaped(&mut tenant, part);
        }
        tenant
    })
}

/// The bytes of an entry a sweep reads first for its tags: the header of
/// an entry with up to some 200 tags.
pub(crate) const HEADER_BYTES: usize = 8192;

/// `GETRANGE key 0 HEADER_BYTES-1`: an entry's first bytes.
pub(crate) fn entry_prefix(key: &str) -> Cmd {
    cmd("GETRANGE").arg(key).arg(0).arg(HEADER_BYTES - 1).take()
}

/// The tags of a batch of entries (`None` for an entry that is not an
/// envelope of this version, or is gone), read together: each entry's first
/// bytes ([`entry_prefix`]) in one round trip, then the whole of those whose
/// header runs past them in a second.
pub(crate) struct HeaderRead<'k> {
    keys: &'k [&'k str],
    found: Vec<Option<EntryTags>>,
    /// Whether the first bytes were read; then, the entries to read whole.
    prefixes_read: bool,
    whole: Vec<usize>,
}

impl<'k> HeaderRead<'k> {
    pub(crate) fn new(keys: &'k [&'k str]) -> Self {
        HeaderRead {
            keys,
            found: Vec::with_capacity(keys.len()),
            prefixes_read: false,
            whole: Vec::new(),
        }
    }

    /// Reads `replies`, one per command sent; `Ok(true)` when every
    /// entry's tags are known.
    fn judge(&mut self, replies: Replies) -> Result<bool, GenerationError> {
        let reading_prefixes = !self.prefixes_read;
        let sent = match reading_prefixes {
            true => self.keys.len(),
            false => self.whole.len(),
        };
        if replies.len() != sent {
            return Err(GenerationError::store(BackendError::protocol(format!(
                "{} replies to {sent} reads of entries",
                replies.len()
            ))));
        }
        self.prefixes_read = true;
        let whole = std::mem::take(&mut self.whole);
        for (i, reply) in replies.into_iter().enumerate() {
            let bytes = match reply {
                Ok(Value::BulkString(bytes)) => bytes,
                // Gone since the scan, or another Redis type: not an entry.
                Ok(Value::Nil) => Vec::new(),
                Err(error) if error.code() == Some("WRONGTYPE") => Vec::new(),
                Err(error) => return Err(GenerationError::store(BackendError::refused(error))),
                Ok(other) => {
                    return Err(GenerationError::store(BackendError::protocol(format!(
                        "an entry read answered {other:?}"
                    ))));
                }
            };
            if reading_prefixes {
                let tags = match header_tags(&bytes, bytes.len() < HEADER_BYTES) {
                    HeaderTags::Found(tags) => Some(tags),
                    HeaderTags::Truncated => {
                        self.whole.push(i);
                        None
                    }
                    HeaderTags::Foreign => None,
                };
                self.found.push(tags);
            } else if let HeaderTags::Found(tags) = header_tags(&bytes, true) {
                self.found[whole[i]] = Some(tags);
            }
        }
        Ok(self.whole.is_empty())
    }
}

impl Exchange for HeaderRead<'_> {
    type Output = Result<Vec<Option<EntryTags>>, GenerationError>;

    fn send(&mut self, batch: &mut Batch) {
        match self.prefixes_read {
            false => self.keys.iter().for_each(|key| {
                batch.push(entry_prefix(key));
            }),
            true => self.whole.iter().for_each(|&i| {
                batch.push(cmd("GET").arg(self.keys[i]).take());
            }),
        }
    }

    fn receive(&mut self, replies: Sent) -> Option<Self::Output> {
        let judged = replies
            .map_err(GenerationError::store)
            .and_then(|answers| self.judge(answers.replies));
        match judged {
            Ok(true) => Some(Ok(std::mem::take(&mut self.found))),
            Ok(false) => None,
            Err(error) => Some(Err(error)),
        }
    }
}

/// Whether `stamp`, an entry's value's tags, holds `tag` (a tag scope's).
pub(crate) fn holds(stamp: &TagStamp, tag: (TagScope, &str)) -> bool {
    stamp.tags.iter().any(|held| held == tag)
}

/// What a sweep does with an entry of its scope at `generation`, its
/// query's current one being `now`, when its key alone says: an old
/// generation, or (sweeping no tag) the current one; `None` when its
/// entry's tags decide.
pub(crate) fn verdict_by_key(
    generation: u64,
    now: u64,
    swept_tag: Option<(TagScope, &str)>,
) -> Option<Verdict> {
    match generation.cmp(&now) {
        std::cmp::Ordering::Less => Some(Verdict::Old),
        std::cmp::Ordering::Equal if swept_tag.is_none() => Some(Verdict::Keep),
        _ => None,
    }
}

/// What a sweep does with an entry of its scope.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Readable: kept.
    Keep,
    /// Of an older generation than its query's current one: deleted.
    Old,
    /// At its current generation, but its value holds the swept tag, and a
    /// tag of its value was bumped since its fill began: deleted.
    EndedByTag,
}

/// A key `SCAN` returned, decoded when it is one of `scope`'s.
pub(crate) fn in_scope(scope: &GenerationScope, key: &str) -> Option<DecodedKey> {
    decode(key).ok().filter(|decoded| scope.contains(decoded))
}

/// `SCAN cursor MATCH glob COUNT count`.
pub(crate) fn scan(cursor: u64, glob: &str, count: usize) -> Cmd {
    cmd("SCAN")
        .arg(cursor)
        .arg("MATCH")
        .arg(glob)
        .arg("COUNT")
        .arg(count)
        .take()
}

/// Where a cluster's `SCAN` of the primary owning `slot` goes.
pub(crate) fn primary_of(slot: u16) -> RoutingInfo {
    RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(Route::new(
        slot,
        SlotAddr::Master,
    )))
}

/// `CLUSTER SLOTS`, asked of any primary.
pub(crate) fn cluster_slots() -> (Cmd, RoutingInfo) {
    (
        cmd("CLUSTER").arg("SLOTS").take(),
        RoutingInfo::SingleNode(SingleNodeRoutingInfo::RandomPrimary),
    )
}

/// One slot owned by each primary, from `CLUSTER SLOTS`'s reply.
pub(crate) fn primaries(slots: Value) -> RedisResult<Vec<u16>> {
    // Each range: [start, end, [host, port, node id, ...], replicas...].
    let ranges: Vec<Vec<Value>> = ::redis::from_redis_value(slots)?;
    let mut first_slot: HashMap<Vec<u8>, u16> = HashMap::new();
    for range in ranges {
        let (Some(start), Some(Value::Array(primary))) = (range.first(), range.get(2)) else {
            continue;
        };
        let start: u16 = ::redis::from_redis_value_ref(start)?;
        let id = match primary.get(2) {
            Some(Value::BulkString(id)) => id.clone(),
            _ => format!("{:?}{:?}", primary.first(), primary.get(1)).into_bytes(),
        };
        let slot = first_slot.entry(id).or_insert(start);
        *slot = (*slot).min(start);
    }
    let mut slots: Vec<u16> = first_slot.into_values().collect();
    slots.sort_unstable();
    Ok(slots)
}
