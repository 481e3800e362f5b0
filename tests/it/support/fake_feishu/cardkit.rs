//! CardKit card entities (schema 2.0): create, stream an element's text, change the
//! settings, replace the card; with the per-card sequence rule, streaming mode and its
//! ten-minute window, presses in flight, the 30 KB size limit and the per-card
//! frequency limit. Codes are from
//! `cardkit-v1/card/create.md` and `cardkit-v1/card-element/content.md` unless a
//! comment says the docs are silent.

use std::sync::{Arc, atomic::Ordering};

use axum::{
    body::Bytes,
    extract::{Path, State},
    http::{HeaderMap, StatusCode, Uri},
    response::Response,
};
use serde_json::{Value, json};

use super::{
    FakeState,
    entities::{CardEntity, element_mut, parse_card},
    gate::{Refused, success},
    limits::CARD_MAX_BYTES,
    mentions,
};

const CREATE: &str = "POST /open-apis/cardkit/v1/cards";
const UPDATE: &str = "PUT /open-apis/cardkit/v1/cards/{card_id}";
const SETTINGS: &str = "PATCH /open-apis/cardkit/v1/cards/{card_id}/settings";
const CONTENT: &str = "PUT /open-apis/cardkit/v1/cards/{card_id}/elements/{element_id}/content";

/// The first card id it gives (the docs' example id); later ones count up from it.
const FIRST_CARD_ID: u64 = 7355439197428236291;

pub(super) async fn create(
    State(s): State<Arc<FakeState>>,
    uri: Uri,
    headers: HeaderMap,
    raw: Bytes,
) -> Response {
    let answer = create_card(&s, uri.path(), &headers, &raw);
    let card_id = match &answer {
        Ok((id, _)) => id.clone(),
        Err(_) => String::new(),
    };
    s.card_op("create", &card_id, None, answer.map(|(_, r)| r))
}

fn create_card(
    s: &FakeState,
    path: &str,
    headers: &HeaderMap,
    raw: &Bytes,
) -> Result<(String, Response), Refused> {
    s.cardkit_gate(CREATE, path, headers)?;
    if raw.len() > CARD_MAX_BYTES {
        return Err(s.refuse(
            CREATE,
            StatusCode::BAD_REQUEST,
            200860,
            "Card content exceeds limit.",
        ));
    }
    let body: Value = serde_json::from_slice(raw).unwrap_or(Value::Null);
    if body["type"] != "card_json" {
        // `template` cards exist in Feishu but are not modelled here.
        let msg = "Your request contains an invalid request parameter.";
        return Err(s.refuse(CREATE, StatusCode::BAD_REQUEST, 10002, msg));
    }
    let card = parse_card(s, CREATE, body["data"].as_str())?;
    s.notify(mentions::tags_in_json(&card));
    let card_id = (FIRST_CARD_ID + s.next_card.fetch_add(1, Ordering::SeqCst)).to_string();
    let mut entity = CardEntity {
        card,
        last_sequence: 0,
        message_id: None,
        streaming_since: None,
    };
    s.streaming_changed(&mut entity, false);
    s.cards
        .lock()
        .expect("lock")
        .insert(card_id.clone(), entity);
    Ok((card_id.clone(), success(json!({"card_id": card_id}))))
}

