//! An authenticated event arriving by any way in (the event URL, the card URL, the long
//! connection): its inbox row, whether it is a card press (answered within its own
//! budget, see [`super::press`]), and its durable write by a deadline.

use tokio::time::Instant;

use super::{CommitError, Committer};
use crate::{
    protocol::{VerifiedEvent, events},
    store::{InboxStatus, InsertOutcome, NewInboxEvent},
    util::UnixMs,
};

/// An event on its way into the inbox.
#[derive(Debug, Clone)]
pub struct Arrival {
    /// Its row.
    pub row: NewInboxEvent,
    /// The bridge acts on it (others are stored as skipped).
    pub handled: bool,
    /// A card button press.
    pub is_press: bool,
}

impl Arrival {
    /// The row of `event` for `profile`, received now; `Err` (why) when the database
    /// could not take it — refused before it joins a batch, so that it cannot fail its
    /// batch-mates.
    pub fn of(profile: &str, event: VerifiedEvent) -> Result<Self, String> {
        let handled = events::is_handled(&event.event_type);
        let is_press = matches!(
            event.event_type.as_str(),
            events::CARD_ACTION | events::CARD_ACTION_LEGACY
        );
        let row = NewInboxEvent {
            profile: profile.to_string(),
            event_id: event.event_id,
            event_type: event.event_type,
            message_id: event.message_id,
            chat_key: event.chat_key,
            payload: event.payload,
            received_at: UnixMs::now(),
            status: if handled {
                InboxStatus::Pending
            } else {
                InboxStatus::Skipped
            },
        };
        match row.unstorable() {
            Some(why) => Err(why),
            None => Ok(Self {
                row,
                handled,
                is_press,
            }),
        }
    }

    /// Writes the event durably by `deadline` (the whole wait, queueing for the
    /// committer included); [`CommitError::Late`] past it. A batch that commits after
    /// the deadline only makes Feishu's next delivery a duplicate.
    pub async fn store(
        self,
        committer: &Committer,
        deadline: Instant,
    ) -> Result<InsertOutcome, CommitError> {
        match tokio::time::timeout_at(deadline, committer.submit(self.row, deadline)).await {
            Ok(stored) => stored,
            Err(_) => Err(CommitError::Late),
        }
    }

    /// The outcome's label (metrics, logs, the [`OUTCOME_HEADER`] of the answer).
    pub fn label(outcome: InsertOutcome, handled: bool) -> &'static str {
        match (outcome, handled) {
            (InsertOutcome::Duplicate, _) => "duplicate",
            (InsertOutcome::Inserted, true) => "accepted",
            (InsertOutcome::Inserted, false) => "skipped",
        }
    }
}

/// The response header that says what became of an accepted callback: `accepted`,
/// `duplicate` (stored before: nothing new happens), `skipped` (an event type the bridge
/// does not act on), `challenge`, `deferred` (a card press answered before it was stored).
pub const OUTCOME_HEADER: &str = "x-feishu-bridge-outcome";
