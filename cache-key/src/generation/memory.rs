//! [`MemoryGenerations`]: generation counters in the process, for a cache in
//! the process.

use std::fmt;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use foldhash::fast::{FoldHasher, RandomState};

use std::future::Future;

use super::counters::{Counter, Counters, GenerationSum};
use super::error::GenerationError;
use super::store::{AsyncGenerationStore, GenerationStore};
use crate::tag::{TagClock, TagScope, Tags};

/// Generation counters in the process: a fixed table of atomic counters.
///
/// - **Reads are lock-free**: a query's generation is one atomic load per
///   counter (three for a one-value tenant), no lock; `key_for` reads the
///   tenant from the key it writes, so nothing is allocated but the key.
/// - **Memory is bounded and fixed**: the counters are slots of three tables
///   (namespaces, tenants and operations within tenants), allocated once:
///   8 bytes per slot, about 1 MiB with the default
///   [`DEFAULT_SLOTS`](Self::DEFAULT_SLOTS), however many tenants there are.
/// - **No counter ever goes back**: a scope's counter is the slot its name
///   hashes to, and slots are never dropped, reset or reused at a lower
///   value. There is nothing to evict, so nothing can come back at a value an
///   old entry carries.
///
/// The price of a fixed table is sharing: scopes whose names hash to one slot
/// (the hash is seeded at random per store, so nobody can choose such names)
/// share a counter, and bumping one also invalidates the others. That costs
/// misses, never a stale read: the shared counter still only increases. With
/// `n` tenants in use and `s` slots, a tenant bump also invalidates about
/// `n / s` other tenants; size the table with [`with_slots`](Self::with_slots).
/// Namespaces have a table of their own, so bumping a tenant never
/// invalidates a namespace.
///
/// Counters start at 0 when the store is made and live as long as it does,
/// as an in-process cache does: keep one store for as long as the cache it
/// keys. A cache that outlives the process or is shared by several (Redis,
/// memcached) needs counters that do too:
/// `RedisGenerations` (feature `redis`). (Generations
/// stay small numbers here, so keys stay as short and as cheap to write as
/// with a generation you keep yourself.)
///
/// ```
/// use cache_key::{CacheKey, GenerationStore, MemoryGenerations, Scopes};
///
/// #[derive(CacheKey)]
/// #[cache_key(namespace = "library", operation = "list")]
/// struct BranchList { #[tenant] branch: u32, #[criterion] page: u32 }
///
/// let generations = MemoryGenerations::new();
/// let branch_2 = BranchList { branch: 2, page: 1 };
/// let branch_3 = BranchList { branch: 3, page: 1 };
/// let (key_2, key_3) = (generations.key_for(&branch_2)?, generations.key_for(&branch_3)?);
///
/// generations.invalidate(&BranchList::tenant_scope(&2)?)?;
/// assert_ne!(generations.key_for(&branch_2)?, key_2);
/// assert_eq!(generations.key_for(&branch_3)?, key_3);
/// # Ok::<(), cache_key::GenerationError>(())
/// ```
pub struct MemoryGenerations {
    hasher: RandomState,
    namespaces: Box<[AtomicU64]>,
    tenants: Box<[AtomicU64]>,
    operations: Box<[AtomicU64]>,
    /// Tags' counters: each the tag clock's time of its last bump (0 if
    /// never).
    tags: Box<[AtomicU64]>,
    /// The tag clock's start: its time is microseconds since then, plus one.
    born: Instant,
}

/// Slots for namespaces: there are few, and they are known at compile time.
const NAMESPACE_SLOTS: usize = 256;

impl MemoryGenerations {
    /// The default number of slots of the tenant table, and of the table of
    /// operations within tenants: 65,536 each (512 KiB each).
    pub const DEFAULT_SLOTS: usize = 1 << 16;

    /// A store with [`DEFAULT_SLOTS`](Self::DEFAULT_SLOTS) slots per table.
    pub fn new() -> Self {
        Self::with_slots(Self::DEFAULT_SLOTS)
    }

