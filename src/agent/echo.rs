//! The built-in `echo` agent: answers with a summary of what it was given, so the whole
//! path runs without a real agent. It repeats no message text, only counts and sources,
//! so a later recall has nothing of the recalled text to chase.

use async_trait::async_trait;

use super::{Agent, AgentError, AgentTurn, Answer, Partial};

/// The echo agent.
#[derive(Debug, Default, Clone, Copy)]
pub struct EchoAgent;

#[async_trait]
impl Agent for EchoAgent {
    async fn run(&self, t: &AgentTurn, _partial: &Partial) -> Result<Answer, AgentError> {
        let sources = if t.context_items.is_empty() {
            "none".to_string()
        } else {
            t.context_items
                .iter()
                .map(|i| i.author_label.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        };
        Ok(Answer::from(format!(
            "(echo) {} received a request of {} chars; topic root: {}; thread context: {} item(s) from {}; \
             group history: {} message(s); quoted reply: {}; feed: {}; prompt {} chars; session {}.",
            t.profile,
            t.request_text.chars().count(),
            if t.topic_root { "yes" } else { "no" },
            t.context_items.len(),
            sources,
            t.history,
            if t.quoted { "yes" } else { "no" },
            feed(t),
            t.prompt.chars().count(),
            t.session_id,
        )))
    }
}

/// The attached feed segments, by id and size: `none`, or `2 segment(s) (#3: 12
/// messages, #4: 5 messages)`.
fn feed(t: &AgentTurn) -> String {
    if t.feed.is_empty() {
        return "none".into();
    }
    let each: Vec<String> = t
        .feed
        .iter()
        .map(|s| format!("#{}: {} messages", s.segment_id, s.items))
        .collect();
    format!("{} segment(s) ({})", t.feed.len(), each.join(", "))
}
