//! Turns a routed message into event-log records and their context items.
//!
//! `topic_root` and `human_message` records get an item (what the selector consumes);
//! `user_request` and `command` are recorded as facts only and never become items.
//! A record with no text contributes nothing and is not written.

use serde_json::json;

use crate::{
    routing::{Place, Record, Route},
    util::UnixMs,
    vocab::{ChatType, EventType, ItemType, NewContextEvent, NewItem, Role},
};

/// One message as the bridge records it: where it sits, who sent it (and how the agent
/// is shown the sender), its normalized text, and the facts kept with it. Built once per
/// routed message; its records, verdict, session and turn are all made from it.
#[derive(Debug, Clone)]
pub struct Message {
    /// The profile recording it.
    pub profile: String,
    /// That profile's app id (its bridge id).
    pub app_id: String,
    /// Where the message sits.
    pub place: Place,
    /// Private or group.
    pub chat_type: ChatType,
    /// `omt_…`
    pub thread_id: Option<String>,
    pub message_id: String,
    /// The message it quotes.
    pub parent_id: Option<String>,
    /// `user`, `bot`, `app`.
    pub actor_type: String,
    /// The sender's open_id.
    pub actor_id: String,
    /// How the sender is shown to the agent.
    pub author_label: String,
    /// Normalized text.
    pub text: String,
    /// Message type, mention flags, parent id.
    pub metadata: serde_json::Value,
    pub history_scope: String,
    /// This bot (the target of a request).
    pub bot_open_id: Option<String>,
    /// When it was sent.
    pub created_at: UnixMs,
}

impl Message {
    /// The sender's display name, when one is known (not just the open_id).
    pub fn sender_name(&self) -> Option<String> {
        (self.author_label != self.actor_id).then(|| self.author_label.clone())
    }
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
pub fn records(route: &Route, m: &Message) -> Vec<NewContextEvent> {
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
                author_label: m.author_label.clone(),
                text: m.text.clone(),
                token_estimate: token_estimate(&m.text),
                truncated: false,
            });
            let targeted = matches!(r, Record::UserRequest | Record::Command);
            NewContextEvent {
                chat_id: m.place.chat_id.clone(),
                chat_type: m.chat_type,
                root_msg_id: m.place.root_msg_id.clone(),
                thread_id: m.thread_id.clone(),
                message_id: m.message_id.clone(),
                event_type,
                actor_type: m.actor_type.clone(),
                actor_id: m.actor_id.clone(),
                bridge_id: m.app_id.clone(),
                bot_profile: m.profile.clone(),
                target_id: m.bot_open_id.clone().filter(|_| targeted),
                target_name: targeted.then(|| m.profile.clone()),
                session_name: route.session_key.clone(),
                history_scope: m.history_scope.clone(),
                text: m.text.clone(),
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

/// `metadata` with what the message refers to besides its text (image and file keys, a
/// forwarded bundle, doc links), for a turn to fetch; none is kept when there is none. A
/// recall empties the metadata, and these references with it.
pub fn with_media(
    mut metadata: serde_json::Value,
    media: &[crate::protocol::media::MediaRef],
) -> serde_json::Value {
    if !media.is_empty()
        && let Some(o) = metadata.as_object_mut()
    {
        o.insert("media".into(), json!(media));
    }
    metadata
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
