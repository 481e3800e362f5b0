//! The inbox worker: claims due events, processes them, records the outcome.
//!
//! Failures are retried with exponential backoff until `max_attempts`, then the event is
//! marked failed (visible in `/status` and `/metrics`). A failure of the database is not
//! the event's: it is retried without counting towards `max_attempts`, the rest of the
//! claim goes back to pending, and the worker backs off until the database takes writes
//! again — it resumes by itself.
//!
//! Claims carry this process's name and a lease that a heartbeat renews while the event
//! is in hand. At start the worker takes back the claims an earlier run of this process
//! left (every claim on SQLite); another replica's dead claims are taken once their
//! lease runs out. On shutdown the worker finishes the event in hand and returns the rest
//! of its claim to pending.

use std::{
    collections::BTreeSet,
    sync::{Arc, Mutex},
    time::Duration,
};

use tokio::sync::{Notify, broadcast};
use tokio_util::sync::CancellationToken;

use super::pipeline::{Pipeline, ProcessError};
use crate::{
    config::WorkerConfig,
    store::{Finish, InboxEvent, InboxStore},
    telemetry::Metrics,
    util::UnixMs,
};

/// Events claimed per round trip.
const CLAIM_BATCH: i64 = 32;

/// What the worker did with one event; broadcast for observers (tests, tools).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Processed {
    /// Inbox row id.
    pub id: i64,
    pub profile: String,
    pub event_id: String,
    /// What became of the attempt.
    pub outcome: Outcome,
}

crate::spelled! {
    /// What became of one processing attempt (a metrics label).
    pub enum Outcome("processing outcome") {
        /// Processed.
        Done,
        /// Failed; tried again later.
        Retry,
        /// Failed for good.
        Failed,
    }
}

/// The worker loop and what it needs.
pub struct Worker {
    pub store: Arc<dyn InboxStore>,
    /// What processing means.
    pub pipeline: Arc<Pipeline>,
    /// Tuning.
    pub config: WorkerConfig,
    pub metrics: Metrics,
    /// Poked by the committer when new work arrived.
    pub wake: Arc<Notify>,
    /// Observers of processing outcomes.
    pub processed: broadcast::Sender<Processed>,
    /// Stop signal.
    pub stop: CancellationToken,
    /// The name on this process's claims.
    pub owner: String,
}

/// Ids of the claimed events not finished yet: what the heartbeat renews.
#[derive(Clone, Default)]
struct InHand(Arc<Mutex<BTreeSet<i64>>>);

impl InHand {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeSet<i64>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
    fn ids(&self) -> Vec<i64> {
        self.lock().iter().copied().collect()
    }
}

/// Whether an attempt failed because the database did (not because it refused what this
/// event would write, which retrying cannot change).
fn store_failed(e: &ProcessError) -> bool {
    matches!(e, ProcessError::Store(s) if s.database_failed())
}

