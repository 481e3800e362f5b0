//! Sending and replying: Feishu's uuid idempotency, its size limits, the errors of the
//! target (recalled, a chat without threads, an aggregated message), sending a card
//! entity, and the injected transport faults.

use std::sync::{Arc, atomic::Ordering};

use axum::{
    Json,
    body::Bytes,
    extract::{Path, State},
    http::{HeaderMap, StatusCode, Uri},
    response::{IntoResponse, Response},
};
use serde_json::{Value, json};

use super::{
    FakeState,
    gate::{Answer, bad_gateway, cut, either, take_one},
    limits::{CARD_MAX_BYTES, TEXT_MAX_BYTES},
    mentions,
};

const REPLY: &str = "POST /open-apis/im/v1/messages/{message_id}/reply";
const SEND: &str = "POST /open-apis/im/v1/messages";

/// A message the fake created: when, of which type, and its decoded `content`.
#[derive(Debug, Clone)]
pub(super) struct Posted {
    pub at: i64,
    pub msg_type: String,
    pub content: Value,
}

pub(super) async fn reply(
    State(s): State<Arc<FakeState>>,
    Path(id): Path<String>,
    uri: Uri,
    headers: HeaderMap,
    raw: Bytes,
) -> Response {
    either(deliver(&s, REPLY, uri.path(), Some(&id), &headers, &raw).await)
}

pub(super) async fn send(
    State(s): State<Arc<FakeState>>,
    uri: Uri,
    headers: HeaderMap,
    raw: Bytes,
) -> Response {
    // `receive_id_type` is a required query parameter naming what `receive_id` is.
    let kind = uri
        .query()
        .unwrap_or_default()
        .split('&')
        .find_map(|p| p.strip_prefix("receive_id_type="))
        .unwrap_or_default()
        .to_string();
    if !RECEIVE_ID_TYPES.contains(&kind.as_str()) {
        let refused = s.refuse(
            SEND,
            StatusCode::BAD_REQUEST,
            99992402,
            "field validation failed",
        );
        return refused.into_response();
    }
    let body: Value = serde_json::from_slice(&raw).unwrap_or(Value::Null);
    let to = body["receive_id"].as_str().unwrap_or_default().to_string();
    s.receive_id_types.lock().expect("lock").push((to, kind));
    either(deliver(&s, SEND, uri.path(), None, &headers, &raw).await)
}

/// The documented values of `receive_id_type`.
const RECEIVE_ID_TYPES: [&str; 5] = ["open_id", "union_id", "user_id", "email", "chat_id"];

