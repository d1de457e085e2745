//! [`Stats`]: a snapshot of what a cache counted, and why entries were
//! rejected ([`RejectReason`], [`Rejected`]).

/// Why an entry found under a query's key was not served (it counts as a miss).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RejectReason {
    /// The entry was written for another value id than the query's
    /// ([`CachedQuery::VALUE_ID`](crate::cache::CachedQuery::VALUE_ID)).
    ValueType,
    /// The entry was written for another query (its full criteria differ).
    Query,
    /// The entry was written under another key schema.
    Schema,
    /// The entry's envelope has a format version this crate does not read.
    Version,
    /// The entry's bytes do not decode (not an envelope, or a value that does
    /// not deserialize).
    Undecodable,
    /// The key holds another Redis type than a string (a list, a hash...).
    WrongType,
    /// The entry's value holds a tag whose counter the read that found it
    /// had to make (missing, or written by another server process): the
    /// fill began before the counter existed, so it cannot be told from one
    /// a bump ended. The first fill of a new entity on Redis, or an entry
    /// whose counter expired or was lost; a moka cache serves such a first
    /// fill. Invalidating the entity's tag ahead of reads (or a change
    /// log's bump of its INSERT) makes its counter first.
    NewTagCounter,
}

/// How many entries were rejected, by reason.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Rejected {
    /// Another value id.
    pub value_type: u64,
    /// Another query.
    pub query: u64,
    /// Another schema.
    pub schema: u64,
    /// Another envelope version.
    pub version: u64,
    /// Bytes that do not decode.
    pub undecodable: u64,
    /// Another Redis type under the key.
    pub wrong_type: u64,
    /// A value tag whose counter the read had to make
    /// ([`RejectReason::NewTagCounter`]).
    pub new_tag_counter: u64,
}

impl Rejected {
    /// Every rejection, whatever the reason.
    pub fn total(&self) -> u64 {
        self.value_type
            + self.query
            + self.schema
            + self.version
            + self.undecodable
            + self.wrong_type
            + self.new_tag_counter
    }
}

/// A snapshot of a cache's counters, each counted since the cache was made.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// Reads answered from the cache.
    pub hits: u64,
    /// Of `hits`, those answered in process without a value from Redis:
    /// every hit of a moka cache, and a Redis cache's hits on its
    /// in-process level.
    pub local_hits: u64,
    /// Values served past their freshness because the origin failed (or
    /// was slower than a soft timeout), or served from the level in process
    /// without Redis to check them (an outage), with a fail-safe; not
    /// counted in `hits`.
    pub stale: u64,
    /// Reads that found no usable entry (rejected entries included).
    pub misses: u64,
    /// Origin calls made by the cache.
    pub loads: u64,
    /// Misses answered by another caller's origin call for the same key.
    pub coalesced: u64,
    /// Entries found but not served, by reason (Redis only: the moka caches
    /// keep each value type in a cache of its own, so nothing is rejected).
    pub rejected: Rejected,
    /// Calls that returned an error (generation store, backend or origin),
    /// and eager refreshes that failed (which have no caller to tell).
    pub errors: u64,
    /// Calls answered although the cache failed on the way: the backend
    /// could not be read (the origin answered) or the answer could not be
    /// stored. Each is also a `tracing` event with the failure.
    pub degraded: u64,
    /// Not a count but the state now: invalidations this process made that
    /// Redis has not confirmed (it was out, or refused them), each sent
    /// again before the reads it could change are trusted (Redis caches
    /// only; the same for every query type of a cache).
    pub pending_invalidations: u64,
}
