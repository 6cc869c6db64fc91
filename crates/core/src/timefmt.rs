//! UTC timestamps as Rampart writes them: RFC 3339 in UTC with a `Z` suffix and a fixed
//! width (`2026-11-24T05:09:54Z`, or `2026-11-24T05:09:54.123Z` with milliseconds), so they
//! sort as text. Dataset manifests, eval runs, discovery records and the audit log all write
//! their times through [`UtcTime`].
//!
//! ```
//! use rampart_core::timefmt::{Precision, UtcTime};
//!
//! let t = UtcTime::from_unix_ms(1_795_496_400_500).unwrap();
//! assert_eq!(t.to_rfc3339(Precision::Seconds), "2026-11-24T05:00:00Z");
//! assert_eq!(t.to_rfc3339(Precision::Millis), "2026-11-24T05:00:00.500Z");
//! assert_eq!((t.year, t.month, t.day), (2026, 11, 24));
//! ```

use time::OffsetDateTime;

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
}
