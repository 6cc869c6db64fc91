//! Times and durations as the CLI and exports write them.

use crate::AuditError;
use rampart_core::timefmt::{Precision, UtcTime};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// The current time, Unix epoch milliseconds (0 if the clock is before 1970).
pub fn now_ms() -> i64 {
    rampart_core::timefmt::now_unix_ms()
}

/// Formats Unix epoch milliseconds as RFC 3339 in UTC with milliseconds
/// (`2026-11-24T05:09:54.123Z`, fixed width, so it sorts as text); a value outside years
/// 0–9999 is written as the number.
pub fn format_time_ms(ms: i64) -> String {
    UtcTime::from_unix_ms(ms).map_or_else(|| ms.to_string(), |t| t.to_rfc3339(Precision::Millis))
}

/// Parses a duration: a positive integer and a unit, `s`, `m`, `h`, `d` or `w` (`90s`, `15m`,
/// `24h`, `7d`, `2w`), into milliseconds.
pub fn parse_duration_ms(s: &str) -> Result<i64, AuditError> {
    let s = s.trim();
    let bad = || {
        AuditError::Filter(format!(
            "invalid duration {s:?}: expected a number and a unit s, m, h, d or w (e.g. 24h, 30d)"
        ))
    };
    let split = s.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?;
    let (num, unit) = s.split_at(split);
    let n: i64 = num.parse().map_err(|_| bad())?;
    let unit_ms: i64 = match unit {
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        "w" => 7 * 86_400_000,
        _ => return Err(bad()),
    };
    n.checked_mul(unit_ms).ok_or_else(bad)
}

/// Parses a point in time: RFC 3339 (`2026-11-24T05:00:00Z`, `2026-11-24T07:00:00+02:00`), a
/// date (`2026-11-24`, midnight UTC), or a duration before `now_ms` (`24h`, `7d`; see
/// [`parse_duration_ms`]). Returns Unix epoch milliseconds.
pub fn parse_time(s: &str, now_ms: i64) -> Result<i64, AuditError> {
    let t = s.trim();
    if let Ok(dt) = OffsetDateTime::parse(t, &Rfc3339) {
        return i64::try_from(dt.unix_timestamp_nanos() / 1_000_000)
            .map_err(|_| AuditError::Filter(format!("time {t:?} is out of range")));
    }
    if let Some(ms) = parse_date(t) {
        return Ok(ms);
    }
    match parse_duration_ms(t) {
        Ok(d) => Ok(now_ms.saturating_sub(d)),
        Err(_) => Err(AuditError::Filter(format!(
            "invalid time {t:?}: expected RFC 3339 (2026-11-24T05:00:00Z), a date (2026-11-24) \
             or a duration ago (24h, 7d)"
        ))),
    }
}

fn parse_date(s: &str) -> Option<i64> {
    let mut parts = s.split('-');
    let (y, m, d) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() || y.len() != 4 || m.len() != 2 || d.len() != 2 {
        return None;
    }
    let month = time::Month::try_from(m.parse::<u8>().ok()?).ok()?;
    let date = time::Date::from_calendar_date(y.parse().ok()?, month, d.parse().ok()?).ok()?;
    Some(date.midnight().assume_utc().unix_timestamp() * 1000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration_ms("90s").unwrap(), 90_000);
        assert_eq!(parse_duration_ms("15m").unwrap(), 900_000);
        assert_eq!(parse_duration_ms("24h").unwrap(), 86_400_000);
        assert_eq!(parse_duration_ms("30d").unwrap(), 30 * 86_400_000);
        assert_eq!(parse_duration_ms("2w").unwrap(), 14 * 86_400_000);
        for bad in [
            "",
            "d",
            "7",
            "7x",
            "-7d",
            "7 d",
            "1.5h",
            "99999999999999999999d",
        ] {
            assert!(parse_duration_ms(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn times() {
        let now = 1_800_000_000_000;
        assert_eq!(
            parse_time("2026-11-24T05:00:00Z", now).unwrap(),
            1_795_496_400_000
        );
        assert_eq!(
            parse_time("2026-11-24T07:00:00.5+02:00", now).unwrap(),
            1_795_496_400_500
        );
        assert_eq!(parse_time("2026-11-24", now).unwrap(), 1_795_478_400_000);
        assert_eq!(parse_time("24h", now).unwrap(), now - 86_400_000);
        for bad in [
            "yesterday",
            "2026-13-01",
            "2026-11-24T05:00:00",
            "1795910400000",
        ] {
            assert!(parse_time(bad, now).is_err(), "{bad:?}");
        }
        assert_eq!(
            format_time_ms(1_795_496_400_500),
            "2026-11-24T05:00:00.500Z"
        );
        assert_eq!(format_time_ms(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(format_time_ms(-1), "1969-12-31T23:59:59.999Z");
        assert_eq!(format_time_ms(i64::MAX), i64::MAX.to_string());
        let t = 1_795_496_400_123;
        assert_eq!(parse_time(&format_time_ms(t), now).unwrap(), t);
    }
}
