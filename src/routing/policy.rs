//! The routing decision for one message and one profile: what is recorded as context
//! (observation), whether the agent is invoked (invocation), and why.
//!
//! Observation and invocation are separate questions. `allow_chats` decides which group
//! chats may be observed at all; `allow_users` (and a workspace's `owner_only` mode)
//! decide who may invoke. Being observed never grants invocation, and being refused
//! invocation does not hide a message that is part of the visible discussion.
//!
//! Collection follows the workspace mode:
//! * a root message (a main-chat message, or a thread's first message) that is not a
//!   command is a `topic_root`, whoever sent it (the actual sender type is kept);
//! * in `shared` mode, other messages from people are `human_message`s; in `owner_only`
//!   mode they are not recorded; messages from this bot or other apps never are;
//! * an invocation records the `user_request`; a command records a `command`.
//!
//! Fail closed: when this bot's own open_id is unknown, mentions cannot be told apart,
//! so group messages are neither captured nor acted on.

use super::{
    Command, Place,
    permission::{Sender, group_admits, may_invoke, owner_of},
    verdict::{Reason, Verdict},
};
use crate::{
    config::{Profile, Workspace, WorkspaceMode},
    protocol::content::Normalized,
};

/// What to write into the event log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Record {
    /// The topic's root message.
    TopicRoot,
    /// Discussion in shared mode.
    HumanMessage,
    /// The request of an invocation.
    UserRequest,
    /// A slash command.
    Command,
}

impl Record {
    /// `event_type` spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::TopicRoot => "topic_root",
            Self::HumanMessage => "human_message",
            Self::UserRequest => "user_request",
            Self::Command => "command",
        }
    }
}

/// The routing of one message for one profile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    pub verdict: Verdict,
    /// Why.
    pub reason: Reason,
    /// Event-log records to write.
    pub records: Vec<Record>,
    /// The session the turn or command belongs to (invocations only).
    pub session_key: Option<String>,
    /// The command, when the request is one.
    pub command: Option<Command>,
    /// Workspace mode that applied (groups only).
    pub mode: Option<WorkspaceMode>,
}

impl Route {
    fn ignored(reason: Reason) -> Self {
        Self {
            verdict: Verdict::Ignored,
            reason,
            records: Vec::new(),
            session_key: None,
            command: None,
            mode: None,
        }
    }
}

/// Everything the decision looks at.
#[derive(Debug, Clone)]
pub struct Inbound<'a> {
    /// Profile being routed for.
    pub profile: &'a Profile,
    /// This bot's open_id, if known.
    pub bot_open_id: Option<&'a str>,
    /// The chat's workspace config, if the chat is one.
    pub workspace: Option<&'a Workspace>,
    /// Where the message sits.
    pub place: &'a Place,
    /// Who sent it.
    pub sender: Sender<'a>,
    pub content: &'a Normalized,
    /// The profile injects topic roots (an empty @ in a thread is then a task on the
    /// topic).
    pub topic_root_enabled: bool,
}

/// Decides the route of one message.
pub fn route(m: &Inbound<'_>) -> Route {
    if m.place.is_dm {
        route_dm(m)
    } else {
        route_group(m)
    }
}

fn route_dm(m: &Inbound<'_>) -> Route {
    let p = m.profile;
    if !p.dm_enabled {
        return Route::ignored(Reason::DmDisabled);
    }
    if is_own(m) {
        return Route::ignored(Reason::OwnMessage);
    }
    if !m.sender.is_user() {
        return Route::ignored(Reason::BotSender);
    }
    if let Err(reason) = may_invoke(p, None, &m.sender) {
        return Route::ignored(reason);
    }
    // Private chats never enter workspace thread context: only the request is recorded.
    invoke(
        m,
        Command::parse(&m.content.text),
        Vec::new(),
        Reason::Dm,
        None,
    )
}

fn route_group(m: &Inbound<'_>) -> Route {
    let p = m.profile;
    if let Err(reason) = group_admits(p, &m.place.chat_id) {
        return Route::ignored(reason);
    }
    if m.bot_open_id.is_none() {
        return Route::ignored(Reason::BotIdentityUnknown);
    }
    let mode = m.workspace.map(|w| w.mode).unwrap_or_default();
    let command = if m.content.mentions_bot || !p.require_mention || p.group_reply_all {
        Command::parse(&m.content.text)
    } else {
        None
    };

    // Observation: independent of who may invoke.
    let mut observed = Vec::new();
    if m.place.is_root() && command.is_none() {
        observed.push(Record::TopicRoot);
    } else if !m.place.is_root()
        && mode == WorkspaceMode::Shared
        && m.sender.is_user()
        && !is_own(m)
    {
        observed.push(Record::HumanMessage);
    }

    let observe_only = |reason| Route {
        verdict: if observed.is_empty() {
            Verdict::Ignored
        } else {
            Verdict::Observed
        },
        reason,
        records: observed.clone(),
        session_key: None,
        command: None,
        mode: Some(mode),
    };
    if is_own(m) {
        return observe_only(Reason::OwnMessage);
    }
    if !m.sender.is_user() {
        return observe_only(Reason::BotSender);
    }
    let explicit = m.content.mentions_bot;
    let intent = match mode {
        WorkspaceMode::OwnerOnly => explicit,
        WorkspaceMode::Shared => explicit || p.group_reply_all || !p.require_mention,
    };
    if !intent {
        return observe_only(Reason::NoMention);
    }
    if let Err(reason) = may_invoke(p, owner_of(m.workspace), &m.sender) {
        return observe_only(reason);
    }
    // The request itself is not discussion: only a root keeps its topic_root record.
    observed.retain(|r| *r == Record::TopicRoot);
    let reason = if explicit {
        Reason::Mention
    } else {
        Reason::ReplyAll
    };
    invoke(m, command, observed, reason, Some(mode))
}

fn invoke(
    m: &Inbound<'_>,
    command: Option<Command>,
    mut records: Vec<Record>,
    reason: Reason,
    mode: Option<WorkspaceMode>,
) -> Route {
    // An empty @ is a task only when there is a topic root to work on.
    if command.is_none()
        && m.content.text.trim().is_empty()
        && (m.place.is_dm || m.place.is_root() || !m.topic_root_enabled)
    {
        return Route {
            records,
            mode,
            ..Route::ignored(Reason::EmptyRequest)
        };
    }
    let (record, reason) = match &command {
        Some(_) => (Record::Command, Reason::Command),
        None => (Record::UserRequest, reason),
    };
    records.push(record);
    Route {
        verdict: Verdict::Invoked,
        reason,
        records,
        session_key: Some(
            m.place
                .session_key(m.profile, m.sender.open_id.unwrap_or_default()),
        ),
        command,
        mode,
    }
}

fn is_own(m: &Inbound<'_>) -> bool {
    m.bot_open_id.is_some() && m.sender.open_id == m.bot_open_id
}
