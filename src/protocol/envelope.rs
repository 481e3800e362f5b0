//! The callback envelope: telling `url_verification`, schema 2.0 and schema 1.0 apart,
//! and pulling out what the inbox keys on (event id, type, message id, chat, create time).
//!
//! Only the fields needed for routing are parsed here; the payload is kept as the exact
//! decrypted JSON text.

use serde::Deserialize;

/// The fields of a plaintext callback that decide what it is.
#[derive(Debug, Deserialize, Default)]
#[serde(default)]
pub(crate) struct Probe {
    pub schema: Option<String>,
    pub header: Option<HeaderV2>,
    pub uuid: Option<String>,
    pub token: Option<String>,
    #[serde(rename = "type")]
    pub kind: Option<String>,
    pub challenge: Option<String>,
    pub ts: Option<String>,
    pub event: Option<EventProbe>,
}

/// Schema 2.0 `header`.
#[derive(Debug, Deserialize, Default)]
#[serde(default)]
pub(crate) struct HeaderV2 {
    pub event_id: Option<String>,
    pub token: Option<String>,
    pub create_time: Option<String>,
    pub event_type: Option<String>,
}

/// The part of `event` the inbox needs.
#[derive(Debug, Deserialize, Default)]
#[serde(default)]
pub(crate) struct EventProbe {
    #[serde(rename = "type")]
    pub kind: Option<String>,
    pub message: Option<MessageProbe>,
    /// A recall's chat.
    #[serde(deserialize_with = "text_or_none")]
    pub chat_id: Option<String>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(default)]
pub(crate) struct MessageProbe {
    pub message_id: Option<String>,
    #[serde(deserialize_with = "text_or_none")]
    pub chat_id: Option<String>,
}

/// A chat id if it is text; anything else is left for the worker to refuse (the event
/// is stored either way: it is authentic).
fn text_or_none<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    Ok(match serde_json::Value::deserialize(d)? {
        serde_json::Value::String(s) => Some(s),
        _ => None,
    })
}

/// Which envelope schema an event used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Schema {
    /// `{"schema":"2.0","header":{…},"event":{…}}`
    V2,
    /// `{"uuid":…,"token":…,"type":"event_callback","event":{…}}`
    V1,
}

/// A recognised callback, before authentication of its token.
#[derive(Debug)]
pub(crate) enum Classified {
    /// `url_verification`.
    Challenge { challenge: String, token: String },
    /// An event (schema 2.0 or 1.0).
    Event {
        schema: Schema,
        event_id: String,
        event_type: String,
        token: String,
        message_id: Option<String>,
        /// The chat whose order the event takes part in ('' for none).
        chat_key: String,
        create_time_secs: Option<i64>,
    },
}

/// Why an envelope is not a usable callback.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum EnvelopeError {
    /// A required field is missing.
    Missing(&'static str),
}

/// Decides what a parsed plaintext callback is. The SDKs' rule: a non-empty `schema`
/// means 2.0; else a non-empty `uuid` means 1.0; else the top-level `type`.
pub(crate) fn classify(p: Probe) -> Result<Classified, EnvelopeError> {
    if p.schema.as_deref().is_some_and(|s| !s.is_empty()) {
        let h = p.header.ok_or(EnvelopeError::Missing("header"))?;
        let event_id = non_empty(h.event_id).ok_or(EnvelopeError::Missing("header.event_id"))?;
        let event_type =
            non_empty(h.event_type).ok_or(EnvelopeError::Missing("header.event_type"))?;
        let message_id = message_id_of(&event_type, p.event.as_ref());
        return Ok(Classified::Event {
            schema: Schema::V2,
            chat_key: chat_key_of(&event_type, p.event.as_ref()),
            event_id,
            event_type,
            token: h.token.unwrap_or_default(),
            message_id,
            create_time_secs: h.create_time.as_deref().and_then(parse_create_time),
        });
    }
    if let Some(uuid) = non_empty(p.uuid) {
        let event_type = p
            .event
            .as_ref()
            .and_then(|e| e.kind.clone())
            .filter(|t| !t.is_empty())
            .ok_or(EnvelopeError::Missing("event.type"))?;
        return Ok(Classified::Event {
            schema: Schema::V1,
            event_id: uuid,
            message_id: message_id_of(&event_type, p.event.as_ref()),
            chat_key: chat_key_of(&event_type, p.event.as_ref()),
            event_type,
            token: p.token.unwrap_or_default(),
            create_time_secs: p.ts.as_deref().and_then(parse_fractional_secs),
        });
    }
    match p.kind.as_deref() {
        Some("url_verification") => Ok(Classified::Challenge {
            challenge: p.challenge.ok_or(EnvelopeError::Missing("challenge"))?,
            token: p.token.unwrap_or_default(),
        }),
        _ => Err(EnvelopeError::Missing("schema, uuid or type")),
    }
}

