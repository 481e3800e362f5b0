//! Agent backends: what a turn's prompt is handed to.

pub mod answer;
mod echo;
pub mod events;
pub mod openai;
pub mod webhook;

use async_trait::async_trait;
pub use echo::EchoAgent;
pub use openai::OpenAiAgent;
use serde::{Deserialize, Serialize};
pub use webhook::{PendingCallbacks, WebhookAgent};

/// Another profile of the hub asked to take over after this answer (a webhook agent's
/// optional `handoff` field).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct HandoffAsk {
    /// The profile to hand to (its name in the config).
    pub profile: String,
    /// What it is asked to do.
    pub text: String,
}

/// Another profile of the hub this turn's answer may hand work to: mention its bot
/// (`<at user_id="{open_id}">{profile}</at>`) or name it in the `handoff` field.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HandoffPeer {
    pub profile: String,
    /// Its bot's open_id.
    pub open_id: String,
}

/// What an agent answered: the text posted, and the handoff it asks for, if any.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Answer {
    pub text: String,
    pub handoff: Option<HandoffAsk>,
}

impl From<String> for Answer {
    fn from(text: String) -> Self {
        Self {
            text,
            handoff: None,
        }
    }
}

impl From<&str> for Answer {
    fn from(text: &str) -> Self {
        Self::from(text.to_string())
    }
}

/// Who asked.
#[derive(Debug, Clone, Serialize)]
pub struct TurnSender {
    pub open_id: String,
    /// Display name, when known.
    pub name: Option<String>,
}

/// One injected context item, as the agent gets it.
#[derive(Debug, Clone, Serialize)]
pub struct ContextItem {
    /// `topic_root`, `human_message`, `agent_output`, …
    pub item_type: String,
    pub author_label: String,
    /// Text as injected.
    pub text: String,
    /// Cut to the budget.
    pub truncated: bool,
}

/// One image or file a webhook agent can read through a signed URL.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct MediaLink {
    /// `image`, `text_file` or `file`.
    pub item_type: String,
    /// The message it came from.
    pub message_id: String,
    /// The file's name (`image` for an image).
    pub name: String,
    /// Its size in bytes, when known.
    pub size: Option<u64>,
    /// `GET` it (an absolute URL with `media.public_url`, else a path on the bridge).
    pub url: String,
    /// Unix seconds after which the URL is refused.
    pub expires_at: i64,
}

/// One batched-feed segment attached to a turn's session: background from the group
/// chat that nobody asked the agent about.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct FeedSegment {
    pub segment_id: i64,
    /// Messages in it.
    pub items: usize,
    /// Its text, labelled as background (see `feed::render`).
    pub text: String,
    /// The messages in it (what other blocks of the turn leave out).
    #[serde(skip)]
    pub message_ids: Vec<String>,
    /// The chat's own feed (given to each session once, at its turn), not the
    /// session's.
    #[serde(skip)]
    pub shared: bool,
}

/// A feed segment attached to a session without waking its agent: the webhook backend
/// posts this (`"kind": "inject"`) and expects no answer; the others keep nothing (they
/// get the session's attached segments with its next turn).
#[derive(Debug, Clone, Serialize)]
pub struct FeedInject<'a> {
    /// Always `inject`.
    pub kind: &'static str,
    /// Always `null`: no turn runs.
    pub turn_id: Option<&'a str>,
    pub profile: &'a str,
    pub session_key: &'a str,
    pub session_id: &'a str,
    pub segment_id: i64,
    pub text: &'a str,
}

