//! What processing an inbox event means: parse it, and for a message normalize, route,
//! record (event log, verdict, session, in one transaction), then run a command or hand
//! a turn to the session's queue. A recall removes the message from every context.

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use tokio::time::Instant;

use crate::{
    config::Config,
    context::collector::{self, Message},
    feishu_api::identity::Identities,
    feishu_api::outbound::{Outbound, OutboundError},
    inbox::commands::{self, CommandError},
    inbox::routed::RoutedMessage,
    protocol::{
        content,
        events::{self, ChatType, MessageReceive, TypedEvent},
    },
    routing::{self, Inbound, Place, Reason, Sender, Verdict},
    store::{EventLog, NewInboxEvent, NewVerdict, SessionStore, Store, StoreError},
    turns::TurnRunner,
    turns::queue::SessionQueues,
    util::UnixMs,
};

/// Why an event could not be processed. Messages never contain payload content.
#[derive(Debug, thiserror::Error)]
pub enum ProcessError {
    /// The payload does not have the shape of its event type.
    #[error(transparent)]
    Parse(#[from] events::ParseError),
    /// The database failed; the event is retried.
    #[error("store: {0}")]
    Store(#[from] StoreError),
    /// A reply could not be sent.
    #[error("reply not sent: {0}")]
    Reply(#[source] crate::feishu_api::OpenApiError),
}

impl From<CommandError> for ProcessError {
    fn from(e: CommandError) -> Self {
        match e {
            CommandError::Store(s) | CommandError::Reply(OutboundError::Store(s)) => Self::Store(s),
            CommandError::Reply(OutboundError::Api(e)) => Self::Reply(e),
        }
    }
}

/// How often retention runs (it rides on an event-log write).
const PURGE_EVERY: Duration = Duration::from_secs(60);

/// The processing stages and what they share.
pub struct Pipeline {
    config: Arc<Config>,
    log: Arc<dyn EventLog>,
    sessions: Arc<dyn SessionStore>,
    identities: Arc<Identities>,
    queues: SessionQueues,
    outbound: Arc<dyn Outbound>,
    turns: Arc<TurnRunner>,
    last_purge: Mutex<Option<Instant>>,
}

impl std::fmt::Debug for Pipeline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Pipeline")
    }
}

impl Pipeline {
    /// A pipeline over the app's parts.
    pub fn new(
        config: Arc<Config>,
        store: Arc<dyn Store>,
        identities: Arc<Identities>,
        queues: SessionQueues,
        outbound: Arc<dyn Outbound>,
        turns: Arc<TurnRunner>,
    ) -> Self {
        Self {
            config,
            log: store.clone(),
            sessions: store,
            identities,
            queues,
            outbound,
            turns,
            last_purge: Mutex::new(None),
        }
    }

    /// Processes one claimed event.
    pub async fn process(&self, event: &NewInboxEvent) -> Result<(), ProcessError> {
        // A recalled message is never parsed again (its payload is gone by design).
        if let Some(message_id) = &event.message_id
            && self.log.is_recalled(message_id).await?
        {
            self.log
                .record_verdict(&NewVerdict {
                    profile: event.profile.clone(),
                    message_id: message_id.clone(),
                    chat_id: String::new(),
                    verdict: Verdict::Ignored,
                    reason: Reason::Recalled,
                    session_key: None,
                    created_at: UnixMs::now(),
                })
                .await?;
            return Ok(());
        }
        match events::parse(&event.event_type, &event.payload)? {
            TypedEvent::MessageReceive(m) => self.on_message(&event.profile, &m).await,
            TypedEvent::MessageRecalled(r) => {
                let n = self
                    .log
                    .recall(&r.message_id, &r.chat_id, UnixMs::now())
                    .await?;
                tracing::info!(message_id = %r.message_id, records = n, "message recalled: text removed, excluded from context");
                Ok(())
            }
            TypedEvent::CardAction(_) | TypedEvent::LegacyCardAction(_) => {
                tracing::debug!("card action recorded");
                Ok(())
            }
        }
    }

    fn purge_due(&self) -> Option<UnixMs> {
        let mut last = self.last_purge.lock().unwrap_or_else(|p| p.into_inner());
        if last.is_some_and(|t| t.elapsed() < PURGE_EVERY) {
            return None;
        }
        *last = Some(Instant::now());
        let days = u64::from(self.config.context.retention_days);
        Some(UnixMs::now() - Duration::from_secs(days * 24 * 3600))
    }

