//! Per-session serial execution: work for one session key runs in submission order,
//! different keys run in parallel, and nothing is serialised across keys.
//!
//! Each key with work has one runner task and one queue; the runner exits when its queue
//! is empty. The shared map is locked only for the moment of handing over a job, never
//! while one runs. Every job gets a cancellation token; cancelling a key's running job
//! (`/stop`) touches no other key.

use std::{
    collections::HashMap,
    future::Future,
    pin::Pin,
    sync::{Arc, Mutex},
};

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// A unit of work: given its cancellation token, a future to run.
pub type Job =
    Box<dyn FnOnce(CancellationToken) -> Pin<Box<dyn Future<Output = ()> + Send>> + Send>;

#[derive(Default)]
struct KeyState {
    tx: Option<mpsc::UnboundedSender<(String, Job)>>,
    queued: usize,
    /// The running job's token and label.
    running: Option<(CancellationToken, String)>,
    /// The labels of its queued and running jobs.
    labels: Vec<String>,
}

/// The per-key queues.
#[derive(Clone, Default)]
pub struct SessionQueues {
    keys: Arc<Mutex<HashMap<String, KeyState>>>,
    retired: Arc<tokio::sync::Notify>,
}

impl std::fmt::Debug for SessionQueues {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (queued, running) = self.totals();
        write!(f, "SessionQueues(queued={queued}, running={running})")
    }
}

/// One key's state, for `/status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct KeyStatus {
    /// A job is running.
    pub running: bool,
    /// Jobs waiting behind it.
    pub queued: usize,
}

impl SessionQueues {
    /// Empty queues.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, KeyState>> {
        self.keys
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Queues `job` behind the key's earlier jobs, labelled (a turn id) so that
    /// [`Self::cancel_label`] can name it.
    pub fn submit(&self, key: &str, label: &str, job: Job) {
        let job = (label.to_string(), job);
        let mut keys = self.lock();
        let state = keys.entry(key.to_string()).or_default();
        state.queued += 1;
        state.labels.push(label.to_string());
        // A runner exists exactly while the key has an entry with a sender: it holds the
        // receiver until it retires under this same lock, so this send cannot fail.
        let job = match &state.tx {
            Some(tx) => match tx.send(job) {
                Ok(()) => return,
                Err(mpsc::error::SendError(job)) => job,
            },
            None => job,
        };
        let (tx, rx) = mpsc::unbounded_channel();
        // A fresh channel cannot be closed: the receiver is alive right here.
        let _ = tx.send(job);
        state.tx = Some(tx);
        tokio::spawn(self.clone().run(key.to_string(), rx));
    }

    async fn run(self, key: String, mut rx: mpsc::UnboundedReceiver<(String, Job)>) {
        loop {
            let (job, token) = {
                let mut keys = self.lock();
                let Ok((label, job)) = rx.try_recv() else {
                    // Empty: retire under the lock, so a concurrent submit starts a new runner.
                    keys.remove(&key);
                    self.retired.notify_waiters();
                    return;
                };
                let token = CancellationToken::new();
                if let Some(state) = keys.get_mut(&key) {
                    state.queued = state.queued.saturating_sub(1);
                    state.running = Some((token.clone(), label));
                }
                (job, token)
            };
            job(token).await;
            if let Some(state) = self.lock().get_mut(&key)
                && let Some((_, label)) = state.running.take()
                && let Some(at) = state.labels.iter().position(|l| *l == label)
            {
                state.labels.remove(at);
            }
        }
    }

    /// Cancels the key's running job; `false` when none runs.
    pub fn cancel_running(&self, key: &str) -> bool {
        cancel(self.lock().get(key).and_then(|s| s.running.as_ref()))
    }

    /// Cancels the running job labelled `label`, whichever key it runs under; `false`
    /// when no such job runs.
    pub fn cancel_label(&self, label: &str) -> bool {
        let keys = self.lock();
        let running = keys
            .values()
            .filter_map(|s| s.running.as_ref())
            .find(|(_, l)| l == label);
        cancel(running)
    }

    /// Whether a job labelled `label` is queued or running here.
    pub fn holds(&self, label: &str) -> bool {
        self.lock()
            .values()
            .any(|s| s.labels.iter().any(|l| l == label))
    }

