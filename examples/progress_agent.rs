//! A webhook agent that shows its work, and a stand-in for the part of the Open API its
//! card needs, for trying turn events without a Feishu app (`sh examples/demo.sh
//! progress`, config `examples/progress.toml`).
//!
//! * `POST /turn` — the agent. A turn (`kind: "turn"`) is accepted with `202`; then, as
//!   signed turn events to the bridge (`POST /agent/{profile}/turns/{turn_id}/events`),
//!   it streams its text, reports two tool calls, asks a yes/no question and waits for
//!   the answer (`GET …/asks/{id}?wait_secs=…`: a person's press, or the default when
//!   nobody answers in time), then sends its answer, a markdown table, through the output
//!   callback. Answers the bridge posts (`kind: "answer"`) are acknowledged and printed.
//! * `/open-apis/…` — the tenant token, CardKit cards, replies and reactions, answered as
//!   Feishu answers them, each call kept.
//! * `GET /demo/cards` — what the cards received, one line per call, as text.
//!
//! ```sh
//! cargo run --example progress_agent        # listens on 127.0.0.1:9000
//! cargo run --release -- --config examples/progress.toml serve
//! cargo run --release -- --config examples/progress.toml simulate --scenario examples/progress_scenario.toml
//! curl -s localhost:9000/demo/cards
//! ```

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use axum::{
    Json, Router,
    body::Bytes,
    extract::{Path, State},
    http::{HeaderMap, StatusCode},
    response::{IntoResponse, Response},
    routing::{delete, get, patch, post, put},
};
use feishu_bridge::agent::webhook::{sign, verify};
use serde_json::{Value, json};

/// The demo secret of `examples/progress.toml` (not a secret of anything real).
const DEMO_SECRET: &str = "whsec_cHJvZ3Jlc3MtYWdlbnQtZGVtby1zZWNyZXQ=";

/// What the stand-in was sent, and the bridge the agent reports to.
#[derive(Default)]
struct Seen {
    /// One line per card call.
    cards: Mutex<Vec<String>>,
    /// Ids handed out.
    next: Mutex<u64>,
}

#[derive(Clone)]
struct Shared {
    seen: Arc<Seen>,
    http: reqwest::Client,
    bridge: String,
    secret: String,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let listen = std::env::var("PROGRESS_AGENT_LISTEN").unwrap_or_else(|_| "127.0.0.1:9000".into());
    let shared = Shared {
        seen: Arc::default(),
        http: reqwest::Client::new(),
        bridge: std::env::var("PROGRESS_AGENT_BRIDGE")
            .unwrap_or_else(|_| "http://127.0.0.1:8080".into()),
        secret: std::env::var("PROGRESS_AGENT_SECRET").unwrap_or_else(|_| DEMO_SECRET.into()),
    };
    let api = "/open-apis";
    let app = Router::new()
        .route("/turn", post(turn))
        .route("/demo/cards", get(cards))
        .route(
            &format!("{api}/auth/v3/tenant_access_token/internal"),
            post(|| async {
                Json(json!({"code": 0, "msg": "ok", "tenant_access_token": "t-progress-demo", "expire": 7200}))
            }),
        )
        .route(&format!("{api}/cardkit/v1/cards"), post(card_created))
        .route(&format!("{api}/cardkit/v1/cards/{{card_id}}"), put(card_replaced))
        .route(
            &format!("{api}/cardkit/v1/cards/{{card_id}}/settings"),
            patch(card_settings),
        )
        .route(
            &format!("{api}/cardkit/v1/cards/{{card_id}}/elements/{{element_id}}/content"),
            put(card_text),
        )
        .route(&format!("{api}/im/v1/messages"), post(message_sent))
        .route(&format!("{api}/im/v1/messages/{{id}}/reply"), post(message_sent))
        .route(&format!("{api}/im/v1/messages/{{id}}"), patch(card_patched))
        .route(&format!("{api}/im/v1/messages/{{id}}/reactions"), post(reacted))
        .route(
            &format!("{api}/im/v1/messages/{{id}}/reactions/{{reaction_id}}"),
            delete(unreacted),
        )
        .with_state(shared);
    let listener = tokio::net::TcpListener::bind(&listen).await?;
    println!("progress agent on http://{listen} (webhook: /turn, Open API: /open-apis)");
    axum::serve(listener, app).await?;
    Ok(())
}

fn ok(data: Value) -> Json<Value> {
    Json(json!({"code": 0, "msg": "success", "data": data}))
}

impl Seen {
    fn id(&self, prefix: &str) -> String {
        let mut n = self.next.lock().unwrap_or_else(|p| p.into_inner());
        *n += 1;
        format!("{prefix}{n}")
    }

