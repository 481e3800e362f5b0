//! The parts of a turn's card besides its answer: the model's reasoning and the agent's
//! tool calls (each a collapsed panel), its questions (with their buttons while open),
//! the errors it reported and its status line with the time elapsed. Each part has a
//! byte budget, so however much an agent reports, the card stays within Feishu's size
//! limit with room for the answer: the reasoning keeps its end, the tool panel its
//! latest calls (and says how many earlier ones it leaves out), the questions the open
//! ones and the latest answered.

use std::time::Duration;

use serde_json::{Value, json};

use crate::{
    agent::{AskState, AskView, Progress, events::ToolStatus},
    feishu_api::{defuse, fit},
};

/// Button value `action` that answers a question.
pub const ACTION_ANSWER: &str = "answer";

/// The most bytes (as [`fit::card_text_bytes`] counts them) of reasoning shown.
const THINKING_BYTES: usize = 2 * 1024;
/// The most bytes of the tool panel's lines.
const TOOLS_BYTES: usize = 4 * 1024;
/// The most bytes of one tool call's line.
const TOOL_LINE_BYTES: usize = 400;
/// The most bytes of an open question's text as shown.
const PROMPT_BYTES: usize = 1200;
/// The most bytes of a settled question's text as shown.
const SETTLED_PROMPT_BYTES: usize = 300;
/// Answered questions shown (the latest), beside every open one.
const ANSWERED_SHOWN: usize = 2;
/// Errors shown (the latest), each cut to [`ERROR_BYTES`].
const ERRORS_SHOWN: usize = 3;
const ERROR_BYTES: usize = 300;
/// The most bytes of the status line.
const STATUS_BYTES: usize = 300;

/// The elements above the answer: the reasoning and tool panels.
pub fn above(p: &Progress) -> Vec<Value> {
    let mut out = Vec::new();
    if !p.thinking.trim().is_empty() {
        let shown = tail(&p.thinking, THINKING_BYTES);
        out.push(panel(
            "Thinking",
            vec![json!({"tag": "markdown", "content": defuse::mentions(&shown), "text_size": "notation"})],
        ));
    }
    if !p.tools.is_empty() {
        let running = p
            .tools
            .iter()
            .filter(|t| t.status == ToolStatus::Running)
            .count();
        let calls = p.tools.len();
        let mut title = format!("Tools · {calls} call{}", if calls == 1 { "" } else { "s" });
        if running > 0 {
            title.push_str(&format!(" · {running} running"));
        }
        out.push(panel(
            &title,
            vec![json!({"tag": "markdown", "content": defuse::mentions(&tool_lines(p)), "text_size": "notation"})],
        ));
    }
    out
}

/// The elements below the answer: questions (with buttons while `running`), errors and,
/// while `running`, the status line with the time elapsed.
pub fn below(p: &Progress, running: bool, elapsed: Option<Duration>, turn_id: &str) -> Vec<Value> {
    let mut out = Vec::new();
    for ask in shown_asks(&p.asks) {
        out.extend(ask_elements(ask, running, turn_id));
    }
    let errors = p.errors.len();
    for e in &p.errors[errors.saturating_sub(ERRORS_SHOWN)..] {
        let e = head(e, ERROR_BYTES);
        out.push(notation(&format!("⚠️ {e}")));
    }
    if running && (p.is_rich() || elapsed.is_some()) {
        let status = p
            .status
            .as_deref()
            .map_or_else(|| "Working…".to_string(), |s| head(s, STATUS_BYTES));
        let line = match elapsed {
            Some(e) => format!("{status} · {}", clock(e)),
            None => status,
        };
        out.push(notation(&line));
    }
    out
}

/// `12 s`, `3 min 4 s`, `1 h 2 min`.
pub fn clock(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0..60 => format!("{s} s"),
        60..3600 => format!("{} min {} s", s / 60, s % 60),
        _ => format!("{} h {} min", s / 3600, s % 3600 / 60),
    }
}

/// A collapsed panel titled `title` holding `elements`.
fn panel(title: &str, elements: Vec<Value>) -> Value {
    json!({
        "tag": "collapsible_panel",
        "expanded": false,
        "header": {"title": {"tag": "markdown", "content": defuse::mentions(title)}},
        "elements": elements,
    })
}

fn notation(text: &str) -> Value {
    json!({"tag": "markdown", "content": defuse::mentions(text), "text_size": "notation"})
}

