//! A moving events-per-second figure: counts in one-second buckets over a short window,
//! cheap enough to feed from the worker's hot path.

use std::{
    sync::Mutex,
    time::{Duration, Instant},
};

/// Seconds the rate is averaged over.
pub const WINDOW_SECS: u64 = 10;

/// Counts per second over the last [`WINDOW_SECS`] seconds.
#[derive(Debug)]
pub struct RateMeter {
    start: Instant,
    /// `(second since start, count)`, one slot per second of the window.
    slots: Mutex<[(u64, u64); WINDOW_SECS as usize]>,
}

impl Default for RateMeter {
    fn default() -> Self {
        Self {
            start: Instant::now(),
            slots: Mutex::new([(u64::MAX, 0); WINDOW_SECS as usize]),
        }
    }
}

impl RateMeter {
    /// Counts `n` events now.
    pub fn add(&self, n: u64) {
        self.add_at(self.start.elapsed(), n);
    }

    /// The average per second over the window ending now.
    pub fn per_second(&self) -> f64 {
        self.per_second_at(self.start.elapsed())
    }

    fn add_at(&self, since_start: Duration, n: u64) {
        let sec = since_start.as_secs();
        let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        let slot = &mut slots[(sec % WINDOW_SECS) as usize];
        if slot.0 == sec {
            slot.1 += n;
        } else {
            *slot = (sec, n);
        }
    }

    fn per_second_at(&self, since_start: Duration) -> f64 {
        let now = since_start.as_secs();
        let slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        let total: u64 = slots
            .iter()
            .filter(|(sec, _)| *sec != u64::MAX && now.saturating_sub(*sec) < WINDOW_SECS)
            .map(|(_, n)| n)
            .sum();
        total as f64 / WINDOW_SECS as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: u64) -> Duration {
        Duration::from_millis(secs * 1000 + 500)
    }

    #[test]
    fn averages_the_window_and_forgets_what_fell_out_of_it() {
        let m = RateMeter::default();
        assert_eq!(m.per_second_at(at(0)), 0.0);
        m.add_at(at(0), 50);
        m.add_at(at(3), 30);
        m.add_at(at(3), 20);
        assert_eq!(m.per_second_at(at(3)), 10.0);
        // Second 0 leaves the window at second 10; second 3 at 13.
        assert_eq!(m.per_second_at(at(10)), 5.0);
        assert_eq!(m.per_second_at(at(13)), 0.0);
        // A slot reused a window later starts from zero.
        m.add_at(at(13), 7);
        assert_eq!(m.per_second_at(at(13)), 0.7);
    }
}