    fn card(&self, line: String) {
        println!("{line}");
        self.cards
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(line);
    }
}

/// A card in a few words: its panels' titles, its texts, its buttons.
fn describe(card: &Value) -> String {
    let mut parts = Vec::new();
    walk(card, &mut parts);
    parts.join(" | ")
}

fn walk(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => match m.get("tag").and_then(Value::as_str) {
            Some("collapsible_panel") => {
                let title = m["header"]["title"]["content"].as_str().unwrap_or_default();
                let inner = m["elements"][0]["content"].as_str().unwrap_or_default();
                out.push(format!("[{title}: {}]", inner.replace('\n', "; ")));
            }
            Some("markdown") => {
                let text = m["content"].as_str().unwrap_or_default();
                out.push(text.replace('\n', " ⏎ "));
            }
            Some("button") => {
                let label = m["text"]["content"].as_str().unwrap_or_default();
                out.push(format!("<{label}>"));
            }
            _ => m.values().for_each(|x| walk(x, out)),
        },
        Value::Array(a) => a.iter().for_each(|x| walk(x, out)),
        _ => {}
    }
}

/// The card JSON inside a request's string field `field` (under `card` for updates).
fn card_in(body: &Value, pointer: &str) -> Value {
    body.pointer(pointer)
        .and_then(Value::as_str)
        .and_then(|s| serde_json::from_str(s).ok())
        .unwrap_or_default()
}

async fn card_created(State(s): State<Shared>, Json(body): Json<Value>) -> Json<Value> {
    let id = s.seen.id("card_");
    let card = card_in(&body, "/data");
    s.seen.card(format!("create {id}: {}", describe(&card)));
    ok(json!({"card_id": id}))
}

async fn card_replaced(
    State(s): State<Shared>,
    Path(card_id): Path<String>,
    Json(body): Json<Value>,
) -> Json<Value> {
    let card = card_in(&body, "/card/data");
    s.seen
        .card(format!("update {card_id}: {}", describe(&card)));
    ok(json!({}))
}

async fn card_settings(
    State(s): State<Shared>,
    Path(card_id): Path<String>,
    Json(body): Json<Value>,
) -> Json<Value> {
    let settings = body["settings"].as_str().unwrap_or_default();
    s.seen.card(format!("settings {card_id}: {settings}"));
    ok(json!({}))
}

async fn card_text(
    State(s): State<Shared>,
    Path((card_id, element)): Path<(String, String)>,
    Json(body): Json<Value>,
) -> Json<Value> {
    let text = body["content"].as_str().unwrap_or_default();
    s.seen.card(format!(
        "stream {card_id}/{element}: {}",
        text.replace('\n', " ⏎ ")
    ));
    ok(json!({}))
}

async fn card_patched(
    State(s): State<Shared>,
    Path(id): Path<String>,
    Json(body): Json<Value>,
) -> Json<Value> {
    let card = card_in(&body, "/content");
    s.seen.card(format!("patch {id}: {}", describe(&card)));
    ok(json!({}))
}

async fn message_sent(State(s): State<Shared>, Json(body): Json<Value>) -> Json<Value> {
    let id = s.seen.id("om_progress_");
    let content = card_in(&body, "/content");
    let shown = match content["data"]["card_id"].as_str() {
        Some(card_id) => format!("card {card_id}"),
        None => describe(&content),
    };
    s.seen.card(format!("send {id}: {shown}"));
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    ok(json!({"message_id": id, "create_time": now.to_string()}))
}

async fn reacted(
    State(s): State<Shared>,
    Path(id): Path<String>,
    Json(body): Json<Value>,
) -> Json<Value> {
    let emoji = body["reaction_type"]["emoji_type"]
        .as_str()
        .unwrap_or_default();
    s.seen.card(format!("reaction on {id}: {emoji}"));
    ok(json!({"reaction_id": s.seen.id("reaction_"), "reaction_type": {"emoji_type": emoji}}))
}

async fn unreacted(
    State(s): State<Shared>,
    Path((id, reaction_id)): Path<(String, String)>,
) -> Json<Value> {
    s.seen
        .card(format!("reaction {reaction_id} removed from {id}"));
    ok(json!({}))
}

async fn cards(State(s): State<Shared>) -> String {
    let lines = s.seen.cards.lock().unwrap_or_else(|p| p.into_inner());
    let mut out = lines.join("\n");
    out.push('\n');
    out
}

