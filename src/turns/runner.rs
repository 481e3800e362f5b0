//! Running one turn: gather, record the decision, hand the prompt to the agent, record
//! and send the answer.

use std::{collections::HashMap, sync::Arc};

use tokio_util::sync::CancellationToken;

use crate::{
    agent::{Agent, AgentTurn, EchoAgent},
    config::{Config, WorkspaceMode},
    context::{collector::token_estimate, explain::ExcludedItem, selector::truncate},
    feishu_api::FeishuClient,
    identity::Identities,
    outbound::{Outbound, Reply},
    store::{NewContextEvent, NewDecision, NewItem, Store, StoreError},
    util::now_ms,
};

/// A turn as routing hands it over.
#[derive(Debug, Clone)]
pub struct TurnJob {
    /// Profile.
    pub profile: String,
    /// Its app id.
    pub app_id: String,
    /// Session key.
    pub session_key: String,
    /// Chat.
    pub chat_id: String,
    /// `p2p` / `group`.
    pub chat_type: String,
    /// Private chat.
    pub is_dm: bool,
    /// Thread root.
    pub root_msg_id: String,
    /// `omt_…`
    pub thread_id: Option<String>,
    /// Request message.
    pub message_id: String,
    /// The message it quotes.
    pub parent_id: Option<String>,
    /// Request text.
    pub request_text: String,
    /// Sender open_id.
    pub sender_open_id: String,
    /// Sender display name, when known.
    pub sender_name: Option<String>,
    /// History scope.
    pub history_scope: String,
    /// Workspace mode (`None` in private chats).
    pub workspace_mode: Option<WorkspaceMode>,
}

impl TurnJob {
    /// The quoted message, when the request explicitly quotes one. Inside a thread every
    /// reply points at the root, which has its own handling, so that is not a quote.
    pub fn quoted_message_id(&self) -> Option<&str> {
        self.parent_id
            .as_deref()
            .filter(|p| !p.is_empty() && *p != self.root_msg_id && *p != self.message_id)
    }
}

/// A finished turn, broadcast for observers (tests, tools).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnDone {
    /// Profile.
    pub profile: String,
    /// Request message.
    pub message_id: String,
    /// `answered`, `stopped`, `quote_unreadable`, `agent_failed`, `failed`.
    pub outcome: &'static str,
}

/// Runs turns.
pub struct TurnRunner {
    pub(super) config: Arc<Config>,
    pub(super) store: Arc<dyn Store>,
    pub(super) identities: Arc<Identities>,
    pub(super) clients: HashMap<String, Arc<FeishuClient>>,
    outbound: Arc<dyn Outbound>,
    done: tokio::sync::broadcast::Sender<TurnDone>,
    agents: HashMap<String, Arc<dyn Agent>>,
}

impl std::fmt::Debug for TurnRunner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TurnRunner")
    }
}

/// How a turn ended, for the log.
#[derive(Debug, thiserror::Error)]
enum TurnError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("reply not sent")]
    Outbound(#[from] crate::outbound::OutboundError),
}

impl TurnRunner {
    /// A runner over the app's parts.
    pub fn new(
        config: Arc<Config>,
        store: Arc<dyn Store>,
        identities: Arc<Identities>,
        clients: HashMap<String, Arc<FeishuClient>>,
        outbound: Arc<dyn Outbound>,
        done: tokio::sync::broadcast::Sender<TurnDone>,
        agents: HashMap<String, Arc<dyn Agent>>,
    ) -> Self {
        Self {
            config,
            store,
            identities,
            clients,
            outbound,
            done,
            agents,
        }
    }

    pub(super) fn thread_limit(&self, chat_id: &str) -> usize {
        self.config
            .workspaces
            .iter()
            .find(|w| w.chat_id == chat_id)
            .and_then(|w| w.thread_context_limit)
            .unwrap_or(self.config.context.thread_context_limit)
    }

    fn profile_flag(
        &self,
        profile: &str,
        pick: impl Fn(&crate::config::Profile) -> Option<bool>,
        default: bool,
    ) -> bool {
        self.config
            .profile(profile)
            .and_then(pick)
            .unwrap_or(default)
    }

    pub(super) fn topic_root_enabled(&self, profile: &str) -> bool {
        self.profile_flag(
            profile,
            |p| p.topic_root_enabled,
            self.config.context.topic_root_enabled,
        )
    }

