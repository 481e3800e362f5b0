//! Replies as recorded (every posted reply, and dry runs' instead of sending).

use async_trait::async_trait;

use super::StoreError;
use crate::util::UnixMs;

crate::util::spelled::spelled! {
    /// What a reply is.
    pub enum ReplyKind("reply kind") {
        /// A command's answer.
        CommandReply,
        /// An agent's answer (or its continuation past a card).
        Answer,
        /// What the bridge tells a user about a turn (a stop, a failure).
        Notice,
        /// A streaming answer's card.
        Card,
        /// An update of a posted card (recorded by dry runs).
        CardUpdate,
    }
}

/// A reply to record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewOutbound {
    pub profile: String,
    pub chat_id: String,
    /// The message replied to.
    pub reply_to: Option<String>,
    /// What it is.
    pub kind: ReplyKind,
    pub text: String,
    pub created_at: UnixMs,
}

/// A recorded reply.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct OutboundRow {
    pub id: i64,
    pub profile: String,
    pub chat_id: String,
    /// The message replied to.
    pub reply_to: Option<String>,
    /// Kind.
    #[sqlx(try_from = "String")]
    pub kind: ReplyKind,
    pub text: String,
    pub created_at: UnixMs,
}

/// Recorded replies.
#[async_trait]
pub trait OutboundStore: Send + Sync + 'static {
    /// Records a reply.
    async fn record_outbound(&self, message: &NewOutbound) -> Result<i64, StoreError>;
    /// The most recent replies of a profile, oldest first.
    async fn outbound(&self, profile: &str, limit: i64) -> Result<Vec<OutboundRow>, StoreError>;
}
