//! A local agent for trying the whole loop without a real one: it serves both agent
//! backends the bridge speaks.
//!
//! * `POST /turn` — a `webhook` agent: checks the Standard Webhooks signature with the
//!   secret in `LOCAL_AGENT_SECRET`, then answers `200 {"output": …}`.
//! * `POST /planner` — the same, as a planner that hands the work on: its answer is a
//!   short plan that mentions the coder's bot (`<at user_id="ou_demo_coder">`), so the hub
//!   queues the coder's turn (`examples/handoff.toml`).
//! * `POST /v1/chat/completions` — an OpenAI-compatible model: streams (Server-Sent
//!   Events) or answers in one piece, word by word from a short canned reply that shows
//!   what it was given. Asked for a daily digest (its system message says so), it
//!   answers a short summary made of the transcript's first and last lines instead.
//! * A stand-in for the few Open API reads the day demo's names need — the tenant token,
//!   `GET /open-apis/contact/v3/users/batch` and `GET /open-apis/im/v1/chats/{chat_id}` —
//!   with the demo's people and group (a profile whose `api_base` is this agent sees
//!   them named).
//!
//! ```sh
//! cargo run --example local_agent            # listens on 127.0.0.1:9000
//! cargo run -- --config examples/agents.toml serve
//! cargo run -- --config examples/agents.toml simulate --scenario examples/scenario.toml
//! ```

use std::{convert::Infallible, time::Duration};

use axum::{
    Json, Router,
    body::{Body, Bytes},
    extract::{Path, RawQuery},
    http::{HeaderMap, StatusCode, header},
    response::{IntoResponse, Response},
    routing::{get, post},
};
use serde_json::{Value, json};

/// The demo secret of `examples/agents.toml` (not a secret of anything real).
const DEMO_SECRET: &str = "whsec_bG9jYWwtYWdlbnQtZGVtby1zZWNyZXQ=";

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let listen = std::env::var("LOCAL_AGENT_LISTEN").unwrap_or_else(|_| "127.0.0.1:9000".into());
    let app = Router::new()
        .route("/turn", post(turn))
        .route("/planner", post(planner))
        .route("/v1/chat/completions", post(completions))
        .route(
            "/open-apis/auth/v3/tenant_access_token/internal",
            post(tenant_token),
        )
        .route("/open-apis/contact/v3/users/batch", get(users))
        .route("/open-apis/im/v1/chats/{chat_id}", get(chat));
    let listener = tokio::net::TcpListener::bind(&listen).await?;
    println!("local agent on http://{listen} (webhook: /turn, openai: /v1)");
    axum::serve(listener, app).await?;
    Ok(())
}

/// A signed turn's body, or the answer refusing it.
fn verified(headers: &HeaderMap, body: &Bytes) -> Result<Value, (StatusCode, Json<Value>)> {
    let secret = std::env::var("LOCAL_AGENT_SECRET").unwrap_or_else(|_| DEMO_SECRET.into());
    let h = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    if let Err(e) = feishu_bridge::agent::webhook::verify(
        &secret,
        h("webhook-id"),
        h("webhook-timestamp"),
        h("webhook-signature"),
        body,
    ) {
        return Err((
            StatusCode::UNAUTHORIZED,
            Json(json!({"error": e.to_string()})),
        ));
    }
    serde_json::from_slice::<Value>(body)
        .map_err(|_| (StatusCode::BAD_REQUEST, Json(json!({"error": "not JSON"}))))
}

/// The planner: verify, then answer with a plan that hands the work to the coder.
async fn planner(headers: HeaderMap, body: Bytes) -> Response {
    if let Err(refused) = verified(&headers, &body) {
        return refused.into_response();
    }
    let output = "Plan: 1. a canvas game loop, 2. touch controls, 3. under 50 KB. \
         <at user_id=\"ou_demo_coder\">coder</at> please build it from this plan.";
    Json(json!({ "output": output })).into_response()
}

/// The webhook agent: verify, then answer with what it was given.
async fn turn(headers: HeaderMap, body: Bytes) -> Response {
    let turn = match verified(&headers, &body) {
        Ok(turn) => turn,
        Err(refused) => return refused.into_response(),
    };
    let items = turn["context_items"].as_array().map_or(0, Vec::len);
    let output = format!(
        "(local webhook agent) You asked: \"{}\". I was given {items} context item(s) and a prompt of {} characters in session {}.",
        turn["request_text"].as_str().unwrap_or_default(),
        turn["prompt"].as_str().map_or(0, |p| p.chars().count()),
        turn["session_id"].as_str().unwrap_or_default(),
    );
    Json(json!({ "output": output })).into_response()
}

