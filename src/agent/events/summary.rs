//! What a turn's events add up to, for a reader such as a card: the text so far, each
//! tool call as it last stood, the latest status line, the questions and the errors.

use serde::Serialize;
use utoipa::ToSchema;

use super::{AskEvent, TextMode, ToolStatus, TurnEvent};

/// A tool call as its latest event left it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct ToolSummary {
    pub id: String,
    pub name: String,
    pub input_summary: String,
    pub status: ToolStatus,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
}

/// What a turn's displayable events add up to.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, ToSchema)]
pub struct TurnEventSummary {
    /// The answer text so far.
    pub text: String,
    /// Tool calls, in the order they first appeared.
    pub tools: Vec<ToolSummary>,
    /// The latest status line.
    pub status: Option<String>,
    /// Questions asked, in order.
    pub asks: Vec<AskEvent>,
    /// Error messages, in order.
    pub errors: Vec<String>,
}

/// Sums up events given in seq order, stale ones left out by the caller.
pub fn summarize<'a>(events: impl IntoIterator<Item = &'a TurnEvent>) -> TurnEventSummary {
    let mut s = TurnEventSummary::default();
    for event in events {
        match event {
            TurnEvent::Text(t) => match t.mode {
                TextMode::Delta => s.text.push_str(&t.text),
                TextMode::Full => s.text.clone_from(&t.text),
            },
            TurnEvent::Tool(t) => {
                let now = ToolSummary {
                    id: t.id.clone(),
                    name: t.name.clone(),
                    input_summary: t.input_summary.clone(),
                    status: t.status,
                    duration_ms: t.duration_ms,
                };
                match s.tools.iter_mut().find(|x| x.id == t.id) {
                    Some(known) => *known = now,
                    None => s.tools.push(now),
                }
            }
            TurnEvent::Status(st) => s.status = Some(st.text.clone()),
            TurnEvent::Ask(a) => s.asks.push(a.clone()),
            TurnEvent::Error(e) => s.errors.push(e.message.clone()),
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::events::parse;

    #[test]
    fn deltas_append_a_full_text_replaces_and_a_tool_keeps_its_latest() {
        let events: Vec<TurnEvent> = [
            r#"{"seq":1,"kind":"text","text":"Hel","mode":"delta"}"#,
            r#"{"seq":2,"kind":"text","text":"lo","mode":"delta"}"#,
            r#"{"seq":3,"kind":"tool","id":"a","phase":"start","name":"ls","status":"running"}"#,
            r#"{"seq":4,"kind":"tool","id":"a","phase":"end","name":"ls","status":"ok","duration_ms":7}"#,
            r#"{"seq":5,"kind":"text","text":"Hello!","mode":"full"}"#,
        ]
        .iter()
        .map(|b| parse(b.as_bytes()).expect("valid").event)
        .collect();
        let s = summarize(&events);
        assert_eq!(s.text, "Hello!");
        assert_eq!(s.tools.len(), 1);
        assert_eq!(s.tools[0].status, ToolStatus::Ok);
        assert_eq!(s.tools[0].duration_ms, Some(7));
        assert_eq!(summarize(&events[..2]).text, "Hello");
    }
}
