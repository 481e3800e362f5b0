//! One app's budget of Open API calls. Feishu limits an app to 50 calls per second and
//! 1,000 per minute per API; the bridge keeps every call of the app (all APIs together)
//! under 30 per second and 900 per minute, so that many answers streaming at once never
//! trip the limit. Feishu counts a call when it arrives, and calls admitted here at an
//! even pace can arrive bunched (a busy host, a slow network): the second's budget
//! leaves room for twenty of them to arrive early or late. Intermediate updates of a streaming card (whose text the next update
//! repeats) are made only while a spare part of each window is left, so they can never
//! crowd out a final answer, a reply or a read.
//!
//! Replicas on one Postgres database keep those limits together: every call is first
//! recorded in the database ([`ApiCalls`]), which admits it only while the app's calls
//! of every replica leave room. When the database cannot record it, a replica falls back
//! to its own share, divided by the live replicas as their heartbeats show: of the
//! minute's budget, and of what the second's budget leaves of Feishu's limit — the
//! other replicas may still be filling the budget through the database, unaware of the
//! calls this one cannot record.

use std::{
    collections::VecDeque,
    sync::{Arc, Mutex},
    time::Duration,
};

use tokio::{sync::watch, time::Instant};

use crate::{
    store::{ApiCalls, CallLimits, CallRoom},
    util::{SystemClock, UnixMs},
};

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

/// Feishu's limit of calls in any one second.
const FEISHU_PER_SECOND: usize = 50;
/// Calls in any one second.
const PER_SECOND: usize = 30;
/// Calls in any one minute.
const PER_MINUTE: usize = 900;
/// What intermediate calls leave to the others, per second and per minute.
const SPARE: (usize, usize) = (9, 180);

const SECOND: Duration = Duration::from_secs(1);
const MINUTE: Duration = Duration::from_secs(60);

/// How long the database is left out of the budget after it failed to record a call.
const LEDGER_PAUSE: Duration = Duration::from_secs(5);

/// How many replicas split every app's limits when the database cannot say what the
/// others called.
#[derive(Debug)]
pub struct ApiShare {
    replicas: watch::Sender<usize>,
}

impl Default for ApiShare {
    fn default() -> Self {
        Self {
            replicas: watch::Sender::new(1),
        }
    }
}

impl ApiShare {
    /// The live replicas, this one included (at least 1).
    pub fn replicas(&self) -> usize {
        (*self.replicas.borrow()).max(1)
    }

    /// The count of live replicas as it changes.
    pub fn subscribe(&self) -> watch::Receiver<usize> {
        self.replicas.subscribe()
    }

    /// Splits the limits between `replicas` replicas from now on; whether that changed
    /// the count.
    pub fn set_replicas(&self, replicas: usize) -> bool {
        let replicas = replicas.max(1);
        self.replicas.send_if_modified(|n| {
            let changed = *n != replicas;
            *n = replicas;
            changed
        })
    }
}

/// Every replica's calls of one app, as the database records them.
pub struct Ledger {
    calls: Arc<dyn ApiCalls>,
    app_id: String,
    /// Until when the database is left out after a failure.
    paused_until: Mutex<Option<Instant>>,
    /// This process's calls are recorded one at a time, so that no more than one of its
    /// database connections waits for the other replicas' recordings.
    one_at_a_time: tokio::sync::Mutex<()>,
}

impl Ledger {
    /// The calls of `app_id` in `calls`.
    pub fn new(calls: Arc<dyn ApiCalls>, app_id: &str) -> Self {
        Self {
            calls,
            app_id: app_id.to_string(),
            paused_until: Mutex::new(None),
            one_at_a_time: tokio::sync::Mutex::new(()),
        }
    }