    /// Runs one turn; errors are logged and the user is told.
    pub async fn run(&self, job: TurnJob, cancel: CancellationToken) {
        let outcome = match self.try_run(&job, &cancel).await {
            Ok(outcome) => outcome,
            Err(e) => {
                tracing::error!(profile = %job.profile, message_id = %job.message_id, error = %e, "turn failed");
                let _ = self
                    .notify(
                        &job,
                        "Sorry, this request failed inside the bridge; please try again.".into(),
                    )
                    .await;
                "failed"
            }
        };
        tracing::info!(profile = %job.profile, message_id = %job.message_id, outcome, "turn finished");
        let _ = self.done.send(TurnDone {
            profile: job.profile,
            message_id: job.message_id,
            outcome,
        });
    }

    async fn try_run(
        &self,
        job: &TurnJob,
        cancel: &CancellationToken,
    ) -> Result<&'static str, TurnError> {
        let Some(session) = self.store.session(&job.profile, &job.session_key).await? else {
            tracing::warn!(session_key = %job.session_key, "turn for a session that no longer exists");
            return Ok("failed");
        };
        let thread_on = !job.is_dm
            && self.profile_flag(
                &job.profile,
                |p| p.shared_thread_enabled,
                self.config.context.shared_thread_enabled,
            );
        let history_on = !job.is_dm
            && self.profile_flag(
                &job.profile,
                |p| p.group_chat_history_share,
                self.config.context.group_chat_history_share,
            );
        let mut g = self
            .gather(
                job,
                session.topic_root_prompt_delivered,
                thread_on,
                history_on,
            )
            .await?;
        let quoted_ok = self.quoted(job, &mut g).await?;
        let prompt = if quoted_ok.is_ok() {
            g.prompt(&job.request_text)
        } else {
            String::new()
        };

        let mut sources = vec![format!(",{},", job.message_id)];
        sources.extend(g.source_message_ids.iter().map(|m| format!("{m},")));
        let excluded: Vec<ExcludedItem> = g
            .thread
            .excluded
            .iter()
            .chain(&g.history.excluded)
            .cloned()
            .map(ExcludedItem::from)
            .collect();
        let selected = g.selected_items();
        let decision = NewDecision {
            chat_id: job.chat_id.clone(),
            root_msg_id: job.root_msg_id.clone(),
            message_id: job.message_id.clone(),
            bridge_id: job.app_id.clone(),
            bot_profile: job.profile.clone(),
            target_id: self.identities.get(&job.profile),
            workspace_mode: match job.workspace_mode {
                None => "dm".into(),
                Some(WorkspaceMode::Shared) => "shared".into(),
                Some(WorkspaceMode::OwnerOnly) => "owner_only".into(),
            },
            mode: g.mode(thread_on, history_on),
            session_key: session.session_key.clone(),
            session_id: session.session_id.clone(),
            request_text: job.request_text.clone(),
            thread_context: g.rendered_context(),
            selected_item_ids_json: serde_json::to_string(
                &g.thread
                    .selected
                    .iter()
                    .chain(&g.history.selected)
                    .map(|s| s.item_id)
                    .collect::<Vec<_>>(),
            )
            .unwrap_or_default(),
            selected_json: serde_json::to_string(&selected).unwrap_or_default(),
            excluded_json: serde_json::to_string(&excluded).unwrap_or_default(),
            prompt_preview: prompt.clone(),
            diagnostics_json: g.diagnostics().to_string(),
            source_message_ids: sources.concat(),
            created_at: now_ms(),
        };
        let decision_id = self.store.record_decision(&decision).await?;
        tracing::info!(profile = %job.profile, message_id = %job.message_id, decision_id, mode = %decision.mode, "context decision recorded");

        if quoted_ok.is_err() {
            self.notify(
                job,
                "I could not read the message you replied to (it may have been recalled or I cannot \
                 see it), so I did not send your request to the agent. Please quote it again or paste \
                 its text."
                    .into(),
            )
            .await?;
            return Ok("quote_unreadable");
        }
        // Accepted: the pending history up to this snapshot is consumed now, whatever the
        // agent does next.
        if let Some(up_to) = g.history_up_to {
            self.store
                .consume_history(&job.profile, &job.history_scope, up_to, now_ms())
                .await?;
        }

