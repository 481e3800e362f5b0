//! The inbox worker: claims due events, processes them, records the outcome.
//!
//! Each chat's events go through in arrival order, and different chats side by side: a
//! claim takes the oldest due events of each chat that no worker holds (up to
//! `worker.batch` per chat, from up to `worker.lanes` chats), and each chat's events run
//! as one batch in a lane of their own, recorded in one transaction. So a request in a
//! quiet chat is processed at once, whatever backlog another chat has.
//!
//! Failures are retried with exponential backoff until `max_attempts`, then the event is
//! marked failed (visible in `/status` and `/metrics`); a failed event does not hold up
//! the rest of its chat. A failure of the database is not the event's: it is retried
//! without counting towards `max_attempts`, and the worker backs off until the database
//! takes writes again — it resumes by itself.
//!
//! Claims carry this process's name and a lease that a heartbeat renews while the event
//! is in hand (on SQLite the store holds them in memory instead of writing them). At
//! start the worker takes back the claims an earlier run of this process left (every
//! claim on SQLite); another replica's dead claims are taken once their lease runs out.
//! On shutdown the worker finishes the batches in hand.

use std::{
    collections::BTreeSet,
    sync::{Arc, Mutex},
    time::Duration,
};

use tokio::{sync::broadcast, task::JoinSet};
use tokio_util::sync::CancellationToken;

use super::{
    Arrivals,
    pipeline::{Pipeline, ProcessError, Settled, Unfinished},
};
use crate::{
    config::WorkerConfig,
    store::{ClaimLimits, Finish, InboxEvent, InboxStore},
    telemetry::Metrics,
    util::UnixMs,
};

/// How recently an event must have been stored for the worker to count events as
/// arriving.
const ARRIVING: Duration = Duration::from_secs(1);

/// The most events of one chat claimed together while events are arriving.
pub const ARRIVING_BATCH: u32 = 32;

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

