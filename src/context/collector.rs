//! Turns a routed message into event-log records and their context items.
//!
//! `topic_root` and `human_message` records get an item (what the selector consumes);
//! `user_request` and `command` are recorded as facts only and never become items.
//! A record with no text contributes nothing and is not written.

use serde_json::json;

use super::kinds::{EventType, ItemType, Role};
use crate::{
    protocol::events::ChatType,
    routing::{Place, Record, Route},
    store::{NewContextEvent, NewItem},
    util::UnixMs,
};

/// The facts of one message the records are made of.
#[derive(Debug, Clone)]
pub struct MessageFacts<'a> {
    pub profile: &'a str,
    /// Its app id (the bridge id).
    pub app_id: &'a str,
    /// Where the message sits.
    pub place: &'a Place,
    /// Private or group.
    pub chat_type: ChatType,
    /// `omt_…`
    pub thread_id: Option<&'a str>,
    pub message_id: &'a str,
    /// `user`, `bot`, `app`.
    pub actor_type: &'a str,
    /// The sender's id.
    pub actor_id: &'a str,
    /// How the sender is shown to the agent.
    pub author_label: &'a str,
    /// Normalized text.
    pub text: &'a str,
    /// Message type, mention flags, parent id.
    pub metadata: serde_json::Value,
    pub history_scope: &'a str,
    /// This bot (the target of a request).
    pub bot_open_id: Option<&'a str>,
    /// When it was sent.
    pub created_at: UnixMs,
}

/// The event-log record routing asked for.
fn event_type(r: Record) -> EventType {
    match r {
        Record::TopicRoot => EventType::TopicRoot,
        Record::HumanMessage => EventType::HumanMessage,
        Record::UserRequest => EventType::UserRequest,
        Record::Command => EventType::Command,
    }
}

/// The records of one routed message.
pub fn records(route: &Route, m: &MessageFacts<'_>) -> Vec<NewContextEvent> {
    route
        .records
        .iter()
        .filter(|r| matches!(r, Record::UserRequest | Record::Command) || !m.text.trim().is_empty())
        .map(|r| {
            let event_type = event_type(*r);
            let item = ItemType::of(event_type).map(|item_type| NewItem {
                item_type,
                role: if m.actor_type == "user" {
                    Role::Human
                } else {
                    Role::Bot
                },
                author_label: m.author_label.into(),
                text: m.text.into(),
                token_estimate: token_estimate(m.text),
                truncated: false,
            });
            let targeted = matches!(r, Record::UserRequest | Record::Command);
            NewContextEvent {
                chat_id: m.place.chat_id.clone(),
                chat_type: m.chat_type,
                root_msg_id: m.place.root_msg_id.clone(),
                thread_id: m.thread_id.map(str::to_string),
                message_id: m.message_id.into(),
                event_type,
                actor_type: m.actor_type.into(),
                actor_id: m.actor_id.into(),
                bridge_id: m.app_id.into(),
                bot_profile: m.profile.into(),
                target_id: m.bot_open_id.filter(|_| targeted).map(str::to_string),
                target_name: targeted.then(|| m.profile.to_string()),
                session_name: route.session_key.clone(),
                history_scope: m.history_scope.into(),
                text: m.text.into(),
                metadata_json: m.metadata.to_string(),
                created_at: m.created_at,
                item,
            }
        })
        .collect()
}

/// The metadata kept with a record: no text, only facts about it.
pub fn metadata(
    message_type: &str,
    placeholder: bool,
    mentions_all: bool,
    parent_id: Option<&str>,
) -> serde_json::Value {
    json!({
        "message_type": message_type,
        "placeholder": placeholder,
        "mentions_all": mentions_all,
        "parent_id": parent_id,
    })
}

/// A rough token count without a tokenizer: about four ASCII characters per token, and
/// one per other character (CJK text is close to that).
pub fn token_estimate(text: &str) -> i64 {
    let (ascii, other) = text.chars().fold((0i64, 0i64), |(a, o), c| {
        if c.is_ascii() { (a + 1, o) } else { (a, o + 1) }
    });
    (ascii + 3) / 4 + other
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_estimate_counts_cjk_per_character() {
        assert_eq!(token_estimate("abcdefgh"), 2);
        assert_eq!(token_estimate("你好"), 2);
        assert_eq!(token_estimate(""), 0);
    }
}
