//! A webhook agent on 127.0.0.1:0 that answers only when the test lets it: each turn is
//! reported to the test as it arrives, then waits for a permit.

use std::sync::Arc;

use axum::{Json, Router, extract::State, routing::post};
use serde_json::{Value, json};
use tokio::{
    net::TcpListener,
    sync::{Semaphore, mpsc},
};

/// Signing secret of the agent (Standard Webhooks `whsec_` form).
pub const AGENT_SECRET: &str = "whsec_dGVzdC1hZ2VudC1zZWNyZXQ=";

struct Shared {
    turns: mpsc::UnboundedSender<Value>,
    permits: Arc<Semaphore>,
}

/// The running agent.
pub struct GatedAgent {
    /// Its URL.
    pub url: String,
    /// Turns as they arrive (parsed bodies).
    pub turns: mpsc::UnboundedReceiver<Value>,
    permits: Arc<Semaphore>,
}

impl GatedAgent {
    /// Starts it; it answers `answer: <request_text>` once released.
    pub async fn start() -> Self {
        let (tx, turns) = mpsc::unbounded_channel();
        let permits = Arc::new(Semaphore::new(0));
        let shared = Arc::new(Shared {
            turns: tx,
            permits: permits.clone(),
        });
        async fn turn(State(s): State<Arc<Shared>>, Json(body): Json<Value>) -> Json<Value> {
            s.turns.send(body.clone()).ok();
            if let Ok(permit) = s.permits.acquire().await {
                permit.forget();
            }
            let request = body["request_text"].as_str().unwrap_or_default();
            Json(json!({"output": format!("answer: {request}")}))
        }
        let app = Router::new().route("/turn", post(turn)).with_state(shared);
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("http://{}/turn", listener.local_addr().expect("addr"));
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self {
            url,
            turns,
            permits,
        }
    }

    /// Lets every turn from now on answer at once.
    pub fn open(&self) {
        self.permits.add_permits(Semaphore::MAX_PERMITS / 2);
    }

    /// The next turn to arrive.
    pub async fn next(&mut self) -> Value {
        tokio::time::timeout(std::time::Duration::from_secs(30), self.turns.recv())
            .await
            .expect("a turn arrives at the agent")
            .expect("agent channel open")
    }

    /// `[profiles.agent]` for it.
    pub fn config(&self) -> String {
        webhook_agent_toml(&self.url, 60)
    }
}

/// `[profiles.agent]` for a webhook agent at `url` signing with [`AGENT_SECRET`].
pub fn webhook_agent_toml(url: &str, timeout_secs: u64) -> String {
    format!(
        "[profiles.agent]\nkind = \"webhook\"\nurl = \"{url}\"\nsecret = \"{AGENT_SECRET}\"\ntimeout_secs = {timeout_secs}\n"
    )
}
