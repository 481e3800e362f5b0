//! Replies recorded in `outbound_messages` instead of sent (dry runs; profiles without
//! an app secret), logged without their text.

use std::sync::Arc;

use async_trait::async_trait;

use super::{CardReply, CardUpdate, Format, Outbound, OutboundError, PostedCard, Reply};
use crate::{
    feishu_api::reply::Sent,
    store::{NewOutbound, OutboundStore, ReplyKind},
    util::UnixMs,
};

/// Records replies in `outbound_messages` and logs that it did (without the text).
pub struct RecordingOutbound {
    store: Arc<dyn OutboundStore>,
}

impl RecordingOutbound {
    /// Records into this store.
    pub fn new(store: Arc<dyn OutboundStore>) -> Self {
        Self { store }
    }
}

#[async_trait]
impl Outbound for RecordingOutbound {
    async fn send(&self, reply: Reply) -> Result<Sent, OutboundError> {
        let id = self
            .store
            .record_outbound(&NewOutbound {
                profile: reply.profile.clone(),
                chat_id: reply.chat_id.clone(),
                reply_to: reply.reply_to.clone(),
                kind: reply.kind,
                text: reply.text.clone(),
                created_at: UnixMs::now(),
            })
            .await?;
        tracing::info!(profile = %reply.profile, chat_id = %reply.chat_id, reply_to = ?reply.reply_to, kind = %reply.kind, outbound_id = id, "reply recorded");
        Ok(Sent::unstamped(format!("rec_{id}")))
    }

    async fn send_card(&self, card: CardReply) -> Result<PostedCard, OutboundError> {
        self.send(card.as_reply()).await.map(PostedCard::message)
    }

    async fn update_card(&self, update: CardUpdate<'_>) -> Result<(), OutboundError> {
        self.send(Reply {
            profile: update.profile.to_string(),
            chat_id: update.chat_id.to_string(),
            reply_to: Some(update.card.message_id().to_string()),
            in_thread: false,
            kind: ReplyKind::CardUpdate,
            text: update.text.to_string(),
            turn_id: None,
            format: Format::Markdown,
        })
        .await
        .map(|_| ())
    }
}
