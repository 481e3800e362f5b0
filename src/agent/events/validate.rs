//! Reading and checking one event: its JSON, its `seq`, its kind's fields and their
//! lengths.

use serde_json::{Map, Value};

use crate::redact::echo;

use super::{AskEvent, AskStyle, ToolEvent, ToolPhase, ToolStatus, TurnEvent};

/// The most bytes of an id (a tool call's, a question's).
const MAX_ID_BYTES: usize = 128;
/// The most bytes of a tool's name.
const MAX_NAME_BYTES: usize = 128;
/// The most bytes of a tool call's input summary.
const MAX_SUMMARY_BYTES: usize = 1024;
/// The most bytes of a status line.
const MAX_STATUS_BYTES: usize = 512;
/// The most bytes of a question, and of an error message.
const MAX_PROMPT_BYTES: usize = 4096;
/// The most bytes of one option of a question.
const MAX_OPTION_BYTES: usize = 200;
/// The most options of a question.
const MAX_OPTIONS: usize = 20;
/// The longest a question stays open.
const MAX_TIMEOUT_SECS: u64 = 24 * 3600;

/// An event refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EventError {
    /// Not a JSON object (400).
    #[error("{0}")]
    Malformed(String),
    /// A JSON object that is not a valid event (422).
    #[error("{0}")]
    Invalid(String),
}

/// A valid event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedEvent {
    pub seq: i64,
    pub event: TurnEvent,
    /// The event as stored: its JSON without `seq`, fields in a fixed order.
    pub body: String,
}

/// Reads one event's request body.
pub fn parse(body: &[u8]) -> Result<ParsedEvent, EventError> {
    let mut object: Map<String, Value> = serde_json::from_slice(body)
        .map_err(|_| EventError::Malformed("expected a JSON object: one event".into()))?;
    let seq = object
        .remove("seq")
        .ok_or_else(|| invalid("seq is required"))?
        .as_u64()
        .and_then(|s| i64::try_from(s).ok())
        .filter(|s| *s >= 1)
        .ok_or_else(|| invalid("seq must be a whole number from 1"))?;
    let kind = match object.get("kind") {
        Some(Value::String(k)) => k.clone(),
        Some(_) => return Err(invalid("kind must be a string")),
        None => return Err(invalid("kind is required")),
    };
    if let Some(fields) = fields_of(&kind)
        && let Some(unknown) = object
            .keys()
            .find(|k| *k != "kind" && !fields.contains(&k.as_str()))
    {
        return Err(invalid(&format!(
            "unknown field {:?} for kind {kind}: it takes {}",
            echo(unknown),
            fields.join(", ")
        )));
    }
    let event: TurnEvent = serde_json::from_value(Value::Object(object))
        .map_err(|e| invalid(&format!("not a valid event: {e}")))?;
    check(&event).map_err(|m| invalid(&m))?;
    let body = serde_json::to_string(&event).map_err(|_| invalid("the event cannot be stored"))?;
    Ok(ParsedEvent { seq, event, body })
}

/// The fields each kind takes besides `seq` and `kind` (the schema's, which states no
/// `additionalProperties`, since the kinds are its `oneOf` with `kind` beside them); an
/// unknown kind is left to serde, which names the known ones.
fn fields_of(kind: &str) -> Option<&'static [&'static str]> {
    Some(match kind {
        "text" => &["text", "mode"],
        "tool" => &[
            "id",
            "phase",
            "name",
            "input_summary",
            "status",
            "duration_ms",
        ],
        "status" => &["text"],
        "ask" => &[
            "id",
            "prompt",
            "style",
            "options",
            "timeout_secs",
            "default",
        ],
        "error" => &["message"],
        _ => return None,
    })
}

fn invalid(message: &str) -> EventError {
    EventError::Invalid(message.to_string())
}

/// The checks serde does not make: lengths, lines and the fields that go together.
fn check(event: &TurnEvent) -> Result<(), String> {
    match event {
        // A text is bounded by the event's body.
        TurnEvent::Text(_) => Ok(()),
        TurnEvent::Tool(t) => check_tool(t),
        TurnEvent::Status(s) => {
            text("status text", &s.text, MAX_STATUS_BYTES)?;
            if s.text.contains(['\n', '\r']) {
                return Err("status text must be one line".into());
            }
            Ok(())
        }
        TurnEvent::Ask(a) => check_ask(a),
        TurnEvent::Error(e) => text("error message", &e.message, MAX_PROMPT_BYTES),
    }
}

/// A string that must be there and not too long.
fn text(what: &str, value: &str, max_bytes: usize) -> Result<(), String> {
    if value.trim().is_empty() {
        return Err(format!("{what} must not be empty"));
    }
    if value.len() > max_bytes {
        return Err(format!("{what} is longer than {max_bytes} bytes"));
    }
    Ok(())
}

