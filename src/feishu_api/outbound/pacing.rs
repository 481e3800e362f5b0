//! Pacing what goes to one place. Sends to one chat are spaced so that several bots
//! together stay under Feishu's group limit (5 messages per second shared by all bots
//! in a chat). Operations on one card are spaced under Feishu's per-card limits (10 per
//! second for a CardKit entity, 5 per second for a message's card), and a card whose
//! intermediate update was rate limited stays quiet until the limit resets.

use std::{collections::HashMap, sync::Mutex, time::Duration};

use tokio::time::Instant;

/// Between two sends to one chat.
const CHAT_SPACING: Duration = Duration::from_millis(220);
/// Between two operations on one CardKit card (8 a second; Feishu allows 10).
pub(super) const ENTITY_SPACING: Duration = Duration::from_millis(125);
/// Between two updates of one message's card (4 a second; Feishu allows 5).
pub(super) const MESSAGE_SPACING: Duration = Duration::from_millis(250);
/// How long a rate-limited card stays quiet when Feishu did not say.
const QUIET: Duration = Duration::from_secs(2);
/// The longest it stays quiet whatever Feishu said.
const QUIET_MAX: Duration = Duration::from_secs(30);

/// Spaces sends per chat.
#[derive(Debug, Default)]
pub(super) struct Pacer {
    next: tokio::sync::Mutex<HashMap<String, Instant>>,
}

impl Pacer {
    /// Waits for `chat_id`'s next slot.
    pub(super) async fn wait(&self, chat_id: &str) {
        let at = slot(&mut *self.next.lock().await, chat_id, Instant::now());
        // Only when there is something to wait for: a timer, even one already due,
        // costs a tick of the runtime's clock (about a millisecond).
        if at > Instant::now() {
            tokio::time::sleep_until(at).await;
        }
    }
}

/// When a send to `chat_id` may go, given the chats' next free slots, and books the slot
/// after it. Chats whose slot has passed are forgotten, so the map holds only chats sent
/// to in the last moment.
fn slot(next: &mut HashMap<String, Instant>, chat_id: &str, now: Instant) -> Instant {
    next.retain(|_, free| *free > now);
    let at = next.get(chat_id).copied().unwrap_or(now);
    next.insert(chat_id.to_string(), at + CHAT_SPACING);
    at
}

/// One card's pace.
#[derive(Debug)]
pub(super) struct CardPace {
    next: Mutex<Instant>,
    quiet_until: Mutex<Option<Instant>>,
}

impl Default for CardPace {
    fn default() -> Self {
        Self {
            next: Mutex::new(Instant::now()),
            quiet_until: Mutex::default(),
        }
    }
}

impl CardPace {
    /// Waits for the card's next slot and books the one `spacing` after it.
    pub(super) async fn wait(&self, spacing: Duration) {
        let at = {
            let mut next = self.next.lock().unwrap_or_else(|p| p.into_inner());
            let at = (*next).max(Instant::now());
            *next = at + spacing;
            at
        };
        if at > Instant::now() {
            tokio::time::sleep_until(at).await;
        }
    }

    /// Whether intermediate updates should hold off (a rate limit has not reset yet).
    pub(super) fn quiet(&self) -> bool {
        let quiet = self.quiet_until.lock().unwrap_or_else(|p| p.into_inner());
        quiet.is_some_and(|until| Instant::now() < until)
    }

    /// Holds intermediate updates off for `reset` (as Feishu said), or a moment.
    pub(super) fn hush(&self, reset: Option<Duration>) {
        let until = Instant::now() + reset.unwrap_or(QUIET).min(QUIET_MAX);
        *self.quiet_until.lock().unwrap_or_else(|p| p.into_inner()) = Some(until);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sends_to_one_chat_are_spaced_and_other_chats_are_not_held() {
        let mut next = HashMap::new();
        let t0 = Instant::now();
        assert_eq!(slot(&mut next, "oc_a", t0), t0, "a first send goes at once");
        assert_eq!(slot(&mut next, "oc_a", t0), t0 + CHAT_SPACING);
        assert_eq!(slot(&mut next, "oc_a", t0), t0 + CHAT_SPACING * 2);
        assert_eq!(slot(&mut next, "oc_b", t0), t0, "another chat is not held");
        // Once the booked slots have passed, the chat is free again and forgotten.
        let later = t0 + CHAT_SPACING * 5;
        assert_eq!(slot(&mut next, "oc_b", later), later);
        assert_eq!(next.len(), 1, "oc_a's passed slot was dropped");
    }

    #[test]
    fn a_hushed_card_is_quiet() {
        let pace = CardPace::default();
        assert!(!pace.quiet());
        pace.hush(Some(Duration::from_secs(60)));
        assert!(pace.quiet());
        pace.hush(Some(Duration::ZERO));
        assert!(!pace.quiet());
    }
}