    /// One key's state.
    pub fn status(&self, key: &str) -> KeyStatus {
        self.lock()
            .get(key)
            .map(|s| KeyStatus {
                running: s.running.is_some(),
                queued: s.queued,
            })
            .unwrap_or_default()
    }

    /// Cancels every running job (shutdown).
    pub fn cancel_all(&self) {
        for state in self.lock().values() {
            if let Some((token, _)) = &state.running {
                token.cancel();
            }
        }
    }

    /// Resolves once no key has work left.
    pub async fn idle(&self) {
        loop {
            let retired = self.retired.notified();
            tokio::pin!(retired);
            retired.as_mut().enable();
            if self.lock().is_empty() {
                return;
            }
            retired.await;
        }
    }

    /// (queued, running) over all keys.
    pub fn totals(&self) -> (usize, usize) {
        self.lock().values().fold((0, 0), |(q, r), s| {
            (q + s.queued, r + usize::from(s.running.is_some()))
        })
    }
}

/// Cancels a running job, if there is one.
fn cancel(running: Option<&(CancellationToken, String)>) -> bool {
    running.inspect(|(token, _)| token.cancel()).is_some()
}

#[cfg(test)]
mod tests {
    use tokio::sync::{mpsc, oneshot};

    use super::*;

    fn job<F>(f: impl FnOnce(CancellationToken) -> F + Send + 'static) -> Job
    where
        F: Future<Output = ()> + Send + 'static,
    {
        Box::new(move |t| Box::pin(f(t)))
    }

    /// A job that logs `what`.
    fn say(log: &mpsc::UnboundedSender<&'static str>, what: &'static str) -> Job {
        let log = log.clone();
        job(move |_| async move {
            log.send(what).ok();
        })
    }

    #[tokio::test]
    async fn one_key_runs_in_order_while_another_key_proceeds() {
        let q = SessionQueues::new();
        let (log_tx, mut log) = mpsc::unbounded_channel::<&'static str>();
        let (release_slow, slow_gate) = oneshot::channel::<()>();

        let l = log_tx.clone();
        q.submit(
            "a",
            "",
            job(move |_| async move {
                l.send("a1 start").ok();
                slow_gate.await.ok();
                l.send("a1 end").ok();
            }),
        );
        q.submit("a", "", say(&log_tx, "a2"));
        q.submit("b", "", say(&log_tx, "b1"));

        // b runs to completion while a1 is still blocked.
        let mut seen = Vec::new();
        while seen.len() < 2 {
            seen.push(log.recv().await.expect("log"));
        }
        seen.sort_unstable();
        assert_eq!(seen, ["a1 start", "b1"]);
        assert_eq!(
            q.status("a"),
            KeyStatus {
                running: true,
                queued: 1
            }
        );

        release_slow.send(()).expect("release");
        assert_eq!(log.recv().await, Some("a1 end"));
        assert_eq!(log.recv().await, Some("a2"), "a2 waited for a1");
    }

    #[tokio::test]
    async fn cancelling_one_key_leaves_the_other_running() {
        let q = SessionQueues::new();
        let (tx, mut rx) = mpsc::unbounded_channel::<(&'static str, bool)>();
        let (started_tx, mut started) = mpsc::unbounded_channel::<&'static str>();
        for (key, label) in [("a", "a-job"), ("b", "b-job")] {
            let (tx, started_tx) = (tx.clone(), started_tx.clone());
            q.submit(
                key,
                label,
                job(move |token| async move {
                    started_tx.send(key).ok();
                    token.cancelled().await;
                    tx.send((key, true)).ok();
                }),
            );
        }
        started.recv().await.expect("started");
        started.recv().await.expect("started");
        assert!(q.cancel_running("a"));
        assert_eq!(rx.recv().await, Some(("a", true)));
        assert!(q.status("b").running, "b is untouched");
        assert!(!q.cancel_running("nope"));
        assert!(q.holds("b-job") && !q.holds("c-job"));
        assert!(!q.cancel_label("c-job"));
        assert!(q.cancel_label("b-job"), "found by its label");
        assert_eq!(rx.recv().await, Some(("b", true)));
    }
}
