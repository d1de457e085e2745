//! The envelope a value is stored in outside the process: enough beside the
//! value to check on read that it is this query's answer, of this type,
//! under this schema.
//!
//! ```text
//! {"v":1,"schema":1,"type":"alloc::vec::Vec<alloc::string::String>",
//!  "query":"library:s1:g3:t1:search:title=Dune","value":["Dune"]}
//! ```
//!
//! JSON (serde_json): readable in `redis-cli`, and a value that does not
//! decode is an error value, never a panic. `query` is the readable key
//! ([`CacheKey::write_readable_key`](crate::CacheKey::write_readable_key)):
//! criteria never summarized, so a summarized key's collision is caught.
//! Why JSON rather than a smaller binary format, with the measurements:
//! BENCHMARKS.md, "Redis values".
//!
//! [`RedisCache`](super::RedisCache) writes and checks entries with
//! [`encode`] and [`decode`]; they are public so that another writer (a
//! migration, a service in another language following this layout) can
//! produce entries the caches accept, and a reader can check them the same
//! way.

use std::borrow::Cow;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::RejectReason;

/// The envelope format this crate writes and reads (the `v` field).
pub const VERSION: u32 = 1;

/// What an entry must match to be served: the query's key schema, the
/// value type's name and the query's readable key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Expected<'a> {
    pub(crate) schema: u32,
    pub(crate) value_type: &'a str,
    pub(crate) query: &'a str,
}

impl<'a> Expected<'a> {
    /// An entry under key schema `schema`, of the value type named
    /// `value_type` (the caches use [`std::any::type_name`]), for the query
    /// whose readable key is `query`.
    pub const fn new(schema: u32, value_type: &'a str, query: &'a str) -> Self {
        Expected {
            schema,
            value_type,
            query,
        }
    }
}

#[derive(Serialize)]
struct Write<'a, T> {
    v: u32,
    schema: u32,
    #[serde(rename = "type")]
    value_type: &'a str,
    query: &'a str,
    value: &'a T,
}

/// The header, read first; every field but `v` optional so that another
/// version's header is reported as a version, not as undecodable bytes.
#[derive(Deserialize)]
struct Header<'a> {
    v: u32,
    schema: Option<u32>,
    #[serde(rename = "type", borrow)]
    value_type: Option<Cow<'a, str>>,
    #[serde(borrow)]
    query: Option<Cow<'a, str>>,
}

/// A whole envelope, read in one pass on the way to a hit.
#[derive(Deserialize)]
struct Entry<'a, T> {
    v: u32,
    schema: u32,
    #[serde(rename = "type", borrow)]
    value_type: Cow<'a, str>,
    #[serde(borrow)]
    query: Cow<'a, str>,
    value: T,
}

/// `value` in an envelope for `expected`: the bytes the caches store.
pub fn encode<T: Serialize>(
    expected: &Expected<'_>,
    value: &T,
) -> Result<Vec<u8>, serde_json::Error> {
    serde_json::to_vec(&Write {
        v: VERSION,
        schema: expected.schema,
        value_type: expected.value_type,
        query: expected.query,
        value,
    })
}

/// The value in `bytes` if the envelope matches `expected`, otherwise why
/// not: an envelope of another [`VERSION`], schema, value type or query, or
/// bytes that are not an envelope or hold a value that does not
/// deserialize as `T` ([`RejectReason::Undecodable`]). Never panics.
pub fn decode<T: DeserializeOwned>(
    bytes: &[u8],
    expected: &Expected<'_>,
) -> Result<T, RejectReason> {
    // One pass when the entry is whole; only an entry that does not read
    // as one is read again, header only, to say why.
    match serde_json::from_slice::<Entry<'_, T>>(bytes) {
        Ok(entry) => {
            check(
                entry.v,
                Some(entry.schema),
                Some(&entry.value_type),
                Some(&entry.query),
                expected,
            )?;
            Ok(entry.value)
        }
        Err(_) => {
            let header: Header<'_> =
                serde_json::from_slice(bytes).map_err(|_| RejectReason::Undecodable)?;
            check(
                header.v,
                header.schema,
                header.value_type.as_deref(),
                header.query.as_deref(),
                expected,
            )?;
            // A matching header around a value that is not a `T`.
            Err(RejectReason::Undecodable)
        }
    }
}

/// Why a header does not match `expected`, checked in this order: the
/// version first (another version's header may differ in anything else).
fn check(
    v: u32,
    schema: Option<u32>,
    value_type: Option<&str>,
    query: Option<&str>,
    expected: &Expected<'_>,
) -> Result<(), RejectReason> {
    if v != VERSION {
        return Err(RejectReason::Version);
    }
    let (Some(schema), Some(value_type), Some(query)) = (schema, value_type, query) else {
        return Err(RejectReason::Undecodable);
    };
    if schema != expected.schema {
        return Err(RejectReason::Schema);
    }
    if value_type != expected.value_type {
        return Err(RejectReason::ValueType);
    }
    if query != expected.query {
        return Err(RejectReason::Query);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXPECTED: Expected<'static> = Expected {
        schema: 1,
        value_type: "u64",
        query: "library:s1:g1:t1:count",
    };

    #[test]
    fn a_value_round_trips_and_every_mismatch_has_its_reason() {
        let bytes = encode(&EXPECTED, &7u64).unwrap();
        assert_eq!(decode::<u64>(&bytes, &EXPECTED), Ok(7));
        let other = |schema, value_type, query| Expected {
            schema,
            value_type,
            query,
        };
        let cases = [
            (other(2, "u64", EXPECTED.query), RejectReason::Schema),
            (other(1, "u32", EXPECTED.query), RejectReason::ValueType),
            (
                other(1, "u64", "library:s1:g2:t1:count"),
                RejectReason::Query,
            ),
        ];
        for (expected, reason) in cases {
            assert_eq!(decode::<u64>(&bytes, &expected), Err(reason));
        }
        assert_eq!(
            decode::<String>(&bytes, &EXPECTED),
            Err(RejectReason::Undecodable)
        );
        assert_eq!(
            decode::<u64>(b"\xff{", &EXPECTED),
            Err(RejectReason::Undecodable)
        );
        assert_eq!(
            decode::<u64>(br#"{"v":2}"#, &EXPECTED),
            Err(RejectReason::Version)
        );
        assert_eq!(
            decode::<u64>(br#"{"v":1}"#, &EXPECTED),
            Err(RejectReason::Undecodable)
        );
    }

    #[test]
    fn a_header_mismatch_is_reported_also_around_a_value_that_does_not_decode() {
        let other_schema = Expected::new(2, "u64", EXPECTED.query);
        let bytes = encode(&other_schema, &7u64).unwrap();
        assert_eq!(
            decode::<String>(&bytes, &EXPECTED),
            Err(RejectReason::Schema)
        );
        let version_2 = br#"{"v":2,"schema":1,"type":"u64","query":"q","value":7}"#;
        assert_eq!(
            decode::<u64>(version_2, &EXPECTED),
            Err(RejectReason::Version)
        );
        assert_eq!(
            decode::<String>(version_2, &EXPECTED),
            Err(RejectReason::Version)
        );
        // Fields in any order, unknown fields ignored, as serde_json reads.
        let reordered =
            br#"{"value":7,"query":"library:s1:g1:t1:count","x":0,"type":"u64","schema":1,"v":1}"#;
        assert_eq!(decode::<u64>(reordered, &EXPECTED), Ok(7));
    }
}
