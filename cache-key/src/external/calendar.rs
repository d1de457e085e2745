//! The canonical strings of dates and instants, shared by the `chrono` and
//! `time` features so both crates give byte-identical keys.
//!
//! Everything is written into the [`CanonicalWriter`] through `fmt::Write`,
//! never through a heap `String`.

use core::fmt::Write as _;

use crate::canonical::CanonicalWriter;

/// Writes a calendar date (proleptic Gregorian) as `YYYY-MM-DD`.
///
/// The year is written as chrono's `%Y` and chrono's `NaiveDate` display write
/// it: four zero-padded digits for `0000..=9999`; outside that range an explicit
/// sign and at least four digits (`+10000-01-01`, `-0001-12-31`, `-10000-...`).
/// A year inside the range never has a sign and one outside always has one, so
/// distinct dates always give distinct strings.
pub(super) fn write_date(out: &mut CanonicalWriter<'_>, year: i32, month: u8, day: u8) {
    // Writing into a `CanonicalWriter` never fails.
    let _ = if (0..=9999).contains(&year) {
        write!(out, "{year:04}-{month:02}-{day:02}")
    } else {
        write!(out, "{year:+05}-{month:02}-{day:02}")
    };
}

/// A UTC date and time of day, as written by [`write_utc`].
pub(super) struct UtcParts {
    pub(super) year: i32,
    pub(super) month: u8,
    pub(super) day: u8,
    pub(super) hour: u8,
    pub(super) minute: u8,
    /// `0..=59`, or `60` during a leap second.
    pub(super) second: u8,
    /// `0..=999_999_999`.
    pub(super) nanosecond: u32,
}

/// Writes a UTC instant as RFC 3339 with exactly nine fraction digits and a
/// `Z`: `2026-11-29T10:20:30.123456789Z`, `2026-11-29T10:20:30.000000000Z`.
///
/// The fraction is never shortened, so equal instants always give equal
/// strings and different instants different ones, down to the nanosecond.
pub(super) fn write_utc(out: &mut CanonicalWriter<'_>, parts: &UtcParts) {
    let UtcParts {
        year,
        month,
        day,
        hour,
        minute,
        second,
        nanosecond,
    } = *parts;
    write_date(out, year, month, day);
    // Writing into a `CanonicalWriter` never fails.
    let _ = write!(out, "T{hour:02}:{minute:02}:{second:02}.{nanosecond:09}Z");
}

/// The UTC parts of a Unix timestamp in nanoseconds (no leap seconds), for
/// instants whose UTC date lies outside the range a date crate can represent.
#[cfg(feature = "time")]
pub(super) fn utc_from_unix_nanos(nanos: i128) -> UtcParts {
    const NANOS_PER_SECOND: i128 = 1_000_000_000;
    let seconds = nanos.div_euclid(NANOS_PER_SECOND);
    let nanosecond = nanos.rem_euclid(NANOS_PER_SECOND) as u32;
    let days = seconds.div_euclid(86_400);
    let second_of_day = seconds.rem_euclid(86_400) as u32;

    // Howard Hinnant's `civil_from_days`: days since 1970-01-01 to a
    // proleptic Gregorian date, with 400-year eras starting on March 1st.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1_460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let shifted_month = (5 * day_of_year + 2) / 153;
    let day = (day_of_year - (153 * shifted_month + 2) / 5 + 1) as u8;
    let month = if shifted_month < 10 {
        shifted_month + 3
    } else {
        shifted_month - 9
    } as u8;
    let year = (year_of_era + era * 400 + i128::from(month <= 2)) as i32;

    UtcParts {
        year,
        month,
        day,
        hour: (second_of_day / 3_600) as u8,
        minute: (second_of_day / 60 % 60) as u8,
        second: (second_of_day % 60) as u8,
        nanosecond,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn date(year: i32, month: u8, day: u8) -> String {
        let mut out = String::new();
        write_date(&mut CanonicalWriter::escaped(&mut out), year, month, day);
        out
    }

    #[test]
    fn years_outside_four_digits_have_a_sign() {
        assert_eq!(date(2026, 3, 7), "2026-03-07");
        assert_eq!(date(0, 1, 1), "0000-01-01");
        assert_eq!(date(9999, 12, 31), "9999-12-31");
        // `+` is escaped in a key.
        assert_eq!(date(10_000, 1, 1), "%2B10000-01-01");
        assert_eq!(date(-1, 12, 31), "-0001-12-31");
        assert_eq!(date(-10_000, 1, 1), "-10000-01-01");
    }

    #[cfg(feature = "time")]
    #[test]
    fn unix_nanos_to_civil() {
        let check = |nanos: i128, expected: &str| {
            let mut out = String::new();
            write_utc(
                &mut CanonicalWriter::escaped(&mut out),
                &utc_from_unix_nanos(nanos),
            );
            assert_eq!(out, expected, "{nanos}");
        };
        check(0, "1970-01-01T00%3A00%3A00.000000000Z");
        check(-1, "1969-12-31T23%3A59%3A59.999999999Z");
        check(
            951_782_400_000_000_000,
            "2000-02-29T00%3A00%3A00.000000000Z",
        );
        check(
            1_795_947_630_123_456_789,
            "2026-11-29T10%3A20%3A30.123456789Z",
        );
        // -10000-12-31T23:00:00Z, one hour before the year -9999 starts.
        check(
            -377_705_120_400_000_000_000,
            "-10000-12-31T23%3A00%3A00.000000000Z",
        );
        check(
            253_402_300_800_000_000_000,
            "%2B10000-01-01T00%3A00%3A00.000000000Z",
        );
    }
}