impl Worker {
    /// Runs until `stop` is cancelled.
    pub async fn run(self) {
        let poll = Duration::from_millis(self.config.poll_interval_ms.max(1));
        match self.store.reclaim_inbox(&self.owner, UnixMs::now()).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(events = n, "claims of the previous run taken back"),
            Err(e) => {
                // Their leases run out and they are claimed then; nothing is lost.
                tracing::warn!(error = %e, "claims of the previous run not taken back");
                self.metrics.store_error("reclaim_inbox");
            }
        }
        let in_hand = InHand::default();
        let heartbeat = tokio::spawn(self.heartbeat(in_hand.clone()));
        // Consecutive rounds the database failed: the pause before the next one doubles.
        let mut store_failures = 0u32;
        while !self.stop.is_cancelled() {
            let claimed = self
                .store
                .claim_inbox(
                    &self.owner,
                    UnixMs::now(),
                    self.config.lease_ms as i64,
                    CLAIM_BATCH,
                )
                .await;
            let pause = match claimed {
                Ok(events) if events.is_empty() => {
                    store_failures = 0;
                    tokio::select! {
                        () = self.wake.notified() => {}
                        () = tokio::time::sleep(poll) => {}
                        () = self.stop.cancelled() => {}
                    }
                    continue;
                }
                Ok(events) => {
                    in_hand.lock().extend(events.iter().map(|e| e.id));
                    if self.process_claim(events, &in_hand).await {
                        store_failures = 0;
                        continue;
                    }
                    store_failures += 1;
                    store_pause(poll, store_failures)
                }
                Err(e) => {
                    tracing::warn!(error = %e, "inbox claim failed; retrying");
                    self.metrics.store_error("claim_inbox");
                    store_failures += 1;
                    store_pause(poll, store_failures)
                }
            };
            tokio::select! {
                () = tokio::time::sleep(pause) => {}
                () = self.stop.cancelled() => {}
            }
        }
        heartbeat.abort();
    }

    /// Renews the leases of the events in hand every third of a lease, so a live worker
    /// keeps them however long they take and a dead one's run out.
    fn heartbeat(&self, in_hand: InHand) -> impl std::future::Future<Output = ()> + use<> {
        let (store, owner, stop) = (self.store.clone(), self.owner.clone(), self.stop.clone());
        let lease = self.config.lease_ms;
        async move {
            let every = Duration::from_millis((lease / 3).max(1));
            loop {
                tokio::select! {
                    () = tokio::time::sleep(every) => {}
                    () = stop.cancelled() => return,
                }
                let ids = in_hand.ids();
                let until = UnixMs::now() + Duration::from_millis(lease);
                if let Err(e) = store.renew_leases(&owner, &ids, until).await {
                    tracing::warn!(error = %e, events = ids.len(), "leases not renewed");
                }
            }
        }
    }

    /// Processes a claim in order; returns `false` when the database failed (the rest of
    /// the claim is then returned to pending).
    async fn process_claim(&self, events: Vec<InboxEvent>, in_hand: &InHand) -> bool {
        let mut rest = events.into_iter();
        let mut healthy = true;
        for event in rest.by_ref() {
            let id = event.id;
            healthy = self.process_one(event).await;
            in_hand.lock().remove(&id);
            if !healthy || self.stop.is_cancelled() {
                break;
            }
        }
        let unstarted: Vec<i64> = rest.map(|e| e.id).collect();
        if !unstarted.is_empty() {
            self.write_until_stored("release_inbox", || self.store.release_inbox(&unstarted))
                .await;
        }
        let mut held = in_hand.lock();
        for id in unstarted {
            held.remove(&id);
        }
        healthy
    }

    /// Processes one event and records the outcome; returns `false` when the database
    /// failed.
    #[tracing::instrument(skip_all, fields(profile = %event.event.profile, event_id = %event.event.event_id, event_type = %event.event.event_type, attempt = event.attempts))]
    async fn process_one(&self, event: InboxEvent) -> bool {
        let result = self.pipeline.process(&event.event).await;
        let healthy = !result.as_ref().is_err_and(store_failed);
        let (finish, outcome) = match result {
            Ok(()) => (Finish::Done, Outcome::Done),
            Err(ProcessError::Store(e)) if e.database_failed() => {
                let delay = backoff(&self.config, event.attempts);
                tracing::warn!(error = %e.reason(), retry_in_ms = delay, "the database failed; the event will be retried");
                (
                    Finish::Deferred {
                        error: format!("store: {}", e.reason()),
                        at: UnixMs::now() + Duration::from_millis(delay),
                    },
                    Outcome::Retry,
                )
            }
            // A signed payload that does not fit its type will not fit on a retry either:
            // it is failed at once, with its value-free reason.
            Err(e @ ProcessError::Parse(_)) => {
                tracing::error!(
                    error = %e,
                    "event payload does not fit its type; failed without retry"
                );
                (
                    Finish::Failed {
                        error: e.to_string(),
                    },
                    Outcome::Failed,
                )
            }
            Err(e) if event.attempts >= i64::from(self.config.max_attempts) => {
                tracing::error!(error = %e, "event failed for good");
                (
                    Finish::Failed {
                        error: e.to_string(),
                    },
                    Outcome::Failed,
                )
            }
            Err(e) => {
                let delay = backoff(&self.config, event.attempts);
                tracing::warn!(error = %e, retry_in_ms = delay, "event failed; will retry");
                (
                    Finish::Retry {
                        error: e.to_string(),
                        at: UnixMs::now() + Duration::from_millis(delay),
                    },
                    Outcome::Retry,
                )
            }
        };
        if !self.record(event.id, &finish).await {
            return false;
        }
        self.metrics
            .events_processed
            .with_label_values(&[
                &event.event.profile,
                &event.event.event_type,
                outcome.as_str(),
            ])
            .inc();
        // Nobody listening is fine: the broadcast is for observers only.
        let _ = self.processed.send(Processed {
            id: event.id,
            profile: event.event.profile,
            event_id: event.event.event_id,
            outcome,
        });
        healthy
    }
}

