//! One query's entry in Redis: its key at a generation, the commands that
//! read and write it, and what a `GET` reply means.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use ::redis::{Cmd, RedisResult, Value, cmd};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::batch::{Batch, is_error};
use super::envelope::{self, EncodeError, Expected};
use crate::cache::{CachedQuery, RejectReason};
use crate::generation::GenerationError;
use crate::tag::TagStamp;
use cache_key_format::{SEPARATOR, SUMMARY_HEX_DIGITS, SUMMARY_PREFIX};

/// A query's entry at the generation read before any origin call: its key
/// and the envelope it must have.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    /// The key, then the query's own tags, which the envelope records, as
    /// [`Tags`] writes them (none for most query types): one allocation.
    key_and_tags: String,
    key_len: usize,
    /// The query's key at generation 0, this entry's generation, and when
    /// the read that named it began (on [`Invalidations`]' clock): how the
    /// in-process level finds and judges it (`redis/local.rs`); `None`
    /// without one.
    ///
    /// [`Invalidations`]: super::invalidations::Invalidations
    local: Option<(Box<str>, Validated)>,
    schema: u32,
    /// `CachedQuery::VALUE_ID`, written in the envelope and checked on read.
    value_id: &'static str,
    /// The readable key (criteria never summarized), whose digest the
    /// envelope holds, when it is not the key itself.
    readable: Option<String>,
}

/// What a read of an entry found.
#[derive(Debug)]
pub(crate) enum Found<V> {
    Value(Stored<V>),
    Absent,
    Rejected(RejectReason),
}

/// The generation a value in process is valid at, as the counters read
/// when `since` (on [`Invalidations`]' clock) gave it: a bump made or heard
/// of after `since` may have ended it.
///
/// [`Invalidations`]: super::invalidations::Invalidations
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Validated {
    pub(crate) generation: u64,
    pub(crate) since: u64,
}

/// A value as a level keeps it: with the time it stops being fresh, and
/// its tags when it has any (served only while none was bumped since).
#[derive(Debug, Clone)]
pub(crate) struct Stored<V> {
    pub(crate) value: V,
    pub(crate) fresh_until: SystemTime,
    pub(crate) tags: Option<Arc<TagStamp>>,
}

impl<V> Stored<V> {
    /// Whether the value is fresh now.
    pub(crate) fn is_fresh(&self) -> bool {
        SystemTime::now() < self.fresh_until
    }
}

/// How long an entry lives: fresh for `ttl`, then kept `keep` longer (the
/// fail-safe's window) before Redis drops it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Lifetime {
    pub(crate) ttl: Duration,
    pub(crate) keep: Duration,
}

impl Lifetime {
    /// The whole time an entry is kept.
    pub(crate) fn kept(&self) -> Duration {
        self.ttl.saturating_add(self.keep)
    }
}

impl Entry {
    /// `query`'s entry under `key`, written at `generation`, its own tags'
    /// text `query_tags` (as [`Tags`] writes them, written with the key);
    /// `local` is the query's key at generation 0 and when its read began,
    /// when there is an in-process level.
    pub(crate) fn new<Q: CachedQuery + ?Sized>(
        query: &Q,
        key: &str,
        query_tags: &str,
        generation: u64,
        local: Option<(&str, u64)>,
    ) -> Result<Entry, GenerationError> {
        let readable = match may_be_summarized(key) {
            true => {
                let mut readable = String::with_capacity(key.len() + 64);
                query.write_readable_key(generation, &mut readable)?;
                Some(readable)
            }
            false => None,
        };
        let mut key_and_tags = String::with_capacity(key.len() + query_tags.len());
        key_and_tags.push_str(key);
        key_and_tags.push_str(query_tags);
        Ok(Entry {
            key_and_tags,
            key_len: key.len(),
            local: local.map(|(zero, since)| (zero.into(), Validated { generation, since })),
            schema: Q::KEY_SCHEMA.schema(),
            value_id: Q::VALUE_ID,
            readable,
        })
    }

    pub(crate) fn key(&self) -> &str {
        &self.key_and_tags[..self.key_len]
    }

    /// Where the in-process level keeps this entry: the query's key at
    /// generation 0, and the generation it is valid at, since when.
    pub(crate) fn local(&self) -> Option<(&str, Validated)> {
        self.local
            .as_ref()
            .map(|(zero, validated)| (&**zero, *validated))
    }

