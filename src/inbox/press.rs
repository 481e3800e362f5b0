//! A card button press (`card.action.trigger` on either URL or over the long connection,
//! or a legacy message-card action): stored and answered within its own budget.
//!
//! Feishu never retries a card callback: a 503, or an answer after its 3 seconds, is a
//! lost press (the user sees an error). So a press is never answered 503 for a slow
//! database. Its durable write, then the button's answer ([`buttons::answer`]), run in a
//! task of their own, and the request waits for that task until its budget,
//! `server.ack_deadline_ms` (2.5 s by default) after the request came in — the same
//! bound as any callback's, already validated under Feishu's 3 s and leaving room for
//! the network. Then it answers with what there is: the button's toast, `{}` for a
//! repeated delivery, or, past the budget, an `info` toast saying the press is being
//! worked on. The task goes on without the request: it writes again while the database
//! fails (SQLite gives a locked write up after `database.timeout_ms`) for up to
//! [`PATIENCE`], then does what the button does; a press it could not store is logged.
//! The shutdown waits for these tasks (a `TaskTracker` in the app state) before it
//! stops the committers.

use std::{sync::Arc, time::Duration};

use serde_json::{Value, json};
use tokio::{sync::oneshot, time::Instant};
use tokio_util::task::TaskTracker;

use super::{CommitError, Committer};
use crate::{
    config::Config,
    store::{InsertOutcome, NewInboxEvent, Store},
    turns::{
        buttons::{self, ButtonContext},
        queue::SessionQueues,
    },
};

/// How long a press keeps trying to be stored. A minute outlasts a database restart or
/// a lock held for a while, and is still soon enough for a stop or a new session to be
/// what its user asked for; during a shutdown, the shorter grace period bounds it.
pub const PATIENCE: Duration = Duration::from_secs(60);

/// The pause after `failures` failed writes: 100 ms doubling, at most 2 s.
fn pause(failures: u32) -> Duration {
    let factor = 1u32 << failures.saturating_sub(1).min(5);
    (Duration::from_millis(100) * factor).min(Duration::from_secs(2))
}

/// The answer while a press is still being stored or acted on.
pub fn working_on_it() -> Value {
    json!({"toast": {"type": "info", "content": "Working on it; this can take a moment."}})
}

/// What a press came to: stored (or a repeat) and the body to answer, or not stored.
type Done = Result<(InsertOutcome, Value), CommitError>;

/// How a press was answered by its budget.
#[derive(Debug)]
pub enum Answered {
    /// Stored (or a repeated delivery) and this is the body to answer.
    Done(InsertOutcome, Value),
    /// Not done by the budget: answer [`working_on_it`]; it goes on in the background.
    Deferred,
    /// It could not be stored.
    NotStored(CommitError),
    /// The task ended without an outcome (it panicked).
    Lost,
}

impl Answered {
    /// A metrics label.
    pub fn label(&self) -> &'static str {
        match self {
            Self::Done(outcome, _) => label(*outcome),
            Self::Deferred => "deferred",
            Self::NotStored(_) | Self::Lost => "not_stored",
        }
    }
}

/// What storing and answering presses needs (cheap to clone).
#[derive(Clone)]
pub struct Presses {
    /// The inbox's group committer.
    pub committer: Committer,
    /// The database (turns, sessions, the stored press).
    pub store: Arc<dyn Store>,
    /// Profiles and workspaces (who may press).
    pub config: Arc<Config>,
    /// Where a running turn is stopped.
    pub queues: SessionQueues,
    /// Where work outliving its answer runs; the shutdown waits for it.
    pub background: TaskTracker,
    /// Where a stored answer to an agent's question is announced.
    pub notes: tokio::sync::broadcast::Sender<crate::agent::events::TurnEventNote>,
    /// What delivers such an answer to the agent.
    pub answers: Arc<crate::agent::answer::AnswerSender>,
}

impl Presses {
    /// Stores a verified press and answers it by `budget`, finishing in the background
    /// what is not done by then.
    pub async fn receive(&self, row: NewInboxEvent, budget: Instant) -> Answered {
        let (tx, mut rx) = oneshot::channel();
        let press = Press {
            parts: self.clone(),
            row,
        };
        self.background.spawn(press.run(tx));
        let done = match tokio::time::timeout_at(budget, &mut rx).await {
            Ok(Ok(done)) => done,
            Ok(Err(_)) => return Answered::Lost,
            Err(_) => {
                // Closed first, so that the task knows nobody waits for its outcome; one
                // sent meanwhile still counts.
                rx.close();
                match rx.try_recv() {
                    Ok(done) => done,
                    Err(_) => return Answered::Deferred,
                }
            }
        };
        match done {
            Ok((outcome, body)) => Answered::Done(outcome, body),
            Err(e) => Answered::NotStored(e),
        }
    }
}