impl Worker {
    /// Records an attempt's outcome; returns `false` if it was not recorded.
    async fn record(&self, id: i64, finish: &Finish) -> bool {
        self.write_until_stored("finish_inbox", || {
            self.store.finish_inbox(id, finish, UnixMs::now())
        })
        .await
    }

    /// Runs a write of the events in hand, retrying while the database fails (the events
    /// stay in hand meanwhile, their leases renewed, so no other worker takes them);
    /// returns `false` if it did not get through (the leases then run out, and the events
    /// are processed again: at-least-once, and routing a message twice records it once).
    async fn write_until_stored<F, Fut>(&self, op: &'static str, mut write: F) -> bool
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<(), crate::store::StoreError>>,
    {
        let poll = Duration::from_millis(self.config.poll_interval_ms.max(1));
        let mut failures = 0u32;
        loop {
            let e = match write().await {
                Ok(()) => return true,
                Err(e) => e,
            };
            self.metrics.store_error(op);
            failures += 1;
            if !e.database_failed() || self.stop.is_cancelled() {
                tracing::warn!(error = %e.reason(), op, "inbox write given up");
                return false;
            }
            if failures == 1 {
                tracing::warn!(error = %e.reason(), op, "inbox write failed; retrying");
            }
            tokio::select! {
                () = tokio::time::sleep(store_pause(poll, failures)) => {}
                () = self.stop.cancelled() => {}
            }
        }
    }
}

/// The pause after `failures` consecutive rounds the database failed: the poll interval,
/// doubling, at most 5 s (so a database that is back is used again within seconds).
fn store_pause(poll: Duration, failures: u32) -> Duration {
    let factor = 1u32 << failures.saturating_sub(1).min(6);
    (poll * factor).min(Duration::from_secs(5))
}

/// `retry_base_ms · 2^(attempts-1)`, capped at `retry_max_ms`.
fn backoff(config: &WorkerConfig, attempts: i64) -> u64 {
    let exp = u32::try_from(attempts.saturating_sub(1).clamp(0, 30)).unwrap_or(30);
    config
        .retry_base_ms
        .saturating_mul(1u64 << exp)
        .min(config.retry_max_ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pause_after_database_failures_doubles_up_to_five_seconds() {
        let poll = Duration::from_millis(100);
        assert_eq!(store_pause(poll, 1), poll);
        assert_eq!(store_pause(poll, 2), poll * 2);
        assert_eq!(
            store_pause(poll, 7),
            Duration::from_millis(6400).min(Duration::from_secs(5))
        );
        assert_eq!(store_pause(poll, 40), Duration::from_secs(5));
    }

    #[test]
    fn backoff_doubles_and_caps() {
        let c = WorkerConfig {
            retry_base_ms: 100,
            retry_max_ms: 1000,
            ..WorkerConfig::default()
        };
        assert_eq!(backoff(&c, 1), 100);
        assert_eq!(backoff(&c, 2), 200);
        assert_eq!(backoff(&c, 4), 800);
        assert_eq!(backoff(&c, 5), 1000);
        assert_eq!(backoff(&c, 60), 1000);
    }
}
