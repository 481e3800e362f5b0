//! A fake agent runtime for the `webhook` backend, on 127.0.0.1:0: it checks the
//! Standard Webhooks signature, takes `delay` (spread ±50% by the turn id) to think,
//! then answers `200 {"output": …}`. It counts calls per turn id, so a scenario can tell
//! a turn run twice from one run once.

use std::{
    collections::HashMap,
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use axum::{
    Json, Router,
    body::Bytes,
    extract::State,
    http::{HeaderMap, StatusCode},
    response::{IntoResponse, Response},
    routing::post,
};
use feishu_bridge::agent::webhook;
use serde_json::{Value, json};

/// The agent's signing secret (the bridge's `profiles.agent.secret`).
pub const SECRET: &str = "faults-agent-secret";

struct Agent {
    delay: Duration,
    calls: Mutex<HashMap<String, u32>>,
    in_flight: AtomicU64,
    most_in_flight: AtomicU64,
    bad_signatures: AtomicU64,
}

/// The running fake agent.
#[derive(Clone)]
pub struct FakeAgent {
    /// The turn URL for the bridge's config.
    pub url: String,
    agent: Arc<Agent>,
}

impl FakeAgent {
    /// Starts an agent that takes about `delay` per turn.
    pub async fn start(delay: Duration) -> Self {
        let agent = Arc::new(Agent {
            delay,
            calls: Mutex::default(),
            in_flight: AtomicU64::new(0),
            most_in_flight: AtomicU64::new(0),
            bad_signatures: AtomicU64::new(0),
        });
        let app = Router::new()
            .route("/turn", post(turn))
            .with_state(agent.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind fake agent");
        let url = format!("http://{}/turn", listener.local_addr().expect("addr"));
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self { url, agent }
    }

    /// Calls per turn id.
    pub fn calls(&self) -> HashMap<String, u32> {
        self.agent.calls.lock().expect("lock").clone()
    }

    /// Most turns it was thinking about at once.
    pub fn most_in_flight(&self) -> u64 {
        self.agent.most_in_flight.load(Ordering::SeqCst)
    }

    /// Calls whose signature did not verify.
    pub fn bad_signatures(&self) -> u64 {
        self.agent.bad_signatures.load(Ordering::SeqCst)
    }
}

/// Decrements the in-flight count when the request ends, answered or dropped.
struct InFlight<'a>(&'a AtomicU64);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

async fn turn(State(a): State<Arc<Agent>>, headers: HeaderMap, raw: Bytes) -> Response {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let signed = webhook::verify(
        SECRET,
        header("webhook-id"),
        header("webhook-timestamp"),
        header("webhook-signature"),
        &raw,
    );
    if signed.is_err() {
        a.bad_signatures.fetch_add(1, Ordering::SeqCst);
        return (StatusCode::UNAUTHORIZED, "bad signature").into_response();
    }
    let body: Value = serde_json::from_slice(&raw).unwrap_or(Value::Null);
    if body["kind"] != "turn" {
        // A feed inject: nothing to answer.
        return StatusCode::NO_CONTENT.into_response();
    }
    let turn_id = body["turn_id"].as_str().unwrap_or_default().to_string();
    let message_id = body["message_id"].as_str().unwrap_or_default().to_string();
    *a.calls
        .lock()
        .expect("lock")
        .entry(turn_id.clone())
        .or_default() += 1;
    let now = a.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
    let _guard = InFlight(&a.in_flight);
    a.most_in_flight.fetch_max(now, Ordering::SeqCst);
    // ±50% of the delay, stable per turn.
    let spread = turn_id
        .bytes()
        .fold(0u64, |h, b| h.wrapping_mul(31).wrapping_add(u64::from(b)))
        % 1000;
    let think = a.delay.mul_f64(0.5 + spread as f64 / 1000.0);
    tokio::time::sleep(think).await;
    Json(json!({"output": format!("Three action items for {message_id}: plan, build, ship.")}))
        .into_response()
}
