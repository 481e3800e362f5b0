//! A turn as routing hands it over: what it answers, where, for whom, and in which
//! session. Stored with the queued turn, so it runs again after a restart.

use serde::{Deserialize, Serialize};

use crate::{config::WorkspaceMode, store::NewTurn};

/// A turn as routing hands it over (and as it is stored, to run again after a restart).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TurnJob {
    /// `turn_<hex>`.
    pub turn_id: String,
    /// Profile.
    pub profile: String,
    /// Its app id.
    pub app_id: String,
    /// Session key.
    pub session_key: String,
    /// Chat.
    pub chat_id: String,
    /// `p2p` / `group`.
    pub chat_type: String,
    /// Private chat.
    pub is_dm: bool,
    /// Thread root.
    pub root_msg_id: String,
    /// `omt_…`
    pub thread_id: Option<String>,
    /// Request message.
    pub message_id: String,
    /// The message it quotes.
    pub parent_id: Option<String>,
    /// Request text.
    pub request_text: String,
    /// Sender open_id.
    pub sender_open_id: String,
    /// Sender display name, when known.
    pub sender_name: Option<String>,
    /// History scope.
    pub history_scope: String,
    /// Workspace mode (`None` in private chats).
    pub workspace_mode: Option<WorkspaceMode>,
}

impl TurnJob {
    /// A fresh turn id.
    pub fn new_id() -> String {
        format!("turn_{:032x}", rand::random::<u128>())
    }

    /// The row that queues this job.
    pub fn to_new_turn(&self, now: i64) -> NewTurn {
        NewTurn {
            turn_id: self.turn_id.clone(),
            profile: self.profile.clone(),
            session_key: self.session_key.clone(),
            chat_id: self.chat_id.clone(),
            message_id: self.message_id.clone(),
            request_text: self.request_text.clone(),
            // Plain strings, booleans and options: serializing cannot fail.
            job_json: serde_json::to_string(self).unwrap_or_default(),
            queued_at: now,
        }
    }

    /// The quoted message, when the request explicitly quotes one. Inside a thread every
    /// reply points at the root, which has its own handling, so that is not a quote.
    pub fn quoted_message_id(&self) -> Option<&str> {
        self.parent_id
            .as_deref()
            .filter(|p| !p.is_empty() && *p != self.root_msg_id && *p != self.message_id)
    }
}