fn check_tool(t: &ToolEvent) -> Result<(), String> {
    text("tool id", &t.id, MAX_ID_BYTES)?;
    text("tool name", &t.name, MAX_NAME_BYTES)?;
    if t.input_summary.len() > MAX_SUMMARY_BYTES {
        return Err(format!(
            "tool input_summary is longer than {MAX_SUMMARY_BYTES} bytes"
        ));
    }
    match (t.phase, t.status) {
        (ToolPhase::Start, ToolStatus::Running) | (ToolPhase::Update, _) => Ok(()),
        (ToolPhase::End, ToolStatus::Ok | ToolStatus::Error) => Ok(()),
        (ToolPhase::Start, _) => Err("a tool's start has status running".into()),
        (ToolPhase::End, _) => Err("a tool's end has status ok or error".into()),
    }
}

fn check_ask(a: &AskEvent) -> Result<(), String> {
    text("ask id", &a.id, MAX_ID_BYTES)?;
    text("ask prompt", &a.prompt, MAX_PROMPT_BYTES)?;
    if !(1..=MAX_TIMEOUT_SECS).contains(&a.timeout_secs) {
        return Err(format!("ask timeout_secs must be 1 to {MAX_TIMEOUT_SECS}"));
    }
    for o in &a.options {
        text("an ask option", o, MAX_OPTION_BYTES)?;
    }
    let distinct: std::collections::HashSet<&String> = a.options.iter().collect();
    if distinct.len() != a.options.len() {
        return Err("ask options must differ".into());
    }
    let n = a.options.len();
    match a.style {
        AskStyle::Select if !(2..=MAX_OPTIONS).contains(&n) => {
            return Err(format!("a select ask has 2 to {MAX_OPTIONS} options"));
        }
        AskStyle::Confirm if n != 0 && n != 2 => {
            return Err("a confirm ask has no options (yes/no) or two".into());
        }
        _ => {}
    }
    let Some(default) = &a.default else {
        return Ok(());
    };
    let plain_confirm = a.style == AskStyle::Confirm && n == 0;
    let known = if plain_confirm {
        default == "yes" || default == "no"
    } else {
        a.options.contains(default)
    };
    if known {
        Ok(())
    } else {
        Err("ask default must be one of its options (yes or no for a plain confirm)".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_each_kind_and_refuses_what_does_not_fit() {
        let ok = parse(br#"{"seq":1,"kind":"text","text":"hi","mode":"delta"}"#).expect("valid");
        assert_eq!(ok.seq, 1);
        assert_eq!(ok.body, r#"{"kind":"text","text":"hi","mode":"delta"}"#);
        let tool = br#"{"seq":2,"kind":"tool","id":"t1","phase":"end","name":"grep","status":"ok","duration_ms":12}"#;
        assert!(parse(tool).is_ok());
        for bad in [
            &br#"[1]"#[..],
            br#"{"seq":0,"kind":"status","text":"x"}"#,
            br#"{"seq":1,"kind":"nope"}"#,
            br#"{"seq":1,"kind":"status","text":"x","extra":1}"#,
            br#"{"seq":1,"kind":"status","text":"two\nlines"}"#,
            br#"{"seq":1,"kind":"tool","id":"t","phase":"end","name":"n","status":"running"}"#,
            br#"{"seq":1,"kind":"ask","id":"a","prompt":"p","style":"select","options":["x"],"timeout_secs":5}"#,
            br#"{"seq":1,"kind":"ask","id":"a","prompt":"p","style":"confirm","timeout_secs":5,"default":"maybe"}"#,
            br#"{"seq":1,"kind":"error"}"#,
        ] {
            assert!(parse(bad).is_err(), "{}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn every_field_a_kind_has_is_one_it_takes() {
        for full in [
            r#"{"seq":1,"kind":"text","text":"t","mode":"full"}"#,
            r#"{"seq":1,"kind":"tool","id":"i","phase":"end","name":"n","input_summary":"s","status":"ok","duration_ms":1}"#,
            r#"{"seq":1,"kind":"status","text":"s"}"#,
            r#"{"seq":1,"kind":"ask","id":"i","prompt":"p","style":"select","options":["a","b"],"timeout_secs":5,"default":"a"}"#,
            r#"{"seq":1,"kind":"error","message":"m"}"#,
        ] {
            let event = parse(full.as_bytes()).expect("valid").event;
            let written = serde_json::to_value(&event).expect("json");
            let fields = fields_of(event.kind()).expect("a kind");
            for key in written.as_object().expect("object").keys() {
                assert!(key == "kind" || fields.contains(&key.as_str()), "{key}");
            }
            assert_eq!(written.as_object().map(|o| o.len()), Some(fields.len() + 1));
        }
    }
}
