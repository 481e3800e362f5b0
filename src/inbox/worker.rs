//! The inbox worker: claims due events, processes them, records the outcome.
//!
//! Failures are retried with exponential backoff until `max_attempts`, then the event is
//! marked failed (visible in `/status` and `/metrics`). An event claimed by a worker that
//! died is claimed again when its lease runs out; events left pending by a stopped
//! process are picked up after a restart. On shutdown the worker finishes the event in
//! hand and returns the rest of its claim to pending.

use std::{sync::Arc, time::Duration};

use tokio::sync::{Notify, broadcast};
use tokio_util::sync::CancellationToken;

use super::pipeline::Pipeline;
use crate::{
    config::WorkerConfig,
    store::{Finish, InboxEvent, Store},
    telemetry::Metrics,
    util::now_ms,
};

/// Events claimed per round trip.
const CLAIM_BATCH: i64 = 32;

/// What the worker did with one event; broadcast for observers (tests, tools).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Processed {
    /// Inbox row id.
    pub id: i64,
    /// Profile.
    pub profile: String,
    /// Event id.
    pub event_id: String,
    /// `done`, `retry` or `failed`.
    pub outcome: &'static str,
}

/// The worker loop and what it needs.
pub struct Worker {
    /// Store.
    pub store: Arc<dyn Store>,
    /// What processing means.
    pub pipeline: Arc<Pipeline>,
    /// Tuning.
    pub config: WorkerConfig,
    /// Metrics.
    pub metrics: Metrics,
    /// Poked by the committer when new work arrived.
    pub wake: Arc<Notify>,
    /// Observers of processing outcomes.
    pub processed: broadcast::Sender<Processed>,
    /// Stop signal.
    pub stop: CancellationToken,
}

impl Worker {
    /// Runs until `stop` is cancelled.
    pub async fn run(self) {
        let poll = Duration::from_millis(self.config.poll_interval_ms.max(1));
        while !self.stop.is_cancelled() {
            let claimed = self
                .store
                .claim_inbox(now_ms(), self.config.lease_ms as i64, CLAIM_BATCH)
                .await;
            match claimed {
                Ok(events) if events.is_empty() => {
                    tokio::select! {
                        () = self.wake.notified() => {}
                        () = tokio::time::sleep(poll) => {}
                        () = self.stop.cancelled() => {}
                    }
                }
                Ok(events) => self.process_claim(events).await,
                Err(e) => {
                    tracing::warn!(error = %e, "inbox claim failed; retrying");
                    self.metrics.store_error("claim_inbox");
                    tokio::select! {
                        () = tokio::time::sleep(poll) => {}
                        () = self.stop.cancelled() => {}
                    }
                }
            }
        }
    }

    async fn process_claim(&self, events: Vec<InboxEvent>) {
        let mut rest = events.into_iter();
        for event in rest.by_ref() {
            self.process_one(event).await;
            if self.stop.is_cancelled() {
                break;
            }
        }
        let unstarted: Vec<i64> = rest.map(|e| e.id).collect();
        if !unstarted.is_empty()
            && let Err(e) = self.store.release_inbox(&unstarted).await
        {
            // Their lease runs out and they are claimed again; nothing is lost.
            tracing::warn!(error = %e, count = unstarted.len(), "could not release claimed events");
            self.metrics.store_error("release_inbox");
        }
    }

    #[tracing::instrument(skip_all, fields(profile = %event.profile, event_id = %event.event_id, event_type = %event.event_type, attempt = event.attempts))]
    async fn process_one(&self, event: InboxEvent) {
        let result = self.pipeline.process(&event).await;
        let (finish, outcome) = match result {
            Ok(()) => (Finish::Done, "done"),
            // A signed payload that does not fit its type will not fit on a retry either:
            // it is failed at once, with its value-free reason.
            Err(e @ super::pipeline::ProcessError::Parse(_)) => {
                tracing::error!(
                    error = %e,
                    "event payload does not fit its type; failed without retry"
                );
                (
                    Finish::Failed {
                        error: e.to_string(),
                    },
                    "failed",
                )
            }
            Err(e) if event.attempts >= i64::from(self.config.max_attempts) => {
                tracing::error!(error = %e, "event failed for good");
                (
                    Finish::Failed {
                        error: e.to_string(),
                    },
                    "failed",
                )
            }
            Err(e) => {
                let delay = backoff(&self.config, event.attempts);
                tracing::warn!(error = %e, retry_in_ms = delay, "event failed; will retry");
                (
                    Finish::Retry {
                        error: e.to_string(),
                        at: now_ms() + delay as i64,
                    },
                    "retry",
                )
            }
        };
        if let Err(e) = self.store.finish_inbox(event.id, &finish, now_ms()).await {
            // The lease runs out and the event is processed again: at-least-once.
            tracing::warn!(error = %e, "could not record the outcome");
            self.metrics.store_error("finish_inbox");
            return;
        }
        self.metrics
            .events_processed
            .with_label_values(&[&event.profile, &event.event_type, outcome])
            .inc();
        let _ = self.processed.send(Processed {
            id: event.id,
            profile: event.profile,
            event_id: event.event_id,
            outcome,
        });
    }
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