    /// A store with `slots` slots (rounded up to a power of two, at least 1)
    /// in the tenant table and in the table of operations within tenants.
    ///
    /// More slots, fewer scopes sharing a counter: with `n` tenants in use, a
    /// bump invalidates about `n / slots` other tenants besides its own.
    pub fn with_slots(slots: usize) -> Self {
        let table = |slots: usize| -> Box<[AtomicU64]> {
            let slots = slots.max(1).checked_next_power_of_two().unwrap_or(1 << 30);
            (0..slots).map(|_| AtomicU64::new(0)).collect()
        };
        MemoryGenerations {
            hasher: RandomState::default(),
            namespaces: table(NAMESPACE_SLOTS.min(slots.max(1))),
            tenants: table(slots),
            operations: table(slots),
            tags: table(slots),
            born: Instant::now(),
        }
    }

    /// The number of slots of the tenant table (and of the operation table).
    pub fn slots(&self) -> usize {
        self.tenants.len()
    }

    /// Hashes the counters of `namespace`, then (with `tenant`) of each run
    /// of its leading values, then (with `operation`) of the operation
    /// within it, calling `visit` with each counter's slot, outermost first;
    /// returns where the slots of tags' counters are hashed from.
    ///
    /// Reads and bumps both go through here, so a counter always hashes
    /// the same way: one hasher fed the namespace, then each of the tenant's
    /// values, then the operation, its state read at each step. Each table
    /// holds one kind of counter, and within a table two counters feed
    /// different text (a raw `,` never occurs inside an escaped value), so
    /// two counters share a slot only when their hashes do.
    #[inline(always)]
    fn walk<'s, E>(
        &'s self,
        namespace: &str,
        tenant: Option<&str>,
        operation: Option<&str>,
        mut visit: impl FnMut(&'s AtomicU64) -> Result<(), E>,
    ) -> Result<TagRoots<'s>, E> {
        let mut hasher = self.hasher.build_hasher();
        hasher.write(namespace.as_bytes());
        visit(pick(&self.namespaces, hasher.finish()))?;
        let past_namespace = hasher.clone();
        // The global keys (an empty tenant) have no tenant counter.
        if let Some(tenant) = tenant.filter(|tenant| !tenant.is_empty()) {
            // Each value, then the next: a short loop beats `split`'s search.
            let mut rest = tenant.as_bytes();
            loop {
                let end = rest.iter().position(|&b| b == b',').unwrap_or(rest.len());
                hasher.write(&rest[..end]);
                visit(pick(&self.tenants, hasher.finish()))?;
                match rest.get(end + 1..) {
                    Some(next) => rest = next,
                    None => break,
                }
            }
        }
        let roots = TagRoots {
            namespace: past_namespace,
            tenant: hasher.clone(),
            table: &self.tags,
        };
        if let Some(operation) = operation {
            hasher.write(operation.as_bytes());
            visit(pick(&self.operations, hasher.finish()))?;
        }
        Ok(roots)
    }

    /// Where the slots of the tags of `namespace` and `tenant` (escaped, as
    /// a key writes it) are hashed from.
    fn tag_roots(&self, namespace: &str, tenant: Option<&str>) -> TagRoots<'_> {
        let roots = self.walk(namespace, tenant, None, |_| {
            Ok::<(), std::convert::Infallible>(())
        });
        let Ok(roots) = roots;
        roots
    }

    /// The tag clock now: microseconds since the store was made, plus one
    /// (so that 0 is a tag never bumped); it never goes back.
    fn tag_now(&self) -> u64 {
        u64::try_from(self.born.elapsed().as_micros())
            .unwrap_or(u64::MAX)
            .saturating_add(1)
    }

    /// The slot holding `counter`: the last one its walk visits.
    fn slot(&self, counter: Counter<'_>) -> &AtomicU64 {
        let mut last = &self.namespaces[0];
        let walked = self.walk(
            counter.namespace(),
            counter.tenant(),
            counter.operation(),
            |slot| {
                last = slot;
                Ok::<(), std::convert::Infallible>(())
            },
        );
        let Ok(_) = walked;
        last
    }
}

