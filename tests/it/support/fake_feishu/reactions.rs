//! Reactions on messages, as `im-v1/message-reaction/create` and `…/delete` document
//! them: `POST /open-apis/im/v1/messages/{message_id}/reactions` with
//! `{"reaction_type":{"emoji_type":…}}` answers `data.reaction_id` (an id of its own
//! per reaction); `DELETE …/reactions/{reaction_id}` removes it. Either scope
//! `im:message` or `im:message.reactions:write_only` allows both: a test withholds them
//! with [`Reactions::withhold_scope`] (then 99991672, the scope named in `msg`). Codes:
//! 231001 for an emoji type Feishu does not know, 231003 for a message that does not
//! exist or was recalled, 231010 for a reaction on another message, 231011 for a
//! reaction id that is not there (never added, or removed already). The app's
//! frequency limits (50/s, 1,000/min) are the gate's, as for every call.

use std::{
    collections::{HashMap, HashSet},
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
};

use axum::{
    body::Bytes,
    extract::{Path, State},
    http::{HeaderMap, StatusCode, Uri},
    response::{IntoResponse, Response},
};
use serde_json::{Value, json};

use super::{
    FakeState,
    gate::{Refused, success},
};

const ADD: &str = "POST /open-apis/im/v1/messages/{message_id}/reactions";
const DELETE: &str = "DELETE /open-apis/im/v1/messages/{message_id}/reactions/{reaction_id}";

/// The narrow scope for reactions (`im:message` would do too).
pub const REACTIONS_SCOPE: &str = "im:message.reactions:write_only";

/// Some of the emoji types of Feishu's list (others are refused with 231001).
const EMOJI_TYPES: [&str; 12] = [
    "Typing",
    "OnIt",
    "OneSecond",
    "THUMBSUP",
    "OK",
    "DONE",
    "SMILE",
    "Get",
    "MUSCLE",
    "THINKING",
    "HEART",
    "CheckMark",
];

/// One add or removal the fake accepted, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReactionOp {
    /// `(message_id, emoji_type, reaction_id)`.
    Added(String, String, String),
    /// `(message_id, reaction_id)`.
    Removed(String, String),
}

/// The reactions on messages, and what a test set up.
#[derive(Default)]
pub struct Reactions {
    /// On messages now: reaction id → (message id, emoji type).
    pub live: Mutex<HashMap<String, (String, String)>>,
    /// Every accepted add and removal, in order.
    pub ops: Mutex<Vec<ReactionOp>>,
    /// Messages that do not exist for the app (add and delete refused with 231003).
    pub missing: Mutex<HashSet<String>>,
    /// While set, both calls are refused for a missing scope.
    scope_withheld: AtomicBool,
    next: AtomicU64,
}

impl Reactions {
    /// Withholds both scopes that allow reactions.
    pub fn withhold_scope(&self) {
        self.scope_withheld.store(true, Ordering::SeqCst);
    }

    /// The accepted adds and removals, in order.
    pub fn ops(&self) -> Vec<ReactionOp> {
        self.ops.lock().expect("lock").clone()
    }

    /// The reactions on `message_id` now: emoji types.
    pub fn on(&self, message_id: &str) -> Vec<String> {
        let live = self.live.lock().expect("lock");
        let mut on: Vec<String> = live
            .values()
            .filter(|(m, _)| m == message_id)
            .map(|(_, e)| e.clone())
            .collect();
        on.sort();
        on
    }

    fn push(&self, op: ReactionOp) {
        self.ops.lock().expect("lock").push(op);
    }
}

/// Whether the request is one whose path names reactions (for tests that count the
/// other calls).
pub fn is_reaction_endpoint(endpoint: &str) -> bool {
    endpoint == ADD || endpoint == DELETE
}

