//! The directory reads: users by open_id (`GET /open-apis/contact/v3/users/batch`, at
//! most 50 `user_ids` a call, more refused with 99992402 "field validation failed"; ids
//! the app cannot see are left out of `data.items`) and a chat by id
//! (`GET /open-apis/im/v1/chats/{chat_id}`, its `data.name`; a chat the bot is not in
//! is refused with 232011). A scope a test withholds is refused as Feishu does, with
//! 99991672 and the scope named in `msg`.

use std::{
    collections::{HashMap, HashSet},
    sync::{
        Arc, Mutex,
        atomic::{AtomicUsize, Ordering},
    },
};

use axum::{
    extract::{Path, State},
    http::{HeaderMap, StatusCode, Uri},
    response::{IntoResponse, Response},
};
use serde_json::json;

use super::{FakeState, gate::success};

const USERS: &str = "GET /open-apis/contact/v3/users/batch";
const CHAT: &str = "GET /open-apis/im/v1/chats/{chat_id}";

/// Feishu's limit on `user_ids` in one users call.
pub const USERS_PER_CALL: usize = 50;
/// The scope the users call needs.
pub const USERS_SCOPE: &str = "contact:user.base:readonly";
/// The scope the chat call needs.
pub const CHATS_SCOPE: &str = "im:chat:readonly";

/// Who and which chats the fake knows, and which scopes the app lacks.
#[derive(Default)]
pub struct Directory {
    /// Users the app can see: open_id → name.
    pub users: Mutex<HashMap<String, String>>,
    /// Chats the bot is in: chat_id → name.
    pub chats: Mutex<HashMap<String, String>>,
    /// Scopes not granted: their calls are refused with 99991672.
    pub withheld: Mutex<HashSet<&'static str>>,
    /// Users calls answered or refused.
    pub user_calls: AtomicUsize,
    /// Chat calls answered or refused.
    pub chat_calls: AtomicUsize,
}

impl Directory {
    /// Names a user.
    pub fn user(&self, open_id: &str, name: &str) {
        let mut users = self.users.lock().expect("lock");
        users.insert(open_id.into(), name.into());
    }

    /// Names a chat.
    pub fn chat(&self, chat_id: &str, name: &str) {
        let mut chats = self.chats.lock().expect("lock");
        chats.insert(chat_id.into(), name.into());
    }

    /// Withholds `scope` from the app.
    pub fn withhold(&self, scope: &'static str) {
        self.withheld.lock().expect("lock").insert(scope);
    }

    fn lacks(&self, scope: &str) -> bool {
        self.withheld.lock().expect("lock").contains(scope)
    }
}

/// Feishu's refusal for a scope the app lacks.
fn no_scope(s: &FakeState, endpoint: &'static str, scope: &str) -> Response {
    let msg = format!("Access denied. One of the following scopes is required: [{scope}]");
    s.refuse(endpoint, StatusCode::BAD_REQUEST, 99991672, &msg)
        .into_response()
}

pub(super) async fn users_batch(
    State(s): State<Arc<FakeState>>,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    s.directory.user_calls.fetch_add(1, Ordering::SeqCst);
    if let Err(refused) = s.admit(USERS, uri.path(), &headers) {
        return refused.into_response();
    }
    if s.directory.lacks(USERS_SCOPE) {
        return no_scope(&s, USERS, USERS_SCOPE);
    }
    let query = uri.query().unwrap_or_default();
    let pairs: Vec<(&str, &str)> = query
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .collect();
    let ids: Vec<&str> = pairs
        .iter()
        .filter(|(k, _)| *k == "user_ids")
        .map(|(_, v)| *v)
        .collect();
    let by_open_id = pairs.contains(&("user_id_type", "open_id"));
    if ids.is_empty() || ids.len() > USERS_PER_CALL || !by_open_id {
        return s
            .refuse(
                USERS,
                StatusCode::BAD_REQUEST,
                99992402,
                "field validation failed",
            )
            .into_response();
    }
    let users = s.directory.users.lock().expect("lock").clone();
    let items: Vec<_> = ids
        .iter()
        .filter_map(|id| {
            let name = users.get(*id)?;
            Some(json!({"open_id": id, "name": name, "en_name": name, "status": {"is_activated": true}}))
        })
        .collect();
    success(json!({"items": items}))
}

pub(super) async fn chat(
    State(s): State<Arc<FakeState>>,
    Path(id): Path<String>,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    s.directory.chat_calls.fetch_add(1, Ordering::SeqCst);
    if let Err(refused) = s.admit(CHAT, uri.path(), &headers) {
        return refused.into_response();
    }
    if s.directory.lacks(CHATS_SCOPE) {
        return no_scope(&s, CHAT, CHATS_SCOPE);
    }
    let name = s.directory.chats.lock().expect("lock").get(&id).cloned();
    match name {
        Some(name) => success(json!({
            "name": name, "chat_mode": "group", "chat_type": "private",
            "owner_id_type": "open_id", "external": false
        })),
        None => s
            .refuse(
                CHAT,
                StatusCode::BAD_REQUEST,
                232011,
                "operator can NOT be out of the chat",
            )
            .into_response(),
    }
}
