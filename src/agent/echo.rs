//! The built-in `echo` agent: answers with a summary of what it was given, so the whole
//! path runs without a real agent. It repeats no message text, only counts and sources,
//! so a later recall has nothing of the recalled text to chase.

use async_trait::async_trait;

use super::{Agent, AgentError, AgentTurn, Partial};

/// The echo agent.
#[derive(Debug, Default, Clone, Copy)]
pub struct EchoAgent;

#[async_trait]
impl Agent for EchoAgent {
    async fn run(&self, t: &AgentTurn, _partial: &Partial) -> Result<String, AgentError> {
        let sources = if t.context_items.is_empty() {
            "none".to_string()
        } else {
            t.context_items
                .iter()
                .map(|i| i.author_label.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        };
        Ok(format!(
            "(echo) {} received a request of {} chars; topic root: {}; thread context: {} item(s) from {}; \
             group history: {} message(s); quoted reply: {}; prompt {} chars; session {}.",
            t.profile,
            t.request_text.chars().count(),
            if t.topic_root { "yes" } else { "no" },
            t.context_items.len(),
            sources,
            t.history,
            if t.quoted { "yes" } else { "no" },
            t.prompt.chars().count(),
            t.session_id,
        ))
    }
}