    fn expected(&self) -> Expected<'_> {
        let readable = self.readable.as_deref().unwrap_or(self.key());
        Expected::new(self.schema, self.value_id, readable)
            .with_query_tag_text(&self.key_and_tags[self.key_len..])
    }

    /// Adds `GET key` to `batch`; where its reply will be.
    pub(crate) fn get(&self, batch: &mut Batch) -> usize {
        get(batch, self.key())
    }

    /// `SET key <envelope> PX <ttl + keep>`, fresh for `ttl` from now, and
    /// when that is; refused when the value cannot be stored so that it
    /// reads back the same.
    pub(crate) fn set<T: Serialize>(
        &self,
        value: &T,
        lifetime: Lifetime,
        tags: Option<&TagStamp>,
    ) -> Result<(Cmd, SystemTime), EncodeError> {
        let fresh_until = SystemTime::now() + lifetime.ttl;
        let bytes = envelope::encode(&self.expected(), value, fresh_until, tags)?;
        let set = cmd("SET")
            .arg(self.key())
            .arg(bytes)
            .arg("PX")
            .arg(px(lifetime.kept()))
            .take();
        Ok((set, fresh_until))
    }

    /// What the reply to [`get`](Self::get) holds for this entry: another
    /// Redis type under the key, bytes that are not its envelope and an
    /// envelope of another query, value id, schema or version are all misses,
    /// each with its reason. `Err` only for a failure of the server.
    pub(crate) fn judge<V: DeserializeOwned>(
        &self,
        reply: RedisResult<Value>,
    ) -> RedisResult<Found<V>> {
        if is_error(&reply, "WRONGTYPE") {
            return Ok(Found::Rejected(RejectReason::WrongType));
        }
        Ok(match reply? {
            Value::Nil => Found::Absent,
            Value::BulkString(bytes) => match envelope::decode(&bytes, &self.expected()) {
                Ok(decoded) => Found::Value(Stored {
                    value: decoded.value,
                    fresh_until: decoded.fresh_until,
                    tags: decoded.tags.map(Arc::new),
                }),
                Err(reason) => Found::Rejected(reason),
            },
            _ => Found::Rejected(RejectReason::Undecodable),
        })
    }
}

/// Whether `key`'s criteria may be summarized, so that its readable key is
/// other text: a summarized key ends with `:c_` and the digest's hex digits
/// (a key whose operation is such text is taken for one too, which only
/// costs writing its readable key again).
fn may_be_summarized(key: &str) -> bool {
    let tail = SEPARATOR.len_utf8() + SUMMARY_PREFIX.len() + SUMMARY_HEX_DIGITS;
    (key.len().checked_sub(tail))
        .and_then(|start| key.get(start..))
        .and_then(|tail| tail.strip_prefix(SEPARATOR))
        .is_some_and(|digest| digest.starts_with(SUMMARY_PREFIX))
}

/// Adds `GET key` to `batch`; where its reply will be.
pub(crate) fn get(batch: &mut Batch, key: &str) -> usize {
    batch.push_args("GET", std::iter::once(key))
}

/// `ttl` in milliseconds for `SET ... PX`: at least 1 (Redis refuses
/// `PX 0`; a zero TTL still expires at once), at most `u64::MAX`.
pub(crate) fn px(ttl: Duration) -> u64 {
    u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1)
}

#[cfg(test)]
mod tests {
    use super::may_be_summarized;
    use crate::KeyBuilder;

    fn key(title: &str) -> String {
        KeyBuilder::new("library", "search")
            .tenant("acme")
            .criterion("title", title)
            .build()
            .expect("a key")
            .as_str()
            .to_owned()
    }

    #[test]
    fn a_key_is_taken_for_summarized_only_when_its_criteria_may_be() {
        let summarized = key(&"Dune ".repeat(20));
        assert!(summarized.contains(":c_"), "{summarized}");
        assert!(may_be_summarized(&summarized));
        // Short criteria, written out: the key is the readable key.
        assert!(!may_be_summarized(&key("Dune")));
        // Written out, however they end.
        assert!(!may_be_summarized(&key(&format!("c_{}", "0".repeat(32)))));
        assert!(!may_be_summarized("c_"));
        // No criteria, an operation that looks like a summary: taken for one.
        let operation = format!("c_{}", "a".repeat(32));
        let bare = KeyBuilder::new("library", &operation)
            .tenant("acme")
            .build()
            .expect("a key");
        assert!(may_be_summarized(bare.as_str()));
    }
}
