//! Typed forms of the events the bridge handles. Everything else is acknowledged and
//! recorded as skipped.

use serde::Deserialize;

use crate::redact::decode::{Failure, from_json};

/// A message was sent to a chat the bot can see.
pub const MESSAGE_RECEIVE: &str = "im.message.receive_v1";
/// A message was recalled.
pub const MESSAGE_RECALLED: &str = "im.message.recalled_v1";
/// A card button (new callback subscription).
pub const CARD_ACTION: &str = "card.action.trigger";
/// A card button (legacy message-card request URL).
pub const CARD_ACTION_LEGACY: &str = "card.action.trigger_v1";

/// Whether the bridge acts on this event type (others are stored as skipped).
pub fn is_handled(event_type: &str) -> bool {
    matches!(
        event_type,
        MESSAGE_RECEIVE | MESSAGE_RECALLED | CARD_ACTION | CARD_ACTION_LEGACY
    )
}

/// A handled event, parsed.
#[derive(Debug, Clone)]
pub enum TypedEvent {
    /// `im.message.receive_v1`
    MessageReceive(Box<MessageReceive>),
    /// `im.message.recalled_v1`
    MessageRecalled(MessageRecalled),
    /// `card.action.trigger`
    CardAction(Box<CardAction>),
    /// `card.action.trigger_v1`
    LegacyCardAction(Box<LegacyCardAction>),
}

/// Why a stored payload could not be parsed into its typed form. The message names the
/// event type, the path and the kind of mismatch, never a value from the payload.
#[derive(Debug, thiserror::Error)]
pub enum ParseError {
    /// Not a type the bridge handles.
    #[error("unhandled event type {}", crate::redact::echo(.0))]
    Unhandled(String),
    /// The JSON does not have the expected shape.
    #[error("{event_type}: {failure}")]
    Shape {
        /// Event type being parsed.
        event_type: String,
        /// Where and how the shape differs (value-free).
        failure: Failure,
    },
}

#[derive(Deserialize)]
struct V2<E> {
    event: E,
}

/// Parses a stored payload of a handled type.
pub fn parse(event_type: &str, payload: &str) -> Result<TypedEvent, ParseError> {
    let shape = |failure| ParseError::Shape {
        event_type: event_type.to_string(),
        failure,
    };
    Ok(match event_type {
        MESSAGE_RECEIVE => TypedEvent::MessageReceive(Box::new(
            from_json::<V2<MessageReceive>>(payload)
                .map_err(shape)?
                .event,
        )),
        MESSAGE_RECALLED => TypedEvent::MessageRecalled(
            from_json::<V2<MessageRecalled>>(payload)
                .map_err(shape)?
                .event,
        ),
        CARD_ACTION => TypedEvent::CardAction(Box::new(
            from_json::<V2<CardAction>>(payload).map_err(shape)?.event,
        )),
        CARD_ACTION_LEGACY => {
            TypedEvent::LegacyCardAction(Box::new(from_json(payload).map_err(shape)?))
        }
        other => return Err(ParseError::Unhandled(other.to_string())),
    })
}

/// Sender ids; `user_id` needs an extra scope and may be null.
#[derive(Debug, Clone, Deserialize, Default)]
pub struct UserIds {
    /// Per-app id.
    #[serde(default)]
    pub open_id: Option<String>,
    /// Per-developer id.
    #[serde(default)]
    pub union_id: Option<String>,
    /// Per-tenant id.
    #[serde(default)]
    pub user_id: Option<String>,
}

/// `im.message.receive_v1` `event`.
#[derive(Debug, Clone, Deserialize)]
pub struct MessageReceive {
    /// Who sent it.
    pub sender: Sender,
    pub message: Message,
}

/// `event.sender`.
#[derive(Debug, Clone, Deserialize)]
pub struct Sender {
    /// Sender ids.
    #[serde(default)]
    pub sender_id: UserIds,
    /// `user` or `bot` (or `app`).
    pub sender_type: String,
    /// Tenant.
    #[serde(default)]
    pub tenant_key: Option<String>,
}