fn label(outcome: InsertOutcome) -> &'static str {
    match outcome {
        InsertOutcome::Inserted => "accepted",
        InsertOutcome::Duplicate => "duplicate",
    }
}

/// One press on its way into the inbox and through its button.
struct Press {
    parts: Presses,
    row: NewInboxEvent,
}

impl Press {
    /// Stores and answers the press, and hands the outcome to its request; when the
    /// request has already been answered (or its client left), logs what became of the
    /// press instead.
    async fn run(self, answer: oneshot::Sender<Done>) {
        let done = self.store_and_answer().await;
        let Err(unsent) = answer.send(done) else {
            return;
        };
        let (profile, event_id) = (&self.row.profile, &self.row.event_id);
        match unsent {
            Ok((InsertOutcome::Inserted, _)) => tracing::info!(
                profile,
                %event_id,
                "card press stored and acted on after its request was answered"
            ),
            Ok((InsertOutcome::Duplicate, _)) => {}
            Err(e) => {
                let reason = match &e {
                    CommitError::Store(s) | CommitError::Refused(s) => s.reason(),
                    other => other.to_string(),
                };
                tracing::error!(profile, %event_id, %reason, "card press not stored after its request was answered: it is lost");
            }
        }
    }

    async fn store_and_answer(&self) -> Done {
        let row = &self.row;
        let outcome = self.store().await?;
        tracing::info!(profile = %row.profile, event_id = %row.event_id, event_type = %row.event_type, outcome = label(outcome), "callback stored");
        let body = match outcome {
            InsertOutcome::Inserted => {
                let state = &self.parts;
                let cx = ButtonContext {
                    config: &state.config,
                    turns: state.store.clone(),
                    leases: state.store.clone(),
                    sessions: state.store.clone(),
                    queues: &state.queues,
                    background: &state.background,
                    asks: state.store.clone(),
                    notes: state.notes.clone(),
                    answers: state.answers.clone(),
                };
                buttons::answer(cx, &row.profile, &row.event_type, &row.payload).await
            }
            // A repeated delivery is only acknowledged: the first one did the work.
            InsertOutcome::Duplicate => json!({}),
        };
        Ok((outcome, body))
    }

    /// Writes the press, again while the database fails, until [`PATIENCE`] is spent.
    async fn store(&self) -> Result<InsertOutcome, CommitError> {
        let give_up = Instant::now() + PATIENCE;
        let mut failures = 0u32;
        loop {
            let e = match self.parts.committer.submit(self.row.clone(), give_up).await {
                Ok(InsertOutcome::Duplicate) if failures > 0 => return Ok(self.ours().await),
                Ok(outcome) => return Ok(outcome),
                Err(CommitError::Store(e)) => e,
                Err(e) => return Err(e),
            };
            failures += 1;
            let pause = pause(failures);
            if Instant::now() + pause >= give_up {
                return Err(CommitError::Store(e));
            }
            if failures == 1 {
                tracing::warn!(profile = %self.row.profile, event_id = %self.row.event_id, reason = %e.reason(), "a card press was not stored; trying again");
            }
            tokio::time::sleep(pause).await;
        }
    }

    /// A failed write may have committed after all (a statement that timed out here can
    /// still run in the database), so a row already there after one is this press's own
    /// when it carries this press's arrival time; an earlier delivery carries another.
    async fn ours(&self) -> InsertOutcome {
        let row = &self.row;
        match self
            .parts
            .store
            .inbox_event(&row.profile, &row.event_id)
            .await
        {
            Ok(Some(stored)) if stored.event.received_at == row.received_at => {
                InsertOutcome::Inserted
            }
            Ok(_) => InsertOutcome::Duplicate,
            Err(e) => {
                // Doing a button's work twice is better than losing it.
                tracing::warn!(profile = %row.profile, event_id = %row.event_id, reason = %e.reason(), "cannot tell whether a card press was stored earlier; acting on it");
                InsertOutcome::Inserted
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pause_doubles_from_a_tenth_of_a_second_up_to_two() {
        let pauses: Vec<u128> = (1..=7).map(|f| pause(f).as_millis()).collect();
        assert_eq!(pauses, [100, 200, 400, 800, 1600, 2000, 2000]);
    }
}
