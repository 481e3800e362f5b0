//! Replies as recorded (every posted reply, and dry runs' instead of sending).

use async_trait::async_trait;

use super::StoreError;

/// A reply to record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewOutbound {
    /// Profile.
    pub profile: String,
    /// Chat.
    pub chat_id: String,
    /// The message replied to.
    pub reply_to: Option<String>,
    /// `command_reply`, `answer`, …
    pub kind: String,
    /// Text.
    pub text: String,
    /// Unix ms.
    pub created_at: i64,
}

/// A recorded reply.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct OutboundRow {
    /// Row id.
    pub id: i64,
    /// Profile.
    pub profile: String,
    /// Chat.
    pub chat_id: String,
    /// The message replied to.
    pub reply_to: Option<String>,
    /// Kind.
    pub kind: String,
    /// Text.
    pub text: String,
    /// Unix ms.
    pub created_at: i64,
}

/// Recorded replies.
#[async_trait]
pub trait OutboundStore: Send + Sync + 'static {
    /// Records a reply.
    async fn record_outbound(&self, message: &NewOutbound) -> Result<i64, StoreError>;
    /// The most recent replies of a profile, oldest first.
    async fn outbound(&self, profile: &str, limit: i64) -> Result<Vec<OutboundRow>, StoreError>;
}