crate::util::spelled::spelled! {
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
    /// Told by the committer when new work arrived.
    pub arrivals: Arc<Arrivals>,
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
        let me = Arc::new(self);
        let poll = Duration::from_millis(me.config.poll_interval_ms.max(1));
        match me.store.reclaim_inbox(&me.owner, UnixMs::now()).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(events = n, "claims of the previous run taken back"),
            Err(e) => {
                // Their leases run out and they are claimed then; nothing is lost.
                tracing::warn!(error = %e, "claims of the previous run not taken back");
                me.metrics.store_error("reclaim_inbox");
            }
        }
        let in_hand = InHand::default();
        let heartbeat = tokio::spawn(me.heartbeat(in_hand.clone()));
        let lanes_cap = me.config.lanes.max(1);
        let mut lanes: JoinSet<bool> = JoinSet::new();
        // Consecutive rounds the database failed: the pause before the next one doubles.
        let mut store_failures = 0u32;
        // The last chat taken: the next claim starts after it, so claims go round the
        // chats and a quiet chat is served however old the others' backlogs are.
        let mut last_chat: Option<String> = None;
        while !me.stop.is_cancelled() {
            let free = lanes_cap.saturating_sub(lanes.len());
            if free > 0 {
                let limits = ClaimLimits {
                    chats: i64::try_from(free).unwrap_or(i64::MAX),
                    per_chat: i64::from(me.batch(UnixMs::now())),
                };
                let lease = i64::try_from(me.config.lease_ms).unwrap_or(i64::MAX);
                match me
                    .store
                    .claim_inbox(
                        &me.owner,
                        UnixMs::now(),
                        lease,
                        limits,
                        last_chat.as_deref(),
                    )
                    .await
                {
                    Ok(events) => {
                        store_failures = 0;
                        if let Some(chat) = last_taken(last_chat.as_deref(), &events) {
                            last_chat = Some(chat);
                        }
                        in_hand.lock().extend(events.iter().map(|e| e.id));
                        for chat in by_chat(events) {
                            lanes.spawn(me.clone().process_lane(chat, in_hand.clone()));
                        }
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "inbox claim failed; retrying");
                        me.metrics.store_error("claim_inbox");
                        store_failures += 1;
                        me.pause(store_pause(poll, store_failures)).await;
                        continue;
                    }
                }
            }
            tokio::select! {
                Some(done) = lanes.join_next(), if !lanes.is_empty() => {
                    if matches!(done, Ok(false)) {
                        store_failures += 1;
                        me.pause(store_pause(poll, store_failures)).await;
                    }
                }
                () = me.arrivals.notified() => {}
                () = tokio::time::sleep(poll) => {}
                () = me.stop.cancelled() => {}
            }
        }
        // The batches in hand are finished and recorded.
        while lanes.join_next().await.is_some() {}
        heartbeat.abort();
    }

    /// Events of one chat to claim now: `worker.batch`, or at most [`ARRIVING_BATCH`]
    /// while events are arriving, so that the worker's transactions, which a group
    /// commit may wait for, stay short (arrivals first).
    fn batch(&self, now: UnixMs) -> u32 {
        let batch = self.config.batch.max(1);
        if self.arrivals.recent(now, ARRIVING) {
            batch.min(ARRIVING_BATCH)
        } else {
            batch
        }
    }

    /// Waits `pause`, or until stopped.
    async fn pause(&self, pause: Duration) {
        tokio::select! {
            () = tokio::time::sleep(pause) => {}
            () = self.stop.cancelled() => {}
        }
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

    /// Processes one chat's claimed events as a batch and records what each came to;
    /// returns `false` when the database failed.
    async fn process_lane(self: Arc<Self>, mut events: Vec<InboxEvent>, in_hand: InHand) -> bool {
        let ids: Vec<i64> = events.iter().map(|e| e.id).collect();
        let (settled, failure) = match self.pipeline.process_batch(&events).await {
            Ok(settled) => (settled, None),
            Err(Unfinished { settled, error }) => (settled, Some(error)),
        };
        // What the batch recorded before the database failed stays recorded (a command
        // among it has run): only the rest waits for the database.
        let rest = events.split_off(settled.len().min(events.len()));
        let mut healthy = true;
        for (event, settled) in events.into_iter().zip(settled) {
            healthy &= match settled {
                Settled::Done => {
                    self.report(event, Outcome::Done);
                    true
                }
                Settled::Open(result) => self.settle(event, result).await,
            };
        }
        if let Some(e) = failure {
            healthy = false;
            self.defer(rest, &e).await;
        }
        let mut held = in_hand.lock();
        for id in &ids {
            held.remove(id);
        }
        healthy
    }

    /// Puts back the events a batch did not record because the database failed: tried
    /// again later, without counting the attempt.
    async fn defer(&self, events: Vec<InboxEvent>, e: &crate::store::StoreError) {
        let ids: Vec<i64> = events.iter().map(|e| e.id).collect();
        let delay = backoff(&self.config, 1);
        tracing::warn!(error = %e.reason(), events = ids.len(), retry_in_ms = delay, "the database failed; the events will be retried");
        let finish = Finish::Deferred {
            error: format!("store: {}", e.reason()),
            at: UnixMs::now() + Duration::from_millis(delay),
        };
        if self.record(&ids, &finish).await {
            for event in events {
                self.report(event, Outcome::Retry);
            }
        }
    }

    /// Records the outcome of an event whose batch left it open; returns `false` when
    /// the database failed.
    async fn settle(&self, event: InboxEvent, result: Result<(), ProcessError>) -> bool {
        let healthy = !result.as_ref().is_err_and(store_failed);
        let e = &event.event;
        let (finish, outcome) = match result {
            Ok(()) => (Finish::Done, Outcome::Done),
            Err(ProcessError::Store(err)) if err.database_failed() => {
                let delay = backoff(&self.config, event.attempts);
                tracing::warn!(profile = %e.profile, event_id = %e.event_id, error = %err.reason(), retry_in_ms = delay, "the database failed; the event will be retried");
                (
                    Finish::Deferred {
                        error: format!("store: {}", err.reason()),
                        at: UnixMs::now() + Duration::from_millis(delay),
                    },
                    Outcome::Retry,
                )
            }
            // A signed payload that does not fit its type will not fit on a retry either:
            // it is failed at once, with its value-free reason.
            Err(err @ ProcessError::Parse(_)) => {
                tracing::error!(profile = %e.profile, event_id = %e.event_id, event_type = %e.event_type, error = %err, "event payload does not fit its type; failed without retry");
                let error = err.to_string();
                (Finish::Failed { error }, Outcome::Failed)
            }
            Err(err) if event.attempts >= i64::from(self.config.max_attempts) => {
                tracing::error!(profile = %e.profile, event_id = %e.event_id, attempt = event.attempts, error = %err, "event failed for good");
                let error = err.to_string();
                (Finish::Failed { error }, Outcome::Failed)
            }
            Err(err) => {
                let delay = backoff(&self.config, event.attempts);
                tracing::warn!(profile = %e.profile, event_id = %e.event_id, attempt = event.attempts, error = %err, retry_in_ms = delay, "event failed; will retry");
                (
                    Finish::Retry {
                        error: err.to_string(),
                        at: UnixMs::now() + Duration::from_millis(delay),
                    },
                    Outcome::Retry,
                )
            }
        };
        if !self.record(&[event.id], &finish).await {
            return false;
        }
        self.report(event, outcome);
        healthy
    }

    /// Counts a recorded outcome and tells the observers.
    fn report(&self, event: InboxEvent, outcome: Outcome) {
        let e = event.event;
        self.metrics
            .events_processed
            .with_label_values(&[&e.profile, &e.event_type, outcome.as_str()])
            .inc();
        self.metrics.worker_rate.add(1);
        // Nobody listening is fine: the broadcast is for observers only.
        let _ = self.processed.send(Processed {
            id: event.id,
            profile: e.profile,
            event_id: e.event_id,
            outcome,
        });
    }
}

