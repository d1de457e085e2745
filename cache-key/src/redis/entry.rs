//! One query's entry in Redis: its key at a generation, the commands that
//! read and write it, and what a `GET` reply means.

use std::time::Duration;

use ::redis::{Cmd, RedisResult, Value, cmd};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::batch::is_error;
use super::envelope::{self, EncodeError, Expected};
use crate::cache::{CachedQuery, RejectReason};
use crate::generation::GenerationError;

/// A query's entry at the generation read before any origin call: its key
/// and the envelope it must have.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    key: String,
    schema: u32,
    value_type: &'static str,
    /// The readable key (criteria never summarized), whose digest the
    /// envelope holds.
    readable: String,
}

/// What a `GET` of an entry found.
#[derive(Debug)]
pub(crate) enum Found<V> {
    Value(V),
    Absent,
    Rejected(RejectReason),
}

impl Entry {
    /// `query`'s entry under `key`, written at `generation`.
    pub(crate) fn new<Q: CachedQuery + ?Sized>(
        query: &Q,
        key: &str,
        generation: u64,
    ) -> Result<Entry, GenerationError> {
        let mut readable = String::with_capacity(key.len() + 64);
        query.write_readable_key(generation, &mut readable)?;
        Ok(Entry {
            key: key.to_owned(),
            schema: Q::KEY_SCHEMA.schema(),
            value_type: std::any::type_name::<Q::Value>(),
            readable,
        })
    }

    pub(crate) fn key(&self) -> &str {
        &self.key
    }

    fn expected(&self) -> Expected<'_> {
        Expected::new(self.schema, self.value_type, &self.readable)
    }

    /// `GET key`.
    pub(crate) fn get(&self) -> Cmd {
        get(&self.key)
    }

    /// `SET key <envelope> PX ttl`; refused when the value cannot be stored
    /// so that it reads back the same.
    pub(crate) fn set<T: Serialize>(&self, value: &T, ttl: Duration) -> Result<Cmd, EncodeError> {
        let bytes = envelope::encode(&self.expected(), value)?;
        Ok(cmd("SET")
            .arg(&self.key)
            .arg(bytes)
            .arg("PX")
            .arg(px(ttl))
            .take())
    }

    /// What the reply to [`get`](Self::get) holds for this entry: another
    /// Redis type under the key, bytes that are not its envelope and an
    /// envelope of another query, type, schema or version are all misses,
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
                Ok(value) => Found::Value(value),
                Err(reason) => Found::Rejected(reason),
            },
            _ => Found::Rejected(RejectReason::Undecodable),
        })
    }
}

/// `GET key`.
pub(crate) fn get(key: &str) -> Cmd {
    let mut get = Cmd::with_capacity(2, 3 + key.len());
    get.arg("GET").arg(key);
    get
}

/// `ttl` in milliseconds for `SET ... PX`: at least 1 (Redis refuses
/// `PX 0`; a zero TTL still expires at once), at most `u64::MAX`.
pub(crate) fn px(ttl: Duration) -> u64 {
    u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1)
}
