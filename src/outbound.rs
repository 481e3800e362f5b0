//! Replies leaving the bridge. The [`Outbound`] interface is what commands and turns
//! talk to; the Feishu Open API client implements it for real, and [`RecordingOutbound`]
//! records replies in the database instead of sending them (dry runs, and until a
//! profile has an Open API client).

use std::sync::Arc;

use async_trait::async_trait;

use crate::{
    store::{NewOutbound, Store, StoreError},
    util::now_ms,
};

/// A reply to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    /// Sending profile.
    pub profile: String,
    /// Chat.
    pub chat_id: String,
    /// The message replied to (answers go into its thread).
    pub reply_to: Option<String>,
    /// `command_reply`, `answer`, `notice`.
    pub kind: &'static str,
    /// Text.
    pub text: String,
}

/// Why a reply did not go out.
#[derive(Debug, thiserror::Error)]
pub enum OutboundError {
    /// Recording it failed.
    #[error("could not record the reply")]
    Store(#[from] StoreError),
}

/// Where replies go.
#[async_trait]
pub trait Outbound: Send + Sync {
    /// Sends (or records) one reply; returns the sent message's id (`rec_<n>` when it
    /// was only recorded).
    async fn send(&self, reply: Reply) -> Result<String, OutboundError>;
}

/// Records replies in `outbound_messages` and logs that it did (without the text).
pub struct RecordingOutbound {
    store: Arc<dyn Store>,
}

impl RecordingOutbound {
    /// Records into this store.
    pub fn new(store: Arc<dyn Store>) -> Self {
        Self { store }
    }
}

#[async_trait]
impl Outbound for RecordingOutbound {
    async fn send(&self, reply: Reply) -> Result<String, OutboundError> {
        let id = self
            .store
            .record_outbound(&NewOutbound {
                profile: reply.profile.clone(),
                chat_id: reply.chat_id.clone(),
                reply_to: reply.reply_to.clone(),
                kind: reply.kind.to_string(),
                text: reply.text.clone(),
                created_at: now_ms(),
            })
            .await?;
        tracing::info!(profile = %reply.profile, chat_id = %reply.chat_id, reply_to = ?reply.reply_to, kind = reply.kind, outbound_id = id, "reply recorded");
        Ok(format!("rec_{id}"))
    }
}
