//! Rampart's one time module. UTC timestamps as Rampart writes them: RFC 3339 in UTC with a
//! `Z` suffix and a fixed width (`2026-11-24T05:09:54Z`, or `2026-11-24T05:09:54.123Z` with
//! milliseconds), so they sort as text. Dataset manifests, eval runs, discovery records and
//! the audit log all write their times through [`UtcTime`]; evaluation run ids
//! (`eval_20261124_050954`) are [`UtcTime::to_run_id`] and read back by [`run_id_timestamp`].
//! What people type (`--since 24h`, `--ttl 7d`, a date) is read by [`parse_time`] and
//! [`parse_duration_ms`]; every reading error is a [`TimeError`].
//!
//! ```
//! use rampart_core::timefmt::{Precision, UtcTime};
//!
//! let t = UtcTime::from_unix_ms(1_795_496_400_500).unwrap();
//! assert_eq!(t.to_rfc3339(Precision::Seconds), "2026-11-24T05:00:00Z");
//! assert_eq!(t.to_rfc3339(Precision::Millis), "2026-11-24T05:00:00.500Z");
//! assert_eq!((t.year, t.month, t.day), (2026, 11, 24));
//! ```

use time::format_description::well_known::Rfc3339;
use time::{Date, Month, OffsetDateTime, Time};

/// How much of the second a timestamp shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Precision {
    /// Whole seconds (`…T05:00:00Z`).
    Seconds,
    /// Milliseconds (`…T05:00:00.500Z`).
    Millis,
}

/// A point in time broken down in UTC, in years 0–9999 (the range a four-digit year
/// covers).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UtcTime {
    /// Year, 0–9999.
    pub year: u16,
    /// Month, 1–12.
    pub month: u8,
    /// Day of the month, 1–31.
    pub day: u8,
    /// Hour, 0–23.
    pub hour: u8,
    /// Minute, 0–59.
    pub minute: u8,
    /// Second, 0–59.
    pub second: u8,
    /// Millisecond, 0–999.
    pub millisecond: u16,
}

impl UtcTime {
    /// 1970-01-01T00:00:00Z.
    pub const UNIX_EPOCH: UtcTime = UtcTime {
        year: 1970,
        month: 1,
        day: 1,
        hour: 0,
        minute: 0,
        second: 0,
        millisecond: 0,
    };

    /// Breaks down Unix epoch milliseconds (negative ones are before 1970); `None` outside
    /// years 0–9999.
    pub fn from_unix_ms(ms: i64) -> Option<UtcTime> {
        let t = OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000).ok()?;
        Some(UtcTime {
            year: u16::try_from(t.year()).ok().filter(|y| *y <= 9999)?,
            month: u8::from(t.month()),
            day: t.day(),
            hour: t.hour(),
            minute: t.minute(),
            second: t.second(),
            millisecond: t.millisecond(),
        })
    }

    /// The current time ([`UtcTime::UNIX_EPOCH`] if the clock is outside years 1970–9999).
    pub fn now() -> UtcTime {
        UtcTime::from_unix_ms(now_unix_ms()).unwrap_or(UtcTime::UNIX_EPOCH)
    }

    /// RFC 3339 in UTC, fixed width: `YYYY-MM-DDTHH:MM:SSZ` or `YYYY-MM-DDTHH:MM:SS.mmmZ`.
    pub fn to_rfc3339(self, precision: Precision) -> String {
        let UtcTime {
            year,
            month,
            day,
            hour,
            minute,
            second,
            millisecond,
        } = self;
        match precision {
            Precision::Seconds => {
                format!("{year:04}-{month:02}-{day:02}T{hour:02}:{minute:02}:{second:02}Z")
            }
            Precision::Millis => format!(
                "{year:04}-{month:02}-{day:02}T{hour:02}:{minute:02}:{second:02}.{millisecond:03}Z"
            ),
        }
    }
}