/// What an agent gets for one turn (the webhook backend posts exactly this).
#[derive(Debug, Clone, Serialize)]
pub struct AgentTurn {
    /// Always `turn` (a webhook agent also receives `inject` calls).
    pub kind: &'static str,
    /// Unique per turn; the webhook's `webhook-id`.
    pub turn_id: String,
    pub profile: String,
    pub session_key: String,
    pub session_id: String,
    pub chat_id: String,
    /// `p2p` / `group`.
    pub chat_type: String,
    pub root_msg_id: String,
    pub message_id: String,
    /// Who asked.
    pub sender: TurnSender,
    pub request_text: String,
    /// The assembled prompt.
    pub prompt: String,
    /// The injected thread and history items, oldest first.
    pub context_items: Vec<ContextItem>,
    /// A topic root was injected.
    pub topic_root: bool,
    /// A quoted message was injected.
    pub quoted: bool,
    /// Pending group messages injected.
    pub history: usize,
    /// The ids of the feed segments this turn uses (their texts were injected into the
    /// session before; for conversational backends they are in `feed`).
    pub feed_segment_ids: Vec<i64>,
    /// The feed segments this turn uses, oldest first (the webhook body carries their
    /// ids only: their texts were injected when they were attached).
    #[serde(skip)]
    pub feed: Vec<FeedSegment>,
    /// The session's earlier finished turns, oldest first (for backends that keep a
    /// conversation; the webhook body does not carry them).
    #[serde(skip)]
    pub earlier: Vec<PastTurn>,
    /// The hub's other profiles this turn may hand work to (group chats, handoffs on;
    /// left out of the body when there are none).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub handoff_peers: Vec<HandoffPeer>,
    /// The images and files the turn's messages carry, as signed URLs the bridge serves
    /// (`GET /media/{token}`); empty for a profile without an agent secret.
    pub media: Vec<MediaLink>,
    /// The images handed over inline, `(MIME type, bytes)` (an OpenAI-compatible model
    /// gets them as `image_url` data URLs; the webhook body carries `media` instead).
    #[serde(skip)]
    pub images: Vec<(String, Vec<u8>)>,
}

/// One earlier turn of the same session: what was asked and what the agent answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PastTurn {
    /// The texts of the batched-feed segments that turn read, oldest first: they stay
    /// in the session's history with it.
    pub feed: Vec<String>,
    /// The request text.
    pub request: String,
    /// The recorded answer.
    pub output: String,
}

/// What a running turn has shown so far: the answer text, the model's reasoning (when it
/// streams it and the profile shows it), and what a webhook agent reported through its
/// turn events (tool calls, the status line, questions, errors).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Progress {
    /// The answer text so far.
    pub text: String,
    /// The model's reasoning so far (never part of the answer).
    pub thinking: String,
    /// Tool calls, in the order they first appeared.
    pub tools: Vec<events::ToolSummary>,
    /// The latest status line.
    pub status: Option<String>,
    /// Questions asked, in order, with where each stands.
    pub asks: Vec<AskView>,
    /// Error messages reported, in order.
    pub errors: Vec<String>,
}

impl Progress {
    /// The progress of a turn that has shown only `text`.
    pub fn text(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            ..Self::default()
        }
    }

    /// Whether nothing has been shown yet.
    pub fn is_empty(&self) -> bool {
        self == &Self::default()
    }

    /// Whether anything besides the answer text is shown (a card then shows panels).
    pub fn is_rich(&self) -> bool {
        !self.thinking.is_empty()
            || !self.tools.is_empty()
            || self.status.is_some()
            || !self.asks.is_empty()
            || !self.errors.is_empty()
    }
}

/// A question asked in a turn, as its card shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AskView {
    pub id: String,
    pub prompt: String,
    pub style: events::AskStyle,
    /// The choices offered (for a confirm without options, `yes` and `no`).
    pub options: Vec<String>,
    pub state: AskState,
}

/// Where a question stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AskState {
    /// Waiting for an answer: its buttons are shown.
    Open,
    /// Answered by a person (named when known).
    Answered { value: String, by: Option<String> },
    /// Nobody answered in time; the default (if any) applies.
    TimedOut { value: Option<String> },
    /// The turn ended before it was answered.
    Closed,
}

/// Where a streaming backend publishes what the turn shows as it grows: the whole
/// progress so far, each time. Non-streaming backends leave it alone.
pub type Partial = tokio::sync::watch::Sender<Progress>;

