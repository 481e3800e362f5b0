//! What the envelope parser must make of a JSON document, written out from the rules in
//! `protocol::envelope` and `protocol::verify` (the SDKs' classification, the
//! Verification Token check, the token cut out of the stored payload), and a generator
//! of documents that are almost callbacks.

use feishu_bridge::protocol::{
    Rejection, Schema, Verified,
    events::{MESSAGE_RECALLED, MESSAGE_RECEIVE},
};
use proptest::{collection::vec, option, prelude::*, sample::select};
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value, json};

use crate::json::{self, stringish};

/// What a callback came to: the challenge, the event's keys, or the refusal's code.
#[derive(Debug, Clone, PartialEq)]
pub enum Seen {
    Challenge(String),
    Event {
        schema: Schema,
        event_id: String,
        event_type: String,
        message_id: Option<String>,
        chat_key: String,
        /// The stored payload, parsed.
        payload: Value,
    },
}

pub type Outcome = Result<Seen, &'static str>;

/// The outcome of a real verification, comparable with [`expected`].
pub fn seen(got: Result<Verified, Rejection>) -> Outcome {
    match got.map_err(|e| e.code())? {
        Verified::Challenge(c) => Ok(Seen::Challenge(c)),
        Verified::Event(e) => Ok(Seen::Event {
            schema: e.schema.expect("a callback event has a schema"),
            event_id: e.event_id,
            event_type: e.event_type,
            message_id: e.message_id,
            chat_key: e.chat_key,
            payload: serde_json::from_str(&e.payload).unwrap_or(json!("<not JSON>")),
        }),
    }
}

/// Where the document arrives: a callback to a profile without an Encrypt Key (its
/// token is checked), or a push over the long connection (no token, no challenge).
#[derive(Debug, Clone, Copy)]
pub enum Route<'a> {
    Callback { token: &'a str },
    Pushed,
}

const MALFORMED: &str = "malformed_json";

/// A member that must be a string when present; `Err` when it is not.
fn text(o: &Map<String, Value>, key: &str) -> Result<Option<String>, &'static str> {
    match o.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(MALFORMED),
    }
}

/// The "code" of a document the model does not judge: one with a non-empty array where
/// the envelope types expect an object (serde's derived types read an array
/// positionally, which this model does not follow).
pub const POSITIONAL: &str = "positional";

/// A member that must be an object when present (an empty array reads as an empty
/// object, its fields all absent).
fn nested(o: &Map<String, Value>, key: &str) -> Result<Option<Map<String, Value>>, &'static str> {
    match o.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Object(m)) => Ok(Some(m.clone())),
        Some(Value::Array(a)) if a.is_empty() => Ok(Some(Map::new())),
        Some(Value::Array(_)) => Err(POSITIONAL),
        Some(_) => Err(MALFORMED),
    }
}

/// A chat id: any text, anything else none (and never an error).
fn chat(o: Option<&Map<String, Value>>) -> Option<String> {
    o?.get("chat_id")?.as_str().map(str::to_string)
}

fn non_empty(s: Option<String>) -> Option<String> {
    s.filter(|s| !s.is_empty())
}

/// The outcome for a JSON object arriving by `route`.
pub fn expected(doc: &Map<String, Value>, route: Route<'_>) -> Outcome {
    match doc.get("encrypt") {
        None | Some(Value::Null) => {}
        Some(Value::String(_)) => return Err("undecryptable"),
        Some(_) => return Err(MALFORMED),
    }
    let header = nested(doc, "header")?;
    let header_field = |k| header.as_ref().map(|h| text(h, k)).transpose();
    let (event_id, header_token, event_type_v2) = (
        header_field("event_id")?.flatten(),
        header_field("token")?.flatten(),
        header_field("event_type")?.flatten(),
    );
    header_field("create_time")?;
    let (schema, uuid, token, kind, challenge) = (
        text(doc, "schema")?,
        text(doc, "uuid")?,
        text(doc, "token")?,
        text(doc, "type")?,
        text(doc, "challenge")?,
    );
    text(doc, "ts")?;
    let event = nested(doc, "event")?;
    let event_kind = event
        .as_ref()
        .map(|e| text(e, "type"))
        .transpose()?
        .flatten();
    let message = event
        .as_ref()
        .map(|e| nested(e, "message"))
        .transpose()?
        .flatten();
    let message_id = message
        .as_ref()
        .map(|m| text(m, "message_id"))
        .transpose()?
        .flatten();

    let (schema, event_id, event_type, token) = if non_empty(schema).is_some() {
        let _ = header.as_ref().ok_or(MALFORMED)?;
        let event_id = non_empty(event_id).ok_or(MALFORMED)?;
        let event_type = non_empty(event_type_v2).ok_or(MALFORMED)?;
        (Schema::V2, event_id, event_type, header_token)
    } else if let Some(uuid) = non_empty(uuid) {
        let event_type = non_empty(event_kind).ok_or(MALFORMED)?;
        (Schema::V1, uuid, event_type, token)
    } else if kind.as_deref() == Some("url_verification") {
        let challenge = challenge.ok_or(MALFORMED)?;
        return match route {
            Route::Pushed => Err(MALFORMED),
            Route::Callback { token: t } if token.as_deref() == Some(t) => {
                Ok(Seen::Challenge(challenge))
            }
            Route::Callback { .. } => Err("bad_token"),
        };
    } else {
        return Err(MALFORMED);
    };
    if let Route::Callback { token: t } = route
        && token.as_deref() != Some(t)
    {
        return Err("bad_token");
    }
    let receive = event_type == MESSAGE_RECEIVE;
    let chat_key = match event_type.as_str() {
        MESSAGE_RECEIVE => chat(message.as_ref()),
        MESSAGE_RECALLED => chat(event.as_ref()),
        _ => None,
    };
    let mut payload = doc.clone();
    payload.remove("token");
    if let Some(Value::Object(h)) = payload.get_mut("header") {
        h.remove("token");
    }
    Ok(Seen::Event {
        schema,
        event_id,
        message_id: non_empty(message_id).filter(|_| receive),
        chat_key: chat_key.unwrap_or_default(),
        event_type,
        payload: Value::Object(payload),
    })
}