/// A send (`reply_to` is `None`) or reply (`reply_to` is its target).
async fn deliver(
    s: &FakeState,
    ep: &'static str,
    path: &str,
    reply_to: Option<&str>,
    headers: &HeaderMap,
    raw: &Bytes,
) -> Answer {
    s.send_attempts.fetch_add(1, Ordering::SeqCst);
    let body: Value = serde_json::from_slice(raw).unwrap_or(Value::Null);
    let uuid = body["uuid"].as_str().unwrap_or_default().to_string();
    s.attempt_uuids.lock().expect("lock").push(uuid.clone());
    s.activity.send(format!("attempt:{uuid}")).ok();
    let recalled = reply_to.is_some_and(|id| s.targets_recalled(id));
    if s.hang.load(Ordering::SeqCst) {
        std::future::pending::<()>().await;
    }
    s.check_storm(ep, path)?;
    // A 502 comes from a proxy in front of Feishu's gateway: before the token check and
    // the app's windows.
    if take_one(&s.server_errors) {
        return Err(bad_gateway().into());
    }
    s.check_token(ep, headers)?;
    s.check_app_rate(ep)?;
    let failure = {
        let mut f = s.failures.lock().expect("lock");
        (!f.is_empty()).then(|| f.remove(0))
    };
    if let Some((status, code)) = failure {
        let status = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_REQUEST);
        let mut refused = s.refuse(ep, status, code, "fake failure");
        refused
            .headers_mut()
            .insert("x-ogw-ratelimit-reset", 0.into());
        return Err(refused);
    }
    if !body.is_object() {
        // Feishu's generic "field validation failed".
        return Err(s.refuse(
            ep,
            StatusCode::BAD_REQUEST,
            99992402,
            "invalid request body",
        ));
    }
    // Feishu's idempotency: a repeated uuid answers the message created first, even when
    // the content differs, and creates nothing. It comes before the content checks, so
    // the retry of a lost answer for a card entity is not refused as "sent already".
    let mut uuids = s.uuids.lock().expect("lock");
    if let Some((id, at)) = uuids.get(&uuid).filter(|_| !uuid.is_empty()).cloned() {
        drop(uuids);
        let msg_type = s
            .posted
            .lock()
            .expect("lock")
            .get(&id)
            .map(|p| p.msg_type.clone());
        return Ok(answer(s, &id, at, msg_type.as_deref().unwrap_or("text")));
    }
    let msg_type = body["msg_type"].as_str().unwrap_or_default().to_string();
    let max = match msg_type.as_str() {
        "interactive" | "post" => Some(CARD_MAX_BYTES),
        "text" => Some(TEXT_MAX_BYTES),
        _ => None,
    };
    // The documented limits are on the request body as sent, not on the decoded text.
    if max.is_some_and(|max| raw.len() > max) {
        return Err(s.refuse(
            ep,
            StatusCode::BAD_REQUEST,
            230025,
            "message content is too long",
        ));
    }
    if recalled {
        return Err(s.refuse(
            ep,
            StatusCode::BAD_REQUEST,
            230011,
            "message has been recalled",
        ));
    }
    let in_thread = body["reply_in_thread"] == true;
    if in_thread && reply_to.is_some_and(|id| s.no_thread.lock().expect("lock").contains(id)) {
        let msg = "The group to which the message belongs does not support reply in thread.";
        return Err(s.refuse(ep, StatusCode::BAD_REQUEST, 230071, msg));
    }
    if in_thread && reply_to.is_some_and(|id| s.aggregated.lock().expect("lock").contains(id)) {
        let msg = "Aggregated messages do not support reply in thread.";
        return Err(s.refuse(ep, StatusCode::BAD_REQUEST, 230072, msg));
    }
    let content_text = body["content"].as_str().unwrap_or_default();
    let content: Value = serde_json::from_str(content_text).unwrap_or(Value::Null);
    // An image or file message carries a key an upload gave.
    let media_key = match msg_type.as_str() {
        "image" => Some(&content["image_key"]),
        "file" => Some(&content["file_key"]),
        _ => None,
    };
    if media_key.is_some_and(|k| !s.media.issued(k.as_str().unwrap_or_default())) {
        let msg = "invalid image_key or file_key";
        return Err(s.refuse(ep, StatusCode::BAD_REQUEST, 230001, msg));
    }
    let entity = (msg_type == "interactive" && content["type"] == "card").then(|| {
        content["data"]["card_id"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    });
    let mut cards = s.cards.lock().expect("lock");
    if let Some(card_id) = &entity {
        // Each entity can be sent once ([DOC] `cardkit-v1/card/create.md`); the code for
        // an unknown or already sent entity is undocumented: 230001 ("invalid parameter"
        // family of the message API) is this fake's choice.
        if cards.get(card_id).is_none_or(|e| e.message_id.is_some()) {
            let msg = "card entity not found or already sent";
            return Err(s.refuse(ep, StatusCode::BAD_REQUEST, 230001, msg));
        }
    }
    let mut sent = s.sent.lock().expect("lock");
    let id = format!("om_bot_reply_{}", sent.len() + 1);
    let at = s
        .create_time
        .lock()
        .expect("lock")
        .unwrap_or_else(feishu_bridge::util::now_ms);
    if !uuid.is_empty() {
        uuids.insert(uuid.clone(), (id.clone(), at));
    }
    let target = match reply_to {
        Some(target) => target.to_string(),
        None => body["receive_id"].as_str().unwrap_or_default().to_string(),
    };
    sent.push((target, body.clone()));
    drop(sent);
    if let Some(entity) = entity.as_ref().and_then(|card_id| cards.get_mut(card_id)) {
        entity.message_id = Some(id.clone());
    } else {
        s.notify(mentions::tags_in_content(content_text));
    }
    drop(cards);
    drop(uuids);
    let posted = Posted {
        at,
        msg_type: msg_type.clone(),
        content,
    };
    s.posted.lock().expect("lock").insert(id.clone(), posted);
    s.activity.send(format!("sent:{uuid}")).ok();
    Ok(answer(s, &id, at, &msg_type))
}

/// The answer to a send or reply that created (or had created) message `id` at `at`,
/// or that answer cut in transit while `lose_answers` lasts.
fn answer(s: &FakeState, id: &str, at: i64, msg_type: &str) -> Response {
    let created = created(id, at, msg_type);
    if take_one(&s.lose_answers) {
        s.activity.send(format!("lost:{id}")).ok();
        return cut(&created);
    }
    Json(created).into_response()
}

/// Like Feishu's, its times are strings of milliseconds.
fn created(id: &str, at: i64, msg_type: &str) -> Value {
    json!({"code": 0, "msg": "success", "data": {
        "message_id": id,
        "msg_type": msg_type,
        "create_time": at.to_string(),
        "update_time": at.to_string(),
        "deleted": false,
        "updated": false,
        "sender": {"id": "cli_fake", "id_type": "app_id", "sender_type": "app"},
    }})
}
