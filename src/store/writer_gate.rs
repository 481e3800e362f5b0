//! SQLite's one writer, taken in turn, the inbox first.
//!
//! SQLite lets one connection write at a time; a writer that finds the lock taken sleeps
//! in SQLite's busy handler in steps of up to 100 ms, whatever the holder is doing. Under
//! a draining backlog that put the webhook's group commits behind the worker's
//! transactions by hundreds of milliseconds. So every write on SQLite first takes this
//! gate, in process, in arrival order, and never meets the lock taken: the inbox
//! committer goes straight to the gate, every other writer first queues behind the
//! others, so at most one other writer is ever ahead of a group commit.

use tokio::sync::{Mutex, MutexGuard};

/// The gate (see the module header).
#[derive(Debug, Default)]
pub(crate) struct WriterGate {
    gate: Mutex<()>,
    others: Mutex<()>,
}

/// Holds the writer's turn until dropped.
pub struct WriteTurn<'a> {
    _others: Option<MutexGuard<'a, ()>>,
    _gate: MutexGuard<'a, ()>,
}

impl WriterGate {
    /// The inbox committer's turn: next after the writer in hand and at most one other.
    pub(crate) async fn inbox(&self) -> WriteTurn<'_> {
        WriteTurn {
            _others: None,
            _gate: self.gate.lock().await,
        }
    }

    /// Any other writer's turn: after the writers queued before it.
    pub(crate) async fn other(&self) -> WriteTurn<'_> {
        let others = self.others.lock().await;
        WriteTurn {
            _gate: self.gate.lock().await,
            _others: Some(others),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex as Log};

    use super::*;

    #[tokio::test]
    async fn a_group_commit_goes_before_the_other_writers_queued_before_it() {
        let gate = Arc::new(WriterGate::default());
        let order = Arc::new(Log::new(Vec::new()));
        let held = gate.other().await;
        let mut tasks = Vec::new();
        for (name, inbox) in [("a", false), ("b", false), ("inbox", true)] {
            let (g, order) = (gate.clone(), order.clone());
            tasks.push(tokio::spawn(async move {
                let _turn = if inbox {
                    g.inbox().await
                } else {
                    g.other().await
                };
                order.lock().expect("log").push(name);
            }));
            // Let it queue before the next one comes.
            tokio::task::yield_now().await;
        }
        drop(held);
        for t in tasks {
            t.await.expect("writer");
        }
        assert_eq!(*order.lock().expect("log"), ["inbox", "a", "b"]);
    }
}
