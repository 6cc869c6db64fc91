//! Checking timestamps and run ids: `eval_{YYYYMMDD_HHMMSS}` and ISO 8601 UTC
//! (`YYYY-MM-DDTHH:MM:SSZ`, optional fraction of a second). Times are written with
//! `rampart_core::timefmt`.

use time::{Date, Month, Time};

fn digits(s: &str) -> Option<u32> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// A calendar date and time of day, checked (leap years, month lengths, 00–23 h).
fn checked(y: u32, mo: u32, d: u32, h: u32, mi: u32, s: u32) -> Result<(), String> {
    let year = i32::try_from(y).map_err(|_| "year out of range".to_string())?;
    let month = u8::try_from(mo)
        .ok()
        .and_then(|m| Month::try_from(m).ok())
        .ok_or_else(|| format!("month {mo:02} out of range"))?;
    let day = u8::try_from(d).map_err(|_| format!("day {d} out of range"))?;
    Date::from_calendar_date(year, month, day)
        .map_err(|_| format!("no such date {y:04}-{mo:02}-{d:02}"))?;
    let (h, mi, s) = (
        u8::try_from(h).unwrap_or(u8::MAX),
        u8::try_from(mi).unwrap_or(u8::MAX),
        u8::try_from(s).unwrap_or(u8::MAX),
    );
    Time::from_hms(h, mi, s).map_err(|_| format!("no such time {h:02}:{mi:02}:{s:02}"))?;
    Ok(())
}

/// Parses `eval_{YYYYMMDD_HHMMSS}` and returns the run's time as ISO 8601 UTC.
pub fn run_id_timestamp(run_id: &str) -> Result<String, String> {
    let bad = || format!("{run_id:?} is not eval_YYYYMMDD_HHMMSS");
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
    checked(y, mo, d, h, mi, s).map_err(|e| format!("{run_id:?}: {e}"))?;
    Ok(format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}Z"))
}

/// Checks an ISO 8601 UTC timestamp: `YYYY-MM-DDTHH:MM:SS[.fraction]Z`.
pub fn check_iso_utc(s: &str) -> Result<(), String> {
    let bad = || format!("{s:?} is not an ISO 8601 UTC timestamp (YYYY-MM-DDTHH:MM:SSZ)");
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
    checked(n(y)?, n(mo)?, n(d)?, n(h)?, n(mi)?, n(sec)?).map_err(|e| format!("{s:?}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

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
    }

    #[test]
    fn now_is_valid() {
        check_iso_utc(&rampart_core::timefmt::now_rfc3339()).unwrap();
    }
}
