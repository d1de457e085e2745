//! Value types of other crates behind `cache-key` features (`uuid`, `chrono`,
//! `time`, `url`): their exact keys, and `chrono` and `time` agreeing byte for
//! byte on the same dates and instants. The root package enables all four
//! features on its `cache-key` dev-dependency.

use cache_key::{CacheKey, CriterionValue, KeyBuilder, TenantValue};
use chrono::{DateTime, FixedOffset, NaiveDate, SecondsFormat, TimeZone, Utc};
use time::{Month, OffsetDateTime, UtcDateTime, UtcOffset};
use url::Url;
use uuid::Uuid;

const ORG: Uuid = Uuid::from_u128(0x67e5_5044_10b1_426f_9247_bb68_0e5f_e0c8);
const ORG_TEXT: &str = "67e55044-10b1-426f-9247-bb680e5fe0c8";

/// The key of a query with one tenant `t` and one criterion `v`.
fn key_with(value: impl CriterionValue) -> String {
    KeyBuilder::new("ns", "q")
        .tenant("t")
        .criterion("v", value)
        .build()
        .unwrap()
        .as_str()
        .to_owned()
}

/// The key of a query with tenant `tenant` and no criteria.
fn key_for_tenant(tenant: impl TenantValue) -> String {
    KeyBuilder::new("ns", "q")
        .tenant(tenant)
        .build()
        .unwrap()
        .as_str()
        .to_owned()
}

// ---------------------------------------------------------------- uuid

#[test]
fn uuid_is_lowercase_hyphenated() {
    assert_eq!(key_with(ORG), format!("ns:s1:g1:tt:q:v={ORG_TEXT}"));
    // Every spelling parses to one value, so one key.
    for spelling in [
        "67E55044-10B1-426F-9247-BB680E5FE0C8",
        "67e5504410b1426f9247bb680e5fe0c8",
        "{67e55044-10b1-426f-9247-bb680e5fe0c8}",
        "urn:uuid:67e55044-10b1-426f-9247-bb680e5fe0c8",
    ] {
        let parsed = Uuid::parse_str(spelling).unwrap();
        assert_eq!(key_with(parsed), key_with(ORG), "{spelling}");
    }
    assert_eq!(
        key_with(Uuid::nil()),
        key_with("00000000-0000-0000-0000-000000000000")
    );
}

#[test]
fn uuid_is_a_tenant() {
    assert_eq!(key_for_tenant(ORG), format!("ns:s1:g1:t{ORG_TEXT}:q"));
    assert_eq!(
        key_for_tenant(std::sync::Arc::new(ORG)),
        key_for_tenant(ORG_TEXT)
    );
    // The nil UUID is what a tenant left at its default holds: refused,
    // unless declared a real tenant.
    assert!(matches!(
        KeyBuilder::new("ns", "q").tenant(Uuid::nil()).build(),
        Err(cache_key::KeyError::EmptyTenant { .. })
    ));
    assert_eq!(
        KeyBuilder::new("ns", "q")
            .tenant_allowing_zero(Uuid::nil(), "the nil organization is the platform itself")
            .build()
            .unwrap()
            .as_str(),
        "ns:s1:g1:t00000000-0000-0000-0000-000000000000:q"
    );
    // A compound tenant: the organization, then a role.
    let key = KeyBuilder::new("billing", "invoices")
        .tenant(ORG)
        .tenant("admin")
        .generation(3)
        .build()
        .unwrap();
    assert_eq!(
        key.as_str(),
        format!("billing:s1:g3:t{ORG_TEXT},admin:invoices")
    );
}

// ---------------------------------------------------------------- chrono

fn chrono_date(year: i32, month: u32, day: u32) -> NaiveDate {
    NaiveDate::from_ymd_opt(year, month, day).unwrap()
}

fn chrono_instant(
    (year, month, day): (i32, u32, u32),
    (hour, minute, second, nano): (u32, u32, u32, u32),
    offset_seconds: i32,
) -> DateTime<FixedOffset> {
    let local = chrono_date(year, month, day)
        .and_hms_nano_opt(hour, minute, second, nano)
        .unwrap();
    FixedOffset::east_opt(offset_seconds)
        .unwrap()
        .from_local_datetime(&local)
        .single()
        .unwrap()
}

/// chrono's own RFC 3339 text of an instant in UTC, nine fraction digits.
fn chrono_rfc3339<Tz: TimeZone>(instant: &DateTime<Tz>) -> String {
    instant
        .with_timezone(&Utc)
        .to_rfc3339_opts(SecondsFormat::Nanos, true)
}