/// Whether any object in the JSON text repeats a member name (the derived types refuse
/// a repeated field where a `Value` keeps the last one, so the model does not apply).
pub fn repeats_a_name(bytes: &[u8]) -> bool {
    let mut d = serde_json::Deserializer::from_slice(bytes);
    Walk.deserialize(&mut d).unwrap_or(true)
}

struct Walk;

impl<'de> DeserializeSeed<'de> for Walk {
    type Value = bool;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Walk {
    type Value = bool;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("JSON")
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_unit<E: de::Error>(self) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<bool, A::Error> {
        let mut repeated = false;
        while let Some(r) = seq.next_element_seed(Walk)? {
            repeated |= r;
        }
        Ok(repeated)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<bool, A::Error> {
        let (mut names, mut repeated) = (std::collections::HashSet::new(), false);
        while let Some(name) = map.next_key::<String>()? {
            repeated |= !names.insert(name);
            repeated |= map.next_value_seed(Walk)?;
        }
        Ok(repeated)
    }
}

/// An object of the members `members` may give, each present or not.
fn members(
    members: Vec<(&'static str, BoxedStrategy<Value>)>,
) -> impl Strategy<Value = Map<String, Value>> {
    let each: Vec<_> = members
        .into_iter()
        .map(|(name, v)| option::weighted(0.75, v).prop_map(move |v| v.map(|v| (name, v))))
        .collect();
    (each, vec((json::word(), json::value()), 0..2)).prop_map(|(known, extra)| {
        let mut o: Map<String, Value> = extra.into_iter().collect();
        o.extend(known.into_iter().flatten().map(|(k, v)| (k.to_string(), v)));
        o
    })
}

fn one_of(values: &[Value]) -> BoxedStrategy<Value> {
    prop_oneof![2 => select(values.to_vec()), 1 => stringish()].boxed()
}

fn or_odd(object: impl Strategy<Value = Map<String, Value>> + 'static) -> BoxedStrategy<Value> {
    prop_oneof![4 => object.prop_map(Value::Object), 1 => stringish()].boxed()
}

const TYPES: [&str; 4] = [
    MESSAGE_RECEIVE,
    MESSAGE_RECALLED,
    "card.action.trigger",
    "x",
];

/// Documents that are nearly callbacks of every kind, with `token` as the usual token.
pub fn envelope(token: &'static str) -> impl Strategy<Value = Map<String, Value>> {
    let types: Vec<Value> = TYPES.iter().map(|t| json!(t)).collect();
    let ids = || one_of(&[json!("ev-1"), json!("om_1"), json!("")]);
    let message = members(vec![("message_id", ids()), ("chat_id", ids())]);
    let event = members(vec![
        ("type", one_of(&types)),
        ("message", or_odd(message)),
        ("chat_id", ids()),
    ]);
    let header = members(vec![
        ("event_id", ids()),
        ("token", one_of(&[json!(token)])),
        ("create_time", one_of(&[json!("1735689600123")])),
        ("event_type", one_of(&types)),
    ]);
    members(vec![
        ("schema", one_of(&[json!("2.0"), json!("")])),
        ("header", or_odd(header)),
        ("uuid", ids()),
        ("token", one_of(&[json!(token)])),
        (
            "type",
            one_of(&[json!("url_verification"), json!("event_callback")]),
        ),
        ("challenge", one_of(&[json!("c-1")])),
        ("ts", one_of(&[json!("1502199207.7")])),
        ("event", or_odd(event)),
    ])
}
