//! Presses in flight. From the moment Feishu posts a card callback for a message's card
//! to the bridge until it has the bridge's answer, the card is "in an ongoing
//! interaction": CardKit refuses every operation on it with HTTP 400 / 200810 ("The
//! card is in an ongoing interaction and cannot be updated", `cardkit-v1/card/update.md`,
//! `settings.md`, `card-element/content.md`). The message card PATCH docs list no such
//! code; the fake refuses a PATCH of that message the same way, the cautious reading.
//!
//! The test harness plays Feishu's side of a press: it takes an [`Interaction`] for the
//! card's message before it posts the callback and drops it once it has handled the
//! answer.

use std::sync::Arc;

use axum::http::StatusCode;

use super::{FakeState, gate::Refused};

/// The code and message of an update refused during an interaction.
pub(super) const INTERACTING: i64 = 200810;
const INTERACTING_MSG: &str = "The card is in an ongoing interaction and cannot be updated";

/// A press on a message's card, in flight until dropped.
pub struct Interaction {
    state: Arc<FakeState>,
    message_id: String,
}

impl Drop for Interaction {
    fn drop(&mut self) {
        let mut presses = self.state.interactions.lock().expect("lock");
        if let Some(n) = presses.get_mut(&self.message_id) {
            *n -= 1;
            if *n == 0 {
                presses.remove(&self.message_id);
            }
        }
        drop(presses);
        self.state
            .activity
            .send(format!("interaction-ended:{}", self.message_id))
            .ok();
    }
}

impl FakeState {
    /// A press on the card of `message_id` begins (Feishu is about to post its callback).
    pub fn interaction(self: &Arc<Self>, message_id: &str) -> Interaction {
        *self
            .interactions
            .lock()
            .expect("lock")
            .entry(message_id.to_string())
            .or_default() += 1;
        Interaction {
            state: self.clone(),
            message_id: message_id.to_string(),
        }
    }

    /// Refuses an update of the card shown by `message_id` while a press on it is in
    /// flight.
    pub(super) fn check_interaction(
        &self,
        endpoint: &'static str,
        message_id: Option<&str>,
    ) -> Result<(), Refused> {
        let busy =
            message_id.is_some_and(|id| self.interactions.lock().expect("lock").contains_key(id));
        if busy {
            return Err(self.refuse(
                endpoint,
                StatusCode::BAD_REQUEST,
                INTERACTING,
                INTERACTING_MSG,
            ));
        }
        Ok(())
    }

    /// How many requests to `endpoint` were refused with 200810.
    pub fn refused_in_interaction(&self, endpoint: &str) -> usize {
        self.refusals
            .lock()
            .expect("lock")
            .iter()
            .filter(|(ep, code)| ep == endpoint && *code == INTERACTING)
            .count()
    }
}