#[test]
fn chrono_dates() {
    assert_eq!(
        key_with(chrono_date(2026, 11, 29)),
        "ns:s1:g1:tt:q:v=2026-11-29"
    );
    assert_eq!(key_with(chrono_date(7, 3, 1)), "ns:s1:g1:tt:q:v=0007-03-01");
    assert_eq!(key_with(chrono_date(0, 1, 1)), "ns:s1:g1:tt:q:v=0000-01-01");
    assert_eq!(
        key_with(chrono_date(9999, 12, 31)),
        "ns:s1:g1:tt:q:v=9999-12-31"
    );
    // Outside 0000..=9999 the year is signed, as chrono's `%Y` writes it.
    assert_eq!(
        key_with(chrono_date(10_000, 1, 1)),
        "ns:s1:g1:tt:q:v=%2B10000-01-01"
    );
    assert_eq!(
        key_with(chrono_date(-1, 12, 31)),
        "ns:s1:g1:tt:q:v=-0001-12-31"
    );
    assert_eq!(
        key_with(chrono_date(-10_000, 1, 1)),
        "ns:s1:g1:tt:q:v=-10000-01-01"
    );
    for date in [
        chrono_date(2026, 11, 29),
        chrono_date(0, 1, 1),
        chrono_date(10_000, 1, 1),
        chrono_date(-1, 12, 31),
        chrono_date(-10_000, 1, 1),
        NaiveDate::MIN,
        NaiveDate::MAX,
    ] {
        let chrono_text = date.format("%Y-%m-%d").to_string();
        assert_eq!(key_with(date), key_with(chrono_text.as_str()), "{date}");
        assert_eq!(
            key_with(date),
            key_with(date.to_string().as_str()),
            "{date}"
        );
    }
}

#[test]
fn chrono_instants_are_utc_with_nine_fraction_digits() {
    let nanos = chrono_instant((2026, 11, 29), (10, 20, 30, 123_456_789), 0);
    assert_eq!(
        key_with(nanos.with_timezone(&Utc)),
        "ns:s1:g1:tt:q:v=2026-11-29T10%3A20%3A30.123456789Z"
    );
    let whole = chrono_instant((2026, 11, 29), (10, 20, 30, 0), 0);
    assert_eq!(
        key_with(whole),
        "ns:s1:g1:tt:q:v=2026-11-29T10%3A20%3A30.000000000Z"
    );
    // 15:50:30+05:30 is 10:20:30Z: the offset never reaches the key.
    let india = chrono_instant((2026, 11, 29), (15, 50, 30, 0), 5 * 3600 + 1800);
    assert_eq!(key_with(india), key_with(whole));
    // 2026-11-28T22:20:30-12:00 is the next day in UTC.
    let baker = chrono_instant((2026, 11, 28), (22, 20, 30, 123_456_789), -12 * 3600);
    assert_eq!(key_with(baker), key_with(nanos));
    // One nanosecond apart: different keys.
    let next = chrono_instant((2026, 11, 29), (10, 20, 30, 1), 0);
    assert_eq!(
        key_with(next),
        "ns:s1:g1:tt:q:v=2026-11-29T10%3A20%3A30.000000001Z"
    );
    for instant in [nanos, whole, india, baker, next] {
        assert_eq!(
            key_with(instant),
            key_with(chrono_rfc3339(&instant).as_str()),
            "{instant}"
        );
    }
}

#[test]
fn chrono_leap_seconds_are_second_60() {
    let leap = Utc.from_utc_datetime(
        &chrono_date(2016, 12, 31)
            .and_hms_nano_opt(23, 59, 59, 1_500_000_000)
            .unwrap(),
    );
    assert_eq!(
        key_with(leap),
        "ns:s1:g1:tt:q:v=2016-12-31T23%3A59%3A60.500000000Z"
    );
    assert_eq!(key_with(leap), key_with(chrono_rfc3339(&leap).as_str()));
    // Distinct from the second before and the second after.
    let before = chrono_instant((2016, 12, 31), (23, 59, 59, 500_000_000), 0);
    let after = chrono_instant((2017, 1, 1), (0, 0, 0, 500_000_000), 0);
    assert_ne!(key_with(leap), key_with(before));
    assert_ne!(key_with(leap), key_with(after));
    // A leap second under an offset with a seconds part sits at UTC second 58;
    // chrono formats it as the following second, and so does the key.
    let odd = chrono_instant((2016, 12, 31), (23, 59, 59, 1_500_000_000), 1);
    assert_eq!(
        key_with(odd),
        "ns:s1:g1:tt:q:v=2016-12-31T23%3A59%3A59.500000000Z"
    );
    assert_eq!(key_with(odd), key_with(chrono_rfc3339(&odd).as_str()));
}

