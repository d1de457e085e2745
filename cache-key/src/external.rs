//! [`CriterionValue`](crate::CriterionValue) (and, for identifiers,
//! [`TenantValue`](crate::TenantValue)) for types of other crates, each behind
//! an optional feature named after its crate.
//!
//! | feature | types | canonical string |
//! | --- | --- | --- |
//! | `uuid` | `Uuid` (also a tenant) | lowercase hyphenated: `67e55044-10b1-426f-9247-bb680e5fe0c8` |
//! | `chrono` | `NaiveDate`, `DateTime<Tz>` | `YYYY-MM-DD`; the instant in UTC, RFC 3339, nine fraction digits, `Z` |
//! | `time` | `Date`, `OffsetDateTime`, `UtcDateTime` | the same strings as `chrono` for the same date or instant |
//! | `url` | `Url` | `Url::as_str()`, the `url` crate's normalized serialization |
//!
//! Dates and instants are written by [`calendar`] for both date crates, so a
//! `chrono` value and a `time` value for the same instant give the same key.
//!
//! Date-times *without* an offset (`chrono::NaiveDateTime`, `chrono::NaiveTime`,
//! `time::PrimitiveDateTime`, `time::Time`) are deliberately not criteria: the
//! same wall-clock text names different instants in different time zones, so two
//! services (or one service on two hosts) would give one key two meanings.
//! Convert to an instant with an offset first, or bucket to a date.

#[cfg(any(feature = "chrono", feature = "time"))]
mod calendar;
#[cfg(feature = "chrono")]
mod chrono;
#[cfg(feature = "time")]
mod time;
#[cfg(feature = "url")]
mod url;
#[cfg(feature = "uuid")]
mod uuid;