/// The demo's people, by open_id.
const PEOPLE: [(&str, &str); 3] = [
    ("ou_alice", "Alice Wang"),
    ("ou_bob", "Bob Li"),
    ("ou_carol", "Carol Zhang"),
];

/// The demo's group.
const GROUPS: [(&str, &str); 1] = [("oc_demo_feed", "Launch crew")];

/// A tenant token for any app (the demo's keys are not secrets of anything real).
async fn tenant_token() -> Json<Value> {
    Json(json!({"code": 0, "msg": "ok", "tenant_access_token": "t-local-demo", "expire": 7200}))
}

/// The users among `user_ids` this stand-in knows, as the contact API answers.
async fn users(RawQuery(query): RawQuery) -> Json<Value> {
    let query = query.unwrap_or_default();
    let items: Vec<Value> = query
        .split('&')
        .filter_map(|pair| pair.strip_prefix("user_ids="))
        .filter_map(|id| PEOPLE.iter().find(|(known, _)| *known == id))
        .map(|(open_id, name)| json!({"open_id": open_id, "name": name}))
        .collect();
    Json(json!({"code": 0, "msg": "success", "data": {"items": items}}))
}

/// A group's name, as the chat API answers (a group it does not know has none).
async fn chat(Path(chat_id): Path<String>) -> Json<Value> {
    let name = GROUPS
        .iter()
        .find(|(id, _)| *id == chat_id)
        .map(|(_, name)| *name);
    Json(json!({"code": 0, "msg": "success", "data": {"name": name}}))
}

/// The OpenAI-compatible model.
async fn completions(Json(req): Json<Value>) -> Response {
    let messages = req["messages"].as_array().cloned().unwrap_or_default();
    let is_digest = messages.first().is_some_and(|m| {
        m["role"] == "system"
            && m["content"]
                .as_str()
                .is_some_and(|c| c.contains("daily digest"))
    });
    if is_digest {
        return Json(json!({
            "object": "chat.completion",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": summary(&messages)}, "finish_reason": "stop"}],
        }))
        .into_response();
    }
    let prompt = messages
        .last()
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default();
    let request = prompt.rsplit("[User request]\n").next().unwrap_or(prompt);
    let answer = format!(
        "(local model) This session has {} earlier message(s). You asked: \"{}\". The prompt I got is {} characters long; a real model would answer it here.",
        messages.len().saturating_sub(1),
        request.trim(),
        prompt.chars().count(),
    );
    if req["stream"] != json!(true) {
        return Json(json!({
            "object": "chat.completion",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": answer}, "finish_reason": "stop"}],
        }))
        .into_response();
    }
    let words: Vec<String> = answer.split_inclusive(' ').map(str::to_string).collect();
    let stream = futures_util::stream::unfold(0usize, move |i| {
        let words = words.clone();
        async move {
            let event = match i.cmp(&words.len()) {
                std::cmp::Ordering::Less => {
                    // Slow enough to watch the card grow.
                    tokio::time::sleep(Duration::from_millis(120)).await;
                    let chunk = json!({"choices": [{"index": 0, "delta": {"content": words[i]}}]});
                    format!("data: {chunk}\n\n")
                }
                std::cmp::Ordering::Equal => "data: [DONE]\n\n".to_string(),
                std::cmp::Ordering::Greater => return None,
            };
            Some((Ok::<_, Infallible>(Bytes::from(event)), i + 1))
        }
    });
    Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .body(Body::from_stream(stream))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

/// A stand-in summary of the transcript in the last message: how many lines, the first
/// and the last (a real model writes 300 to 500 characters of substance).
fn summary(messages: &[Value]) -> String {
    let transcript = messages
        .last()
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default();
    let lines: Vec<&str> = transcript.lines().filter(|l| l.starts_with('[')).collect();
    format!(
        "(local summarizer) {} message(s). It began with {} and ended with {}",
        lines.len(),
        lines.first().copied().unwrap_or("nothing"),
        lines.last().copied().unwrap_or("nothing"),
    )
}
