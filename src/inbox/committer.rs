//! Group commit: concurrent webhook requests share one transaction.
//!
//! Each request hands its event to the committer and waits for the outcome. A committer
//! takes whatever is queued (up to `MAX_BATCH`), writes it in one transaction, and answers
//! every waiter. While one batch is being committed the next one gathers, so under load
//! the fsync cost is shared by many events, and with no load an event is committed alone
//! without waiting for company. Durability is never traded away: a request is answered
//! only after its transaction committed.

use std::sync::Arc;

use tokio::{
    sync::{Mutex, Notify, mpsc, oneshot},
    task::JoinHandle,
};
use tokio_util::sync::CancellationToken;

use crate::{
    store::{InboxStatus, InsertOutcome, NewInboxEvent, Store, StoreError},
    telemetry::Metrics,
};

/// Most events written in one transaction.
pub const MAX_BATCH: usize = 256;
const QUEUE: usize = 8192;

type Reply = oneshot::Sender<Result<InsertOutcome, Arc<StoreError>>>;

/// Hands events to the committer tasks.
#[derive(Clone, Debug)]
pub struct Committer {
    tx: mpsc::Sender<(NewInboxEvent, Reply)>,
}

/// Why an event could not be committed.
#[derive(Debug, thiserror::Error)]
pub enum CommitError {
    /// The store failed the batch.
    #[error("store failed")]
    Store(#[source] Arc<StoreError>),
    /// The committer is gone (shutting down).
    #[error("committer stopped")]
    Stopped,
}

impl Committer {
    /// Starts `writers` committer tasks sharing one queue. They stop when `stop` is
    /// cancelled, after answering everything already queued.
    pub fn spawn(
        store: Arc<dyn Store>,
        metrics: Metrics,
        wake_worker: Arc<Notify>,
        writers: usize,
        stop: CancellationToken,
    ) -> (Self, Vec<JoinHandle<()>>) {
        let (tx, rx) = mpsc::channel(QUEUE);
        let rx = Arc::new(Mutex::new(rx));
        let handles = (0..writers.max(1))
            .map(|_| {
                let w = Writer {
                    store: store.clone(),
                    metrics: metrics.clone(),
                    wake_worker: wake_worker.clone(),
                    rx: rx.clone(),
                    stop: stop.clone(),
                };
                tokio::spawn(w.run())
            })
            .collect();
        (Self { tx }, handles)
    }

    /// Stores one event durably; returns whether it was new.
    pub async fn submit(&self, event: NewInboxEvent) -> Result<InsertOutcome, CommitError> {
        let (reply, answer) = oneshot::channel();
        self.tx
            .send((event, reply))
            .await
            .map_err(|_| CommitError::Stopped)?;
        answer
            .await
            .map_err(|_| CommitError::Stopped)?
            .map_err(CommitError::Store)
    }
}

struct Writer {
    store: Arc<dyn Store>,
    metrics: Metrics,
    wake_worker: Arc<Notify>,
    rx: Arc<Mutex<mpsc::Receiver<(NewInboxEvent, Reply)>>>,
    stop: CancellationToken,
}

impl Writer {
    async fn run(self) {
        let backend = self.store.backend().as_str();
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
            self.metrics
                .commit_batch_size
                .with_label_values(&[backend])
                .observe(batch.len() as f64);
            let (events, replies): (Vec<_>, Vec<_>) = batch.into_iter().unzip();
            match self.store.insert_inbox_batch(&events).await {
                Ok(outcomes) => {
                    let wake = events.iter().zip(&outcomes).any(|(e, o)| {
                        *o == InsertOutcome::Inserted && e.status == InboxStatus::Pending
                    });
                    for (reply, outcome) in replies.into_iter().zip(outcomes) {
                        let _ = reply.send(Ok(outcome));
                    }
                    if wake {
                        self.wake_worker.notify_one();
                    }
                }
                Err(e) => {
                    tracing::error!(error = %e, source = ?std::error::Error::source(&e), events = events.len(), "inbox batch not committed");
                    self.metrics.store_error("insert_inbox");
                    let e = Arc::new(e);
                    for reply in replies {
                        let _ = reply.send(Err(e.clone()));
                    }
                }
            }
        }
    }
}