impl FakeState {
    /// The refusals every reaction call meets first: the gate, the scope, the message.
    fn reaction_gate(
        &self,
        endpoint: &'static str,
        path: &str,
        headers: &HeaderMap,
        message_id: &str,
    ) -> Result<(), Refused> {
        self.admit(endpoint, path, headers)?;
        if self.reactions.scope_withheld.load(Ordering::SeqCst) {
            let msg = format!(
                "Access denied. One of the following scopes is required: [im:message, {REACTIONS_SCOPE}]"
            );
            return Err(self.refuse(endpoint, StatusCode::BAD_REQUEST, 99991672, &msg));
        }
        let gone = self.recalled.lock().expect("lock").contains(message_id)
            || self
                .reactions
                .missing
                .lock()
                .expect("lock")
                .contains(message_id);
        if gone {
            let msg = "The message is not found, maybe not exist or deleted.";
            return Err(self.refuse(endpoint, StatusCode::BAD_REQUEST, 231003, msg));
        }
        Ok(())
    }
}

pub(super) async fn add(
    State(s): State<Arc<FakeState>>,
    Path(message_id): Path<String>,
    uri: Uri,
    headers: HeaderMap,
    raw: Bytes,
) -> Response {
    if let Err(refused) = s.reaction_gate(ADD, uri.path(), &headers, &message_id) {
        return refused.into_response();
    }
    let body: Value = serde_json::from_slice(&raw).unwrap_or(Value::Null);
    let emoji = body["reaction_type"]["emoji_type"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    if !EMOJI_TYPES.contains(&emoji.as_str()) {
        let refused = s.refuse(
            ADD,
            StatusCode::BAD_REQUEST,
            231001,
            "reaction type is invalid.",
        );
        return refused.into_response();
    }
    let n = s.reactions.next.fetch_add(1, Ordering::SeqCst) + 1;
    let reaction_id = format!("ZCaCIjUBVVWSrm5L-{n}");
    s.reactions
        .live
        .lock()
        .expect("lock")
        .insert(reaction_id.clone(), (message_id.clone(), emoji.clone()));
    s.reactions.push(ReactionOp::Added(
        message_id.clone(),
        emoji.clone(),
        reaction_id.clone(),
    ));
    s.activity
        .send(format!("reaction:add:{message_id}:{reaction_id}"))
        .ok();
    success(json!({
        "reaction_id": reaction_id,
        "operator": {"operator_id": "cli_test", "operator_type": "app"},
        "action_time": "1626086391570",
        "reaction_type": {"emoji_type": emoji},
    }))
}

pub(super) async fn delete(
    State(s): State<Arc<FakeState>>,
    Path((message_id, reaction_id)): Path<(String, String)>,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    if let Err(refused) = s.reaction_gate(DELETE, uri.path(), &headers, &message_id) {
        return refused.into_response();
    }
    let found = {
        let mut live = s.reactions.live.lock().expect("lock");
        match live.get(&reaction_id) {
            Some((on, _)) if *on != message_id => Err(231010),
            Some(_) => live.remove(&reaction_id).ok_or(231011),
            None => Err(231011),
        }
    };
    let (_, emoji) = match found {
        Ok(found) => found,
        Err(231010) => {
            let msg = "The reaction does not belong to the message.";
            return s
                .refuse(DELETE, StatusCode::BAD_REQUEST, 231010, msg)
                .into_response();
        }
        Err(code) => {
            let msg = "The request has an invalid reaction_id.";
            return s
                .refuse(DELETE, StatusCode::BAD_REQUEST, code, msg)
                .into_response();
        }
    };
    s.reactions
        .push(ReactionOp::Removed(message_id.clone(), reaction_id.clone()));
    s.activity
        .send(format!("reaction:delete:{message_id}:{reaction_id}"))
        .ok();
    success(json!({
        "reaction_id": reaction_id,
        "operator": {"operator_id": "cli_test", "operator_type": "app"},
        "action_time": "1626086391570",
        "reaction_type": {"emoji_type": emoji},
    }))
}
