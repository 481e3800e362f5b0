//! The records the event log is made of, as written: one per message a profile saw (or
//! answer it gave), with the context item the selector may pick. Routing writes them
//! with its verdict; a delivered answer writes its own.

use super::{
    chat::ChatType,
    kinds::{EventType, ItemType, Role},
};
use crate::util::UnixMs;

/// An event-log record to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewContextEvent {
    /// `oc_…`
    pub chat_id: String,
    /// Private or group.
    pub chat_type: ChatType,
    /// The thread's root message id.
    pub root_msg_id: String,
    /// `omt_…`, for thread messages.
    pub thread_id: Option<String>,
    pub message_id: String,
    /// What the record is.
    pub event_type: EventType,
    /// `user`, `bot` or `app`.
    pub actor_type: String,
    /// The sender's open_id (or app id).
    pub actor_id: String,
    /// The recording profile's app id.
    pub bridge_id: String,
    /// The recording profile's name.
    pub bot_profile: String,
    /// The bot a request targets.
    pub target_id: Option<String>,
    pub target_name: Option<String>,
    /// The session key the record belongs to.
    pub session_name: Option<String>,
    /// `chat:…` or `thread:…`.
    pub history_scope: String,
    /// Normalized text.
    pub text: String,
    /// Non-text facts (message type, mentions, parent id).
    pub metadata_json: String,
    /// When the message was said: Feishu's create time (of the message received, or of
    /// the answer sent; now when Feishu gave none). Threads are read in this order.
    pub created_at: UnixMs,
    /// The selector's unit, for item-producing event types.
    pub item: Option<NewItem>,
}

/// A context item to write with its event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewItem {
    /// What the item is.
    pub item_type: ItemType,
    /// Who said it.
    pub role: Role,
    /// Who said it, as shown to the agent.
    pub author_label: String,
    /// Text (already truncated when too long).
    pub text: String,
    /// Rough token count.
    pub token_estimate: i64,
    /// The text was cut.
    pub truncated: bool,
}
