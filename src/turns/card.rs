//! The card a streaming answer is shown in (schema 2.0, `update_multi` so it can be
//! replaced while it grows; the answer's markdown carries the element id a CardKit
//! entity streams into), with what else the turn shows around it (`panels`: reasoning,
//! tool calls, questions, status). Its buttons carry the turn id; the card-action handler finds
//! the turn, and through it the one session the button may affect. No text in it — the
//! answer, a failure's reason (a provider's error text), its summary — notifies anyone
//! (mention tags are made plain). The chat list previews it by `config.summary`: the
//! answer's first line, or what state it is in.

use std::time::Duration;

use serde_json::{Value, json};

use super::panels;
use crate::{
    agent::Progress,
    feishu_api::{defuse, fit, outbound::ANSWER_ELEMENT, summary},
};

/// Button value `action` that stops the running turn.
pub const ACTION_STOP: &str = "stop";
/// Button value `action` that starts a new session.
pub const ACTION_NEW_SESSION: &str = "new_session";

/// Where the answer in a card stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CardState<'a> {
    /// Still arriving: shows a stop button.
    Running,
    /// Final.
    Done,
    /// Final, and continued in text replies below.
    Continued,
    /// Stopped by the user.
    Stopped,
    /// Ended without an answer; the reason is shown.
    Failed(&'a str),
}

/// The card for `text` in `state`.
pub fn answer_card(text: &str, state: CardState<'_>, turn_id: &str) -> Value {
    progress_card(&Progress::text(text), state, turn_id, None)
}

/// The card for what a turn has shown (`p`; its text is the answer's) in `state`, with
/// the time elapsed on its status line while it runs.
pub fn progress_card(
    p: &Progress,
    state: CardState<'_>,
    turn_id: &str,
    elapsed: Option<Duration>,
) -> Value {
    let text = p.text.as_str();
    let shown = if text.trim().is_empty() {
        match state {
            CardState::Running => "…",
            _ => "(no text)",
        }
    } else {
        text
    };
    let running = state == CardState::Running;
    let mut elements = panels::above(p);
    elements.push(json!({
        "tag": "markdown",
        "content": defuse::mentions(shown),
        "element_id": ANSWER_ELEMENT,
    }));
    elements.extend(panels::below(p, running, elapsed, turn_id));
    let note = match state {
        CardState::Running | CardState::Done => None,
        CardState::Continued => Some("(continued below)".to_string()),
        CardState::Stopped => Some("Stopped.".to_string()),
        CardState::Failed(why) => Some(format!("Failed: {why}")),
    };
    if let Some(note) = &note {
        let note = defuse::mentions(note);
        elements.push(
            json!({"tag": "markdown", "content": format!("*{note}*"), "text_size": "notation"}),
        );
    }
    elements.push(match state {
        CardState::Running => button("Stop", "danger", ACTION_STOP, turn_id),
        _ => button("New session", "default", ACTION_NEW_SESSION, turn_id),
    });
    let preview = match (state, note) {
        (CardState::Failed(_), Some(note)) => summary::of(&note, "Failed."),
        (CardState::Running, _) => summary::of(text, "Working…"),
        (_, note) => summary::of(text, note.as_deref().unwrap_or("(no text)")),
    };
    json!({
        "schema": "2.0",
        "config": {"update_multi": true, "summary": preview},
        "body": {"elements": elements},
    })
}

/// How many bytes of answer text (as [`fit::card_text_bytes`] counts them) a card in
/// `state` has room for within Feishu's card size limit (its summary's room kept).
pub fn text_room(state: CardState<'_>, turn_id: &str) -> usize {
    room_beside(&Progress::default(), state, turn_id)
}

/// How many bytes of answer text fit in a card in `state` beside the other parts of `p`
/// (its panels, questions and status line, whose budgets leave the answer most of it).
pub fn room_beside(p: &Progress, state: CardState<'_>, turn_id: &str) -> usize {
    let others = Progress {
        text: String::new(),
        ..p.clone()
    };
    let elapsed = (state == CardState::Running).then_some(Duration::from_secs(359_999));
    fit::card_text_room(&progress_card(&others, state, turn_id, elapsed))
        .saturating_sub(summary::RESERVE)
}

/// The first part of `text` that fits a card in `state` (the whole text when it fits),
/// and whether anything is left over.
pub fn fitting(text: &str, state: CardState<'_>, turn_id: &str) -> (String, bool) {
    fitting_beside(&Progress::text(text), state, turn_id)
}

/// What `p` shows with the first part of its text that fits a card in `state` beside
/// its other parts, and whether any text is left over.
pub fn fitting_beside(p: &Progress, state: CardState<'_>, turn_id: &str) -> (String, bool) {
    let room = room_beside(p, state, turn_id);
    if fit::card_text_bytes(&p.text) <= room {
        return (p.text.clone(), false);
    }
    let first = fit::split(&p.text, room, fit::card_text_bytes)
        .into_iter()
        .next()
        .unwrap_or_default();
    (first, true)
}

