//! A turn as routing hands it over (its job: what it answers, where, for whom, in which
//! session; stored with the queued turn, so it runs again after a restart), where its
//! replies go, why it can fail, and how its end is announced.

use serde::{Deserialize, Serialize};

use crate::{
    config::WorkspaceMode,
    context::collector::Message,
    feishu_api::outbound::{Format, OutboundError, Reply},
    routing::{Chain, Via},
    store::{NewTurn, StoreError},
    store::{ProfileThread, ReplyKind},
    util::UnixMs,
    vocab::ChatType,
};

/// A turn as routing hands it over (and as it is stored, to run again after a restart).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TurnJob {
    /// `turn_<hex>`.
    pub turn_id: String,
    pub profile: String,
    pub app_id: String,
    pub session_key: String,
    pub chat_id: String,
    /// `p2p` / `group`.
    pub chat_type: ChatType,
    /// Private chat.
    pub is_dm: bool,
    pub root_msg_id: String,
    /// `omt_…`
    pub thread_id: Option<String>,
    pub message_id: String,
    /// The message it quotes.
    pub parent_id: Option<String>,
    pub request_text: String,
    pub sender_open_id: String,
    /// Sender display name, when known.
    pub sender_name: Option<String>,
    pub history_scope: String,
    /// Workspace mode (`None` in private chats).
    pub workspace_mode: Option<WorkspaceMode>,
    /// The sender's union_id and user_id, when known (a handoff checks the person's
    /// permission on another bot's app, whose open_ids differ).
    #[serde(default)]
    pub sender_union_id: Option<String>,
    #[serde(default)]
    pub sender_user_id: Option<String>,
    /// The handoff chain this turn runs in (another bot's answer queued it).
    #[serde(default)]
    pub chain: Option<Chain>,
}

impl TurnJob {
    /// A fresh turn id.
    pub fn new_id() -> String {
        format!("turn_{:032x}", rand::random::<u128>())
    }

    /// The turn of the request `m`, in session `session_key` (a fresh turn id).
    pub fn for_request(m: &Message, session_key: &str, mode: Option<WorkspaceMode>) -> Self {
        Self {
            turn_id: Self::new_id(),
            profile: m.profile.clone(),
            app_id: m.app_id.clone(),
            session_key: session_key.to_string(),
            chat_id: m.place.chat_id.clone(),
            chat_type: m.chat_type,
            is_dm: m.place.is_dm,
            root_msg_id: m.place.root_msg_id.clone(),
            thread_id: m.thread_id.clone(),
            message_id: m.message_id.clone(),
            parent_id: m.parent_id.clone(),
            request_text: m.text.clone(),
            sender_open_id: m.actor_id.clone(),
            sender_name: m.sender_name(),
            history_scope: m.history_scope.clone(),
            workspace_mode: mode,
            sender_union_id: None,
            sender_user_id: None,
            chain: None,
        }
    }

    /// The message its context leaves out as its request: the request itself, except
    /// for a turn handed over by a structured field, whose request is that field's text
    /// — the handing answer is then context like any other bot's output.
    pub fn request_in_context(&self) -> &str {
        match &self.chain {
            Some(c) if c.via == Via::Field => &self.turn_id,
            _ => &self.message_id,
        }
    }

    /// Its thread, as its profile recorded it.
    pub fn thread(&self) -> ProfileThread<'_> {
        ProfileThread::new(&self.profile, &self.chat_id, &self.root_msg_id)
    }

    /// The row that queues this job.
    pub fn to_new_turn(&self, now: UnixMs, owner: &str) -> NewTurn {
        NewTurn {
            turn_id: self.turn_id.clone(),
            profile: self.profile.clone(),
            session_key: self.session_key.clone(),
            chat_id: self.chat_id.clone(),
            message_id: self.message_id.clone(),
            request_text: self.request_text.clone(),
            // Plain strings, booleans and options: serializing cannot fail.
            job_json: serde_json::to_string(self).unwrap_or_default(),
            queued_at: now,
            owner: owner.to_string(),
        }
    }

    /// The quoted message, when the request explicitly quotes one. Inside a thread every
    /// reply points at the root, which has its own handling, so that is not a quote.
    pub fn quoted_message_id(&self) -> Option<&str> {
        self.parent_id
            .as_deref()
            .filter(|p| !p.is_empty() && *p != self.root_msg_id && *p != self.message_id)
    }
}

/// Where a turn's replies go: its request, in its thread in group chats (a private chat
/// is one conversation: replies there quote the request in the chat).
#[derive(Debug, Clone, Copy)]
pub(super) struct ReplyTo<'a> {
    pub(super) profile: &'a str,
    pub(super) chat_id: &'a str,
    pub(super) message_id: &'a str,
    pub(super) turn_id: &'a str,
    pub(super) in_thread: bool,
}

impl<'a> ReplyTo<'a> {
    /// The request of `job`.
    pub(super) fn of(job: &'a TurnJob) -> Self {
        Self {
            profile: &job.profile,
            chat_id: &job.chat_id,
            message_id: &job.message_id,
            turn_id: &job.turn_id,
            in_thread: !job.is_dm,
        }
    }

    /// A text reply of `kind` with `text` to this target.
    pub(super) fn reply(self, kind: ReplyKind, text: String) -> Reply {
        self.reply_as(kind, text, Format::Text)
    }

    /// A reply of `kind` with `text`, shown as `format`, to this target.
    pub(super) fn reply_as(self, kind: ReplyKind, text: String, format: Format) -> Reply {
        Reply {
            profile: self.profile.to_string(),
            chat_id: self.chat_id.to_string(),
            reply_to: Some(self.message_id.to_string()),
            in_thread: self.in_thread,
            kind,
            text,
            turn_id: Some(self.turn_id.to_string()),
            format,
        }
    }
}

/// Why a turn could not run to its end.
#[derive(Debug, thiserror::Error)]
pub(super) enum TurnError {
    /// The database failed or refused a write.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A reply could not be sent.
    #[error("reply not sent: {0}")]
    Outbound(#[from] OutboundError),
}

/// A finished turn, broadcast for observers (tests, tools).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnDone {
    pub profile: String,
    /// The request message.
    pub message_id: String,
    pub turn_id: String,
    /// How it ended.
    pub outcome: Outcome,
}

crate::util::spelled::spelled! {
    /// How a turn ended (a metrics label, and what observers are told).
    pub enum Outcome("turn outcome") {
        /// The agent answered and the answer was posted.
        Answered,
        /// Stopped by its user.
        Stopped,
        /// A shutdown or restart interrupted it.
        Interrupted,
        /// The message it quoted could not be read; the agent was not asked.
        QuoteUnreadable,
        /// The agent failed or did not answer in time.
        AgentFailed,
        /// It failed inside the bridge.
        Failed,
        /// No longer queued when its time came (cancelled or recalled meanwhile).
        Skipped,
        /// An answer stored before a restart, posted after it.
        Delivered,
    }
}