/// Feishu's own dedup advice: message events are deduplicated on `message_id`.
fn message_id_of(event_type: &str, event: Option<&EventProbe>) -> Option<String> {
    if event_type != crate::protocol::events::MESSAGE_RECEIVE {
        return None;
    }
    event
        .and_then(|e| e.message.as_ref())
        .and_then(|m| m.message_id.clone())
        .filter(|m| !m.is_empty())
}

/// The chat a message or a recall belongs to: the worker keeps each chat's events in
/// arrival order (a recall after the message it recalls) and runs chats side by side.
/// Other events belong to no chat ('').
fn chat_key_of(event_type: &str, event: Option<&EventProbe>) -> String {
    let chat = match event_type {
        crate::protocol::events::MESSAGE_RECEIVE => {
            event.and_then(|e| e.message.as_ref()?.chat_id.as_ref())
        }
        crate::protocol::events::MESSAGE_RECALLED => event.and_then(|e| e.chat_id.as_ref()),
        _ => None,
    };
    chat.cloned().unwrap_or_default()
}

fn non_empty(s: Option<String>) -> Option<String> {
    s.filter(|s| !s.is_empty())
}

/// `header.create_time` comes in ms (message events) or µs (overview, card callbacks):
/// decide by the number of digits.
pub fn parse_create_time(raw: &str) -> Option<i64> {
    let n: i64 = raw.trim().parse().ok()?;
    Some(match raw.trim().len() {
        0..=11 => n,
        12..=14 => n / 1_000,
        15..=17 => n / 1_000_000,
        _ => n / 1_000_000_000,
    })
}

/// A Unix timestamp in seconds, possibly fractional (`"1502199207.7171419"`).
pub fn parse_fractional_secs(raw: &str) -> Option<i64> {
    let whole = raw.trim().split('.').next()?;
    whole.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn create_time_is_parsed_by_length() {
        assert_eq!(parse_create_time("1735689600123"), Some(1_735_689_600));
        assert_eq!(parse_create_time("1603977298000000"), Some(1_603_977_298));
        assert_eq!(parse_create_time("1735689600"), Some(1_735_689_600));
        assert_eq!(parse_create_time("soon"), None);
        assert_eq!(
            parse_fractional_secs("1502199207.7171419"),
            Some(1_502_199_207)
        );
    }

    #[test]
    fn v1_events_take_type_from_the_event_and_id_from_uuid() {
        let p: Probe = serde_json::from_str(
            r#"{"ts":"1502199207.7","uuid":"u-1","token":"t","type":"event_callback","event":{"type":"p2p_chat_create"}}"#,
        )
        .expect("json");
        match classify(p) {
            Ok(Classified::Event {
                schema,
                event_id,
                event_type,
                token,
                ..
            }) => {
                assert_eq!(
                    (
                        schema,
                        event_id.as_str(),
                        event_type.as_str(),
                        token.as_str()
                    ),
                    (Schema::V1, "u-1", "p2p_chat_create", "t")
                );
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn a_body_of_nothing_known_is_an_error() {
        let p: Probe = serde_json::from_str(r#"{"hello":"world"}"#).expect("json");
        assert!(classify(p).is_err());
    }

    #[test]
    fn messages_and_recalls_take_their_chat_and_nothing_else_has_one() {
        let chat = |event_type: &str, event: &str| {
            let body = format!(
                r#"{{"schema":"2.0","header":{{"event_id":"e","event_type":"{event_type}"}},"event":{event}}}"#
            );
            let p: Probe = serde_json::from_str(&body).expect("json");
            match classify(p) {
                Ok(Classified::Event { chat_key, .. }) => chat_key,
                other => panic!("{other:?}"),
            }
        };
        let message = r#"{"message":{"message_id":"om_1","chat_id":"oc_1"}}"#;
        assert_eq!(chat("im.message.receive_v1", message), "oc_1");
        let recall = r#"{"message_id":"om_1","chat_id":"oc_2"}"#;
        assert_eq!(chat("im.message.recalled_v1", recall), "oc_2");
        assert_eq!(chat("card.action.trigger", r#"{"chat_id":"oc_3"}"#), "");
        // A chat id that is not text leaves the event without a chat, still stored.
        let odd = r#"{"message":{"message_id":"om_1","chat_id":7}}"#;
        assert_eq!(chat("im.message.receive_v1", odd), "");
    }
}