fn button(label: &str, kind: &str, action: &str, turn_id: &str) -> Value {
    json!({
        "tag": "button",
        "text": {"tag": "plain_text", "content": label},
        "type": kind,
        "behaviors": [{"type": "callback", "value": {"action": action, "turn_id": turn_id}}],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn buttons(card: &Value) -> Vec<Value> {
        card["body"]["elements"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|e| e["tag"] == "button")
            .map(|b| b["behaviors"][0]["value"].clone())
            .collect()
    }

    #[test]
    fn a_running_card_offers_stop_and_a_final_one_a_new_session() {
        let running = answer_card("partial", CardState::Running, "turn_1");
        assert_eq!(running["config"]["update_multi"], true);
        assert_eq!(running["body"]["elements"][0]["content"], "partial");
        assert_eq!(
            buttons(&running),
            [json!({"action": "stop", "turn_id": "turn_1"})]
        );
        let done = answer_card("all", CardState::Done, "turn_1");
        assert_eq!(
            buttons(&done),
            [json!({"action": "new_session", "turn_id": "turn_1"})]
        );
        let failed = answer_card("", CardState::Failed("agent timed out"), "turn_1");
        assert!(failed.to_string().contains("Failed: agent timed out"));
    }

    #[test]
    fn the_answer_is_the_element_a_card_entity_streams_into_and_pings_nobody() {
        let card = answer_card("hi <at id=all></at>", CardState::Running, "turn_1");
        let answer = &card["body"]["elements"][0];
        assert_eq!(answer["element_id"], ANSWER_ELEMENT);
        assert!(!card.to_string().contains("<at"), "{card}");
    }

    #[test]
    fn no_text_on_any_card_pings_anyone() {
        let ping = "boom <at id=all></at> and <at user_id=\"ou_x\">x</at>";
        for state in [
            CardState::Running,
            CardState::Done,
            CardState::Continued,
            CardState::Stopped,
            CardState::Failed(ping),
        ] {
            let card = answer_card(ping, state, "turn_1");
            let shown = card.to_string();
            assert!(
                !shown.contains("<at") && !shown.contains("</at"),
                "{state:?}: {shown}"
            );
            let empty = answer_card("", state, "turn_1").to_string();
            assert!(!empty.contains("<at"), "{state:?}: {empty}");
        }
    }

    #[test]
    fn the_chat_list_shows_the_answers_first_line_or_the_cards_state() {
        let preview = |text: &str, state| {
            let card = answer_card(text, state, "turn_1");
            card["config"]["summary"]["content"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        };
        let answer = "## Plan\n\nFirst, store the event.";
        assert_eq!(preview(answer, CardState::Done), "Plan");
        assert_eq!(preview(answer, CardState::Continued), "Plan");
        assert_eq!(preview(answer, CardState::Running), "Plan");
        assert_eq!(preview("", CardState::Running), "Working…");
        assert_eq!(preview("", CardState::Done), "(no text)");
        assert_eq!(preview("", CardState::Stopped), "Stopped.");
        assert_eq!(preview("so far", CardState::Stopped), "so far");
        let failed = preview("so far", CardState::Failed("agent timed out <at id=all>"));
        assert_eq!(failed, "Failed: agent timed out ＜at id=all>");
        let long = preview(&"长".repeat(500), CardState::Done);
        assert_eq!(long.chars().count(), summary::MAX_CHARS);
    }

    #[test]
    fn a_long_answer_is_cut_to_what_fits_its_card() {
        let text = "长的回答，含有**标记**。\n".repeat(2000);
        let (first, more) = fitting(&text, CardState::Continued, "turn_1");
        assert!(more);
        let card = answer_card(&first, CardState::Continued, "turn_1");
        assert!(fit::card_request_bytes(&card) <= fit::CARD_REQUEST_MAX);
        assert!(text.starts_with(&first));
        let (all, more) = fitting("short", CardState::Done, "turn_1");
        assert_eq!((all.as_str(), more), ("short", false));
    }

    #[test]
    fn a_card_with_every_part_at_its_largest_stays_within_the_limit() {
        use crate::agent::{
            AskState, AskView,
            events::{AskStyle, ToolStatus, ToolSummary},
        };
        let big = "长\"<".repeat(3000);
        let p = Progress {
            text: big.repeat(4),
            thinking: big.clone(),
            tools: (0..2000)
                .map(|i| ToolSummary {
                    id: format!("t{i}"),
                    name: "n".repeat(128),
                    input_summary: big[..1024].to_string(),
                    status: ToolStatus::Running,
                    duration_ms: None,
                })
                .collect(),
            status: Some("s".repeat(512)),
            asks: (0..20)
                .map(|i| AskView {
                    id: format!("q{i}"),
                    prompt: "p".repeat(4096),
                    style: AskStyle::Select,
                    options: (0..20).map(|o| format!("{o}{}", "o".repeat(190))).collect(),
                    state: if i == 19 {
                        AskState::Open
                    } else {
                        AskState::Answered {
                            value: "v".into(),
                            by: None,
                        }
                    },
                })
                .collect(),
            errors: vec!["e".repeat(4096); 50],
        };
        for state in [CardState::Running, CardState::Continued, CardState::Stopped] {
            let (first, more) = fitting_beside(&p, state, "turn_1");
            assert!(more);
            let shown = Progress {
                text: first,
                ..p.clone()
            };
            let card = progress_card(&shown, state, "turn_1", Some(Duration::from_secs(9)));
            assert!(
                fit::card_request_bytes(&card) <= fit::CARD_REQUEST_MAX,
                "{state:?}: {}",
                fit::card_request_bytes(&card)
            );
            let room = room_beside(&p, state, "turn_1");
            assert!(room > 3 * 1024, "{state:?}: the answer keeps room: {room}");
            // A usual turn: a few tool calls and a yes/no question.
            let usual = Progress {
                tools: p.tools[..5].to_vec(),
                asks: vec![AskView {
                    id: "q".into(),
                    prompt: "Deploy to production?".into(),
                    style: AskStyle::Confirm,
                    options: vec!["yes".into(), "no".into()],
                    state: AskState::Open,
                }],
                ..Progress::default()
            };
            let room = room_beside(&usual, state, "turn_1");
            assert!(room > 14 * 1024, "{state:?}: {room}");
        }
    }
}