/// `event.message`.
#[derive(Debug, Clone, Deserialize)]
pub struct Message {
    /// `om_…`
    pub message_id: String,
    /// Root of the thread, on replies.
    #[serde(default)]
    pub root_id: Option<String>,
    /// The message replied to.
    #[serde(default)]
    pub parent_id: Option<String>,
    /// `omt_…`, for thread (topic) messages.
    #[serde(default)]
    pub thread_id: Option<String>,
    /// ms, as a string.
    #[serde(default)]
    pub create_time: Option<String>,
    /// `oc_…`
    pub chat_id: String,
    /// `p2p` or `group`.
    pub chat_type: String,
    /// `text`, `post`, `image`, …
    pub message_type: String,
    /// The content: a JSON *string*.
    pub content: String,
    /// `@` mentions.
    #[serde(default)]
    pub mentions: Vec<Mention>,
}

/// `event.message.mentions[]`.
#[derive(Debug, Clone, Deserialize)]
pub struct Mention {
    /// `@_user_N`, as it appears in the content.
    pub key: String,
    /// Mentioned ids.
    #[serde(default)]
    pub id: UserIds,
    /// Display name.
    #[serde(default)]
    pub name: String,
    /// `user` or `bot`.
    #[serde(default)]
    pub mentioned_type: Option<String>,
}

/// `im.message.recalled_v1` `event`.
#[derive(Debug, Clone, Deserialize)]
pub struct MessageRecalled {
    /// The recalled message.
    pub message_id: String,
    pub chat_id: String,
    /// ms, as a string.
    #[serde(default)]
    pub recall_time: Option<String>,
    /// Who recalled it.
    #[serde(default)]
    pub recall_type: Option<String>,
}

/// `card.action.trigger` `event`.
#[derive(Debug, Clone, Deserialize)]
pub struct CardAction {
    /// Who clicked.
    pub operator: UserIds,
    /// Token for a delayed card update.
    #[serde(default)]
    pub token: Option<String>,
    pub action: Action,
    /// Where the card lives.
    #[serde(default)]
    pub context: CardContext,
}

/// `event.context` of a card action.
#[derive(Debug, Clone, Deserialize, Default)]
pub struct CardContext {
    /// The card's message.
    #[serde(default)]
    pub open_message_id: Option<String>,
    /// The card's chat.
    #[serde(default)]
    pub open_chat_id: Option<String>,
}

/// A card action's `action`.
#[derive(Debug, Clone, Deserialize)]
pub struct Action {
    /// Object or string.
    #[serde(default)]
    pub value: serde_json::Value,
    /// `button`, …
    #[serde(default)]
    pub tag: Option<String>,
    /// Component name.
    #[serde(default)]
    pub name: Option<String>,
}

/// A legacy card callback body.
#[derive(Debug, Clone, Deserialize)]
pub struct LegacyCardAction {
    /// Who clicked.
    pub open_id: String,
    /// Tenant user id, if permitted.
    #[serde(default)]
    pub user_id: Option<String>,
    /// The card's message.
    pub open_message_id: String,
    /// The card's chat.
    #[serde(default)]
    pub open_chat_id: Option<String>,
    /// Token for a delayed card update.
    #[serde(default)]
    pub token: Option<String>,
    pub action: Action,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message_with(mentions: &str) -> String {
        format!(
            r#"{{"schema":"2.0","header":{{"event_type":"im.message.receive_v1"}},"event":{{"sender":{{"sender_type":"user"}},"message":{{"message_id":"om_1","chat_id":"oc_1","chat_type":"group","message_type":"text","content":"{{}}","mentions":{mentions}}}}}}}"#
        )
    }

    #[test]
    fn a_mistyped_field_is_reported_by_path_and_kind_without_its_value() {
        let map = message_with(r#"[{"key":"@_user_1","name":{"text":"SECRET-MARKER-7f3a"}}]"#);
        let err = parse(MESSAGE_RECEIVE, &map).expect_err("mistyped");
        assert_eq!(
            err.to_string(),
            "im.message.receive_v1: wrong type at event.message.mentions[0].name: expected a string, found a map"
        );
        let text = message_with(r#""@_user_1 SECRET-MARKER-7f3a in mentions""#);
        let err = parse(MESSAGE_RECEIVE, &text).expect_err("mistyped");
        assert_eq!(
            err.to_string(),
            "im.message.receive_v1: wrong type at event.message.mentions: expected a sequence, found a string"
        );
        assert!(parse(MESSAGE_RECEIVE, &message_with("[]")).is_ok());
    }
}
