//! Replies through each profile's Open API client (or recorded, when the profile is a
//! dry run or has no app secret). Every posted part is also recorded.
//!
//! What a real tenant needs beyond a plain call: a chat that refuses replies in thread
//! gets its answer as a quote in the chat (once learned, for a while, straight away), and
//! so does a message that cannot take one (an aggregated message: that reply only);
//! a request message that was recalled gets no further calls; a long answer goes in
//! parts that each fit Feishu's byte limits; a card streams through CardKit when the app
//! may use it, else through updates of its message.

use std::{collections::HashMap, sync::Arc, time::Duration};

use async_trait::async_trait;

use super::{
    CardReply, CardUpdate, Format, Outbound, OutboundError, PostedCard, RecordingOutbound, Reply,
    memory::Memory, pacing, uuid,
};
use crate::{
    config::Config,
    feishu_api::{
        FeishuClient, OpenApiError,
        codes::{CHAT_WITHOUT_THREADS, NO_THREAD, RATE_LIMITED, TARGET_GONE, TOO_LARGE},
        fit,
        reply::{Content, Destination, Sent, markdown_card},
        summary,
    },
    store::OutboundStore,
    util::UnixMs,
};

/// How long a chat that refused a reply in thread is answered in the chat straight away.
const THREADLESS_FOR: Duration = Duration::from_secs(6 * 3600);
/// How long a recalled or deleted message gets no calls (Feishu's uuid window).
const GONE_FOR: Duration = Duration::from_secs(3600);
/// How long an app whose CardKit calls were refused streams by message updates before
/// it tries CardKit again (an admin may grant the scope meanwhile).
const NO_CARDKIT_FOR: Duration = Duration::from_secs(600);
/// Keys each memory holds at most.
const REMEMBERED: usize = 10_000;

/// Sends through each profile's Open API client, or records.
pub struct FeishuOutbound {
    config: Arc<Config>,
    clients: HashMap<String, Arc<FeishuClient>>,
    recording: RecordingOutbound,
    pacer: pacing::Pacer,
    /// Chats whose replies cannot be in thread.
    threadless: Memory,
    /// Messages replied to that are gone (recalled, deleted).
    gone: Memory,
    /// Profiles whose CardKit calls were refused.
    no_cardkit: Memory,
}

impl FeishuOutbound {
    /// Over the app's clients and store.
    pub fn new(
        config: Arc<Config>,
        clients: HashMap<String, Arc<FeishuClient>>,
        store: Arc<dyn OutboundStore>,
    ) -> Self {
        Self {
            config,
            clients,
            recording: RecordingOutbound::new(store),
            pacer: pacing::Pacer::default(),
            threadless: Memory::new(THREADLESS_FOR, REMEMBERED),
            gone: Memory::new(GONE_FOR, REMEMBERED),
            no_cardkit: Memory::new(NO_CARDKIT_FOR, REMEMBERED),
        }
    }

    /// The client to send with, unless the profile records instead (dry run, or no app
    /// secret to send with).
    fn sender(&self, profile: &str) -> Option<&FeishuClient> {
        let dry = self.config.profile(profile).is_none_or(|p| p.dry_run);
        let client = self.clients.get(profile).filter(|c| c.can_send())?;
        (!dry).then_some(client.as_ref())
    }

    /// The record of a posted message is for operators: failing to write it (a full
    /// disk) must not make a reply that Feishu posted look unsent, and be sent again.
    fn recorded(&self, record: Result<Sent, OutboundError>) {
        if let Err(e) = record {
            tracing::warn!(error = %e, "a posted reply was not recorded");
        }
    }

    /// Refuses, without a call, a reply to a message already known to be gone.
    fn check_target(&self, reply_to: Option<&str>) -> Result<(), OutboundError> {
        match reply_to.and_then(|m| self.gone.get(m)) {
            Some(code) => Err(OutboundError::Api(OpenApiError::Api {
                code,
                msg: "the message replied to is gone (seen before; not called again)".into(),
            })),
            None => Ok(()),
        }
    }

    /// Posts part `index` of `reply` as `content`: in the thread when asked and the chat
    /// takes it, else (after learning it does not) as a quote in the chat, with a uuid
    /// of its own.
    async fn post_part(
        &self,
        client: &FeishuClient,
        reply: &Reply,
        index: usize,
        content: Content<'_>,
    ) -> Result<Sent, OpenApiError> {
        let wanted = Destination::of(reply.reply_to.as_deref(), &reply.chat_id, reply.in_thread);
        let threadless = self.threadless.get(&reply.chat_id).is_some();
        let to = if threadless {
            wanted.without_thread()
        } else {
            wanted
        };
        let base = uuid::part(reply, index, content);
        let id = if to.in_thread() == wanted.in_thread() {
            base.clone()
        } else {
            uuid::unthreaded(&base)
        };
        let posted = match client.post(to, content, &id).await {
            Err(e) if to.in_thread() && e.is(&NO_THREAD) => {
                if e.is(&CHAT_WITHOUT_THREADS) {
                    tracing::info!(profile = %reply.profile, chat_id = %reply.chat_id, code = ?e.code(), "the chat takes no replies in thread; answering in the chat");
                    self.threadless
                        .insert(&reply.chat_id, e.code().unwrap_or_default());
                } else {
                    // About this message only (an aggregated one): the chat's next
                    // replies go in thread as usual.
                    tracing::info!(profile = %reply.profile, chat_id = %reply.chat_id, code = ?e.code(), "this message takes no reply in thread; answering it in the chat");
                }
                client
                    .post(to.without_thread(), content, &uuid::unthreaded(&base))
                    .await
            }
            other => other,
        };
        if let (Err(e), Some(target)) = (&posted, to.replied())
            && let Some(code) = e.code().filter(|_| e.is(&TARGET_GONE))
        {
            tracing::info!(profile = %reply.profile, message_id = %target, code, "the message replied to is gone; no further calls to it");
            self.gone.insert(target, code);
        }
        posted
    }