/// The hasher's state past a namespace and past a tenant: a tag's slot is
/// hashed on from the one its scope names, so that a query's read hashes
/// neither again.
struct TagRoots<'s> {
    namespace: FoldHasher<'s>,
    /// Past the namespace and each of the tenant's values (the namespace's
    /// state again for the global keys).
    tenant: FoldHasher<'s>,
    table: &'s [AtomicU64],
}

impl<'s> TagRoots<'s> {
    /// The slot of the counter of `tag` (its scope and escaped
    /// `name=value`). The mark after the root keeps a tag of the global keys'
    /// tenant (whose root is the namespace's) apart from a global tag.
    #[inline(always)]
    fn slot(&self, (scope, tag): (TagScope, &str)) -> &'s AtomicU64 {
        let (mut hasher, mark) = match scope {
            TagScope::Tenant => (self.tenant.clone(), b'#'),
            TagScope::Global => (self.namespace.clone(), b'@'),
        };
        hasher.write_u8(mark);
        hasher.write(tag.as_bytes());
        pick(self.table, hasher.finish())
    }
}

/// The slot of `table` for `hash`; table lengths are powers of two.
#[inline]
fn pick(table: &[AtomicU64], hash: u64) -> &AtomicU64 {
    &table[(hash as usize) & (table.len() - 1)]
}

impl Default for MemoryGenerations {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for MemoryGenerations {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryGenerations")
            .field("slots", &self.slots())
            .finish_non_exhaustive()
    }
}

impl GenerationStore for MemoryGenerations {
    #[inline(always)]
    fn read(&self, counters: Counters<'_>, sum: &mut GenerationSum) -> Result<(), GenerationError> {
        // A global key's operation counter is among the empty tenant's.
        let tenant = Some(counters.tenant().unwrap_or_default());
        let roots = self.walk(
            counters.namespace(),
            tenant,
            Some(counters.operation()),
            |slot| {
                sum.add(slot.load(Ordering::SeqCst));
                Ok::<(), GenerationError>(())
            },
        )?;
        for tag in counters.tag_entries() {
            sum.add(roots.slot(tag).load(Ordering::SeqCst));
        }
        Ok(())
    }

    /// A tag's counter becomes the tag clock's time (at least one more than
    /// it was), so that an entry filled since the clock said `t` is ended
    /// by the bump exactly when the counter is not below `t`.
    fn bump(&self, counter: Counter<'_>) -> Result<(), GenerationError> {
        let (slot, now) = match counter.tag() {
            Some(tag) => {
                let roots = self.tag_roots(counter.namespace(), counter.tenant());
                (roots.slot(tag), self.tag_now())
            }
            None => (self.slot(counter), 0),
        };
        slot.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |value| {
            value.checked_add(1).map(|next| next.max(now))
        })
        .map(drop)
        .map_err(|_| GenerationError::overflow())
    }

    fn tag_clock(&self, _counters: Counters<'_>) -> Result<TagClock, GenerationError> {
        let now = self.tag_now();
        Ok(TagClock {
            tenant: now,
            global: now,
        })
    }

    fn tags_unchanged(
        &self,
        counters: Counters<'_>,
        tags: &Tags,
        since: TagClock,
    ) -> Result<bool, GenerationError> {
        let roots = self.tag_roots(counters.namespace(), counters.tenant());
        Ok(tags
            .iter()
            .all(|tag| roots.slot(tag).load(Ordering::SeqCst) < since.of(tag.0)))
    }
}

/// Reads and bumps never wait: the futures are ready at once.
impl AsyncGenerationStore for MemoryGenerations {
    fn tag_clock<'a>(
        &'a self,
        counters: Counters<'a>,
    ) -> impl Future<Output = Result<TagClock, GenerationError>> + Send + 'a {
        std::future::ready(GenerationStore::tag_clock(self, counters))
    }

    fn tags_unchanged<'a>(
        &'a self,
        counters: Counters<'a>,
        tags: &'a Tags,
        since: TagClock,
    ) -> impl Future<Output = Result<bool, GenerationError>> + Send + 'a {
        std::future::ready(GenerationStore::tags_unchanged(self, counters, tags, since))
    }

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
