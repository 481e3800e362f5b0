//! Agent backends: what a turn's prompt is handed to.

mod echo;
pub mod openai;
pub mod webhook;

use async_trait::async_trait;
pub use echo::EchoAgent;
pub use openai::OpenAiAgent;
use serde::Serialize;
pub use webhook::{PendingCallbacks, WebhookAgent};

/// Who asked.
#[derive(Debug, Clone, Serialize)]
pub struct TurnSender {
    /// open_id.
    pub open_id: String,
    /// Display name, when known.
    pub name: Option<String>,
}

/// One injected context item, as the agent gets it.
#[derive(Debug, Clone, Serialize)]
pub struct ContextItem {
    /// `topic_root`, `human_message`, `agent_output`, …
    pub item_type: String,
    /// Source.
    pub author_label: String,
    /// Text as injected.
    pub text: String,
    /// Cut to the budget.
    pub truncated: bool,
}

/// What an agent gets for one turn (the webhook backend posts exactly this).
#[derive(Debug, Clone, Serialize)]
pub struct AgentTurn {
    /// Unique per turn; the webhook's `webhook-id`.
    pub turn_id: String,
    /// Profile.
    pub profile: String,
    /// Session key.
    pub session_key: String,
    /// Session id.
    pub session_id: String,
    /// Chat.
    pub chat_id: String,
    /// `p2p` / `group`.
    pub chat_type: String,
    /// Thread root.
    pub root_msg_id: String,
    /// Request message.
    pub message_id: String,
    /// Who asked.
    pub sender: TurnSender,
    /// The request text.
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
    /// The session's earlier finished turns, oldest first (for backends that keep a
    /// conversation; the webhook body does not carry them).
    #[serde(skip)]
    pub earlier: Vec<PastTurn>,
}

/// One earlier turn of the same session: what was asked and what the agent answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PastTurn {
    /// The request text.
    pub request: String,
    /// The recorded answer.
    pub output: String,
}

/// Where a streaming backend publishes the answer as it grows: the whole text so far,
/// each time. Non-streaming backends leave it alone.
pub type Partial = tokio::sync::watch::Sender<String>;

/// Why an agent produced no answer.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// The backend failed.
    #[error("agent failed: {0}")]
    Failed(String),
}

/// An agent backend.
#[async_trait]
pub trait Agent: Send + Sync {
    /// Runs one turn to its final answer, publishing partial text to `partial` when the
    /// backend streams.
    async fn run(&self, turn: &AgentTurn, partial: &Partial) -> Result<String, AgentError>;

    /// Whether answers arrive in pieces (the reply is then a card updated as they do).
    fn streams(&self) -> bool {
        false
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
    async fn run(&self, _turn: &AgentTurn, _partial: &Partial) -> Result<String, AgentError> {
        Err(AgentError::Failed(format!(
            "the {} backend is not available in this version",
            self.0
        )))
    }
}
