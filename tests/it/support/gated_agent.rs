//! A webhook agent on 127.0.0.1:0 that answers only when the test lets it: each turn is
//! reported to the test as it arrives, then waits for a permit. The answers of its
//! questions (`kind: answer`) are taken at once (or refused with 503 while the test asks
//! for failures) and reported with their headers.

use std::sync::{
    Arc,
    atomic::{AtomicUsize, Ordering},
};

use axum::{
    Json, Router,
    body::Bytes,
    extract::State,
    http::{HeaderMap, StatusCode},
    response::{IntoResponse, Response},
    routing::post,
};
use serde_json::{Value, json};
use tokio::{
    net::TcpListener,
    sync::{Semaphore, mpsc},
};

/// Signing secret of the agent (Standard Webhooks `whsec_` form).
pub const AGENT_SECRET: &str = "whsec_dGVzdC1hZ2VudC1zZWNyZXQ=";

/// A Standard Webhooks signature with [`AGENT_SECRET`] of `id.ts.body`, made here
/// independently of the bridge's own signing.
pub fn sign(id: &str, ts: &str, body: &str) -> String {
    sign_bytes(id, ts, body.as_bytes())
}

/// [`sign`] of a body that need not be text (a multipart upload).
pub fn sign_bytes(id: &str, ts: &str, body: &[u8]) -> String {
    use base64::{Engine, engine::general_purpose::STANDARD};
    use hmac::{Hmac, Mac};
    let key = STANDARD
        .decode(AGENT_SECRET.trim_start_matches("whsec_"))
        .expect("key");
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(&key).expect("key");
    mac.update(format!("{id}.{ts}.").as_bytes());
    mac.update(body);
    format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes()))
}

/// What the agent answers a turn (its body): the JSON of its `200` answer.
type Reply = Arc<dyn Fn(&Value) -> Value + Send + Sync>;

struct Shared {
    turns: mpsc::UnboundedSender<Value>,
    reply: Reply,
    answers: mpsc::UnboundedSender<Delivered>,
    permits: Arc<Semaphore>,
    /// Answers still to refuse with 503.
    failing: Arc<AtomicUsize>,
    /// Answer POSTs received, refused ones included.
    attempts: Arc<AtomicUsize>,
}

/// An answer POST the agent took.
#[derive(Debug, Clone)]
pub struct Delivered {
    /// `webhook-id`, `webhook-timestamp`, `webhook-signature`.
    pub id: String,
    pub timestamp: String,
    pub signature: String,
    /// The raw body.
    pub body: String,
    /// The body as JSON.
    pub json: Value,
}

/// POSTs one event of `turn_id` of `profile` as its agent: signed with [`AGENT_SECRET`]
/// unless `signature` gives the header to send instead.
pub async fn post_event(
    app: &super::TestApp,
    (profile, turn_id): (&str, &str),
    body: &str,
    signature: Option<&str>,
) -> super::Answer {
    let ts = feishu_bridge::util::now_secs().to_string();
    let sig = signature.map_or_else(|| sign("ev-1", &ts, body), str::to_string);
    let r = app
        .client
        .post(format!(
            "{}/agent/{profile}/turns/{turn_id}/events",
            app.base
        ))
        .header("webhook-id", "ev-1")
        .header("webhook-timestamp", &ts)
        .header("webhook-signature", sig)
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .expect("sent");
    super::app::answer(r).await
}

/// The running agent.
pub struct GatedAgent {
    /// Its URL.
    pub url: String,
    /// Turns as they arrive (parsed bodies).
    pub turns: mpsc::UnboundedReceiver<Value>,
    /// Answer POSTs it took.
    pub answers: mpsc::UnboundedReceiver<Delivered>,
    permits: Arc<Semaphore>,
    failing: Arc<AtomicUsize>,
    attempts: Arc<AtomicUsize>,
}

impl GatedAgent {
    /// Starts it; it answers `answer: <request_text>` once released.
    pub async fn start() -> Self {
        Self::answering(|body| {
            let request = body["request_text"].as_str().unwrap_or_default();
            json!({"output": format!("answer: {request}")})
        })
        .await
    }

    /// Starts it; once released, it answers each turn with the JSON `reply` makes of
    /// the turn's body (`{"output": …}`, and a `handoff` when it hands over).
    pub async fn answering(reply: impl Fn(&Value) -> Value + Send + Sync + 'static) -> Self {
        let (tx, turns) = mpsc::unbounded_channel();
        let (answers_tx, answers) = mpsc::unbounded_channel();
        let permits = Arc::new(Semaphore::new(0));
        let failing = Arc::new(AtomicUsize::new(0));
        let attempts = Arc::new(AtomicUsize::new(0));
        let shared = Arc::new(Shared {
            turns: tx,
            reply: Arc::new(reply),
            answers: answers_tx,
            permits: permits.clone(),
            failing: failing.clone(),
            attempts: attempts.clone(),
        });
        async fn turn(State(s): State<Arc<Shared>>, headers: HeaderMap, raw: Bytes) -> Response {
            let body: Value = serde_json::from_slice(&raw).unwrap_or_default();
            if body["kind"] == "answer" {
                s.attempts.fetch_add(1, Ordering::SeqCst);
                let refuse = s
                    .failing
                    .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                    .is_ok();
                if refuse {
                    return StatusCode::SERVICE_UNAVAILABLE.into_response();
                }
                let h = |n: &str| {
                    headers
                        .get(n)
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or_default()
                        .to_string()
                };
                s.answers
                    .send(Delivered {
                        id: h("webhook-id"),
                        timestamp: h("webhook-timestamp"),
                        signature: h("webhook-signature"),
                        body: String::from_utf8_lossy(&raw).into_owned(),
                        json: body,
                    })
                    .ok();
                return StatusCode::NO_CONTENT.into_response();
            }
            s.turns.send(body.clone()).ok();
            if let Ok(permit) = s.permits.acquire().await {
                permit.forget();
            }
            Json((s.reply)(&body)).into_response()
        }
        let app = Router::new().route("/turn", post(turn)).with_state(shared);
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("http://{}/turn", listener.local_addr().expect("addr"));
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self {
            url,
            turns,
            answers,
            permits,
            failing,
            attempts,
        }
    }

    /// Refuses the next `n` answer POSTs with 503.
    pub fn fail_answers(&self, n: usize) {
        self.failing.store(n, Ordering::SeqCst);
    }

    /// Answer POSTs received so far, refused ones included.
    pub fn answer_attempts(&self) -> usize {
        self.attempts.load(Ordering::SeqCst)
    }

    /// The next answer POST it took.
    pub async fn next_answer(&mut self) -> Delivered {
        tokio::time::timeout(std::time::Duration::from_secs(30), self.answers.recv())
            .await
            .expect("an answer reaches the agent")
            .expect("agent channel open")
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