/// One line per tool call, the latest kept within the panel's budget; the earlier ones
/// left out are counted on the first line.
fn tool_lines(p: &Progress) -> String {
    let lines: Vec<String> = p
        .tools
        .iter()
        .map(|t| {
            let mark = match t.status {
                ToolStatus::Running => "⏳",
                ToolStatus::Ok => "✅",
                ToolStatus::Error => "❌",
            };
            let mut line = format!("{mark} **{}**", t.name);
            if !t.input_summary.is_empty() {
                line.push_str(&format!(" — {}", one_line(&t.input_summary)));
            }
            if let Some(ms) = t.duration_ms {
                line.push_str(&format!(" · {}", millis(ms)));
            }
            head(&line, TOOL_LINE_BYTES)
        })
        .collect();
    let mut used = 0;
    let mut keep = lines.len();
    for (i, line) in lines.iter().enumerate().rev() {
        let cost = fit::card_text_bytes(line) + 3;
        if used + cost > TOOLS_BYTES {
            break;
        }
        used += cost;
        keep = i;
    }
    let mut shown = Vec::with_capacity(lines.len() - keep + 1);
    if keep > 0 {
        shown.push(format!(
            "… {keep} earlier call{} not shown",
            if keep == 1 { "" } else { "s" }
        ));
    }
    shown.extend_from_slice(&lines[keep..]);
    shown.join("\n")
}

/// `850 ms`, `1.2 s`.
fn millis(ms: u64) -> String {
    if ms < 1000 {
        format!("{ms} ms")
    } else {
        format!("{:.1} s", ms as f64 / 1000.0)
    }
}

/// Every open question, and the latest answered ones, in order.
fn shown_asks(asks: &[AskView]) -> Vec<&AskView> {
    let settled: Vec<usize> = asks
        .iter()
        .enumerate()
        .filter(|(_, a)| a.state != AskState::Open)
        .map(|(i, _)| i)
        .collect();
    let hidden = settled.len().saturating_sub(ANSWERED_SHOWN);
    let hidden: std::collections::HashSet<usize> = settled.into_iter().take(hidden).collect();
    asks.iter()
        .enumerate()
        .filter(|(i, _)| !hidden.contains(i))
        .map(|(_, a)| a)
        .collect()
}

/// A question: its text, then its buttons (open, while the turn runs) or where it
/// stands.
fn ask_elements(ask: &AskView, running: bool, turn_id: &str) -> Vec<Value> {
    let open = ask.state == AskState::Open && running;
    let prompt = head(
        &ask.prompt,
        if open {
            PROMPT_BYTES
        } else {
            SETTLED_PROMPT_BYTES
        },
    );
    let mut out = vec![json!({
        "tag": "markdown",
        "content": defuse::mentions(&format!("**❓ {prompt}**")),
    })];
    let outcome = match &ask.state {
        AskState::Open if running => {
            for (i, option) in ask.options.iter().enumerate() {
                let kind = if i == 0 { "primary" } else { "default" };
                out.push(json!({
                    "tag": "button",
                    "text": {"tag": "plain_text", "content": head(option, 100)},
                    "type": kind,
                    "behaviors": [{"type": "callback", "value": {
                        "action": ACTION_ANSWER,
                        "turn_id": turn_id,
                        "ask_id": ask.id,
                        "value": option,
                    }}],
                }));
            }
            return out;
        }
        AskState::Open | AskState::Closed => "Closed without an answer.".to_string(),
        AskState::Answered { value, by } => match by {
            Some(by) => format!("Answered: **{value}** (by {by})"),
            None => format!("Answered: **{value}**"),
        },
        AskState::TimedOut { value: Some(v) } => {
            format!("No answer in time; went with the default: **{v}**")
        }
        AskState::TimedOut { value: None } => "No answer in time.".to_string(),
    };
    out.push(notation(&outcome));
    out
}

/// `text` on one line.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The start of `text` within `max` bytes, with `…` when cut.
fn head(text: &str, max: usize) -> String {
    if fit::card_text_bytes(text) <= max {
        return text.to_string();
    }
    let mut used = 0;
    let mut out = String::new();
    for c in text.chars() {
        used += fit::card_text_bytes(c.encode_utf8(&mut [0; 4]));
        if used + 3 > max {
            break;
        }
        out.push(c);
    }
    out.push('…');
    out
}