    /// Records a call within `limits`: `Ok` when made, `Err(at)` when there is no room
    /// before `at`; `None` when the database did not answer (or failed a moment ago).
    async fn record(&self, limits: (usize, usize)) -> Option<Result<(), Instant>> {
        let limits = CallLimits {
            per_second: u32::try_from(limits.0).unwrap_or(u32::MAX),
            per_minute: u32::try_from(limits.1).unwrap_or(u32::MAX),
        };
        let _turn = self.one_at_a_time.lock().await;
        // Looked at in turn: the calls that queued behind a failing one do not each wait
        // for the database again.
        {
            let paused = self.paused_until.lock().unwrap_or_else(|p| p.into_inner());
            if paused.is_some_and(|until| until > Instant::now()) {
                return None;
            }
        }
        match self
            .calls
            .record_call(&self.app_id, &SystemClock, limits)
            .await
        {
            Ok(CallRoom::Taken) => Some(Ok(())),
            Ok(CallRoom::FullUntil(at)) => {
                let wait = u64::try_from(at.0.saturating_sub(UnixMs::now().0)).unwrap_or(0);
                Some(Err(Instant::now() + Duration::from_millis(wait.max(1))))
            }
            Err(e) => {
                tracing::warn!(error = %e, "Open API call not recorded in the database; keeping to this replica's share of the limits for a while");
                *self.paused_until.lock().unwrap_or_else(|p| p.into_inner()) =
                    Some(Instant::now() + LEDGER_PAUSE);
                None
            }
        }
    }
}

impl std::fmt::Debug for Ledger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Ledger({})", self.app_id)
    }
}

/// The calls of the last minute: recorded with every replica's in the database when
/// there is a ledger, else kept under this replica's share of the app's limits.
#[derive(Debug, Default)]
pub struct Budget {
    made: Mutex<VecDeque<Instant>>,
    share: Arc<ApiShare>,
    ledger: Option<Ledger>,
}

impl Budget {
    /// A budget kept through `ledger` when there is one, else under `share` of the limits.
    pub fn new(share: Arc<ApiShare>, ledger: Option<Ledger>) -> Self {
        Self {
            made: Mutex::default(),
            share,
            ledger,
        }
    }

    /// Takes room for one call: waits for it when `urgency` is required; `false` at once
    /// when an intermediate call finds no spare room.
    pub async fn take(&self, urgency: Urgency) -> bool {
        loop {
            let shared = match &self.ledger {
                Some(ledger) => ledger.record(limits(urgency, 1)).await,
                None => None,
            };
            let now = Instant::now();
            let admitted = {
                let mut made = self.made.lock().unwrap_or_else(|p| p.into_inner());
                match shared {
                    // Kept here too, in case the database fails later in the minute.
                    Some(Ok(())) => {
                        forget_old(&mut made, now);
                        made.push_back(now);
                        Ok(())
                    }
                    Some(Err(at)) => Err(at),
                    None if self.ledger.is_some() => {
                        admit(&mut made, now, fallback(urgency, self.share.replicas()))
                    }
                    None => admit(&mut made, now, limits(urgency, self.share.replicas())),
                }
            };
            match (admitted, urgency) {
                (Ok(()), _) => return true,
                (Err(_), Urgency::Intermediate) => return false,
                (Err(at), Urgency::Required) => tokio::time::sleep_until(at).await,
            }
        }
    }
}

/// (per second, per minute) for calls of `urgency` of one of `replicas` replicas. A
/// required call always has room for one call a second; an intermediate one may have none.
fn limits(urgency: Urgency, replicas: usize) -> (usize, usize) {
    let replicas = replicas.max(1);
    match urgency {
        Urgency::Required => (
            (PER_SECOND / replicas).max(1),
            (PER_MINUTE / replicas).max(1),
        ),
        Urgency::Intermediate => (
            (PER_SECOND - SPARE.0) / replicas,
            (PER_MINUTE - SPARE.1) / replicas,
        ),
    }
}

/// (per second, per minute) for calls of `urgency` of one of `replicas` replicas while
/// the database cannot record them: per second, a share of what the budget leaves of
/// Feishu's limit (the others may be spending the budget meanwhile); per minute, a
/// share of the budget. No intermediate call is made then.
fn fallback(urgency: Urgency, replicas: usize) -> (usize, usize) {
    let replicas = replicas.max(1);
    match urgency {
        Urgency::Required => (
            ((FEISHU_PER_SECOND - PER_SECOND) / replicas).max(1),
            (PER_MINUTE / replicas).max(1),
        ),
        Urgency::Intermediate => (0, 0),
    }
}

/// Forgets the calls that have left the minute before `now`.
fn forget_old(made: &mut VecDeque<Instant>, now: Instant) {
    while made
        .front()
        .is_some_and(|t| now.duration_since(*t) >= MINUTE)
    {
        made.pop_front();
    }
}