        let turn = AgentTurn {
            turn_id: format!("turn_{:032x}", rand::random::<u128>()),
            sender: crate::agent::TurnSender {
                open_id: job.sender_open_id.clone(),
                name: job.sender_name.clone(),
            },
            profile: job.profile.clone(),
            session_key: session.session_key.clone(),
            session_id: session.session_id.clone(),
            chat_id: job.chat_id.clone(),
            chat_type: job.chat_type.clone(),
            root_msg_id: job.root_msg_id.clone(),
            message_id: job.message_id.clone(),
            request_text: job.request_text.clone(),
            prompt,
            context_items: g
                .thread
                .selected
                .iter()
                .chain(&g.history.selected)
                .map(|s| crate::agent::ContextItem {
                    item_type: s.item_type.clone(),
                    author_label: s.author_label.clone(),
                    text: s.text.clone(),
                    truncated: s.truncated,
                })
                .collect(),
            topic_root: g.topic_root.is_some(),
            quoted: g.quoted.is_some(),
            history: g.history.selected.len(),
            earlier: Vec::new(),
        };
        let answer = tokio::select! {
            biased;
            () = cancel.cancelled() => {
                self.notify(job, "Stopped.".into()).await?;
                return Ok("stopped");
            }
            a = self.agent_answer(&turn) => a,
        };
        let answer = match answer {
            Ok(a) => a,
            Err(e) => {
                self.notify(job, format!("The agent did not answer: {e}"))
                    .await?;
                return Ok("agent_failed");
            }
        };
        let reply_id = self
            .outbound
            .send(Reply {
                profile: job.profile.clone(),
                chat_id: job.chat_id.clone(),
                reply_to: Some(job.message_id.clone()),
                kind: "answer",
                text: answer.clone(),
            })
            .await?;
        self.record_output(job, &session.session_key, &reply_id, &answer)
            .await?;
        if matches!(g.topic_root_status, "injected" | "is_request") {
            self.store
                .mark_topic_root_delivered(&job.profile, &session.session_key, &session.session_id)
                .await?;
        }
        Ok("answered")
    }

    async fn agent_answer(&self, turn: &AgentTurn) -> Result<String, crate::agent::AgentError> {
        let (partial, _) = tokio::sync::watch::channel(String::new());
        match self.agents.get(&turn.profile) {
            Some(agent) => agent.run(turn, &partial).await,
            None => EchoAgent.run(turn, &partial).await,
        }
    }

    /// Records the answer as this profile's `agent_output`, so the other bots in the
    /// thread see it next time (truncated over `max_agent_output_chars`, flagged).
    async fn record_output(
        &self,
        job: &TurnJob,
        session_key: &str,
        reply_id: &str,
        answer: &str,
    ) -> Result<(), StoreError> {
        let (text, truncated) = truncate(answer, self.config.context.max_agent_output_chars);
        let actor = self
            .identities
            .get(&job.profile)
            .unwrap_or_else(|| job.app_id.clone());
        let event = NewContextEvent {
            chat_id: job.chat_id.clone(),
            chat_type: job.chat_type.clone(),
            root_msg_id: job.root_msg_id.clone(),
            thread_id: job.thread_id.clone(),
            message_id: reply_id.to_string(),
            event_type: "agent_output".into(),
            actor_type: "bot".into(),
            actor_id: actor,
            bridge_id: job.app_id.clone(),
            bot_profile: job.profile.clone(),
            target_id: None,
            target_name: None,
            session_name: Some(session_key.to_string()),
            history_scope: job.history_scope.clone(),
            text: text.clone(),
            metadata_json: serde_json::json!({"truncated": truncated, "reply_to": job.message_id})
                .to_string(),
            created_at: now_ms(),
            item: (!job.is_dm).then(|| NewItem {
                item_type: "agent_output".into(),
                role: "bot".into(),
                author_label: format!("{} (agent)", job.profile),
                token_estimate: token_estimate(&text),
                text,
                truncated,
            }),
        };
        self.store.record_events(&[event]).await
    }

    async fn notify(
        &self,
        job: &TurnJob,
        text: String,
    ) -> Result<String, crate::outbound::OutboundError> {
        self.outbound
            .send(Reply {
                profile: job.profile.clone(),
                chat_id: job.chat_id.clone(),
                reply_to: Some(job.message_id.clone()),
                kind: "notice",
                text,
            })
            .await
    }
}
