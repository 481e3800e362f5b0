//! Replies leaving the bridge. The [`Outbound`] interface is what commands and turns
//! talk to; the Feishu Open API client implements it for real, and [`RecordingOutbound`]
//! records replies in the database instead of sending them (dry runs, and until a
//! profile has an Open API client).

use std::sync::Arc;

use async_trait::async_trait;

use super::reply::{Content, Destination, Sent};
use crate::{
    store::{NewOutbound, OutboundStore, ReplyKind, StoreError},
    util::UnixMs,
};

/// A reply to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    /// Sending profile.
    pub profile: String,
    pub chat_id: String,
    /// The message replied to.
    pub reply_to: Option<String>,
    /// Reply in the thread of `reply_to` (group chats: answers stay inside the topic);
    /// otherwise as a quote in the chat (private chats: one conversation, no threads).
    pub in_thread: bool,
    /// What it is.
    pub kind: ReplyKind,
    pub text: String,
    /// The turn it belongs to: its parts' uuids derive from it, so a reply re-sent
    /// after a restart posts at most once.
    pub turn_id: Option<String>,
}

/// A card to post (answers of streaming backends).
#[derive(Debug, Clone, PartialEq)]
pub struct CardReply {
    /// Sending profile.
    pub profile: String,
    pub chat_id: String,
    /// The message replied to.
    pub reply_to: Option<String>,
    /// Reply in the thread of `reply_to` (see [`Reply::in_thread`]).
    pub in_thread: bool,
    /// The turn it belongs to (its uuid derives from it).
    pub turn_id: String,
    /// Card JSON.
    pub card: serde_json::Value,
    /// The card's text, for the record.
    pub text: String,
}

impl CardReply {
    /// The card as a reply of kind `card` with its text: what is recorded, and what its
    /// uuid derives from.
    fn as_reply(&self) -> Reply {
        Reply {
            profile: self.profile.clone(),
            chat_id: self.chat_id.clone(),
            reply_to: self.reply_to.clone(),
            in_thread: self.in_thread,
            kind: ReplyKind::Card,
            text: self.text.clone(),
            turn_id: Some(self.turn_id.clone()),
        }
    }
}

/// Why a reply did not go out.
#[derive(Debug, thiserror::Error)]
pub enum OutboundError {
    /// Recording it failed.
    #[error("could not record the reply")]
    Store(#[from] StoreError),
    /// The Open API refused it.
    #[error(transparent)]
    Api(crate::feishu_api::OpenApiError),
}

impl OutboundError {
    /// Whether only the database failed (the reply was not recorded; nothing was refused
    /// by Feishu), so sending it again once the database is back can succeed.
    pub fn database_failed(&self) -> bool {
        matches!(self, Self::Store(e) if e.database_failed())
    }
}

/// Where replies go.
#[async_trait]
pub trait Outbound: Send + Sync {
    /// Sends (or records) one reply; returns its (first) message: the id (`rec_<n>` when
    /// it was only recorded) and the create time Feishu gave it.
    async fn send(&self, reply: Reply) -> Result<Sent, OutboundError>;
    /// Posts a card; returns its message.
    async fn send_card(&self, card: CardReply) -> Result<Sent, OutboundError>;
    /// Replaces a posted card's content.
    async fn update_card(&self, update: CardUpdate<'_>) -> Result<(), OutboundError>;
}

/// New content for a posted card.
#[derive(Debug, Clone, Copy)]
pub struct CardUpdate<'a> {
    /// Sending profile.
    pub profile: &'a str,
    pub chat_id: &'a str,
    /// The card's message.
    pub message_id: &'a str,
    pub card: &'a serde_json::Value,
    /// The card's text, for the record.
    pub text: &'a str,
}

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

    async fn send_card(&self, card: CardReply) -> Result<Sent, OutboundError> {
        self.send(card.as_reply()).await
    }

    async fn update_card(&self, update: CardUpdate<'_>) -> Result<(), OutboundError> {
        self.send(Reply {
            profile: update.profile.to_string(),
            chat_id: update.chat_id.to_string(),
            reply_to: Some(update.message_id.to_string()),
            in_thread: false,
            kind: ReplyKind::CardUpdate,
            text: update.text.to_string(),
            turn_id: None,
        })
        .await
        .map(|_| ())
    }
}

/// Sends through each profile's Open API client, or records when the profile is a dry
/// run (or has no app secret to send with). Every sent part is also recorded.
pub struct FeishuOutbound {
    config: Arc<crate::config::Config>,
    clients: std::collections::HashMap<String, Arc<crate::feishu_api::FeishuClient>>,
    recording: RecordingOutbound,
    pacer: Pacer,
}

impl FeishuOutbound {
    /// Over the app's clients and store.
    pub fn new(
        config: Arc<crate::config::Config>,
        clients: std::collections::HashMap<String, Arc<crate::feishu_api::FeishuClient>>,
        store: Arc<dyn OutboundStore>,
    ) -> Self {
        Self {
            config,
            clients,
            recording: RecordingOutbound::new(store),
            pacer: Pacer::default(),
        }
    }
}

/// Spaces sends to one chat so that several bots together stay under Feishu's group
/// limit (5 messages per second shared by all bots in a chat).
#[derive(Default)]
struct Pacer {
    next: tokio::sync::Mutex<std::collections::HashMap<String, tokio::time::Instant>>,
}

