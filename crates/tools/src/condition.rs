//! Context conditions, compiled once: the caller's role and attributes, weekly time windows
//! at a fixed UTC offset. Evaluation allocates nothing.
//!
//! Calendar arithmetic is written here rather than taken from a crate: a weekday and a
//! minute of the day from Unix time at a fixed offset are two `rem_euclid`s, and a time
//! zone database (daylight saving) is deliberately out of scope.

use crate::CallContext;
use crate::policy::{AttributeMatch, RequirementSpec, TimeWindowSpec, Weekday};

/// Why a condition could not be compiled.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConditionError {
    /// `requires` with nothing in it.
    #[error("`requires` has no condition (role_in, attributes or time)")]
    Empty,
    /// `role_in = []`.
    #[error("`role_in` must not be empty")]
    EmptyRoles,
    /// A time window with neither days nor hours.
    #[error("`time` has neither `days` nor `hours`")]
    EmptyWindow,
    /// Not `HH:MM`.
    #[error("time `{0}` is not HH:MM (00:00 to 24:00)")]
    Clock(String),
    /// Not `±HH:MM` or `Z`.
    #[error("utc_offset `{0}` is not ±HH:MM (at most 14:00) or Z")]
    Offset(String),
}

/// Why a condition did not hold (no values: attributes may be personal).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ContextFailure<'a> {
    Role,
    Attribute(&'a str),
    NoTime,
    OutsideWindow,
}

impl ContextFailure<'_> {
    pub(crate) fn reason(self) -> String {
        match self {
            ContextFailure::Role => "caller role is not among the allowed roles".into(),
            ContextFailure::Attribute(a) => {
                format!("caller attribute `{a}` is missing or has another value")
            }
            ContextFailure::NoTime => "no time given for a time-window condition".into(),
            ContextFailure::OutsideWindow => "outside the allowed time window".into(),
        }
    }
}

/// A compiled `requires`.
#[derive(Debug, Clone)]
pub(crate) struct Requirement {
    role_in: Option<Vec<String>>,
    attributes: Vec<(String, AttributeMatch)>,
    time: Option<TimeWindow>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TimeWindow {
    /// Bit `i` set: weekday `i` (Monday = 0) is open.
    days: u8,
    /// Minutes of the day, `[from, to)`; `from > to` spans midnight; `None`: all day.
    minutes: Option<(u16, u16)>,
    offset_minutes: i32,
}

const MINUTES_PER_DAY: i64 = 24 * 60;

impl Requirement {
    pub(crate) fn compile(spec: &RequirementSpec) -> Result<Self, ConditionError> {
        if spec.role_in.is_none() && spec.attributes.is_empty() && spec.time.is_none() {
            return Err(ConditionError::Empty);
        }
        if spec.role_in.as_ref().is_some_and(Vec::is_empty) {
            return Err(ConditionError::EmptyRoles);
        }
        Ok(Self {
            role_in: spec.role_in.clone(),
            attributes: spec
                .attributes
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            time: spec.time.as_ref().map(TimeWindow::compile).transpose()?,
        })
    }

    /// The first part that does not hold, if any.
    pub(crate) fn evaluate(&self, ctx: &CallContext) -> Result<(), ContextFailure<'_>> {
        if let Some(roles) = &self.role_in
            && !ctx
                .caller
                .role
                .as_deref()
                .is_some_and(|r| roles.iter().any(|x| x == r))
        {
            return Err(ContextFailure::Role);
        }
        for (name, want) in &self.attributes {
            if !ctx
                .caller
                .attributes
                .get(name)
                .is_some_and(|v| attribute_matches(want, v))
            {
                return Err(ContextFailure::Attribute(name));
            }
        }
        if let Some(w) = &self.time {
            let Some(now) = ctx.now_ms else {
                return Err(ContextFailure::NoTime);
            };
            if !w.contains(now) {
                return Err(ContextFailure::OutsideWindow);
            }
        }
        Ok(())
    }
}

fn attribute_matches(want: &AttributeMatch, got: &serde_json::Value) -> bool {
    use serde_json::Value;
    match (want, got) {
        (AttributeMatch::Bool(w), Value::Bool(g)) => w == g,
        (AttributeMatch::Integer(w), Value::Number(g)) => {
            g.as_i64() == Some(*w) || g.as_f64().is_some_and(|g| g == *w as f64)
        }
        (AttributeMatch::Float(w), Value::Number(g)) => g.as_f64() == Some(*w),
        (AttributeMatch::Text(w), Value::String(g)) => w == g,
        (AttributeMatch::AnyOf(ws), Value::String(g)) => ws.iter().any(|w| w == g),
        // A string "true" is not `true`: the application states its attributes typed.
        _ => false,
    }
}

impl TimeWindow {
    pub(crate) fn compile(spec: &TimeWindowSpec) -> Result<Self, ConditionError> {
        if spec.days.is_none() && spec.hours.is_none() {
            return Err(ConditionError::EmptyWindow);
        }
        let days = match &spec.days {
            None => 0x7f,
            Some(ds) => ds.iter().fold(0u8, |acc, d| acc | (1 << weekday_index(*d))),
        };
        let minutes = spec
            .hours
            .as_ref()
            .map(|[a, b]| Ok::<_, ConditionError>((clock(a)?, clock(b)?)))
            .transpose()?;
        let offset_minutes = spec.utc_offset.as_deref().map_or(Ok(0), offset)?;
        Ok(Self {
            days,
            minutes,
            offset_minutes,
        })
    }

    /// Whether the window can never be open (no day, or an empty span of hours).
    pub(crate) fn is_empty(&self) -> bool {
        self.days == 0 || self.minutes.is_some_and(|(a, b)| a == b)
    }

