//! `time` dates and instants as criteria (feature `time`).
//!
//! `PrimitiveDateTime` and `Time` are deliberately not criteria: a wall-clock
//! time without an offset names a different instant in every time zone, so two
//! services could give one key two meanings. Use an `OffsetDateTime` or
//! `UtcDateTime` (an instant) or a `Date` (a bucket).

use ::time::{Date, OffsetDateTime, UtcDateTime};

use super::calendar::{UtcParts, utc_from_unix_nanos, write_date, write_utc};
use crate::canonical::{CanonicalWriter, CriterionValue};

/// `YYYY-MM-DD` (`2026-11-29`), identical to a `chrono::NaiveDate` of the same
/// day. Years outside `0000..=9999` (negative years, and with the
/// `large-dates` feature of `time` years above 9999) are written with a sign
/// and at least four digits: `-0001-12-31`, `+10000-01-01`.
impl CriterionValue for Date {
    fn write_canonical(&self, out: &mut CanonicalWriter<'_>) {
        let (year, month, day) = self.to_calendar_date();
        write_date(out, year, u8::from(month), day);
    }
}

fn utc_parts(utc: UtcDateTime) -> UtcParts {
    let (year, month, day) = utc.to_calendar_date();
    let (hour, minute, second, nanosecond) = utc.as_hms_nano();
    UtcParts {
        year,
        month: u8::from(month),
        day,
        hour,
        minute,
        second,
        nanosecond,
    }
}

/// The instant, converted to UTC, in RFC 3339 with exactly nine fraction
/// digits and `Z`: `2026-11-29T10:20:30.123456789Z`, or
/// `2026-11-29T10:20:30.000000000Z` for a whole second. The offset is not part
/// of the string: the same instant at any offset gives the same key, and the
/// same as a `chrono::DateTime` of that instant. An instant whose UTC date is
/// outside the range `time` can represent (the first or last hours of its
/// range at a non-zero offset) is still written, with a signed year.
impl CriterionValue for OffsetDateTime {
    fn write_canonical(&self, out: &mut CanonicalWriter<'_>) {
        let parts = match self.checked_to_utc() {
            Some(utc) => utc_parts(utc),
            None => utc_from_unix_nanos(self.unix_timestamp_nanos()),
        };
        write_utc(out, &parts);
    }
}

/// As for `OffsetDateTime`: RFC 3339, nine fraction digits, `Z`
/// (`2026-11-29T10:20:30.000000000Z`).
impl CriterionValue for UtcDateTime {
    fn write_canonical(&self, out: &mut CanonicalWriter<'_>) {
        write_utc(out, &utc_parts(*self));
    }
}