/// The agent: a turn is taken on and worked on in the background.
async fn turn(State(s): State<Shared>, headers: HeaderMap, body: Bytes) -> Response {
    let h = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    if let Err(e) = verify(
        &s.secret,
        h("webhook-id"),
        h("webhook-timestamp"),
        h("webhook-signature"),
        &body,
    ) {
        return (
            StatusCode::UNAUTHORIZED,
            Json(json!({"error": e.to_string()})),
        )
            .into_response();
    }
    let Ok(msg) = serde_json::from_slice::<Value>(&body) else {
        return (StatusCode::BAD_REQUEST, Json(json!({"error": "not JSON"}))).into_response();
    };
    match msg["kind"].as_str() {
        Some("turn") => {
            let (profile, turn_id) = (
                msg["profile"].as_str().unwrap_or_default().to_string(),
                msg["turn_id"].as_str().unwrap_or_default().to_string(),
            );
            let request = msg["request_text"].as_str().unwrap_or_default().to_string();
            tokio::spawn(async move {
                if let Err(e) = work(&s, &profile, &turn_id, &request).await {
                    eprintln!("turn {turn_id}: {e}");
                }
            });
            (StatusCode::ACCEPTED, Json(json!({"accepted": true}))).into_response()
        }
        Some("answer") => {
            println!("answer to {}: {}", msg["ask_id"], msg["answer"]);
            Json(json!({"ok": true})).into_response()
        }
        _ => Json(json!({"ok": true})).into_response(),
    }
}

impl Shared {
    /// Sends `body` signed to the bridge's `path`.
    async fn signed(
        &self,
        method: reqwest::Method,
        path: &str,
        body: &str,
    ) -> anyhow::Result<Value> {
        let id = format!("msg_{}", rand::random::<u64>());
        let ts = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)?
            .as_secs()
            .to_string();
        let resp = self
            .http
            .request(method, format!("{}{path}", self.bridge))
            .header("webhook-id", &id)
            .header("webhook-timestamp", &ts)
            .header(
                "webhook-signature",
                sign(&self.secret, &id, &ts, body.as_bytes()),
            )
            .header("content-type", "application/json")
            .body(body.to_string())
            .timeout(Duration::from_secs(40))
            .send()
            .await?;
        let status = resp.status();
        let answer: Value = resp.json().await.unwrap_or_default();
        anyhow::ensure!(status.is_success(), "{path}: {status} {answer}");
        Ok(answer)
    }
}

/// The turn's work, shown as it goes.
async fn work(s: &Shared, profile: &str, turn_id: &str, request: &str) -> anyhow::Result<()> {
    let events = format!("/agent/{profile}/turns/{turn_id}/events");
    let steps = [
        json!({"kind": "status", "text": "Reading the request"}),
        json!({"kind": "text", "mode": "delta", "text": "Checking the build first. "}),
        json!({"kind": "tool", "id": "t1", "phase": "start", "name": "read_file", "input_summary": "Cargo.toml", "status": "running"}),
        json!({"kind": "tool", "id": "t1", "phase": "end", "name": "read_file", "input_summary": "Cargo.toml", "status": "ok", "duration_ms": 120}),
        json!({"kind": "tool", "id": "t2", "phase": "start", "name": "run_tests", "input_summary": "cargo test", "status": "running"}),
        json!({"kind": "status", "text": "Running the tests"}),
        json!({"kind": "tool", "id": "t2", "phase": "end", "name": "run_tests", "input_summary": "cargo test", "status": "ok", "duration_ms": 2400}),
        json!({"kind": "text", "mode": "delta", "text": "All 42 tests pass."}),
        json!({"kind": "ask", "id": "deploy", "prompt": "All tests pass. Deploy to staging?", "style": "confirm", "timeout_secs": 3, "default": "yes"}),
    ];
    for (seq, step) in steps.iter().enumerate() {
        let mut event = step.clone();
        event["seq"] = json!(seq + 1);
        s.signed(reqwest::Method::POST, &events, &event.to_string())
            .await?;
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    // Nobody presses in the demo: the question times out to its default.
    let ask = format!("/agent/{profile}/turns/{turn_id}/asks/deploy?wait_secs=30");
    let answered = s.signed(reqwest::Method::GET, &ask, "").await?;
    let answer = answered["answer"].as_str().unwrap_or("no").to_string();
    let output = format!(
        "**Done** — you asked: {request}\n\n| step | result |\n|---|---|\n| read_file | ok (120 ms) |\n| run_tests | 42 passed (2.4 s) |\n| deploy to staging | {} |\n",
        if answer == "yes" {
            "deployed"
        } else {
            "skipped"
        }
    );
    let callback = format!("/agent/{profile}/turns/{turn_id}/output");
    s.signed(
        reqwest::Method::POST,
        &callback,
        &json!({"output": output}).to_string(),
    )
    .await?;
    Ok(())
}
