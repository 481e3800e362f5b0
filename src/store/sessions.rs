//! Session mappings: which agent-side session a session key is in, and its history
//! scope (`/new` rotates one and clears the other).

use async_trait::async_trait;

use super::StoreError;
use crate::util::UnixMs;
use crate::vocab::ChatType;

/// A session mapping to create (or touch, when it exists).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewSession {
    pub profile: String,
    /// `dm:…`, `group:…`, `group-user:…`, `thread:…`
    pub session_key: String,
    /// Used only when the mapping is new.
    pub session_id: String,
    pub chat_id: String,
    /// Private or group.
    pub chat_type: ChatType,
    /// The user, for `dm:` and `group-user:` keys (and whoever opened the others).
    pub user_id: Option<String>,
    /// The thread root, for `thread:` keys.
    pub root_msg_id: Option<String>,
    /// The history scope of the message that opened it.
    pub history_scope: String,
    pub now: UnixMs,
}

/// A stored session mapping.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct SessionRow {
    pub profile: String,
    pub session_key: String,
    /// Agent-side session id; rotates on `/new` and `/reset`.
    pub session_id: String,
    pub chat_id: String,
    /// Private or group.
    #[sqlx(try_from = "String")]
    pub chat_type: ChatType,
    pub user_id: Option<String>,
    pub root_msg_id: Option<String>,
    pub history_scope: String,
    /// The topic root was injected into this session's first turn.
    pub topic_root_prompt_delivered: bool,
    pub created_at: UnixMs,
    pub updated_at: UnixMs,
}

/// Session mappings.
/// A session's reset (`/new`, `/reset`, `DELETE /sessions/…`, the reset button).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionReset<'a> {
    pub profile: &'a str,
    pub key: &'a str,
    /// The history scope whose pending history is cleared with it.
    pub history_scope: &'a str,
    pub new_session_id: &'a str,
    pub now: UnixMs,
}

#[async_trait]
pub trait SessionStore: Send + Sync + 'static {
    /// Session mappings, optionally filtered.
    async fn sessions(
        &self,
        profile: Option<&str>,
        chat_id: Option<&str>,
    ) -> Result<Vec<SessionRow>, StoreError>;
    /// One session mapping.
    async fn session(&self, profile: &str, key: &str) -> Result<Option<SessionRow>, StoreError>;
    /// Rotates a session's id (clearing `topic_root_prompt_delivered`) and clears the
    /// pending history of `history_scope`; `None` when there is no such session.
    async fn reset_session(
        &self,
        reset: &SessionReset<'_>,
    ) -> Result<Option<SessionRow>, StoreError>;
    /// Messages observed in a history scope since its watermark (recalled excluded).
    async fn pending_history_count(&self, profile: &str, scope: &str) -> Result<i64, StoreError>;
}