pub(super) async fn content(
    State(s): State<Arc<FakeState>>,
    Path((card_id, element_id)): Path<(String, String)>,
    uri: Uri,
    headers: HeaderMap,
    raw: Bytes,
) -> Response {
    let body: Value = serde_json::from_slice(&raw).unwrap_or(Value::Null);
    let sequence = body["sequence"].as_i64();
    let answer = s
        .cardkit_gate(CONTENT, uri.path(), &headers)
        .and_then(|()| {
            let text = body["content"].as_str().unwrap_or_default();
            s.on_card(CONTENT, &card_id, &raw, sequence, |entity| {
                // The docs require `content` of 1 to 100000 characters.
                if text.is_empty() {
                    let msg = "Your request contains an invalid request parameter.";
                    return Err(s.refuse(CONTENT, StatusCode::BAD_REQUEST, 10002, msg));
                }
                if entity.card["config"]["streaming_mode"] != true {
                    return Err(s.refuse(
                        CONTENT,
                        StatusCode::BAD_REQUEST,
                        300309,
                        "Card streaming closed",
                    ));
                }
                if s.streaming_timed_out(entity) {
                    return Err(s.refuse(
                        CONTENT,
                        StatusCode::BAD_REQUEST,
                        200850,
                        "Card streaming timeout",
                    ));
                }
                let mut next = entity.card.clone();
                let Some(element) = element_mut(&mut next["body"], &element_id) else {
                    // Not in the content docs' table; 300315 is this fake's choice.
                    return Err(s.refuse(
                        CONTENT,
                        StatusCode::BAD_REQUEST,
                        300315,
                        "element not found",
                    ));
                };
                element["content"] = json!(text);
                // The whole card must still fit after the change.
                if serde_json::to_vec(&next).map_or(0, |v| v.len()) > CARD_MAX_BYTES {
                    return Err(s.refuse(
                        CONTENT,
                        StatusCode::BAD_REQUEST,
                        200860,
                        "Card content exceeds limit.",
                    ));
                }
                s.notify(mentions::tags_in(text));
                entity.card = next;
                Ok(())
            })
        });
    s.card_op("content", &card_id, sequence, answer)
}

pub(super) async fn settings(
    State(s): State<Arc<FakeState>>,
    Path(card_id): Path<String>,
    uri: Uri,
    headers: HeaderMap,
    raw: Bytes,
) -> Response {
    let body: Value = serde_json::from_slice(&raw).unwrap_or(Value::Null);
    let sequence = body["sequence"].as_i64();
    let answer = s
        .cardkit_gate(SETTINGS, uri.path(), &headers)
        .and_then(|()| {
            s.on_card(SETTINGS, &card_id, &raw, sequence, |entity| {
                // `settings` is a JSON string with an optional `config` (and `card_link`,
                // not modelled); `config` merges key by key into the card's.
                let settings = body["settings"]
                    .as_str()
                    .and_then(|t| serde_json::from_str::<Value>(t).ok())
                    .filter(Value::is_object);
                let config = match settings.map(|mut v| v["config"].take()) {
                    Some(Value::Object(config)) => config,
                    Some(Value::Null) => Default::default(),
                    _ => {
                        let msg = "Your request contains an invalid request parameter.";
                        return Err(s.refuse(SETTINGS, StatusCode::BAD_REQUEST, 10002, msg));
                    }
                };
                if !entity.card["config"].is_object() {
                    entity.card["config"] = json!({});
                }
                let was_on = entity.card["config"]["streaming_mode"] == true;
                // Turning streaming on again starts a new window, even when it was on.
                let restarts = config.get("streaming_mode") == Some(&json!(true));
                for (key, value) in config {
                    entity.card["config"][key] = value;
                }
                s.streaming_changed(entity, was_on && !restarts);
                Ok(())
            })
        });
    s.card_op("settings", &card_id, sequence, answer)
}

pub(super) async fn update(
    State(s): State<Arc<FakeState>>,
    Path(card_id): Path<String>,
    uri: Uri,
    headers: HeaderMap,
    raw: Bytes,
) -> Response {
    let body: Value = serde_json::from_slice(&raw).unwrap_or(Value::Null);
    let sequence = body["sequence"].as_i64();
    let answer = s.cardkit_gate(UPDATE, uri.path(), &headers).and_then(|()| {
        s.on_card(UPDATE, &card_id, &raw, sequence, |entity| {
            if body["card"]["type"] != "card_json" {
                let msg = "Your request contains an invalid request parameter.";
                return Err(s.refuse(UPDATE, StatusCode::BAD_REQUEST, 10002, msg));
            }
            let card = parse_card(&s, UPDATE, body["card"]["data"].as_str())?;
            s.notify(mentions::tags_in_json(&card));
            let was_on = entity.card["config"]["streaming_mode"] == true;
            entity.card = card;
            s.streaming_changed(entity, was_on);
            Ok(())
        })
    });
    s.card_op("update", &card_id, sequence, answer)
}