/// The end of `text` within `max` bytes, with `…` when cut.
fn tail(text: &str, max: usize) -> String {
    if fit::card_text_bytes(text) <= max {
        return text.to_string();
    }
    let mut used = 0;
    let mut kept: Vec<char> = Vec::new();
    for c in text.chars().rev() {
        used += fit::card_text_bytes(c.encode_utf8(&mut [0; 4]));
        if used + 3 > max {
            break;
        }
        kept.push(c);
    }
    let mut out = String::from("…");
    out.extend(kept.into_iter().rev());
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::events::{AskStyle, ToolSummary};

    fn tool(i: usize, status: ToolStatus) -> ToolSummary {
        ToolSummary {
            id: format!("t{i}"),
            name: format!("tool_{i}"),
            input_summary: "x".repeat(200),
            status,
            duration_ms: Some(1500),
        }
    }

    #[test]
    fn the_tool_panel_keeps_the_latest_calls_within_its_budget_and_counts_the_rest() {
        let p = Progress {
            tools: (0..500).map(|i| tool(i, ToolStatus::Ok)).collect(),
            ..Progress::default()
        };
        let lines = tool_lines(&p);
        assert!(
            fit::card_text_bytes(&lines) <= TOOLS_BYTES + 64,
            "{}",
            lines.len()
        );
        assert!(lines.contains("tool_499"), "the latest call is shown");
        assert!(!lines.contains("tool_0 "), "the first is left out");
        let first = lines.lines().next().unwrap_or_default();
        assert!(first.starts_with("… ") && first.ends_with("earlier calls not shown"));
        let one = Progress {
            tools: vec![tool(0, ToolStatus::Running)],
            ..Progress::default()
        };
        let panel = &above(&one)[0];
        assert_eq!(panel["tag"], "collapsible_panel");
        assert_eq!(panel["expanded"], false);
        assert_eq!(
            panel["header"]["title"]["content"],
            "Tools · 1 call · 1 running"
        );
        assert!(tool_lines(&one).starts_with("⏳ **tool_0** — xx"));
    }

    #[test]
    fn reasoning_keeps_its_end() {
        let p = Progress {
            thinking: format!("{}THE END", "思".repeat(5000)),
            ..Progress::default()
        };
        let shown = above(&p)[0]["elements"][0]["content"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        assert!(shown.starts_with('…') && shown.ends_with("THE END"));
        assert!(fit::card_text_bytes(&shown) <= THINKING_BYTES);
    }

    #[test]
    fn an_open_question_has_a_button_per_option_and_a_settled_one_says_how() {
        let ask = |state| AskView {
            id: "q1".into(),
            prompt: "Deploy?".into(),
            style: AskStyle::Confirm,
            options: vec!["yes".into(), "no".into()],
            state,
        };
        let open = ask_elements(&ask(AskState::Open), true, "turn_1");
        let values: Vec<&Value> = open
            .iter()
            .filter(|e| e["tag"] == "button")
            .map(|b| &b["behaviors"][0]["value"])
            .collect();
        assert_eq!(
            values,
            [
                &json!({"action": "answer", "turn_id": "turn_1", "ask_id": "q1", "value": "yes"}),
                &json!({"action": "answer", "turn_id": "turn_1", "ask_id": "q1", "value": "no"}),
            ]
        );
        let ended = ask_elements(&ask(AskState::Open), false, "turn_1");
        assert!(ended.iter().all(|e| e["tag"] != "button"));
        let answered = ask_elements(
            &ask(AskState::Answered {
                value: "yes".into(),
                by: Some("Alice".into()),
            }),
            true,
            "turn_1",
        );
        assert_eq!(answered[1]["content"], "Answered: **yes** (by Alice)");
        let timed_out = ask_elements(
            &ask(AskState::TimedOut {
                value: Some("no".into()),
            }),
            true,
            "turn_1",
        );
        assert!(
            timed_out[1]["content"]
                .as_str()
                .is_some_and(|c| c.contains("default: **no**"))
        );
    }

    #[test]
    fn the_status_line_shows_while_running_with_the_time_elapsed() {
        let p = Progress {
            status: Some("Reading the logs".into()),
            ..Progress::default()
        };
        let rows = below(&p, true, Some(Duration::from_secs(75)), "t");
        assert_eq!(rows[0]["content"], "Reading the logs · 1 min 15 s");
        assert!(below(&p, false, Some(Duration::from_secs(75)), "t").is_empty());
        assert!(below(&Progress::text("x"), true, None, "t").is_empty());
        assert_eq!(clock(Duration::from_secs(3725)), "1 h 2 min");
    }
}
