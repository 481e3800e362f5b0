//! Group commit: concurrent webhook requests share one transaction.
//!
//! Each request hands its event to the committer and waits for the outcome. A committer
//! takes whatever is queued (up to `MAX_BATCH`), writes it in one transaction, and answers
//! every waiter. While one batch is being committed the next one gathers, so under load
//! the fsync cost is shared by many events, and with no load an event is committed alone
//! without waiting for company. Durability is never traded away: a request is answered
//! only after its transaction committed.
//!
//! A request that gave up (its deadline passed, or its client went away) before its batch
//! was taken is left out of it. A batch the database refused because of one row's
//! content is retried row by row, so only that row is refused and its batch-mates are
//! stored.

use std::sync::Arc;

use tokio::{
    sync::{Mutex, mpsc, oneshot},
    task::JoinHandle,
    time::Instant,
};
use tokio_util::sync::CancellationToken;

use super::Arrivals;
use crate::{
    store::{Backend, InboxStatus, InboxStore, InsertOutcome, NewInboxEvent, StoreError},
    telemetry::Metrics,
    util::UnixMs,
};

/// Most events written in one transaction.
pub const MAX_BATCH: usize = 256;
const QUEUE: usize = 8192;

type Reply = oneshot::Sender<Result<InsertOutcome, CommitError>>;

/// One waiting request.
struct Job {
    event: NewInboxEvent,
    deadline: Instant,
    reply: Reply,
}

/// Hands events to the committer tasks.
#[derive(Clone, Debug)]
pub struct Committer {
    tx: mpsc::Sender<Job>,
}

/// Why an event could not be committed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum CommitError {
    /// The store failed the batch; nothing of it was stored.
    #[error("store failed")]
    Store(#[source] Arc<StoreError>),
    /// The database refused this event's row itself (its batch-mates were stored).
    #[error("the database refused the event")]
    Refused(#[source] Arc<StoreError>),
    /// Its deadline passed before a batch took it; it was not stored.
    #[error("deadline passed before the event was written")]
    Late,
    /// The committer is gone (shutting down).
    #[error("committer stopped")]
    Stopped,
}

impl Committer {
    /// Starts `writers` committer tasks sharing one queue. They stop when `stop` is
    /// cancelled, after answering everything already queued.
    pub fn spawn(
        store: Arc<dyn InboxStore>,
        backend: Backend,
        metrics: Metrics,
        arrivals: Arc<Arrivals>,
        writers: usize,
        stop: CancellationToken,
    ) -> (Self, Vec<JoinHandle<()>>) {
        let (tx, rx) = mpsc::channel(QUEUE);
        let rx = Arc::new(Mutex::new(rx));
        let handles = (0..writers.max(1))
            .map(|_| {
                let w = Writer {
                    store: store.clone(),
                    backend,
                    metrics: metrics.clone(),
                    arrivals: arrivals.clone(),
                    rx: rx.clone(),
                    stop: stop.clone(),
                };
                tokio::spawn(w.run())
            })
            .collect();
        (Self { tx }, handles)
    }

    /// Stores one event durably; returns whether it was new. An event still queued when
    /// `deadline` passes is not written (the caller answers first anyway).
    pub async fn submit(
        &self,
        event: NewInboxEvent,
        deadline: Instant,
    ) -> Result<InsertOutcome, CommitError> {
        let (reply, answer) = oneshot::channel();
        let job = Job {
            event,
            deadline,
            reply,
        };
        self.tx.send(job).await.map_err(|_| CommitError::Stopped)?;
        answer.await.map_err(|_| CommitError::Stopped)?
    }
}

struct Writer {
    store: Arc<dyn InboxStore>,
    backend: Backend,
    metrics: Metrics,
    arrivals: Arc<Arrivals>,
    rx: Arc<Mutex<mpsc::Receiver<Job>>>,
    stop: CancellationToken,
}

impl Writer {
    async fn run(self) {
        loop {
            let batch = {
                let mut rx = self.rx.lock().await;
                let first = tokio::select! {
                    biased;
                    job = rx.recv() => job,
                    () = self.stop.cancelled() => rx.try_recv().ok(),
                };
                let Some(first) = first else { return };
                let mut batch = vec![first];
                while batch.len() < MAX_BATCH {
                    match rx.try_recv() {
                        Ok(job) => batch.push(job),
                        Err(_) => break,
                    }
                }
                batch
            };
            self.commit(batch).await;
        }
    }

    /// Writes the live part of a batch and answers every waiter.
    async fn commit(&self, batch: Vec<Job>) {
        let now = Instant::now();
        let (live, late): (Vec<Job>, Vec<Job>) = batch
            .into_iter()
            .partition(|j| !j.reply.is_closed() && j.deadline > now);
        for job in late {
            // Its waiter may be gone (that is why it is late); then nobody needs this.
            let _ = job.reply.send(Err(CommitError::Late));
        }
        if live.is_empty() {
            return;
        }
        let backend = self.backend.as_str();
        self.metrics
            .commit_batch_size
            .with_label_values(&[backend])
            .observe(live.len() as f64);
        let (events, replies): (Vec<_>, Vec<_>) =
            live.into_iter().map(|j| (j.event, j.reply)).unzip();
        let answers = match self.store.insert_inbox_batch(&events).await {
            Ok(outcomes) => outcomes.into_iter().map(Ok).collect(),
            Err(e) if e.refuses_row() && events.len() > 1 => {
                tracing::warn!(error = %e, reason = %e.reason(), events = events.len(), "inbox batch refused; writing its events one by one");
                self.one_by_one(&events).await
            }
            Err(e) => {
                self.failed(&e, events.len());
                let e = Arc::new(e);
                let answer = if e.refuses_row() {
                    CommitError::Refused(e)
                } else {
                    CommitError::Store(e)
                };
                vec![Err(answer); events.len()]
            }
        };
        let wake = events.iter().zip(&answers).any(|(e, a)| {
            matches!(a, Ok(InsertOutcome::Inserted)) && e.status == InboxStatus::Pending
        });
        for (reply, answer) in replies.into_iter().zip(answers) {
            // A waiter that gave up has answered 503; what was committed still is processed.
            let _ = reply.send(answer);
        }
        if wake {
            self.arrivals.stored(UnixMs::now());
        }
    }

    /// Each event in a transaction of its own: a refused row is refused alone.
    async fn one_by_one(
        &self,
        events: &[NewInboxEvent],
    ) -> Vec<Result<InsertOutcome, CommitError>> {
        let mut answers = Vec::with_capacity(events.len());
        for event in events {
            let answer = match self
                .store
                .insert_inbox_batch(std::slice::from_ref(event))
                .await
            {
                Ok(outcomes) => outcomes.into_iter().next().ok_or(CommitError::Late),
                Err(e) if e.refuses_row() => {
                    tracing::warn!(error = %e, reason = %e.reason(), profile = %event.profile, event_id = %event.event_id, "the database refused an event");
                    self.metrics.store_error("insert_inbox_refused");
                    Err(CommitError::Refused(Arc::new(e)))
                }
                Err(e) => {
                    self.failed(&e, 1);
                    Err(CommitError::Store(Arc::new(e)))
                }
            };
            answers.push(answer);
        }
        answers
    }

    fn failed(&self, e: &StoreError, events: usize) {
        tracing::error!(error = %e, reason = %e.reason(), events, "inbox batch not committed");
        self.metrics.store_error("insert_inbox");
    }
}
