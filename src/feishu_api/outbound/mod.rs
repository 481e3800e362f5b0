//! Replies leaving the bridge. The [`Outbound`] interface is what commands and turns
//! talk to; the Feishu Open API implements it for real ([`FeishuOutbound`]), and
//! [`RecordingOutbound`] records replies in the database instead of sending them (dry
//! runs, and profiles without an app secret).
//!
//! A streaming answer's card is opened with [`Outbound::send_card`] and kept current
//! with [`Outbound::update_card`]: through CardKit when the app may use it, else by
//! updating the card's message. Intermediate updates are made only when there is room
//! and never retried (the next one carries the whole text); the final one is retried,
//! also while a user's press on the card keeps Feishu from taking updates.

mod card_updates;
mod feishu;
mod memory;
mod pacing;
mod recording;
mod uuid;

use std::sync::Arc;

use async_trait::async_trait;

pub use self::{feishu::FeishuOutbound, recording::RecordingOutbound};
use super::{OpenApiError, budget::Urgency, cardkit::Sequence, codes, reply::Sent};
use crate::{
    store::{ReplyKind, StoreError},
    util::UnixMs,
};

/// The element of a streaming card whose content is the answer's text (its markdown
/// carries this `element_id`).
pub const ANSWER_ELEMENT: &str = "answer";

/// How a reply's text is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Format {
    /// Text messages (150 KB each; little markdown renders).
    #[default]
    Text,
    /// Markdown, in plain cards (30 KB each): a long answer's continuation under its card.
    Markdown,
}

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
    /// A chat that refuses replies in thread gets a quote instead.
    pub in_thread: bool,
    /// What it is.
    pub kind: ReplyKind,
    pub text: String,
    /// The turn it belongs to: its parts' uuids derive from it and from their content,
    /// so the same reply retried — even after a restart — posts at most once, and a
    /// different text is never taken for a repeat.
    pub turn_id: Option<String>,
    /// How it is shown.
    pub format: Format,
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
    /// Card JSON (schema 2.0; the answer's markdown has the element id
    /// [`ANSWER_ELEMENT`]).
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
            format: Format::Markdown,
        }
    }
}

/// A posted card, and what updating it takes.
#[derive(Debug, Clone)]
pub struct PostedCard {
    /// Its message (the create time is where the answer sits in the thread).
    pub sent: Sent,
    /// Its CardKit entity, when it was sent as one.
    entity: Option<Arc<Entity>>,
    /// When its next update may go (shared by every holder of the card).
    pace: Arc<pacing::CardPace>,
}

#[derive(Debug)]
struct Entity {
    card_id: String,
    sequence: Sequence,
}

impl PostedCard {
    /// A card posted as a message, updated by updating the message.
    pub fn message(sent: Sent) -> Self {
        Self {
            sent,
            entity: None,
            pace: Arc::default(),
        }
    }

    /// A card sent as the CardKit entity `card_id`, whose operations count their
    /// sequence from `epoch` (at or before its creation; see [`Sequence`]).
    pub fn entity(sent: Sent, card_id: String, epoch: UnixMs) -> Self {
        Self {
            sent,
            entity: Some(Arc::new(Entity {
                card_id,
                sequence: Sequence::from(epoch),
            })),
            pace: Arc::default(),
        }
    }

    /// The card's message id.
    pub fn message_id(&self) -> &str {
        &self.sent.message_id
    }

    /// Its CardKit entity id, if it is one.
    pub fn card_id(&self) -> Option<&str> {
        self.entity.as_ref().map(|e| e.card_id.as_str())
    }
}

/// New content for a posted card.
#[derive(Debug, Clone, Copy)]
pub struct CardUpdate<'a> {
    /// Sending profile.
    pub profile: &'a str,
    pub chat_id: &'a str,
    /// The card.
    pub card: &'a PostedCard,
    /// The whole card as it should look now.
    pub view: &'a serde_json::Value,
    /// Its answer text (what a CardKit entity streams into [`ANSWER_ELEMENT`]).
    pub text: &'a str,
    /// An intermediate state of a streaming answer, or its final one.
    pub urgency: Urgency,
    /// Whether more than the answer text changed (an intermediate update of a CardKit
    /// card then replaces the card whole instead of streaming the text into it).
    pub whole: bool,
}

/// Why a reply did not go out.
#[derive(Debug, thiserror::Error)]
pub enum OutboundError {
    /// Recording it failed.
    #[error("could not record the reply")]
    Store(#[from] StoreError),
    /// The Open API refused it.
    #[error(transparent)]
    Api(OpenApiError),
}

impl OutboundError {
    /// Whether only the database failed (the reply was not recorded; nothing was refused
    /// by Feishu), so sending it again once the database is back can succeed.
    pub fn database_failed(&self) -> bool {
        matches!(self, Self::Store(e) if e.database_failed())
    }

    /// Whether it was not sent for want of a tenant token (see
    /// [`OpenApiError::token_unavailable`]).
    pub fn token_unavailable(&self) -> bool {
        matches!(self, Self::Api(e) if e.token_unavailable())
    }

    /// Whether Feishu refused it for its size.
    pub fn too_large(&self) -> bool {
        matches!(self, Self::Api(e) if e.is(&codes::TOO_LARGE))
    }

    /// Whether it was refused because a user's press on the card was being answered
    /// (the same update shortly after can succeed).
    pub fn card_in_interaction(&self) -> bool {
        matches!(self, Self::Api(e) if e.is(&codes::INTERACTING))
    }
}

/// Where replies go.
#[async_trait]
pub trait Outbound: Send + Sync {
    /// Sends (or records) one reply; returns its (first) message: the id (`rec_<n>` when
    /// it was only recorded) and the create time Feishu gave it.
    async fn send(&self, reply: Reply) -> Result<Sent, OutboundError>;
    /// Posts a card for a streaming answer.
    async fn send_card(&self, card: CardReply) -> Result<PostedCard, OutboundError>;
    /// Brings a posted card up to date. An intermediate update may be deferred
    /// ([`OpenApiError::Deferred`]) when the app's budget or the card's pace has no room.
    async fn update_card(&self, update: CardUpdate<'_>) -> Result<(), OutboundError>;
}