/// Records a call at `now` if fewer than `limits` were made in the second and the
/// minute before; else when the first of them leaves its window.
fn admit(
    made: &mut VecDeque<Instant>,
    now: Instant,
    (per_second, per_minute): (usize, usize),
) -> Result<(), Instant> {
    forget_old(made, now);
    if per_second == 0 || per_minute == 0 {
        // No room at all (an intermediate call's share, split too thin).
        return Err(now + SECOND);
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
            assert_eq!(admit(&mut made, t0, limits(Urgency::Required, 1)), Ok(()));
        }
        assert_eq!(
            admit(&mut made, t0, limits(Urgency::Required, 1)),
            Err(t0 + SECOND),
            "full until the first call is a second old"
        );
        assert_eq!(
            admit(&mut made, t0 + SECOND, limits(Urgency::Required, 1)),
            Ok(())
        );
    }

    #[test]
    fn intermediate_calls_leave_the_spare_room_to_the_others() {
        let mut made = VecDeque::new();
        let t0 = Instant::now();
        let (per_second, _) = limits(Urgency::Intermediate, 1);
        for _ in 0..per_second {
            assert_eq!(
                admit(&mut made, t0, limits(Urgency::Intermediate, 1)),
                Ok(())
            );
        }
        assert!(admit(&mut made, t0, limits(Urgency::Intermediate, 1)).is_err());
        for _ in per_second..PER_SECOND {
            assert_eq!(admit(&mut made, t0, limits(Urgency::Required, 1)), Ok(()));
        }
        assert!(admit(&mut made, t0, limits(Urgency::Required, 1)).is_err());
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
                admit(&mut made, at, limits(Urgency::Required, 1)),
                Ok(()),
                "{i}"
            );
        }
        let now = t0 + step * PER_MINUTE as u32;
        assert_eq!(
            admit(&mut made, now, limits(Urgency::Required, 1)),
            Err(t0 + MINUTE),
            "full until the first call is a minute old"
        );
        assert_eq!(
            admit(&mut made, t0 + MINUTE, limits(Urgency::Required, 1)),
            Ok(())
        );
        assert!(made.len() <= PER_MINUTE);
    }

    #[test]
    fn replicas_split_the_limits_so_their_sum_stays_within_them() {
        for replicas in 1..=8 {
            let (second, minute) = limits(Urgency::Required, replicas);
            assert!(second * replicas <= PER_SECOND, "{replicas}: {second}/s");
            assert!(minute * replicas <= PER_MINUTE, "{replicas}: {minute}/min");
            assert!(second >= PER_SECOND / replicas && second >= 1);
            let (spare_second, spare_minute) = limits(Urgency::Intermediate, replicas);
            assert!(spare_second < second && spare_minute < minute, "{replicas}");
        }
        let mut made = VecDeque::new();
        let t0 = Instant::now();
        for _ in 0..PER_SECOND / 2 {
            assert_eq!(admit(&mut made, t0, limits(Urgency::Required, 2)), Ok(()));
        }
        assert_eq!(
            admit(&mut made, t0, limits(Urgency::Required, 2)),
            Err(t0 + SECOND),
            "one of two replicas has half the second"
        );
        assert_eq!(
            admit(&mut made, t0, limits(Urgency::Required, 1)),
            Ok(()),
            "alone again, it has the whole of it"
        );
    }

    #[test]
    fn a_replica_that_cannot_record_keeps_within_what_the_others_leave() {
        for replicas in 1..=8 {
            let (second, minute) = fallback(Urgency::Required, replicas);
            // The others may fill the whole budget through the database meanwhile.
            assert!(
                PER_SECOND + second * replicas <= FEISHU_PER_SECOND,
                "{replicas}: {second}/s"
            );
            assert!(second >= 1 && minute * replicas <= PER_MINUTE);
            assert_eq!(fallback(Urgency::Intermediate, replicas), (0, 0));
        }
        let mut made = VecDeque::new();
        let t0 = Instant::now();
        let share = fallback(Urgency::Required, 2);
        for _ in 0..share.0 {
            assert_eq!(admit(&mut made, t0, share), Ok(()));
        }
        assert_eq!(admit(&mut made, t0, share), Err(t0 + SECOND));
        let none = fallback(Urgency::Intermediate, 2);
        assert_eq!(admit(&mut VecDeque::new(), t0, none), Err(t0 + SECOND));
        assert_eq!(admit(&mut made, t0, none), Err(t0 + SECOND));
    }
}
