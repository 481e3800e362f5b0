//! Agent backends: what a turn's prompt is handed to.

mod echo;

use async_trait::async_trait;
pub use echo::EchoAgent;
use serde::Serialize;

/// What an agent gets for one turn.
#[derive(Debug, Clone, Serialize)]
pub struct AgentTurn {
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
    /// The request text.
    pub request_text: String,
    /// The assembled prompt.
    pub prompt: String,
    /// Sources of the injected context, oldest first (labels, not text).
    pub context_sources: Vec<String>,
    /// A topic root was injected.
    pub topic_root: bool,
    /// A quoted message was injected.
    pub quoted: bool,
    /// Pending group messages injected.
    pub history: usize,
}

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
    /// Runs one turn to its final answer.
    async fn run(&self, turn: &AgentTurn) -> Result<String, AgentError>;
}
