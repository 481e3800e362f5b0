//! When a long connection acts: its ping timer, how long after a ping the server must
//! have said something (the pong timeout that notices a half-open socket), and the
//! waits between attempts, as the SDKs wait: a random jitter within `ReconnectNonce`
//! before the first attempt of a round, then `ReconnectInterval` between attempts,
//! fixed (Feishu pushes an unacknowledged event again only after about an hour, so a
//! wait that grew would cost users their events for that long).

use std::time::Duration;

use tokio::time::{Instant, MissedTickBehavior};

use super::Timing;

/// The shortest wait between two attempts of a round, whatever the server says: a zero
/// or tiny interval must not make a busy loop of failed attempts.
const MIN_INTERVAL: Duration = Duration::from_secs(1);

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

/// The wait before attempt `attempt` (from 0) of a round of reconnect attempts (a round
/// starts when a connection that was up is lost, and at the bridge's start): a random
/// jitter within the nonce before the first, the interval (at least [`MIN_INTERVAL`])
/// before each after it.
pub(super) fn before_attempt(timing: &Timing, attempt: u64) -> Duration {
    if attempt == 0 {
        jitter(timing.reconnect_nonce)
    } else {
        timing.reconnect_interval.max(MIN_INTERVAL)
    }
}

/// Up to `nonce`, at random (none for a zero nonce: how a test server asks for a prompt
/// reconnect, in every SDK).
fn jitter(nonce: Duration) -> Duration {
    let ms = nonce.as_millis() as u64;
    if ms == 0 {
        return Duration::ZERO;
    }
    Duration::from_millis(rand::random::<u64>() % ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_round_starts_with_a_jitter_within_the_nonce_then_keeps_one_interval() {
        let timing = Timing {
            reconnect_interval: Duration::from_secs(5),
            reconnect_nonce: Duration::from_secs(30),
            ..Timing::default()
        };
        for _ in 0..100 {
            assert!(before_attempt(&timing, 0) < Duration::from_secs(30));
        }
        let waits: Vec<u64> = (1..=12)
            .map(|a| before_attempt(&timing, a).as_secs())
            .collect();
        assert_eq!(waits, [5; 12], "fixed: no growth, however many failed");
        let prompt = Timing {
            reconnect_nonce: Duration::ZERO,
            ..timing
        };
        assert_eq!(before_attempt(&prompt, 0), Duration::ZERO);
    }

    #[test]
    fn a_zero_or_tiny_interval_still_waits_a_second() {
        for interval in [Duration::ZERO, Duration::from_millis(3)] {
            let timing = Timing {
                reconnect_interval: interval,
                ..Timing::default()
            };
            assert_eq!(before_attempt(&timing, 1), MIN_INTERVAL);
            assert_eq!(before_attempt(&timing, 40), MIN_INTERVAL);
        }
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
