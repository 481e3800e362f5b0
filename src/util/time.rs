//! Moments as the bridge stores them: Unix milliseconds, one type for all of them.

use std::{
    ops::{Add, Sub},
    time::{Duration, SystemTime, UNIX_EPOCH},
};

/// A moment, in milliseconds since the Unix epoch: every time the bridge stores, reads
/// back or shows in JSON (as the plain number).
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    serde::Serialize,
    serde::Deserialize,
    sqlx::Type,
)]
#[serde(transparent)]
#[sqlx(transparent)]
pub struct UnixMs(pub i64);

impl UnixMs {
    /// Now.
    pub fn now() -> Self {
        let ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
            .unwrap_or_default();
        Self(ms)
    }

    /// The milliseconds.
    pub fn millis(self) -> i64 {
        self.0
    }
}

impl Add<Duration> for UnixMs {
    type Output = Self;
    fn add(self, d: Duration) -> Self {
        let ms = i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
        Self(self.0.saturating_add(ms))
    }
}

impl Sub<Duration> for UnixMs {
    type Output = Self;
    fn sub(self, d: Duration) -> Self {
        let ms = i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
        Self(self.0.saturating_sub(ms))
    }
}

impl std::fmt::Display for UnixMs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn moments_move_by_durations_and_serialise_as_the_number() {
        let t = UnixMs(1_000);
        assert_eq!(t + Duration::from_secs(2), UnixMs(3_000));
        assert_eq!(t - Duration::from_millis(500), UnixMs(500));
        assert_eq!(serde_json::to_string(&t).expect("json"), "1000");
        assert!(UnixMs::now() > UnixMs(1_700_000_000_000));
    }
}
