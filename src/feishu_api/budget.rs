//! One app's budget of Open API calls. Feishu limits an app to 50 calls per second and
//! 1,000 per minute per API; the bridge keeps every call of the app (all APIs together)
//! under 40 per second and 900 per minute, so that many answers streaming at once never
//! trip the limit. Intermediate updates of a streaming card (whose text the next update
//! repeats) are made only while a spare part of each window is left, so they can never
//! crowd out a final answer, a reply or a read.

use std::{collections::VecDeque, sync::Mutex, time::Duration};

use tokio::time::Instant;

/// How much a call is worth waiting for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Urgency {
    /// Superseded by the next call of its kind (a streaming card's intermediate text):
    /// made only when the budget has room to spare, and never retried.
    Intermediate,
    /// Everything else: waits for room, and is retried on rate limits, transport
    /// failures and server errors.
    Required,
}

/// Calls in any one second.
const PER_SECOND: usize = 40;
/// Calls in any one minute.
const PER_MINUTE: usize = 900;
/// What intermediate calls leave to the others, per second and per minute.
const SPARE: (usize, usize) = (12, 180);

const SECOND: Duration = Duration::from_secs(1);
const MINUTE: Duration = Duration::from_secs(60);

/// The calls of the last minute.
#[derive(Debug, Default)]
pub struct Budget {
    made: Mutex<VecDeque<Instant>>,
}

impl Budget {
    /// Takes room for one call: waits for it when `urgency` is required; `false` at once
    /// when an intermediate call finds no spare room.
    pub async fn take(&self, urgency: Urgency) -> bool {
        loop {
            let admitted = {
                let mut made = self.made.lock().unwrap_or_else(|p| p.into_inner());
                admit(&mut made, Instant::now(), limits(urgency))
            };
            match (admitted, urgency) {
                (Ok(()), _) => return true,
                (Err(_), Urgency::Intermediate) => return false,
                (Err(at), Urgency::Required) => tokio::time::sleep_until(at).await,
            }
        }
    }
}

/// (per second, per minute) for calls of `urgency`.
fn limits(urgency: Urgency) -> (usize, usize) {
    match urgency {
        Urgency::Required => (PER_SECOND, PER_MINUTE),
        Urgency::Intermediate => (PER_SECOND - SPARE.0, PER_MINUTE - SPARE.1),
    }
}

/// Records a call at `now` if fewer than `limits` were made in the second and the
/// minute before; else when the first of them leaves its window.
fn admit(
    made: &mut VecDeque<Instant>,
    now: Instant,
    (per_second, per_minute): (usize, usize),
) -> Result<(), Instant> {
    while made
        .front()
        .is_some_and(|t| now.duration_since(*t) >= MINUTE)
    {
        made.pop_front();
    }
    let last_second = made
        .iter()
        .rev()
        .take_while(|t| now.duration_since(**t) < SECOND)
        .count();
    if made.len() >= per_minute {
        return Err(made[made.len() - per_minute] + MINUTE);
    }
    if last_second >= per_second {
        return Err(made[made.len() - per_second] + SECOND);
    }
    made.push_back(now);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_holds_its_limit_and_frees_as_calls_age() {
        let mut made = VecDeque::new();
        let t0 = Instant::now();
        for _ in 0..PER_SECOND {
            assert_eq!(admit(&mut made, t0, limits(Urgency::Required)), Ok(()));
        }
        assert_eq!(
            admit(&mut made, t0, limits(Urgency::Required)),
            Err(t0 + SECOND),
            "full until the first call is a second old"
        );
        assert_eq!(
            admit(&mut made, t0 + SECOND, limits(Urgency::Required)),
            Ok(())
        );
    }

    #[test]
    fn intermediate_calls_leave_the_spare_room_to_the_others() {
        let mut made = VecDeque::new();
        let t0 = Instant::now();
        let (per_second, _) = limits(Urgency::Intermediate);
        for _ in 0..per_second {
            assert_eq!(admit(&mut made, t0, limits(Urgency::Intermediate)), Ok(()));
        }
        assert!(admit(&mut made, t0, limits(Urgency::Intermediate)).is_err());
        for _ in per_second..PER_SECOND {
            assert_eq!(admit(&mut made, t0, limits(Urgency::Required)), Ok(()));
        }
        assert!(admit(&mut made, t0, limits(Urgency::Required)).is_err());
    }

    #[test]
    fn a_minute_holds_its_limit_across_seconds() {
        let mut made = VecDeque::new();
        let t0 = Instant::now();
        // Spread over the minute so that no second is full.
        let step = Duration::from_millis(60_000 / PER_MINUTE as u64 - 1);
        for i in 0..PER_MINUTE {
            let at = t0 + step * i as u32;
            assert_eq!(
                admit(&mut made, at, limits(Urgency::Required)),
                Ok(()),
                "{i}"
            );
        }
        let now = t0 + step * PER_MINUTE as u32;
        assert_eq!(
            admit(&mut made, now, limits(Urgency::Required)),
            Err(t0 + MINUTE),
            "full until the first call is a minute old"
        );
        assert_eq!(
            admit(&mut made, t0 + MINUTE, limits(Urgency::Required)),
            Ok(())
        );
        assert!(made.len() <= PER_MINUTE);
    }
}
