//! The key format of `KEY-FORMAT.md`, written from the specification alone and
//! not from the crate's code: escaping, canonical strings, criteria sorting,
//! the 48-byte summary and the whole key. The tests hold the crate to it.

use std::collections::BTreeSet;
use std::fmt::LowerExp;
use std::ops::Neg;
use std::str::FromStr;

use sha2::{Digest, Sha256};

use super::shortest_digits::shortest_digits;

/// Criteria up to this many bytes (escaped) are kept as they are in the key.
pub const MAX_PLAIN: usize = 48;

/// `esc`: every byte but `A-Z a-z 0-9 - _ . ! ~ * ' ( )` as `%XX`, uppercase.
pub fn esc(text: &str) -> String {
    let mut out = String::new();
    for &byte in text.as_bytes() {
        if unreserved(byte) {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// The bytes `esc` keeps as they are.
pub fn unreserved(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || b"-_.!~*'()".contains(&byte)
}

/// Text written by `esc`: unreserved bytes and `%XX` with uppercase hex only.
pub fn is_escaped(text: &str) -> bool {
    let bytes = text.as_bytes();
    let hex = |b: Option<&u8>| b.is_some_and(|b| b.is_ascii_digit() || (b'A'..=b'F').contains(b));
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            if !(hex(bytes.get(i + 1)) && hex(bytes.get(i + 2))) {
                return false;
            }
            i += 3;
        } else if unreserved(bytes[i]) {
            i += 1;
        } else {
            return false;
        }
    }
    true
}

/// A list's canonical string: each element with `%` as `%25` and `,` as `%2C`,
/// joined with `,`.
pub fn list(items: impl IntoIterator<Item = String>) -> String {
    items
        .into_iter()
        .map(|item| item.replace('%', "%25").replace(',', "%2C"))
        .collect::<Vec<_>>()
        .join(",")
}

/// A set's canonical string: the elements' canonical strings sorted by bytes,
/// deduplicated, written as a list.
pub fn set(items: impl IntoIterator<Item = String>) -> String {
    let sorted: BTreeSet<String> = items.into_iter().collect();
    list(sorted)
}

/// A float's canonical string: JavaScript's `Number.prototype.toString()`
/// (ECMA-262 Number::toString) of the shortest digits that read back as the
/// same `f64` or `f32`.
pub fn js_number<T>(x: T) -> String
where
    T: LowerExp + Copy + FromStr + PartialEq + Neg<Output = T> + Into<f64>,
{
    let wide: f64 = x.into();
    if wide.is_nan() {
        return "NaN".into();
    }
    if wide == 0.0 {
        return "0".into();
    }
    if wide.is_infinite() {
        return if wide > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    if wide < 0.0 {
        return format!("-{}", js_number(-x));
    }
    let (digits, n) = shortest_digits(x);
    let k = digits.len() as i32;
    if k <= n && n <= 21 {
        format!("{digits}{}", "0".repeat((n - k) as usize))
    } else if 0 < n && n <= 21 {
        format!("{}.{}", &digits[..n as usize], &digits[n as usize..])
    } else if -6 < n && n <= 0 {
        format!("0.{}{digits}", "0".repeat((-n) as usize))
    } else {
        let sign = if n - 1 < 0 { '-' } else { '+' };
        let e = (n - 1).abs();
        if k == 1 {
            format!("{digits}e{sign}{e}")
        } else {
            format!("{}.{}e{sign}{e}", &digits[..1], &digits[1..])
        }
    }
}

/// The criteria of a key from (name, canonical value) pairs: empty values
/// dropped, sorted by the bytes of the name.
pub fn pairs(criteria: impl IntoIterator<Item = (String, String)>) -> Vec<(String, String)> {
    let mut pairs: Vec<(String, String)> = criteria
        .into_iter()
        .filter(|(_, value)| !value.is_empty())
        .collect();
    pairs.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    pairs
}

/// The criteria string of sorted `pairs` before summarizing.
pub fn criteria(pairs: &[(String, String)]) -> String {
    pairs
        .iter()
        .map(|(name, value)| format!("{}={}", esc(name), esc(value)))
        .collect::<Vec<_>>()
        .join("&")
}

/// The summary of a criteria string: the first 16 bytes of its SHA-256, as
/// lowercase hex.
pub fn digest32(criteria: &str) -> String {
    Sha256::digest(criteria.as_bytes())
        .iter()
        .take(16)
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The canonical form of a query: what the key must be a function of, and
/// nothing else.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Canonical {
    pub namespace: String,
    pub operation: String,
    pub schema: u32,
    pub generation: u64,
    /// `None` for a global key.
    pub tenant: Option<Vec<String>>,
    pub hash_tag: bool,
    /// (name, canonical value), empties dropped, sorted by name bytes.
    pub pairs: Vec<(String, String)>,
}

impl Canonical {
    /// The criteria string before summarizing.
    pub fn criteria(&self) -> String {
        criteria(&self.pairs)
    }

    /// Whether the key holds the criteria's digest instead of the criteria.
    pub fn summarized(&self) -> bool {
        self.criteria().len() > MAX_PLAIN
    }

    /// The key.
    pub fn key(&self) -> String {
        let tenant = self
            .tenant
            .as_ref()
            .map(|parts| parts.iter().map(|p| esc(p)).collect::<Vec<_>>().join(","))
            .unwrap_or_default();
        let tenant = if self.hash_tag {
            format!("{{{tenant}}}")
        } else {
            tenant
        };
        let mut key = format!(
            "{}:s{}:g{}:t{tenant}:{}",
            esc(&self.namespace),
            self.schema,
            self.generation,
            esc(&self.operation)
        );
        let criteria = self.criteria();
        if criteria.len() > MAX_PLAIN {
            key.push_str(":c_");
            key.push_str(&digest32(&criteria));
        } else if !criteria.is_empty() {
            key.push(':');
            key.push_str(&criteria);
        }
        key
    }
}
