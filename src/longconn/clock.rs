//! When a long connection acts: its ping timer, how long after a ping the server must
//! have said something (the pong timeout that notices a half-open socket), and the
//! waits between attempts (the nonce's jitter after a lost connection, then the
//! interval doubling on repeated failure, capped).

use std::time::Duration;

use tokio::time::{Instant, MissedTickBehavior};

/// The longest wait between two attempts, however many failed (never below the
/// server's interval).
const MAX_BACKOFF: Duration = Duration::from_secs(600);

/// How a pong timeout follows the ping interval: as long as one interval, within these.
const PONG_TIMEOUT: (Duration, Duration) = (Duration::from_secs(2), Duration::from_secs(20));

/// Pings every `interval`, the first at once (a fresh connection) or after one interval.
pub(super) fn ping_timer(interval: Duration, now: bool) -> tokio::time::Interval {
    let start = if now {
        Instant::now()
    } else {
        Instant::now() + interval
    };
    let mut timer = tokio::time::interval_at(start, interval.max(Duration::from_millis(100)));
    timer.set_missed_tick_behavior(MissedTickBehavior::Delay);
    timer
}

/// How long after a ping the connection must have said something.
pub(super) fn pong_timeout(ping_interval: Duration) -> Duration {
    ping_interval.clamp(PONG_TIMEOUT.0, PONG_TIMEOUT.1)
}

/// Sleeps until `at`, or forever without one.
pub(super) async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// The wait before the first attempt after a lost connection: up to `nonce`, at random.
pub(super) fn jitter(nonce: Duration) -> Duration {
    let ms = nonce.as_millis() as u64;
    if ms == 0 {
        return Duration::ZERO;
    }
    Duration::from_millis(rand::random::<u64>() % ms)
}

/// The wait after `failures` failed attempts in a row: the interval, doubling, capped.
pub(super) fn backoff(interval: Duration, failures: u32) -> Duration {
    let doubled = interval.saturating_mul(1 << failures.saturating_sub(1).min(16));
    doubled.min(MAX_BACKOFF.max(interval))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_back_off_from_the_interval_doubling_to_a_cap() {
        let i = Duration::from_secs(5);
        let waits: Vec<u64> = (1..=10).map(|f| backoff(i, f).as_secs()).collect();
        assert_eq!(waits, [5, 10, 20, 40, 80, 160, 320, 600, 600, 600]);
        assert_eq!(
            backoff(Duration::from_secs(900), 3),
            Duration::from_secs(900),
            "never below the interval"
        );
        assert!(jitter(Duration::from_secs(30)) < Duration::from_secs(30));
        assert_eq!(jitter(Duration::ZERO), Duration::ZERO);
    }

    #[test]
    fn the_pong_timeout_follows_the_ping_interval_within_bounds() {
        assert_eq!(pong_timeout(Duration::from_secs(1)), Duration::from_secs(2));
        assert_eq!(pong_timeout(Duration::from_secs(5)), Duration::from_secs(5));
        assert_eq!(
            pong_timeout(Duration::from_secs(120)),
            Duration::from_secs(20)
        );
    }
}