// ---------------------------------------------------------------- time

fn time_date(year: i32, month: u8, day: u8) -> time::Date {
    time::Date::from_calendar_date(year, Month::try_from(month).unwrap(), day).unwrap()
}

/// A calendar date as `time` takes it.
type Ymd = (i32, u8, u8);
/// A time of day as `time` takes it, nanoseconds last.
type Hmsn = (u8, u8, u8, u32);

fn time_instant(
    (year, month, day): Ymd,
    (hour, minute, second, nano): Hmsn,
    offset_seconds: i32,
) -> OffsetDateTime {
    time_date(year, month, day)
        .with_hms_nano(hour, minute, second, nano)
        .unwrap()
        .assume_offset(UtcOffset::from_whole_seconds(offset_seconds).unwrap())
}

#[test]
fn time_dates_match_chrono() {
    assert_eq!(
        key_with(time_date(2026, 11, 29)),
        "ns:s1:g1:tt:q:v=2026-11-29"
    );
    assert_eq!(
        key_with(time_date(-1, 12, 31)),
        "ns:s1:g1:tt:q:v=-0001-12-31"
    );
    for (year, month, day) in [
        (2026, 11, 29),
        (7, 3, 1),
        (0, 1, 1),
        (-1, 12, 31),
        (2000, 2, 29),
        (9999, 12, 31),
    ] {
        assert_eq!(
            key_with(time_date(year, month, day)),
            key_with(chrono_date(year, month.into(), day.into())),
            "{year}-{month}-{day}"
        );
    }
    for date in [time::Date::MIN, time::Date::MAX] {
        let (year, month, day) = date.to_calendar_date();
        let same = chrono_date(year, u8::from(month).into(), day.into());
        assert_eq!(key_with(date), key_with(same), "{date}");
    }
}

#[test]
fn time_instants_are_utc_with_nine_fraction_digits() {
    let nanos = time_instant((2026, 11, 29), (10, 20, 30, 123_456_789), 0);
    assert_eq!(
        key_with(nanos),
        "ns:s1:g1:tt:q:v=2026-11-29T10%3A20%3A30.123456789Z"
    );
    let whole = time_instant((2026, 11, 29), (10, 20, 30, 0), 0);
    assert_eq!(
        key_with(whole),
        "ns:s1:g1:tt:q:v=2026-11-29T10%3A20%3A30.000000000Z"
    );
    let india = time_instant((2026, 11, 29), (15, 50, 30, 0), 5 * 3600 + 1800);
    assert_eq!(key_with(india), key_with(whole));
    let utc = UtcDateTime::new(
        time_date(2026, 11, 29),
        time::Time::from_hms(10, 20, 30).unwrap(),
    );
    assert_eq!(key_with(utc), key_with(whole));
    assert_eq!(key_with(nanos.to_utc()), key_with(nanos));
}

/// The same instants through both crates give the same keys, whatever the
/// offset each was built with.
#[test]
fn chrono_and_time_agree_on_instants() {
    let cases: [(Ymd, Hmsn, i32); 9] = [
        ((2026, 11, 29), (10, 20, 30, 123_456_789), 0),
        ((2026, 11, 29), (10, 20, 30, 0), 0),
        ((2026, 11, 29), (15, 50, 30, 0), 5 * 3600 + 1800),
        ((2026, 11, 28), (22, 20, 30, 999_999_999), -12 * 3600),
        ((2024, 2, 29), (23, 59, 59, 1), -(3 * 3600 + 1800)),
        ((1970, 1, 1), (0, 0, 0, 0), 0),
        ((1969, 12, 31), (23, 59, 59, 999_999_999), 14 * 3600),
        ((1, 1, 1), (0, 0, 0, 0), 3600),
        ((9999, 12, 31), (23, 0, 0, 0), -3600),
    ];
    for ((year, month, day), (hour, minute, second, nano), offset) in cases {
        let with_time = time_instant((year, month, day), (hour, minute, second, nano), offset);
        let with_chrono = chrono_instant(
            (year, month.into(), day.into()),
            (hour.into(), minute.into(), second.into(), nano),
            offset,
        );
        assert_eq!(key_with(with_time), key_with(with_chrono), "{with_time}");
        // `UtcDateTime` has `time`'s date range: the last case is past it.
        if let Some(utc) = with_time.checked_to_utc() {
            assert_eq!(key_with(utc), key_with(with_chrono), "{with_time}");
        }
        assert_eq!(
            key_with(with_time),
            key_with(chrono_rfc3339(&with_chrono).as_str()),
            "{with_time}"
        );
    }
    // 0001-01-01T00:00:00+01:00 is in year 0 in UTC.
    assert_eq!(
        key_with(time_instant((1, 1, 1), (0, 0, 0, 0), 3600)),
        "ns:s1:g1:tt:q:v=0000-12-31T23%3A00%3A00.000000000Z"
    );
}

