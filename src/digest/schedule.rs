//! When the day's digest runs: the local date and time of an instant in the configured
//! zone, and whether that time is before the window, in it, or past it.

use jiff::{Timestamp, civil::Time, tz::TimeZone};

use crate::util::UnixMs;

/// An instant as the digest reads it: its local date (`YYYY-MM-DD`) and time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Local {
    pub date: String,
    pub time: Time,
}

impl Local {
    /// `at` in `tz`.
    pub fn of(at: UnixMs, tz: &TimeZone) -> Self {
        let ts = Timestamp::from_millisecond(at.millis()).unwrap_or(Timestamp::UNIX_EPOCH);
        let zoned = ts.to_zoned(tz.clone());
        Self {
            date: zoned.date().to_string(),
            time: zoned.time(),
        }
    }
}

/// `HH:MM` of `at` in `tz` (transcript lines).
pub fn clock_time(at: UnixMs, tz: &TimeZone) -> String {
    let t = Local::of(at, tz).time;
    format!("{:02}:{:02}", t.hour(), t.minute())
}

/// Where a local time stands against the window `start`..`end`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Window {
    /// Not yet time today.
    Before,
    /// Time to run.
    Open,
    /// The window passed: today's run is skipped (the process was down through it).
    Passed,
}

impl Window {
    /// Where `now` stands.
    pub fn of(now: Time, start: Time, end: Time) -> Self {
        if now < start {
            Self::Before
        } else if now < end {
            Self::Open
        } else {
            Self::Passed
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_local_date_and_time_follow_the_zone() {
        // 2026-12-01T20:30:00Z is 04:30 the next day in Shanghai (UTC+8).
        let at = UnixMs(1_764_621_000_000);
        let utc = Local::of(at, &TimeZone::UTC);
        assert_eq!(utc.date, "2025-12-01");
        assert_eq!(clock_time(at, &TimeZone::UTC), "20:30");
        let sh = Local::of(at, &TimeZone::get("Asia/Shanghai").expect("bundled zone"));
        assert_eq!(sh.date, "2025-12-02");
        assert_eq!(sh.time, Time::constant(4, 30, 0, 0));
    }

    #[test]
    fn the_window_is_start_inclusive_end_exclusive() {
        let (s, e) = (Time::constant(4, 10, 0, 0), Time::constant(8, 0, 0, 0));
        assert_eq!(
            Window::of(Time::constant(4, 9, 59, 0), s, e),
            Window::Before
        );
        assert_eq!(Window::of(s, s, e), Window::Open);
        assert_eq!(Window::of(Time::constant(7, 59, 59, 0), s, e), Window::Open);
        assert_eq!(Window::of(e, s, e), Window::Passed);
    }
}
