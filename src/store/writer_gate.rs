//! SQLite's one writer, taken in turn, the inbox first.
//!
//! SQLite lets one connection write at a time; a writer that finds the lock taken sleeps
//! in SQLite's busy handler in steps of up to 100 ms, whatever the holder is doing. Under
//! a draining backlog that put the webhook's group commits behind the worker's
//! transactions by hundreds of milliseconds. So every write on SQLite first takes this
//! gate, in process, and never meets the lock taken. The inbox committer goes first: it
//! waits only for the writer in hand. Every other writer queues behind the others, and
//! one that comes to the gate while a group commit waits for it steps back and lets the
//! group commit go first — up to [`STEP_BACKS`] times in a row, so that arrivals that
//! never stop cannot hold the worker off for ever.

use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::{Mutex, MutexGuard};

/// How many group commits in a row a writer at the gate lets go first.
const STEP_BACKS: usize = 4;

/// The gate (see the module header).
#[derive(Debug, Default)]
pub(crate) struct WriterGate {
    gate: Mutex<()>,
    others: Mutex<()>,
    /// Group commits waiting for the gate.
    inbox_waiting: AtomicUsize,
}

/// Holds the writer's turn until dropped.
pub struct WriteTurn<'a> {
    _others: Option<MutexGuard<'a, ()>>,
    _gate: MutexGuard<'a, ()>,
}

/// Counts a group commit as waiting until dropped (also when its wait is abandoned).
struct Waiting<'a>(&'a AtomicUsize);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl WriterGate {
    /// The inbox committer's turn: next after the writer in hand.
    pub(crate) async fn inbox(&self) -> WriteTurn<'_> {
        self.inbox_waiting.fetch_add(1, Ordering::AcqRel);
        let waiting = Waiting(&self.inbox_waiting);
        let gate = self.gate.lock().await;
        drop(waiting);
        WriteTurn {
            _others: None,
            _gate: gate,
        }
    }

    /// Any other writer's turn: after the writers queued before it, and after the group
    /// commits waiting when it comes to the gate (at most [`STEP_BACKS`] in a row).
    pub(crate) async fn other(&self) -> WriteTurn<'_> {
        let others = self.others.lock().await;
        let mut step_backs = 0;
        loop {
            let gate = self.gate.lock().await;
            if step_backs == STEP_BACKS || self.inbox_waiting.load(Ordering::Acquire) == 0 {
                return WriteTurn {
                    _gate: gate,
                    _others: Some(others),
                };
            }
            // The gate passes to the waiters in order: the group commit first.
            drop(gate);
            step_backs += 1;
            tokio::task::yield_now().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex as Log};

    use super::*;

    /// While `held` is in hand, writers come one after another (`true`: a group commit),
    /// each queued before the next comes; the order they got their turn in.
    async fn order_of_turns(
        gate: &Arc<WriterGate>,
        held: WriteTurn<'_>,
        writers: &[(&'static str, bool)],
    ) -> Vec<&'static str> {
        let order = Arc::new(Log::new(Vec::new()));
        let mut tasks = Vec::new();
        for &(name, inbox) in writers {
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
        order.lock().expect("log").clone()
    }

    #[tokio::test]
    async fn a_group_commit_goes_before_the_other_writers_queued_before_it() {
        let gate = Arc::new(WriterGate::default());
        let held = gate.other().await;
        let writers = [("a", false), ("b", false), ("inbox", true)];
        let order = order_of_turns(&gate, held, &writers).await;
        assert_eq!(order, ["inbox", "a", "b"]);
    }

    #[tokio::test]
    async fn a_writer_at_the_gate_steps_back_for_a_group_commit_that_came_after_it() {
        let gate = Arc::new(WriterGate::default());
        // A group commit in hand; "a" comes to the gate and waits there, then another
        // group commit comes.
        let held = gate.inbox().await;
        let order = order_of_turns(&gate, held, &[("a", false), ("inbox", true)]).await;
        assert_eq!(order, ["inbox", "a"]);
        assert_eq!(gate.inbox_waiting.load(Ordering::Acquire), 0);
    }

    #[tokio::test]
    async fn group_commits_that_never_stop_hold_another_writer_off_only_so_long() {
        let gate = Arc::new(WriterGate::default());
        // A group commit is always waiting (as under arrivals that never stop).
        gate.inbox_waiting.fetch_add(1, Ordering::AcqRel);
        let turn = tokio::time::timeout(std::time::Duration::from_secs(30), gate.other()).await;
        assert!(turn.is_ok(), "the writer took its turn after stepping back");
    }
}
