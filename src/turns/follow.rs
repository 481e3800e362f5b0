//! Following what a webhook agent reports while its turn runs: the turn's stored events
//! (and questions) read again whenever one is stored — on this replica, told through the
//! app's broadcast; on another, seen by reading every [`POLL`] — and summed up into the
//! turn's [`Progress`], which its card shows. Reads are at most one per interval, so an
//! agent streaming many small deltas costs one read per card update, not one per event.

use std::{sync::Arc, time::Duration};

use tokio::{
    sync::broadcast::{self, error::RecvError},
    task::JoinHandle,
};
use tokio_util::sync::CancellationToken;

use crate::{
    agent::{
        AskState, AskView, Partial, Progress,
        events::{AskStyle, TurnEvent, TurnEventNote, summarize},
    },
    names::Names,
    store::{Store, StoreError},
};

/// How often a turn's events are read when no note of a new one came (an event stored
/// by another replica).
const POLL: Duration = Duration::from_secs(1);

/// Reads turns' events into their progress.
#[derive(Clone)]
pub(super) struct EventFollower {
    pub store: Arc<dyn Store>,
    pub notes: broadcast::Sender<TurnEventNote>,
    /// Who answered a question, by name when known.
    pub names: Arc<Names>,
}

/// A turn being followed; [`Following::stop`] ends it.
pub(super) struct Following {
    stop: CancellationToken,
    task: JoinHandle<()>,
}

impl Following {
    /// Stops following (a read in flight is dropped).
    pub(super) async fn stop(self) {
        self.stop.cancel();
        let _ = self.task.await;
    }
}

impl EventFollower {
    /// What the turn's events (and questions, with their answers) add up to now.
    pub(super) async fn progress(
        &self,
        profile: &str,
        turn_id: &str,
    ) -> Result<Progress, StoreError> {
        let rows = self.store.turn_events(turn_id).await?;
        let events: Vec<TurnEvent> = rows
            .iter()
            .filter(|r| !r.stale)
            // Stored only after validation: a body that does not read back is skipped.
            .filter_map(|r| serde_json::from_str(&r.body).ok())
            .collect();
        let s = summarize(&events);
        let asks = if s.asks.is_empty() {
            Vec::new()
        } else {
            self.asks(profile, turn_id).await?
        };
        Ok(Progress {
            text: s.text,
            thinking: String::new(),
            tools: s.tools,
            status: s.status,
            asks,
            errors: s.errors,
        })
    }

    /// The turn's questions as its card shows them: open (whether the turn still runs
    /// is the card's to say), answered by whom (named when the name is known), or timed
    /// out to what.
    async fn asks(&self, profile: &str, turn_id: &str) -> Result<Vec<AskView>, StoreError> {
        let rows = self.store.turn_asks(turn_id).await?;
        let mut by: Vec<String> = rows.iter().filter_map(|r| r.answered_by.clone()).collect();
        self.names
            .relabel_users(profile, by.iter_mut().collect())
            .await;
        let mut by = by.into_iter();
        Ok(rows
            .into_iter()
            .map(|r| {
                let state = match (r.answered_at, r.timed_out) {
                    (Some(_), true) => AskState::TimedOut { value: r.answer },
                    (Some(_), false) => AskState::Answered {
                        value: r.answer.unwrap_or_default(),
                        by: r.answered_by.as_ref().and_then(|_| by.next()),
                    },
                    (None, _) => AskState::Open,
                };
                let style = if r.style == AskStyle::Select.as_str() {
                    AskStyle::Select
                } else {
                    AskStyle::Confirm
                };
                AskView {
                    options: if r.options.is_empty() && style == AskStyle::Confirm {
                        vec!["yes".into(), "no".into()]
                    } else {
                        r.options
                    },
                    id: r.ask_id,
                    prompt: r.prompt,
                    style,
                    state,
                }
            })
            .collect())
    }

    /// Publishes the turn's progress to `partial` whenever it changes, reading at most
    /// once per `interval`, until stopped.
    pub(super) fn follow(
        &self,
        profile: &str,
        turn_id: &str,
        partial: &Partial,
        interval: Duration,
    ) -> Following {
        let stop = CancellationToken::new();
        let task = tokio::spawn(watch_turn(
            self.clone(),
            (profile.to_string(), turn_id.to_string()),
            partial.clone(),
            interval,
            stop.clone(),
        ));
        Following { stop, task }
    }
}

async fn watch_turn(
    follower: EventFollower,
    (profile, turn_id): (String, String),
    partial: Partial,
    interval: Duration,
    stop: CancellationToken,
) {
    let mut notes = follower.notes.subscribe();
    loop {
        // Wait for news of this turn (or the poll).
        let poll = tokio::time::sleep(POLL);
        tokio::pin!(poll);
        loop {
            tokio::select! {
                biased;
                () = stop.cancelled() => return,
                () = &mut poll => break,
                note = notes.recv() => match note {
                    Ok(n) if n.turn_id == turn_id && !n.stale => break,
                    Ok(_) => {}
                    Err(RecvError::Lagged(_)) => break,
                    Err(RecvError::Closed) => return,
                },
            }
        }
        match follower.progress(&profile, &turn_id).await {
            Ok(now) => {
                partial.send_if_modified(|p| {
                    let changed = *p != now;
                    *p = now;
                    changed
                });
            }
            Err(e) => {
                tracing::debug!(turn_id, error = %e, "turn events not read; the card waits for the next")
            }
        }
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(interval) => {}
        }
    }
}
