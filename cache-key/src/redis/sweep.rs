//! The sweep of old generations: its options, its report, and the commands
//! that walk each primary and judge what they return.

use std::collections::HashMap;

use ::redis::cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr};
use ::redis::{Cmd, RedisResult, Value, cmd};

use crate::decode::{DecodedKey, decode};
use crate::generation::{Counters, GenerationError, GenerationScope};
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
    /// Of these, keys of an older generation than their query's current
    /// one, deleted.
    pub deleted: u64,
}

/// The most current generations a sweep remembers at once (one per tenant
/// and operation met); past it, it forgets them and reads them again.
const REMEMBERED: usize = 4096;

/// The current generations a sweep has read, by tenant and operation.
#[derive(Default)]
pub(crate) struct Current {
    known: HashMap<(Option<String>, String), u64>,
}

impl Current {
    /// The current generation of `key`'s namespace, tenant and operation,
    /// read with `read` when not known yet.
    pub(crate) fn of(
        &mut self,
        key: &DecodedKey,
        read: impl FnOnce(Counters<'_>) -> Result<u64, GenerationError>,
    ) -> Result<u64, GenerationError> {
        let tenant = (!key.tenant().is_global()).then(|| {
            let mut tenant = String::new();
            for (i, part) in key.tenant().parts().iter().enumerate() {
                if i > 0 {
                    tenant.push(',');
                }
                push_escaped(&mut tenant, part);
            }
            tenant
        });
        let id = (tenant, key.operation().to_owned());
        if let Some(&generation) = self.known.get(&id) {
            return Ok(generation);
        }
        let generation = read(Counters::new(key.namespace(), id.0.as_deref(), &id.1))?;
        if self.known.len() >= REMEMBERED {
            self.known.clear();
        }
        self.known.insert(id, generation);
        Ok(generation)
    }
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
