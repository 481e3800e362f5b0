//! Where timed work reads the time: the system clock in production, a clock a test sets
//! and advances, so "40 minutes later" is a call, not a wait.

use std::sync::atomic::{AtomicI64, Ordering};

use super::UnixMs;

/// A source of the current time.
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// Now.
    fn now(&self) -> UnixMs;
}

/// The system clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> UnixMs {
        UnixMs::now()
    }
}

/// A clock that moves only when told (tests, simulations).
#[derive(Debug)]
pub struct ManualClock {
    ms: AtomicI64,
}

impl ManualClock {
    /// Starting at `at`.
    pub fn at(at: UnixMs) -> Self {
        Self {
            ms: AtomicI64::new(at.millis()),
        }
    }

    /// Moves it forward by `by`.
    pub fn advance(&self, by: std::time::Duration) {
        let ms = i64::try_from(by.as_millis()).unwrap_or(i64::MAX);
        self.ms.fetch_add(ms, Ordering::SeqCst);
    }

    /// Sets it to `at`.
    pub fn set(&self, at: UnixMs) {
        self.ms.store(at.millis(), Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> UnixMs {
        UnixMs(self.ms.load(Ordering::SeqCst))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manual_clock_moves_only_when_told() {
        let c = ManualClock::at(UnixMs(1_000));
        assert_eq!(c.now(), UnixMs(1_000));
        c.advance(std::time::Duration::from_secs(2));
        assert_eq!(c.now(), UnixMs(3_000));
        c.set(UnixMs(5));
        assert_eq!(c.now(), UnixMs(5));
        assert!(SystemClock.now().millis() > 1_700_000_000_000);
    }
}