/// At the ends of `time`'s range, a non-zero offset puts the UTC date outside
/// it; the key is still written, as chrono writes that instant.
#[test]
fn time_instants_beyond_its_utc_range() {
    let first = time::Date::MIN
        .midnight()
        .assume_offset(UtcOffset::from_hms(1, 0, 0).unwrap());
    let last = time::Date::MAX
        .with_hms_nano(23, 59, 59, 999_999_999)
        .unwrap()
        .assume_offset(UtcOffset::from_hms(-1, 0, 0).unwrap());
    for instant in [first, last] {
        let (year, month, day) = instant.to_calendar_date();
        let (hour, minute, second, nano) = instant.to_hms_nano();
        let same = chrono_instant(
            (year, u8::from(month).into(), day.into()),
            (hour.into(), minute.into(), second.into(), nano),
            instant.offset().whole_seconds(),
        );
        assert_eq!(key_with(instant), key_with(same), "{instant}");
    }
    if time::Date::MIN.year() == -9999 {
        assert_eq!(
            key_with(first),
            "ns:s1:g1:tt:q:v=-10000-12-31T23%3A00%3A00.000000000Z"
        );
        assert_eq!(
            key_with(last),
            "ns:s1:g1:tt:q:v=%2B10000-01-01T00%3A59%3A59.999999999Z"
        );
    }
}

// ---------------------------------------------------------------- url

#[test]
fn url_is_its_normalized_serialization() {
    let url = Url::parse("HTTP://Ex.COM:80").unwrap();
    assert_eq!(url.as_str(), "http://ex.com/");
    assert_eq!(key_with(&url), "ns:s1:g1:tt:q:v=http%3A%2F%2Fex.com%2F");
    assert_eq!(
        key_with(Url::parse("http://ex.com/").unwrap()),
        key_with(&url)
    );
    let spaced = Url::parse("https://ex.com/a b?q=1").unwrap();
    assert_eq!(
        key_with(spaced),
        "ns:s1:g1:tt:q:v=https%3A%2F%2Fex.com%2Fa%2520b%3Fq%3D1"
    );
}

// ---------------------------------------------------------------- derive

/// An organization's invoices issued on a day, optionally up to an instant.
#[derive(CacheKey)]
#[cache_key(namespace = "billing", operation = "invoices", schema = 2)]
struct Invoices {
    #[tenant]
    org: Uuid,
    #[criterion]
    day: NaiveDate,
    #[criterion]
    until: Option<DateTime<Utc>>,
    #[criterion]
    page: u32,
}

#[test]
fn derive_with_uuid_tenant_and_chrono_criteria() {
    let query = Invoices {
        org: ORG,
        day: chrono_date(2026, 11, 29),
        until: None,
        page: 2,
    };
    let key = query.cache_key(7).unwrap();
    assert_eq!(
        key.as_str(),
        format!("billing:s2:g7:t{ORG_TEXT}:invoices:day=2026-11-29&page=2")
    );
    let built = KeyBuilder::new("billing", "invoices")
        .schema(2)
        .generation(7)
        .tenant(ORG)
        .criterion("page", 2u32)
        .criterion("day", chrono_date(2026, 11, 29))
        .build()
        .unwrap();
    assert_eq!(key, built);

    // With `until` the criteria pass 48 bytes and are summarized; the builder
    // (with a `time` instant for the same moment) agrees byte for byte.
    let until = chrono_instant((2026, 11, 29), (18, 0, 0, 0), 3600).with_timezone(&Utc);
    let query = Invoices {
        until: Some(until),
        ..query
    };
    let key = query.cache_key(7).unwrap();
    let built = KeyBuilder::new("billing", "invoices")
        .schema(2)
        .generation(7)
        .tenant(ORG)
        .criterion("day", time_date(2026, 11, 29))
        .criterion("page", 2u32)
        .criterion("until", time_instant((2026, 11, 29), (17, 0, 0, 0), 0))
        .build()
        .unwrap();
    assert_eq!(key, built);
    assert!(
        key.as_str()
            .starts_with(&format!("billing:s2:g7:t{ORG_TEXT}:invoices:c_"))
    );
}