const CHAT_SPACING: std::time::Duration = std::time::Duration::from_millis(220);

impl Pacer {
    async fn wait(&self, chat_id: &str) {
        let at = slot(
            &mut *self.next.lock().await,
            chat_id,
            tokio::time::Instant::now(),
        );
        // Only when there is something to wait for: a timer, even one already due,
        // costs a tick of the runtime's clock (about a millisecond).
        if at > tokio::time::Instant::now() {
            tokio::time::sleep_until(at).await;
        }
    }
}

/// When a send to `chat_id` may go, given the chats' next free slots, and books the slot
/// after it. Chats whose slot has passed are forgotten, so the map holds only chats sent
/// to in the last moment.
fn slot(
    next: &mut std::collections::HashMap<String, tokio::time::Instant>,
    chat_id: &str,
    now: tokio::time::Instant,
) -> tokio::time::Instant {
    next.retain(|_, free| *free > now);
    let at = next.get(chat_id).copied().unwrap_or(now);
    next.insert(chat_id.to_string(), at + CHAT_SPACING);
    at
}

/// A uuid for one part of one reply: derived from the turn (or, for replies outside a
/// turn, from what is replied to), so the same reply retried — even by another process
/// after a restart — gets the same uuid, and Feishu posts it at most once.
fn part_uuid(reply: &Reply, part: usize) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    for piece in [
        &reply.profile,
        &reply.chat_id,
        reply.reply_to.as_deref().unwrap_or(""),
        reply.turn_id.as_deref().unwrap_or(""),
        reply.kind.as_str(),
    ] {
        h.update(piece.as_bytes());
        h.update([0]);
    }
    h.update(part.to_le_bytes());
    hex::encode(h.finalize())[..32].to_string()
}

#[async_trait]
impl Outbound for FeishuOutbound {
    async fn send(&self, reply: Reply) -> Result<Sent, OutboundError> {
        let Some(client) = self.sender(&reply.profile) else {
            return self.recording.send(reply).await;
        };
        let mut first = None;
        for (i, part) in crate::feishu_api::reply::split(
            &reply.text,
            crate::feishu_api::reply::MAX_MESSAGE_CHARS,
        )
        .into_iter()
        .enumerate()
        {
            self.pacer.wait(&reply.chat_id).await;
            let uuid = part_uuid(&reply, i);
            let to = Destination::of(reply.reply_to.as_deref(), &reply.chat_id, reply.in_thread);
            let sent = client
                .post(to, Content::Text(&part), &uuid)
                .await
                .map_err(OutboundError::Api)?;
            self.recorded(
                self.recording
                    .send(Reply {
                        text: part,
                        ..reply.clone()
                    })
                    .await,
            );
            first.get_or_insert(sent);
        }
        // The answer is where its first part is.
        Ok(first.unwrap_or_else(|| Sent::unstamped("")))
    }

    async fn send_card(&self, card: CardReply) -> Result<Sent, OutboundError> {
        let Some(client) = self.sender(&card.profile) else {
            return self.recording.send_card(card).await;
        };
        self.pacer.wait(&card.chat_id).await;
        let uuid = part_uuid(&card.as_reply(), 0);
        let to = Destination::of(card.reply_to.as_deref(), &card.chat_id, card.in_thread);
        let sent = client
            .post(to, Content::Card(&card.card), &uuid)
            .await
            .map_err(OutboundError::Api)?;
        self.recorded(self.recording.send_card(card).await);
        Ok(sent)
    }

    async fn update_card(&self, update: CardUpdate<'_>) -> Result<(), OutboundError> {
        let Some(client) = self.sender(update.profile) else {
            return self.recording.update_card(update).await;
        };
        client
            .patch_card(update.message_id, update.card)
            .await
            .map_err(OutboundError::Api)
    }
}

impl FeishuOutbound {
    /// The record of a posted message is for operators: failing to write it (a full
    /// disk) must not make a reply that Feishu posted look unsent, and be sent again.
    fn recorded(&self, record: Result<Sent, OutboundError>) {
        if let Err(e) = record {
            tracing::warn!(error = %e, "a posted reply was not recorded");
        }
    }

    /// The client to send with, unless the profile records instead (dry run, or no app
    /// secret to send with).
    fn sender(&self, profile: &str) -> Option<&crate::feishu_api::FeishuClient> {
        let dry = self.config.profile(profile).is_none_or(|p| p.dry_run);
        let client = self.clients.get(profile).filter(|c| c.can_send())?;
        (!dry).then_some(client.as_ref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sends_to_one_chat_are_spaced_and_other_chats_are_not_held() {
        let mut next = std::collections::HashMap::new();
        let t0 = tokio::time::Instant::now();
        assert_eq!(slot(&mut next, "oc_a", t0), t0, "a first send goes at once");
        assert_eq!(slot(&mut next, "oc_a", t0), t0 + CHAT_SPACING);
        assert_eq!(slot(&mut next, "oc_a", t0), t0 + CHAT_SPACING * 2);
        assert_eq!(slot(&mut next, "oc_b", t0), t0, "another chat is not held");
        // Once the booked slots have passed, the chat is free again and forgotten.
        let later = t0 + CHAT_SPACING * 5;
        assert_eq!(slot(&mut next, "oc_b", later), later);
        assert_eq!(next.len(), 1, "oc_a's passed slot was dropped");
    }
}
