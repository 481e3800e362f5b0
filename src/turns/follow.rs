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
    /// What the turn's events (and questions) add up to now.
    pub(super) async fn progress(&self, turn_id: &str) -> Result<Progress, StoreError> {
        let rows = self.store.turn_events(turn_id).await?;
        let events: Vec<TurnEvent> = rows
            .iter()
            .filter(|r| !r.stale)
            // Stored only after validation: a body that does not read back is skipped.
            .filter_map(|r| serde_json::from_str(&r.body).ok())
            .collect();
        let s = summarize(&events);
        let asks = s
            .asks
            .into_iter()
            .map(|a| AskView {
                options: if a.options.is_empty() && a.style == AskStyle::Confirm {
                    vec!["yes".into(), "no".into()]
                } else {
                    a.options
                },
                id: a.id,
                prompt: a.prompt,
                style: a.style,
                state: AskState::Open,
            })
            .collect();
        Ok(Progress {
            text: s.text,
            thinking: String::new(),
            tools: s.tools,
            status: s.status,
            asks,
            errors: s.errors,
        })
    }

    /// Publishes the turn's progress to `partial` whenever it changes, reading at most
    /// once per `interval`, until stopped.
    pub(super) fn follow(&self, turn_id: &str, partial: &Partial, interval: Duration) -> Following {
        let stop = CancellationToken::new();
        let task = tokio::spawn(watch_turn(
            self.clone(),
            turn_id.to_string(),
            partial.clone(),
            interval,
            stop.clone(),
        ));
        Following { stop, task }
    }
}

async fn watch_turn(
    follower: EventFollower,
    turn_id: String,
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
        match follower.progress(&turn_id).await {
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
