//! What the committer tells the worker: that new work was stored, and when it last was.
//!
//! The worker wakes on it, and while events keep arriving it claims smaller batches: on
//! SQLite a group commit waits for the worker transaction in hand (see `writer_gate`),
//! so the worker's transactions are kept short while acknowledgements wait on them, and
//! long, cheaper per event, when nothing arrives.

use std::{
    sync::atomic::{AtomicI64, Ordering},
    time::Duration,
};

use tokio::sync::Notify;

use crate::util::UnixMs;

/// The signal (see the module header).
#[derive(Debug, Default)]
pub struct Arrivals {
    wake: Notify,
    /// When new work was last stored (Unix ms; 0: never).
    last: AtomicI64,
}

impl Arrivals {
    /// New work was stored at `at`: wakes the worker.
    pub fn stored(&self, at: UnixMs) {
        self.last.fetch_max(at.0, Ordering::Relaxed);
        self.wake.notify_one();
    }

    /// Waits for the next [`Self::stored`] (or one that came since the last wait).
    pub async fn notified(&self) {
        self.wake.notified().await;
    }

    /// Whether new work was stored within `within` before `now`.
    pub fn recent(&self, now: UnixMs, within: Duration) -> bool {
        let last = self.last.load(Ordering::Relaxed);
        let within = i64::try_from(within.as_millis()).unwrap_or(i64::MAX);
        last > 0 && now.0.saturating_sub(last) <= within
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn work_stored_is_recent_for_the_given_time_only() {
        let a = Arrivals::default();
        let second = Duration::from_secs(1);
        assert!(!a.recent(UnixMs(10_000), second), "nothing stored yet");
        a.stored(UnixMs(10_000));
        assert!(a.recent(UnixMs(10_500), second));
        assert!(a.recent(UnixMs(11_000), second));
        assert!(!a.recent(UnixMs(11_001), second));
        // An earlier time reported late does not move it back.
        a.stored(UnixMs(9_000));
        assert!(a.recent(UnixMs(11_000), second));
    }

    #[tokio::test]
    async fn a_store_before_the_wait_is_not_missed() {
        let a = Arrivals::default();
        a.stored(UnixMs(1));
        a.notified().await;
    }
}