    /// Posts the parts of `reply`, each within Feishu's limit for its format; a
    /// markdown part refused for its size is halved and sent again.
    async fn post_parts(
        &self,
        client: &FeishuClient,
        reply: &Reply,
    ) -> Result<Sent, OutboundError> {
        let mut parts: std::collections::VecDeque<String> = match reply.format {
            Format::Text => fit::split(&reply.text, fit::MAX_MESSAGE_CHARS, fit::chars),
            Format::Markdown => fit::split(
                &reply.text,
                fit::card_text_room(&markdown_card("")).saturating_sub(summary::RESERVE),
                fit::card_text_bytes,
            ),
        }
        .into();
        let mut first = None;
        let mut index = 0;
        while let Some(part) = parts.pop_front() {
            self.pacer.wait(&reply.chat_id).await;
            let content = match reply.format {
                Format::Text => Content::Text(&part),
                Format::Markdown => Content::Markdown(&part),
            };
            let sent = match self.post_part(client, reply, index, content).await {
                Err(e) if e.is(&TOO_LARGE) && part.chars().count() > 1 => {
                    let half = fit::card_text_bytes(&part) / 2;
                    for smaller in fit::split(&part, half, fit::card_text_bytes)
                        .into_iter()
                        .rev()
                    {
                        parts.push_front(smaller);
                    }
                    continue;
                }
                other => other.map_err(OutboundError::Api)?,
            };
            index += 1;
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

    /// Sends `card` as a CardKit entity; `None` when CardKit is not to be used for it
    /// (refused, or failing now): the card is then posted as a message.
    async fn send_entity(
        &self,
        client: &FeishuClient,
        card: &CardReply,
    ) -> Option<Result<PostedCard, OutboundError>> {
        if self.no_cardkit.get(&card.profile).is_some() {
            return None;
        }
        let card_id = match client.create_card_entity(&card.card).await {
            Ok(id) => id,
            Err(e) => {
                // A refusal (a code, or an answer that is no CardKit answer at all, as
                // from a deployment without CardKit) is remembered; a failure of the
                // moment is not.
                let passing = matches!(
                    e,
                    OpenApiError::Transport { .. }
                        | OpenApiError::Status { .. }
                        | OpenApiError::RateLimited { .. }
                        | OpenApiError::Deferred
                        | OpenApiError::NoSecret
                        | OpenApiError::Token(_)
                ) || e.is(&RATE_LIMITED);
                if !passing {
                    tracing::warn!(profile = %card.profile, code = ?e.code(), error = %e, "CardKit refused this app (does it have the scope cardkit:card:write?); streaming cards are updated as messages for a while");
                    self.no_cardkit
                        .insert(&card.profile, e.code().unwrap_or_default());
                } else {
                    tracing::warn!(profile = %card.profile, error = %e, "CardKit card not created; this card is updated as a message");
                }
                return None;
            }
        };
        let epoch = UnixMs::now();
        let reply = card.as_reply();
        match self
            .post_part(client, &reply, 0, Content::Entity(&card_id))
            .await
        {
            Ok(sent) => Some(Ok(PostedCard::entity(sent, card_id, epoch))),
            Err(e) if e.is(&TARGET_GONE) => Some(Err(OutboundError::Api(e))),
            Err(e) => {
                tracing::warn!(profile = %card.profile, error = %e, "CardKit card not sent; posting the card as a message");
                None
            }
        }
    }
}

#[async_trait]
impl Outbound for FeishuOutbound {
    async fn send(&self, reply: Reply) -> Result<Sent, OutboundError> {
        let Some(client) = self.sender(&reply.profile) else {
            return self.recording.send(reply).await;
        };
        self.check_target(reply.reply_to.as_deref())?;
        self.post_parts(client, &reply).await
    }

    async fn send_card(&self, card: CardReply) -> Result<PostedCard, OutboundError> {
        let Some(client) = self.sender(&card.profile) else {
            return self.recording.send_card(card).await;
        };
        self.check_target(card.reply_to.as_deref())?;
        self.pacer.wait(&card.chat_id).await;
        let posted = match self.send_entity(client, &card).await {
            Some(posted) => posted?,
            None => {
                let sent = self
                    .post_part(client, &card.as_reply(), 0, Content::Card(&card.card))
                    .await
                    .map_err(OutboundError::Api)?;
                PostedCard::message(sent)
            }
        };
        self.recorded(self.recording.send(card.as_reply()).await);
        Ok(posted)
    }

    async fn update_card(&self, update: CardUpdate<'_>) -> Result<(), OutboundError> {
        let Some(client) = self.sender(update.profile) else {
            return self.recording.update_card(update).await;
        };
        Self::update_posted(client, update).await
    }
}