    pub(crate) fn contains(&self, now_ms: u64) -> bool {
        let secs = i64::try_from(now_ms / 1000).unwrap_or(i64::MAX / 2);
        let local_minutes = secs / 60 + i64::from(self.offset_minutes);
        let day = local_minutes.div_euclid(MINUTES_PER_DAY);
        let minute = local_minutes.rem_euclid(MINUTES_PER_DAY);
        // 1970-01-01 was a Thursday (index 3, Monday = 0).
        let weekday = (day + 3).rem_euclid(7);
        let Some((from, to)) = self.minutes.map(|(a, b)| (i64::from(a), i64::from(b))) else {
            return self.days & (1 << weekday) != 0;
        };
        if from <= to {
            self.days & (1 << weekday) != 0 && (from..to).contains(&minute)
        } else if minute >= from {
            // The evening part of a span over midnight belongs to the day it starts.
            self.days & (1 << weekday) != 0
        } else if minute < to {
            // The morning part belongs to the day before.
            self.days & (1 << (weekday + 6).rem_euclid(7)) != 0
        } else {
            false
        }
    }
}

fn weekday_index(d: Weekday) -> u8 {
    match d {
        Weekday::Mon => 0,
        Weekday::Tue => 1,
        Weekday::Wed => 2,
        Weekday::Thu => 3,
        Weekday::Fri => 4,
        Weekday::Sat => 5,
        Weekday::Sun => 6,
    }
}

/// `HH:MM` → minutes of the day (`24:00` is the end of the day).
fn clock(s: &str) -> Result<u16, ConditionError> {
    let bad = || ConditionError::Clock(s.to_string());
    let (h, m) = s.split_once(':').ok_or_else(bad)?;
    if h.len() != 2 || m.len() != 2 {
        return Err(bad());
    }
    let h: u16 = h.parse().map_err(|_| bad())?;
    let m: u16 = m.parse().map_err(|_| bad())?;
    if m >= 60 || h > 24 || (h == 24 && m != 0) {
        return Err(bad());
    }
    Ok(h * 60 + m)
}

/// `±HH:MM` or `Z` → minutes east of UTC.
fn offset(s: &str) -> Result<i32, ConditionError> {
    let bad = || ConditionError::Offset(s.to_string());
    if s == "Z" || s == "z" {
        return Ok(0);
    }
    let (sign, rest) = match s.as_bytes().first() {
        Some(b'+') => (1, &s[1..]),
        Some(b'-') => (-1, &s[1..]),
        _ => return Err(bad()),
    };
    let m = i32::from(clock(rest).map_err(|_| bad())?);
    if m > 14 * 60 {
        return Err(bad());
    }
    Ok(sign * m)
}

#[cfg(test)]
mod tests {
    use super::*;

    // 2026-11-26 (a Thursday) 12:00:00 UTC.
    const THU_NOON_UTC: u64 = 1_795_694_400_000;
    const HOUR: u64 = 3_600_000;

    fn window(
        days: Option<Vec<Weekday>>,
        hours: Option<[&str; 2]>,
        off: Option<&str>,
    ) -> TimeWindow {
        TimeWindow::compile(&TimeWindowSpec {
            days,
            hours: hours.map(|[a, b]| [a.to_string(), b.to_string()]),
            utc_offset: off.map(str::to_string),
        })
        .unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn weekdays_and_hours_at_an_offset() {
        let weekdays = Some(vec![
            Weekday::Mon,
            Weekday::Tue,
            Weekday::Wed,
            Weekday::Thu,
            Weekday::Fri,
        ]);
        let office = window(weekdays.clone(), Some(["09:00", "17:00"]), None);
        assert!(office.contains(THU_NOON_UTC));
        assert!(!office.contains(THU_NOON_UTC + 5 * HOUR));
        assert!(office.contains(THU_NOON_UTC + 5 * HOUR - 1000));
        assert!(!office.contains(THU_NOON_UTC + 2 * 24 * HOUR)); // Saturday
        // New York (-05:00): 12:00 UTC is 07:00 there, before opening.
        let ny = window(weekdays, Some(["09:00", "17:00"]), Some("-05:00"));
        assert!(!ny.contains(THU_NOON_UTC));
        assert!(ny.contains(THU_NOON_UTC + 3 * HOUR));
        // Over midnight: Thursday 22:00 to Friday 06:00 belongs to Thursday.
        let night = window(Some(vec![Weekday::Thu]), Some(["22:00", "06:00"]), None);
        assert!(night.contains(THU_NOON_UTC + 11 * HOUR)); // Thu 23:00
        assert!(night.contains(THU_NOON_UTC + 15 * HOUR)); // Fri 03:00
        assert!(!night.contains(THU_NOON_UTC + 19 * HOUR)); // Fri 07:00
        assert!(!night.contains(THU_NOON_UTC - 9 * HOUR)); // Thu 03:00 (Wednesday's night)
        let days_only = window(Some(vec![Weekday::Sat, Weekday::Sun]), None, Some("+14:00"));
        assert!(days_only.contains(THU_NOON_UTC + 24 * HOUR)); // Fri 12:00 UTC = Sat 02:00
    }

    #[test]
    fn bad_clocks_and_offsets_are_refused() {
        for bad in ["9:00", "24:01", "12:60", "ab:cd", "1200"] {
            assert!(clock(bad).is_err(), "{bad}");
        }
        assert_eq!(clock("24:00"), Ok(1440));
        for bad in ["01:00", "+15:00", "UTC", "+1"] {
            assert!(offset(bad).is_err(), "{bad}");
        }
        assert_eq!(offset("-05:30"), Ok(-330));
    }
}
