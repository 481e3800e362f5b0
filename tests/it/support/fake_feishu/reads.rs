//! The reading endpoints: bot info, and one message.

use std::sync::{Arc, atomic::Ordering};

use axum::{
    Json,
    extract::{Path, State},
    http::{HeaderMap, StatusCode, Uri},
    response::{IntoResponse, Response},
};
use serde_json::json;

use super::{FakeState, gate::success};

const BOT_INFO: &str = "GET /open-apis/bot/v3/info";
const GET: &str = "GET /open-apis/im/v1/messages/{message_id}";

pub(super) async fn bot_info(
    State(s): State<Arc<FakeState>>,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    s.bot_info_requests.fetch_add(1, Ordering::SeqCst);
    if let Err(refused) = s.admit(BOT_INFO, uri.path(), &headers) {
        return refused.into_response();
    }
    Json(json!({"code": 0, "msg": "ok", "bot": {
        "activate_status": 2, "app_name": "Planner", "open_id": s.bot_open_id,
    }}))
    .into_response()
}

pub(super) async fn get_message(
    State(s): State<Arc<FakeState>>,
    Path(id): Path<String>,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    s.get_requests.fetch_add(1, Ordering::SeqCst);
    let recalled = s.targets_recalled(&id);
    if let Err(refused) = s.admit(GET, uri.path(), &headers) {
        return refused.into_response();
    }
    if recalled {
        return s
            .refuse(
                GET,
                StatusCode::BAD_REQUEST,
                230011,
                "message has been recalled",
            )
            .into_response();
    }
    if let Some(items) = s.media.bundle_items(&id) {
        return success(json!({ "items": items }));
    }
    let text = s.messages.lock().expect("lock").get(&id).cloned();
    match text {
        Some(text) => success(json!({"items": [{
            "message_id": id, "msg_type": "text", "deleted": false,
            "body": {"content": json!({"text": text}).to_string()},
            "sender": {"id": "ou_someone", "id_type": "open_id", "sender_type": "user"},
            "mentions": []
        }]})),
        // HTTP 200 for an unknown message, as this fake always answered it.
        None => s
            .refuse(GET, StatusCode::OK, 230011, "message recalled or not found")
            .into_response(),
    }
}