/// The chat a claim that started after `after` took last, going round the keys: the
/// greatest key at or before `after` if the claim went round past the last key, else the
/// greatest key it took.
fn last_taken(after: Option<&str>, events: &[InboxEvent]) -> Option<String> {
    let keys = events.iter().map(|e| e.event.chat_key.as_str());
    let wrapped = after.and_then(|a| keys.clone().filter(|k| *k <= a).max());
    wrapped.or_else(|| keys.max()).map(str::to_owned)
}

/// Claimed events grouped by chat, each group in arrival order.
fn by_chat(events: Vec<InboxEvent>) -> Vec<Vec<InboxEvent>> {
    let mut groups: Vec<Vec<InboxEvent>> = Vec::new();
    let mut index: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    for event in events {
        let at = *index
            .entry(event.event.chat_key.clone())
            .or_insert_with(|| {
                groups.push(Vec::new());
                groups.len() - 1
            });
        groups[at].push(event);
    }
    groups
}

impl Worker {
    /// Records how an attempt ended; returns `false` if it was not recorded.
    async fn record(&self, ids: &[i64], finish: &Finish) -> bool {
        self.write_until_stored("finish_inbox", || {
            self.store.finish_inbox(ids, finish, UnixMs::now())
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

    fn in_chat(id: i64, chat: &str) -> InboxEvent {
        InboxEvent {
            id,
            event: crate::store::NewInboxEvent {
                profile: "p".into(),
                event_id: format!("e{id}"),
                event_type: "im.message.receive_v1".into(),
                message_id: None,
                chat_key: chat.into(),
                payload: "{}".into(),
                received_at: UnixMs(0),
                status: crate::store::InboxStatus::Processing,
            },
            attempts: 1,
            last_error: None,
            next_attempt_at: UnixMs(0),
        }
    }

    #[test]
    fn the_next_claim_starts_after_the_last_chat_taken_going_round() {
        let claimed = [in_chat(1, "oc_d"), in_chat(2, "oc_a"), in_chat(3, "oc_e")];
        // Taken in the order d, e, then round to a.
        assert_eq!(last_taken(Some("oc_c"), &claimed).as_deref(), Some("oc_a"));
        // Not round: the greatest key.
        assert_eq!(last_taken(Some("oc_0"), &claimed).as_deref(), Some("oc_e"));
        assert_eq!(last_taken(None, &claimed).as_deref(), Some("oc_e"));
        assert_eq!(last_taken(Some("oc_c"), &[]), None);
    }

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
