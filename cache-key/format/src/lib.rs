//! The syntax of the cache-key format (version 2): the one place that spells
//! out its separators, segment markers, summary and limits, its escaping
//! ([`escape`]) and the reading back of escaped text ([`mod@unescape`]). The
//! runtime crate `cache-key` writes and reads keys with these; its derive,
//! `cache-key-derive`, lays out the constant parts of keys at compile time
//! with the same ones. Not an API of its own: use `cache-key`.
//!
//! ```text
//! esc(namespace) ":s" schema ":g" generation ":t" ["{"] tenant values ["}"]
//!     ":" esc(operation) [":" criteria]
//! criteria: esc(name) "=" esc(value) joined with "&", in name order,
//!     or "c_" and 32 hex digits of their SHA-256 past 48 bytes
//! ```

#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod escape;
pub mod unescape;

/// The version of the key format written here (KEY-FORMAT.md).
pub const FORMAT_VERSION: u32 = 2;

/// Ends a segment: between the namespace, schema, generation, tenant,
/// operation and criteria.
pub const SEPARATOR: char = ':';

/// What starts the schema segment after the namespace: the separator and `s`.
pub const SCHEMA: &str = ":s";

/// What starts the generation segment: the separator and `g`.
pub const GENERATION: &str = ":g";

/// What starts the tenant segment: the separator and `t`.
pub const TENANT: &str = ":t";

/// The marker of a segment (its byte after the separator), as `decode`
/// checks it.
pub const fn marker(start: &str) -> char {
    start.as_bytes()[1] as char
}

/// Opens a Redis Cluster hash tag around the tenant values.
pub const HASH_TAG_OPEN: char = '{';

/// Closes the hash tag.
pub const HASH_TAG_CLOSE: char = '}';

/// Joins the values of a compound tenant.
pub const TENANT_PART_SEPARATOR: char = ',';

/// Joins the criteria.
pub const CRITERIA_SEPARATOR: char = '&';

/// Between a criterion's name and its value.
pub const NAME_VALUE_SEPARATOR: char = '=';

/// Joins the elements of a list or set value (before the value is escaped).
pub const LIST_SEPARATOR: char = ',';

/// Criteria up to this many bytes are written as they are; longer ones are
/// summarized.
pub const MAX_PLAIN_CRITERIA: usize = 48;

/// What starts a summarized criteria segment.
pub const SUMMARY_PREFIX: &str = "c_";

/// The hex digits of SHA-256 in a summary (after `c_`): 128 bits, so that a
/// collision costs about 2^64 hashes.
pub const SUMMARY_HEX_DIGITS: usize = 32;

/// The hex digits of a version-1 summary, which `decode` still reads.
pub const FORMAT1_SUMMARY_HEX_DIGITS: usize = 16;

/// The longest decimal form, sign included, of an integer type named by its
/// Rust name (`"u8"` ... `"i128"`, `"usize"`, `"isize"`, taken as 64 bits at
/// most, as every target with `std` has them).
pub const fn max_decimal_len(type_name: &str) -> Option<usize> {
    Some(match type_name.as_bytes() {
        b"u8" => 3,
        b"i8" => 4,
        b"u16" => 5,
        b"i16" => 6,
        b"u32" => 10,
        b"i32" => 11,
        b"u64" | b"i64" | b"usize" | b"isize" => 20,
        b"u128" => 39,
        b"i128" => 40,
        _ => return None,
    })
}

/// The longest decimal integer of any width: `i128::MIN` with its sign.
pub const MAX_INTEGER_LEN: usize = 40;

/// The longest schema (a `u32`) in decimal.
pub const MAX_SCHEMA_LEN: usize = 10;

/// The longest generation (a `u64`) in decimal.
pub const MAX_GENERATION_LEN: usize = 20;

/// The longest key whose parts written take these many bytes: `head`, the
/// namespace escaped and the schema's and generation's markers and digits;
/// `tenant`, the tenant values escaped and joined; `operation` escaped. The
/// criteria are bounded by their summary's limit, [`MAX_PLAIN_CRITERIA`].
pub const fn max_key_len(head: usize, hash_tag: bool, tenant: usize, operation: usize) -> usize {
    let hash_tag = if hash_tag { 2 } else { 0 };
    let separator = SEPARATOR.len_utf8();
    head + TENANT.len() + hash_tag + tenant + separator + operation + separator + MAX_PLAIN_CRITERIA
}

/// The length of a head: `namespace` escaped, `schema` and `generation` digits.
pub const fn head_len(namespace: usize, schema: usize, generation: usize) -> usize {
    namespace + SCHEMA.len() + schema + GENERATION.len() + generation
}
