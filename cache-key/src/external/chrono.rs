//! `chrono` dates and instants as criteria (feature `chrono`).
//!
//! `NaiveDateTime` and `NaiveTime` are deliberately not criteria: a wall-clock
//! time without an offset names a different instant in every time zone, so two
//! services could give one key two meanings. Use a `DateTime<Tz>` (an instant)
//! or a `NaiveDate` (a bucket).

use ::chrono::{DateTime, Datelike, NaiveDate, TimeZone, Timelike};

use super::calendar::{UtcParts, write_date, write_utc};
use crate::canonical::{CanonicalWriter, CriterionValue};

/// `YYYY-MM-DD` (`2026-11-29`). Years outside `0000..=9999` are written as
/// chrono's `%Y` writes them, with a sign and at least four digits:
/// `+10000-01-01`, `-0001-12-31`. Identical to a `time::Date` of the same day.
impl CriterionValue for NaiveDate {
    fn write_canonical(&self, out: &mut CanonicalWriter<'_>) {
        write_date(out, self.year(), self.month() as u8, self.day() as u8);
    }
}

/// The instant, converted to UTC, in RFC 3339 with exactly nine fraction
/// digits and `Z`: `2026-11-29T10:20:30.123456789Z`, or
/// `2026-11-29T10:20:30.000000000Z` for a whole second. The time zone is not
/// part of the string: the same instant in any `Tz` gives the same key, and
/// the same as a `time::OffsetDateTime` of that instant.
///
/// A leap second (chrono's nanosecond `>= 1_000_000_000`) is written as chrono
/// writes it, the following second number with the rest of the fraction:
/// `2016-12-31T23:59:60.500000000Z`. Second `60` occurs in no other instant,
/// so the string stays injective. (The only other leap values chrono can hold,
/// at a UTC second other than 59, come from a local leap second under an
/// offset with a seconds part; chrono counts and formats them as the following
/// second, and so does this string.)
impl<Tz: TimeZone> CriterionValue for DateTime<Tz> {
    fn write_canonical(&self, out: &mut CanonicalWriter<'_>) {
        let utc = self.naive_utc();
        let (date, time) = (utc.date(), utc.time());
        let (second, nanosecond) = match time.nanosecond() {
            leap @ 1_000_000_000.. => (time.second() + 1, leap - 1_000_000_000),
            nanosecond => (time.second(), nanosecond),
        };
        write_utc(
            out,
            &UtcParts {
                year: date.year(),
                month: date.month() as u8,
                day: date.day() as u8,
                hour: time.hour() as u8,
                minute: time.minute() as u8,
                second: second as u8,
                nanosecond,
            },
        );
    }
}