/// Why an agent produced no answer. The texts (recorded on the turn and shown to its
/// user) name what went wrong but never a credential, the turn's text or the answer's:
/// transport errors are kept without their URL, and a server's own error message is
/// quoted only redacted and cut short.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// The turn could not be encoded as the request body.
    #[error("agent failed: the turn could not be encoded: {0}")]
    Encode(#[source] serde_json::Error),
    /// The request did not reach the agent (kept without its URL).
    #[error("agent failed: agent unreachable: {}", crate::util::with_causes(.0))]
    Unreachable(#[source] reqwest::Error),
    /// The answer broke off while it was read (kept without its URL).
    #[error("agent failed: the answer broke off: {}", crate::util::with_causes(.0))]
    BrokeOff(#[source] reqwest::Error),
    /// The agent answered with an HTTP status that is not an answer.
    #[error("agent failed: agent answered HTTP {status}{}", detail_suffix(.detail))]
    Status {
        status: reqwest::StatusCode,
        /// What the server said about it: redacted, on one line and cut short.
        detail: Option<String>,
    },
    /// The answer is not JSON (the parser's reason names a position, never a value).
    #[error("agent failed: agent answered without JSON: {0}")]
    NotJson(#[source] serde_json::Error),
    /// An event of a streamed answer is not JSON.
    #[error("agent failed: agent streamed malformed JSON: {0}")]
    MalformedEvent(#[source] serde_json::Error),
    /// A streamed answer sent a line longer than the limit (in bytes).
    #[error("agent failed: agent streamed a line longer than {0} bytes")]
    LineTooLong(usize),
    /// The answer is an error object (its message redacted and cut short).
    #[error("agent failed: agent answered an error: {0}")]
    AnsweredError(String),
    /// An event of a streamed answer is an error object (its message redacted and cut
    /// short).
    #[error("agent failed: agent streamed an error: {0}")]
    StreamedError(String),
    /// The answer lacks the part the answer is read from (what is missing is named).
    #[error("agent failed: agent answered without {0}")]
    MissingAnswer(&'static str),
    /// The answer's message is empty.
    #[error("agent failed: agent answered an empty message")]
    EmptyAnswer,
    /// A streamed answer ended at `[DONE]` without any text.
    #[error("agent failed: agent streamed an empty answer")]
    EmptyStream,
    /// A streamed answer ended before `[DONE]` and without any text.
    #[error("agent failed: the answer stream ended without [DONE] and without any text")]
    UnfinishedStream,
    /// The agent accepted the turn for a callback, which can no longer come.
    #[error("agent failed: the agent's callback never came")]
    CallbackLost(#[source] tokio::sync::oneshot::error::RecvError),
    /// No answer within the turn's timeout.
    #[error("agent failed: no answer within {}", seconds(.0))]
    Timeout(std::time::Duration),
    /// The profile's backend cannot run in this version (its kind is named).
    #[error("agent failed: the {0} backend is not available in this version")]
    Unavailable(&'static str),
}

impl AgentError {
    /// A transport failure before an answer, kept without the URL.
    pub(crate) fn unreachable(e: reqwest::Error) -> Self {
        Self::Unreachable(e.without_url())
    }

    /// A transport failure while the answer was read, kept without the URL.
    pub(crate) fn broke_off(e: reqwest::Error) -> Self {
        Self::BrokeOff(e.without_url())
    }
}

/// `: <detail>` when there is a detail.
fn detail_suffix(detail: &Option<String>) -> String {
    match detail {
        Some(d) if !d.is_empty() => format!(": {d}"),
        _ => String::new(),
    }
}

/// `600 s`, or `300 ms` for a timeout under a second or not a whole number of them.
fn seconds(d: &std::time::Duration) -> String {
    if d.subsec_nanos() == 0 {
        format!("{} s", d.as_secs())
    } else {
        format!("{} ms", d.as_millis())
    }
}

/// An agent backend.
#[async_trait]
pub trait Agent: Send + Sync {
    /// Runs one turn to its final answer, publishing partial text to `partial` when the
    /// backend streams.
    async fn run(&self, turn: &AgentTurn, partial: &Partial) -> Result<Answer, AgentError>;

    /// Whether answers arrive in pieces (the reply is then a card updated as they do).
    fn streams(&self) -> bool {
        false
    }

    /// Whether the agent reports what it does through signed turn events, to be shown in
    /// a card from its first event on (the webhook backend, unless `stream = false`).
    fn reports_events(&self) -> bool {
        false
    }

    /// Attaches a feed segment to a session's history without waking the agent. The
    /// built-in backends keep nothing here (the segments come with the next turn).
    async fn inject(&self, _segment: &FeedInject<'_>) -> Result<(), AgentError> {
        Ok(())
    }
}

impl std::fmt::Debug for dyn Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Agent")
    }
}

/// Builds each profile's agent backend.
pub fn backends(
    config: &crate::config::Config,
    http: &reqwest::Client,
    pending: &std::sync::Arc<PendingCallbacks>,
) -> std::collections::HashMap<String, std::sync::Arc<dyn Agent>> {
    use crate::config::AgentKind;
    config
        .profiles
        .iter()
        .map(|p| {
            let a = &p.agent;
            let agent: std::sync::Arc<dyn Agent> = match (a.kind, &a.url, &a.secret) {
                (AgentKind::Webhook, Some(url), Some(secret)) => {
                    std::sync::Arc::new(WebhookAgent {
                        http: http.clone(),
                        url: url.clone(),
                        secret: secret.clone(),
                        timeout: std::time::Duration::from_secs(a.timeout_secs.max(1)),
                        pending: pending.clone(),
                        stream: a.stream,
                    })
                }
                (AgentKind::Openai, _, _) => match (&a.base_url, &a.model) {
                    (Some(base_url), Some(model)) => std::sync::Arc::new(OpenAiAgent {
                        http: http.clone(),
                        base_url: base_url.clone(),
                        model: model.clone(),
                        api_key: a.api_key.clone(),
                        timeout: std::time::Duration::from_secs(a.timeout_secs.max(1)),
                        stream: a.stream,
                        show_thinking: a.show_thinking,
                    }),
                    _ => std::sync::Arc::new(Unavailable(a.kind.as_str())),
                },
                (AgentKind::Echo, _, _) => std::sync::Arc::new(EchoAgent),
                (kind, _, _) => std::sync::Arc::new(Unavailable(kind.as_str())),
            };
            (p.name.clone(), agent)
        })
        .collect()
}

/// A backend this version cannot run: every turn gets a clear notice.
struct Unavailable(&'static str);

#[async_trait]
impl Agent for Unavailable {
    async fn run(&self, _turn: &AgentTurn, _partial: &Partial) -> Result<Answer, AgentError> {
        Err(AgentError::Unavailable(self.0))
    }
}

/// A turn in a private chat asking `prompt`, for unit tests.
#[cfg(test)]
pub(crate) fn sample_turn(prompt: &str) -> AgentTurn {
    AgentTurn {
        kind: "turn",
        turn_id: "t1".into(),
        profile: "planner".into(),
        session_key: "p2p:ou_1".into(),
        session_id: "s1".into(),
        chat_id: "oc_1".into(),
        chat_type: "p2p".into(),
        root_msg_id: "om_1".into(),
        message_id: "om_1".into(),
        sender: TurnSender {
            open_id: "ou_1".into(),
            name: None,
        },
        request_text: prompt.into(),
        prompt: prompt.into(),
        context_items: Vec::new(),
        topic_root: false,
        quoted: false,
        history: 0,
        feed_segment_ids: Vec::new(),
        feed: Vec::new(),
        earlier: Vec::new(),
        handoff_peers: Vec::new(),
        media: Vec::new(),
        images: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn timeouts_are_told_in_the_unit_they_were_set_in() {
        assert_eq!(
            AgentError::Timeout(Duration::from_secs(600)).to_string(),
            "agent failed: no answer within 600 s"
        );
        assert_eq!(
            AgentError::Timeout(Duration::from_millis(300)).to_string(),
            "agent failed: no answer within 300 ms"
        );
        assert_eq!(
            AgentError::Timeout(Duration::from_millis(1500)).to_string(),
            "agent failed: no answer within 1500 ms"
        );
    }

    #[test]
    fn a_status_is_told_with_its_detail_only_when_there_is_one() {
        let status = reqwest::StatusCode::SERVICE_UNAVAILABLE;
        let with = |detail: Option<&str>| AgentError::Status {
            status,
            detail: detail.map(str::to_string),
        };
        assert_eq!(
            with(None).to_string(),
            "agent failed: agent answered HTTP 503 Service Unavailable"
        );
        assert_eq!(
            with(Some("")).to_string(),
            "agent failed: agent answered HTTP 503 Service Unavailable"
        );
        assert_eq!(
            with(Some("overloaded")).to_string(),
            "agent failed: agent answered HTTP 503 Service Unavailable: overloaded"
        );
    }

    #[tokio::test]
    async fn an_unavailable_backend_names_its_kind() {
        let (partial, _rx) = tokio::sync::watch::channel(Progress::default());
        let turn = sample_turn("hi");
        let err = Unavailable("openai")
            .run(&turn, &partial)
            .await
            .expect_err("unavailable");
        assert!(matches!(err, AgentError::Unavailable("openai")), "{err:?}");
        assert_eq!(
            err.to_string(),
            "agent failed: the openai backend is not available in this version"
        );
    }
}
