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
    context::collector::{self, MessageFacts},
    feishu_api::identity::Identities,
    feishu_api::outbound::{Outbound, OutboundError},
    inbox::commands::{self, CommandCall, CommandError},
    protocol::{
        content,
        events::{self, ChatType, MessageReceive, TypedEvent},
    },
    routing::{self, Inbound, Place, Reason, Sender, Verdict},
    store::{
        EventLog, InboxEvent, NewSession, NewVerdict, RouteWrite, SessionStore, Store, StoreError,
    },
    turns::queue::SessionQueues,
    turns::{TurnJob, TurnRunner},
    util::{UnixMs, new_session_id},
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
    pub async fn process(&self, event: &InboxEvent) -> Result<(), ProcessError> {
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

    async fn on_message(
        &self,
        profile_name: &str,
        ev: &MessageReceive,
    ) -> Result<(), ProcessError> {
        let Some(profile) = self.config.profile(profile_name) else {
            tracing::warn!(
                profile = profile_name,
                "event for a profile no longer configured; dropped"
            );
            return Ok(());
        };
        let msg = &ev.message;
        let bot = self.identities.get(profile_name);
        let content = content::normalize(
            &msg.message_type,
            &msg.content,
            &msg.mentions,
            bot.as_deref(),
        );
        let now = UnixMs::now();
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
        let history_scope = place.history_scope(profile);
        let created_at = msg
            .create_time
            .as_deref()
            .and_then(|t| t.parse::<i64>().ok())
            .map_or(now, UnixMs);
        let facts = MessageFacts {
            profile: profile_name,
            app_id: &profile.app_id,
            place: &place,
            chat_type,
            thread_id: msg.thread_id.as_deref(),
            message_id: &msg.message_id,
            actor_type: &ev.sender.sender_type,
            actor_id: &actor_id,
            author_label: &author_label,
            text: &content.text,
            metadata: collector::metadata(
                &msg.message_type,
                content.placeholder,
                content.mentions_all,
                msg.parent_id.as_deref(),
            ),
            history_scope: &history_scope,
            bot_open_id: bot.as_deref(),
            created_at,
        };
        // An invocation without a command starts a turn, queued in the routing transaction
        // so that a crash right after it cannot lose it.
        let job = match (&route.session_key, &route.command) {
            (Some(key), None) => Some(TurnJob {
                turn_id: TurnJob::new_id(),
                profile: profile_name.to_string(),
                app_id: profile.app_id.clone(),
                session_key: key.clone(),
                chat_id: msg.chat_id.clone(),
                chat_type,
                is_dm: place.is_dm,
                root_msg_id: place.root_msg_id.clone(),
                thread_id: msg.thread_id.clone(),
                message_id: msg.message_id.clone(),
                parent_id: msg.parent_id.clone(),
                request_text: content.text.clone(),
                sender_open_id: actor_id.clone(),
                sender_name: (author_label != actor_id).then(|| author_label.clone()),
                history_scope: history_scope.clone(),
                workspace_mode: route.mode,
            }),
            _ => None,
        };
        let write = RouteWrite {
            verdict: NewVerdict {
                profile: profile_name.into(),
                message_id: msg.message_id.clone(),
                chat_id: msg.chat_id.clone(),
                verdict: route.verdict,
                reason: route.reason,
                session_key: route.session_key.clone(),
                created_at: now,
            },
            events: collector::records(&route, &facts),
            session: route.session_key.as_ref().map(|key| NewSession {
                profile: profile_name.into(),
                session_key: key.clone(),
                session_id: new_session_id(),
                chat_id: msg.chat_id.clone(),
                chat_type,
                user_id: Some(actor_id.clone()),
                root_msg_id: (!place.is_dm).then(|| place.root_msg_id.clone()),
                history_scope: history_scope.clone(),
                now,
            }),
            names: content.names.clone(),
            turn: job.as_ref().map(|j| j.to_new_turn(now)),
        };
        if let Some(cutoff) = self.purge_due() {
            // Retention rides on message traffic, in its own short transaction; a failure
            // only waits for the next round.
            if let Err(e) = self.log.purge(cutoff).await {
                tracing::warn!(error = %e, "retention purge failed");
            }
        }
        let routed = self.log.apply_route(&write).await?;
        tracing::info!(profile = profile_name, message_id = %msg.message_id, verdict = %route.verdict, reason = %route.reason, session_key = ?route.session_key, fresh = routed.fresh, "message routed");

        let Some(session) = routed.session else {
            return Ok(());
        };
        match (&route.command, job) {
            (Some(command), _) => {
                let call = CommandCall {
                    command,
                    session: &session,
                    history_scope: &history_scope,
                    message_id: &msg.message_id,
                };
                commands::execute(
                    self.sessions.as_ref(),
                    &self.queues,
                    self.outbound.as_ref(),
                    &call,
                )
                .await
                .map_err(ProcessError::from)
            }
            // Routed before: its turn was queued then (and runs, or is recovered).
            (None, Some(job)) if routed.fresh => {
                self.turns.submit(&self.queues, job);
                Ok(())
            }
            (None, Some(_)) => Ok(()),
            (None, None) => Ok(()),
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
