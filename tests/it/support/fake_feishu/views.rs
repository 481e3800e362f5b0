//! What tests read back from the fake: the token it accepts, when it created a message,
//! and what a message or card entity shows now.

use std::sync::atomic::Ordering;

use axum::http::HeaderMap;
use serde_json::Value;

use super::{FakeState, entities::find_element};

impl FakeState {
    /// The texts (content JSON) of the messages created in reply to `message_id`.
    pub fn replies_to(&self, message_id: &str) -> Vec<String> {
        let sent = self.sent.lock().expect("lock");
        sent.iter()
            .filter(|(to, _)| to == message_id)
            .map(|(_, body)| body["content"].as_str().unwrap_or_default().to_string())
            .collect()
    }

    /// The bodies of the messages sent (not replies) to `receive_id`, one per message
    /// created.
    pub fn sent_to(&self, receive_id: &str) -> Vec<Value> {
        let sent = self.sent.lock().expect("lock");
        sent.iter()
            .filter(|(to, body)| to == receive_id && body["receive_id"] == receive_id)
            .map(|(_, body)| body.clone())
            .collect()
    }

    /// Invalidates every token issued (Feishu answers 99991663 to them from now on).
    pub fn revoke_token(&self) {
        self.tokens.revoke();
    }

    pub(super) fn authorized(&self, headers: &HeaderMap) -> bool {
        headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .is_some_and(|t| self.tokens.valid(t))
    }

    /// Whether `id` was recalled; a request about it is counted in `calls_to_recalled`.
    pub(super) fn targets_recalled(&self, id: &str) -> bool {
        let recalled = self.recalled.lock().expect("lock").contains(id);
        if recalled {
            self.calls_to_recalled.fetch_add(1, Ordering::SeqCst);
        }
        recalled
    }

    /// Adds mention tags to `notified`.
    pub(super) fn notify(&self, tags: Vec<String>) {
        if !tags.is_empty() {
            self.notified.lock().expect("lock").extend(tags);
        }
    }

    /// The `create_time` (ms) it gave the message `id` it created.
    pub fn created_at(&self, id: &str) -> Option<i64> {
        let by_uuid = self
            .uuids
            .lock()
            .expect("lock")
            .values()
            .find(|(m, _)| m == id)
            .map(|(_, at)| *at);
        by_uuid.or_else(|| self.posted.lock().expect("lock").get(id).map(|p| p.at))
    }

    /// The answer text shown in the latest update (PATCH) of card `id`: its element
    /// `answer`, else its first markdown.
    pub fn card_text(&self, id: &str) -> Option<String> {
        self.patches
            .lock()
            .expect("lock")
            .iter()
            .rev()
            .find(|(m, _)| m == id)
            .map(|(_, card)| {
                let body = &card["body"];
                find_element(body, &|e| e["element_id"] == "answer")
                    .or_else(|| find_element(body, &|e| e["tag"] == "markdown"))
                    .and_then(|e| e["content"].as_str().map(str::to_string))
                    .unwrap_or_default()
            })
    }

    /// The card entity that message `message_id` shows, if it shows one.
    pub fn entity_of(&self, message_id: &str) -> Option<String> {
        self.cards
            .lock()
            .expect("lock")
            .iter()
            .find(|(_, e)| e.message_id.as_deref() == Some(message_id))
            .map(|(id, _)| id.clone())
    }

    /// The answer text message `message_id` shows now: its entity's answer element, or
    /// the first markdown of its latest card.
    pub fn shown_text(&self, message_id: &str) -> Option<String> {
        match self.entity_of(message_id) {
            Some(card_id) => self.entity_text(&card_id),
            None => self.card_text(message_id),
        }
    }

    /// The text of entity `card_id`: the `content` of its element `answer`, else of its
    /// first markdown element (depth first).
    pub fn entity_text(&self, card_id: &str) -> Option<String> {
        let cards = self.cards.lock().expect("lock");
        let body = &cards.get(card_id)?.card["body"];
        let element = find_element(body, &|e| e["element_id"] == "answer")
            .or_else(|| find_element(body, &|e| e["tag"] == "markdown"))?;
        element["content"].as_str().map(str::to_string)
    }

    /// What the chat list previews message `message_id` by, when it is a card: its
    /// `config.summary.content` now.
    pub fn summary_of(&self, message_id: &str) -> Option<String> {
        let card = self.shown_card(message_id)?;
        card["config"]["summary"]["content"]
            .as_str()
            .map(str::to_string)
    }

    /// The card message `message_id` shows now: its entity's card, else its latest
    /// PATCH, else the card it was posted with. `None` for other messages.
    pub fn shown_card(&self, message_id: &str) -> Option<Value> {
        if let Some(card_id) = self.entity_of(message_id) {
            return self
                .cards
                .lock()
                .expect("lock")
                .get(&card_id)
                .map(|e| e.card.clone());
        }
        let patched = self
            .patches
            .lock()
            .expect("lock")
            .iter()
            .rev()
            .find(|(m, _)| m == message_id)
            .map(|(_, card)| card.clone());
        patched.or_else(|| {
            let posted = self.posted.lock().expect("lock");
            let posted = posted.get(message_id)?;
            (posted.msg_type == "interactive").then(|| posted.content.clone())
        })
    }
}
