//! Generations: the invalidation counters a key's `g` segment is made of, the
//! scopes they invalidate, and the stores that keep them.
//!
//! # One number, several scopes
//!
//! A key carries one generation, yet a namespace, one tenant (and, for a
//! compound tenant, each run of its leading values: an organization with all
//! its repositories) and one operation within a tenant can each be
//! invalidated on its own. Each scope has a **counter**; a query's generation
//! is the **sum** of the counters of every scope that encloses it:
//!
//! ```text
//! generation(query) = namespace + tenant prefix 1 + ... + whole tenant + operation in tenant
//! ```
//!
//! Every counter only ever increases, so:
//!
//! - bumping any enclosing counter raises the sum, so every key written
//!   before the bump is named with a smaller generation than any key read
//!   after it: the old entries are unreachable at once;
//! - the sum never decreases, so once a query's generation has moved past a
//!   value it never comes back to it: no bump sequence makes an old entry
//!   reachable again.
//!
//! That argument holds only if no counter ever goes back, including a counter
//! a store drops and recreates (a bounded map evicting it, Redis evicting the
//! key or restarting without persistence). Each store says how it keeps that
//! promise: [`MemoryGenerations`] never drops a counter (a fixed table of
//! counters, shared by scopes that hash alike), and
//! `RedisGenerations` (feature `redis`) recreates a lost
//! counter at the server's clock, above any value it had. Two scopes sharing
//! a counter only ever cost extra misses (bumping one invalidates both), never
//! a stale read, since the shared counter still only increases.
//!
//! # Typed entry points
//!
//! The generation is read from the query itself
//! ([`GenerationStore::key_for`]): namespace and operation come from its
//! derived [`CacheKey::KEY_SCHEMA`](crate::CacheKey::KEY_SCHEMA), the tenant from its own fields, so a key
//! can only be built with its own tenant's counters. Invalidating takes a
//! query type and tenant values ([`GenerationScope`]), never a hand-written
//! name that could be misspelled.
//!
//! # The race rule
//!
//! Read the key (and so the generation) **before** asking the origin, and
//! store the origin's answer under that key. A bump that lands while the
//! origin works then leaves the answer under the old generation, which no
//! reader asks for any more. Building the key after the origin answered would
//! store an answer computed from old data under the new generation: a stale
//! read that no later bump can notice.
//!
//! Counters are read one at a time (not as one snapshot), and that is
//! enough. Say a bump `B` of a counter enclosing query `q` returned, then a
//! reader `R` of `q` reads generation `g` and finds an entry a writer `W`
//! stored under `g`. Every counter `R` read was at least its value when `B`
//! returned, so `g` is at least the sum right after `B`. Had `W` read all its
//! counters before `B` wrote, each would have been at most its value then,
//! and `B`'s own counter below its value after `B`: `W`'s sum would be smaller
//! than `g`. So `W` read some counter after `B` wrote, and asked the origin
//! after that, after the data change that `B` follows: `R` gets an answer at
//! least as new as the change. This needs each counter to be linearizable
//! (an atomic, a Redis key on its primary), nothing more, and holds with any
//! number of threads and processes bumping.
//!
//! # Old generations
//!
//! Entries of old generations are unreachable but still take memory until the
//! cache evicts them. Give entries a time to live (the primary answer: the
//! longest an old generation lingers); in Redis,
//! `RedisGenerations::sweep` (feature `redis`)
//! also deletes a scope's entries of older generations in batches.

mod counters;
mod draft;
mod error;
mod memory;
mod scope;
mod store;

pub use self::counters::{Counter, CounterKind, Counters, CountersIter, GenerationSum};
#[cfg(feature = "redis")]
pub(crate) use self::counters::{tag_counters, with_thread_buffer};
#[cfg(feature = "redis")]
pub(crate) use self::draft::KeyDraft;
#[cfg(any(feature = "moka", feature = "redis"))]
pub(crate) use self::draft::QueryCounters;
pub use self::error::{GenerationError, GenerationErrorKind};
pub use self::memory::MemoryGenerations;
pub use self::scope::{GenerationScope, HasTenant, Scopes, TenantRefs};
pub use self::store::{AsyncGenerationStore, GenerationStore};
