//! Updating a message card in place (`PATCH /open-apis/im/v1/messages/{message_id}`):
//! 5 updates per second per message, 30 KB at most ([DOC] `im-v1/message-card/patch.md`),
//! none while a press on the card is in flight (`interactions`).

use std::{sync::Arc, time::Instant};

use axum::{
    body::Bytes,
    extract::{Path, State},
    http::{HeaderMap, StatusCode, Uri},
    response::Response,
};
use serde_json::{Value, json};

use super::{
    FakeState,
    gate::{Answer, either, success},
    limits::{CARD_MAX_BYTES, PATCH_PER_SEC_PER_MESSAGE},
    mentions,
};

const PATCH: &str = "PATCH /open-apis/im/v1/messages/{message_id}";

pub(super) async fn patch_card(
    State(s): State<Arc<FakeState>>,
    Path(id): Path<String>,
    uri: Uri,
    headers: HeaderMap,
    raw: Bytes,
) -> Response {
    either(patch(&s, &id, uri.path(), &headers, &raw))
}

fn patch(s: &FakeState, id: &str, path: &str, headers: &HeaderMap, raw: &Bytes) -> Answer {
    let recalled = s.targets_recalled(id);
    s.admit(PATCH, path, headers)?;
    if recalled {
        return Err(s.refuse(
            PATCH,
            StatusCode::BAD_REQUEST,
            230011,
            "message has been recalled",
        ));
    }
    s.check_interaction(PATCH, Some(id))?;
    let verdict = s.limits.lock().expect("lock").patch(id, Instant::now());
    if let Err(reset) = verdict {
        // Feishu answers a message's rate limit with HTTP 400 and its message code
        // 230020 ([DOC] `im-v1/message/reply.md`), not with 429 / 99991400.
        s.violation(format!("patch:{id}"));
        let limit = PATCH_PER_SEC_PER_MESSAGE;
        return Err(s.limited(PATCH, StatusCode::BAD_REQUEST, 230020, limit, reset));
    }
    if raw.len() > CARD_MAX_BYTES {
        let msg = "message content is too long";
        return Err(s.refuse(PATCH, StatusCode::BAD_REQUEST, 230025, msg));
    }
    let body: Value = serde_json::from_slice(raw).unwrap_or(Value::Null);
    let content = body["content"].as_str().unwrap_or_default();
    let card: Value = serde_json::from_str(content).unwrap_or(Value::Null);
    s.notify(mentions::tags_in_json(&card));
    s.patches.lock().expect("lock").push((id.to_string(), card));
    s.activity.send(format!("patch:{id}")).ok();
    Ok(success(json!({})))
}