    /// Routes one message and records it; then runs its command or queues its turn.
    async fn on_message(
        &self,
        profile_name: &str,
        ev: &MessageReceive,
    ) -> Result<(), ProcessError> {
        let Some(routed) = self.route(profile_name, ev).await? else {
            return Ok(());
        };
        self.purge_if_due().await;
        let now = UnixMs::now();
        let stored = self.log.apply_route(&routed.write(now)).await?;
        let (m, r) = (&routed.message, &routed.route);
        tracing::info!(profile = profile_name, message_id = %m.message_id, verdict = %r.verdict, reason = %r.reason, session_key = ?r.session_key, fresh = stored.fresh, "message routed");
        let Some(session) = stored.session else {
            return Ok(());
        };
        if let Some(call) = routed.command(&session) {
            let sessions = self.sessions.as_ref();
            return commands::execute(sessions, &self.queues, self.outbound.as_ref(), &call)
                .await
                .map_err(ProcessError::from);
        }
        // Routed before: its turn was queued then (and runs, or is recovered).
        if let Some(job) = routed.job.filter(|_| stored.fresh) {
            self.turns.submit(&self.queues, job);
        }
        Ok(())
    }

    /// The message as recorded and the route it takes; `None` for a profile no longer
    /// configured.
    async fn route(
        &self,
        profile_name: &str,
        ev: &MessageReceive,
    ) -> Result<Option<RoutedMessage>, StoreError> {
        let Some(profile) = self.config.profile(profile_name) else {
            tracing::warn!(
                profile = profile_name,
                "event for a profile no longer configured; dropped"
            );
            return Ok(None);
        };
        let msg = &ev.message;
        let bot = self.identities.get(profile_name);
        let content = content::normalize(
            &msg.message_type,
            &msg.content,
            &msg.mentions,
            bot.as_deref(),
        );
        let chat_type = ChatType::of(&msg.chat_type);
        let place = Place::of(
            &msg.chat_id,
            chat_type,
            &msg.message_id,
            msg.root_id.as_deref(),
            msg.thread_id.as_deref(),
        );
        let ids = &ev.sender.sender_id;
        let sender = Sender {
            open_id: ids.open_id.as_deref(),
            union_id: ids.union_id.as_deref(),
            user_id: ids.user_id.as_deref(),
            sender_type: &ev.sender.sender_type,
        };
        let route = routing::route(&Inbound {
            profile,
            bot_open_id: bot.as_deref(),
            workspace: self.config.workspace(&msg.chat_id),
            place: &place,
            sender: sender.clone(),
            content: &content,
            topic_root_enabled: self.config.topic_root_enabled(profile),
        });
        let actor_id = ids.open_id.clone().unwrap_or_default();
        let author_label = self
            .author_label(profile_name, &sender, &actor_id, bot.as_deref())
            .await?;
        let message = Message {
            profile: profile_name.to_string(),
            app_id: profile.app_id.clone(),
            history_scope: place.history_scope(profile),
            place,
            chat_type,
            thread_id: msg.thread_id.clone(),
            message_id: msg.message_id.clone(),
            parent_id: msg.parent_id.clone(),
            actor_type: ev.sender.sender_type.clone(),
            actor_id,
            author_label,
            metadata: collector::metadata(
                &msg.message_type,
                content.placeholder,
                content.mentions_all,
                msg.parent_id.as_deref(),
            ),
            text: content.text,
            bot_open_id: bot,
            created_at: msg
                .create_time
                .as_deref()
                .and_then(|t| t.parse::<i64>().ok())
                .map_or_else(UnixMs::now, UnixMs),
        };
        Ok(Some(RoutedMessage::new(message, route, content.names)))
    }

    /// Retention rides on message traffic, in its own short transaction; a failure only
    /// waits for the next round.
    async fn purge_if_due(&self) {
        if let Some(cutoff) = self.purge_due()
            && let Err(e) = self.log.purge(cutoff).await
        {
            tracing::warn!(error = %e, "retention purge failed");
        }
    }

    /// How a sender is shown to agents: a remembered display name, else the open_id;
    /// this bot by its profile name; other apps as `app:<id>`.
    async fn author_label(
        &self,
        profile: &str,
        sender: &Sender<'_>,
        actor_id: &str,
        bot: Option<&str>,
    ) -> Result<String, StoreError> {
        if bot.is_some() && Some(actor_id) == bot {
            return Ok(format!("{profile} (this bot)"));
        }
        if sender.sender_type != "user" {
            return Ok(format!("app:{actor_id}"));
        }
        Ok(self
            .log
            .name_of(profile, actor_id)
            .await?
            .unwrap_or_else(|| actor_id.to_string()))
    }
}
