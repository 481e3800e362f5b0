//! A recorded context item as the selector reads it: the store maps its rows to it,
//! the selector picks among them.

use super::kinds::ItemType;
use crate::util::UnixMs;

/// A recorded item the selector may pick (the store maps its rows to it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    pub item_id: i64,
    /// Its event id (write order).
    pub event_id: i64,
    /// When its message was said: Feishu's create time (for the bridge's own answers,
    /// the one the send API returned).
    pub created_at: UnixMs,
    /// What the item is.
    pub item_type: ItemType,
    pub bot_profile: String,
    pub bridge_id: String,
    /// The message it came from.
    pub message_id: String,
    pub author_label: String,
    pub text: String,
    /// Cut at record time.
    pub truncated: bool,
    /// Recalled since.
    pub recalled: bool,
}