impl UtcTime {
    /// An evaluation run id: `eval_YYYYMMDD_HHMMSS` (read back by [`run_id_timestamp`]).
    pub fn to_run_id(self) -> String {
        let UtcTime {
            year,
            month,
            day,
            hour,
            minute,
            second,
            ..
        } = self;
        format!("eval_{year:04}{month:02}{day:02}_{hour:02}{minute:02}{second:02}")
    }
}

/// Formats Unix epoch milliseconds as RFC 3339 in UTC with milliseconds
/// (`2026-11-24T05:09:54.123Z`, fixed width, so it sorts as text); a value outside years
/// 0–9999 is written as the number.
pub fn format_time_ms(ms: i64) -> String {
    UtcTime::from_unix_ms(ms).map_or_else(|| ms.to_string(), |t| t.to_rfc3339(Precision::Millis))
}

/// The current time, Unix epoch milliseconds (0 if the clock is before 1970).
pub fn now_unix_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// The current time as RFC 3339 UTC, to the second: `2026-12-01T10:16:02Z`.
pub fn now_rfc3339() -> String {
    UtcTime::now().to_rfc3339(Precision::Seconds)
}

/// A time, duration, run id or timestamp that does not read; the message quotes the input.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TimeError {
    /// Not a number and a unit.
    #[error("invalid duration {0:?}: expected a number and a unit s, m, h, d or w (e.g. 24h, 30d)")]
    Duration(String),
    /// RFC 3339 that does not fit in Unix epoch milliseconds.
    #[error("time {0:?} is out of range")]
    OutOfRange(String),
    /// Neither RFC 3339, a date nor a duration.
    #[error(
        "invalid time {0:?}: expected RFC 3339 (2026-11-24T05:00:00Z), a date (2026-11-24) or \
         a duration ago (24h, 7d)"
    )]
    Time(String),
    /// Not `eval_YYYYMMDD_HHMMSS`.
    #[error("{0:?} is not eval_YYYYMMDD_HHMMSS")]
    RunId(String),
    /// Not `YYYY-MM-DDTHH:MM:SS[.fraction]Z`.
    #[error("{0:?} is not an ISO 8601 UTC timestamp (YYYY-MM-DDTHH:MM:SSZ)")]
    NotIsoUtc(String),
    /// The right shape, but no such date or time of day.
    #[error("{input:?}: {problem}")]
    Calendar {
        /// The run id or timestamp.
        input: String,
        /// What does not exist.
        problem: CalendarError,
    },
}

/// A date or time of day that does not exist.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CalendarError {
    /// The year does not fit.
    #[error("year out of range")]
    Year,
    /// The month is not 1–12.
    #[error("month {0:02} out of range")]
    Month(u32),
    /// The day does not fit a byte.
    #[error("day {0} out of range")]
    Day(u32),
    /// No such day in that month (leap years counted).
    #[error("no such date {0:04}-{1:02}-{2:02}")]
    Date(u32, u32, u32),
    /// No such time of day (hours 00–23, minutes and seconds 00–59).
    #[error("no such time {0:02}:{1:02}:{2:02}")]
    Time(u8, u8, u8),
}

/// Parses a duration: a positive integer and a unit, `s`, `m`, `h`, `d` or `w` (`90s`, `15m`,
/// `24h`, `7d`, `2w`), into milliseconds.
pub fn parse_duration_ms(s: &str) -> Result<i64, TimeError> {
    let s = s.trim();
    let bad = || TimeError::Duration(s.to_string());
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
pub fn parse_time(s: &str, now_ms: i64) -> Result<i64, TimeError> {
    let t = s.trim();
    if let Ok(dt) = OffsetDateTime::parse(t, &Rfc3339) {
        return i64::try_from(dt.unix_timestamp_nanos() / 1_000_000)
            .map_err(|_| TimeError::OutOfRange(t.to_string()));
    }
    if let Some(ms) = parse_date(t) {
        return Ok(ms);
    }
    match parse_duration_ms(t) {
        Ok(d) => Ok(now_ms.saturating_sub(d)),
        Err(_) => Err(TimeError::Time(t.to_string())),
    }
}

fn parse_date(s: &str) -> Option<i64> {
    let mut parts = s.split('-');
    let (y, m, d) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() || y.len() != 4 || m.len() != 2 || d.len() != 2 {
        return None;
    }
    let month = Month::try_from(m.parse::<u8>().ok()?).ok()?;
    let date = Date::from_calendar_date(y.parse().ok()?, month, d.parse().ok()?).ok()?;
    Some(date.midnight().assume_utc().unix_timestamp() * 1000)
}

fn digits(s: &str) -> Option<u32> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// A calendar date and time of day, checked (leap years, month lengths, 00–23 h).
fn checked(y: u32, mo: u32, d: u32, h: u32, mi: u32, s: u32) -> Result<(), CalendarError> {
    let year = i32::try_from(y).map_err(|_| CalendarError::Year)?;
    let month = u8::try_from(mo)
        .ok()
        .and_then(|m| Month::try_from(m).ok())
        .ok_or(CalendarError::Month(mo))?;
    let day = u8::try_from(d).map_err(|_| CalendarError::Day(d))?;
    Date::from_calendar_date(year, month, day).map_err(|_| CalendarError::Date(y, mo, d))?;
    let (h, mi, s) = (
        u8::try_from(h).unwrap_or(u8::MAX),
        u8::try_from(mi).unwrap_or(u8::MAX),
        u8::try_from(s).unwrap_or(u8::MAX),
    );
    Time::from_hms(h, mi, s).map_err(|_| CalendarError::Time(h, mi, s))?;
    Ok(())
}

/// Parses `eval_{YYYYMMDD_HHMMSS}` and returns the run's time as ISO 8601 UTC.
pub fn run_id_timestamp(run_id: &str) -> Result<String, TimeError> {
    let bad = || TimeError::RunId(run_id.to_string());
    let rest = run_id.strip_prefix("eval_").ok_or_else(bad)?;
    let (date, time) = rest.split_once('_').ok_or_else(bad)?;
    if date.len() != 8 || time.len() != 6 || !date.is_ascii() || !time.is_ascii() {
        return Err(bad());
    }
    let (y, mo, d) = (
        digits(&date[..4]).ok_or_else(bad)?,
        digits(&date[4..6]).ok_or_else(bad)?,
        digits(&date[6..]).ok_or_else(bad)?,
    );
    let (h, mi, s) = (
        digits(&time[..2]).ok_or_else(bad)?,
        digits(&time[2..4]).ok_or_else(bad)?,
        digits(&time[4..]).ok_or_else(bad)?,
    );
    checked(y, mo, d, h, mi, s).map_err(|problem| TimeError::Calendar {
        input: run_id.to_string(),
        problem,
    })?;
    Ok(format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}Z"))
}

/// Checks an ISO 8601 UTC timestamp: `YYYY-MM-DDTHH:MM:SS[.fraction]Z`.
pub fn check_iso_utc(s: &str) -> Result<(), TimeError> {
    let bad = || TimeError::NotIsoUtc(s.to_string());
    let body = s.strip_suffix('Z').ok_or_else(bad)?;
    let (date, time) = body.split_once('T').ok_or_else(bad)?;
    let dparts: Vec<&str> = date.split('-').collect();
    let [y, mo, d] = dparts.as_slice() else {
        return Err(bad());
    };
    if y.len() != 4 || mo.len() != 2 || d.len() != 2 {
        return Err(bad());
    }
    let (hms, frac) = match time.split_once('.') {
        Some((hms, frac)) => (hms, Some(frac)),
        None => (time, None),
    };
    if let Some(f) = frac
        && (f.is_empty() || !f.bytes().all(|b| b.is_ascii_digit()))
    {
        return Err(bad());
    }
    let tparts: Vec<&str> = hms.split(':').collect();
    let [h, mi, sec] = tparts.as_slice() else {
        return Err(bad());
    };
    if h.len() != 2 || mi.len() != 2 || sec.len() != 2 {
        return Err(bad());
    }
    let n = |x: &str| digits(x).ok_or_else(bad);
    checked(n(y)?, n(mo)?, n(d)?, n(h)?, n(mi)?, n(sec)?).map_err(|problem| TimeError::Calendar {
        input: s.to_string(),
        problem,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_fixed_width_utc() {
        let at = |ms, p| UtcTime::from_unix_ms(ms).map(|t| t.to_rfc3339(p));
        assert_eq!(
            at(0, Precision::Seconds).as_deref(),
            Some("1970-01-01T00:00:00Z")
        );
        assert_eq!(
            at(-1, Precision::Millis).as_deref(),
            Some("1969-12-31T23:59:59.999Z")
        );
        // 2000-02-29 12:34:56 UTC, a leap day.
        assert_eq!(
            at(951_827_696_000, Precision::Seconds).as_deref(),
            Some("2000-02-29T12:34:56Z")
        );
        assert_eq!(
            at(1_795_419_112_007, Precision::Millis).as_deref(),
            Some("2026-11-23T07:31:52.007Z")
        );
        assert_eq!(at(i64::MAX, Precision::Seconds), None);
        assert_eq!(at(-62_167_219_200_001, Precision::Seconds), None); // before year 0
    }

    #[test]
    fn now_is_rfc3339_utc() {
        let t = now_rfc3339();
        assert_eq!(t.len(), 20, "{t}");
        assert!(t.ends_with('Z'));
    }

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

    #[test]
    fn run_ids() {
        assert_eq!(
            run_id_timestamp("eval_20261201_101500").unwrap(),
            "2026-12-01T10:15:00Z"
        );
        assert!(run_id_timestamp("eval_20261301_101500").is_err());
        assert!(run_id_timestamp("eval_20260230_101500").is_err());
        assert!(run_id_timestamp("eval_20261201_241500").is_err());
        assert!(run_id_timestamp("eval_2026120_101500").is_err());
        assert!(run_id_timestamp("run_20261201_101500").is_err());
        assert!(run_id_timestamp("eval_20261201-101500").is_err());
        assert!(run_id_timestamp("eval_2026é01_101500").is_err());
        assert!(run_id_timestamp("eval_20261201_1015é").is_err());
        let t = UtcTime::from_unix_ms(1_795_419_112_007).unwrap();
        assert_eq!(t.to_run_id(), "eval_20261123_073152");
        assert_eq!(
            run_id_timestamp(&t.to_run_id()).unwrap(),
            t.to_rfc3339(Precision::Seconds)
        );
    }

    #[test]
    fn calendar_errors_name_the_input() {
        assert_eq!(
            run_id_timestamp("eval_20260230_101500")
                .unwrap_err()
                .to_string(),
            "\"eval_20260230_101500\": no such date 2026-02-30"
        );
        assert_eq!(
            check_iso_utc("2026-12-01T25:16:02Z")
                .unwrap_err()
                .to_string(),
            "\"2026-12-01T25:16:02Z\": no such time 25:16:02"
        );
    }

    #[test]
    fn iso_timestamps() {
        for ok in [
            "2026-12-01T10:16:02Z",
            "2024-02-29T00:00:00Z",
            "2026-12-01T10:16:02.123Z",
        ] {
            assert!(check_iso_utc(ok).is_ok(), "{ok}");
        }
        for bad in [
            "2026-12-01T10:16:02",
            "2026-12-01 10:16:02Z",
            "2026-12-01T10:16:02+01:00",
            "2025-02-29T00:00:00Z",
            "2026-12-01T25:16:02Z",
            "2026-12-1T10:16:02Z",
            "2026-12-01T10:16:02.Z",
            "yesterday",
        ] {
            assert!(check_iso_utc(bad).is_err(), "{bad}");
        }
        check_iso_utc(&now_rfc3339()).unwrap();
    }
}
