//! A fake OpenAI-compatible chat-completions server on 127.0.0.1:0: it records each
//! request and answers with fixed chunks, as one JSON answer or as Server-Sent Events.
//!
//! A test can hold a stream part-way (`hold_after`, then [`FakeOpenAi::release`]), see
//! that the client went away before the stream finished ([`FakeOpenAi::client_gone`]),
//! and make it answer an error status (`fail_with`). Waiting is done on channels, never
//! by sleeping.

use std::{
    collections::VecDeque,
    convert::Infallible,
    pin::Pin,
    sync::{Arc, Mutex},
    task::{Context, Poll, ready},
};

use axum::{
    Router,
    body::{Body, Bytes, HttpBody},
    extract::State,
    http::{HeaderMap, StatusCode, header},
    response::{IntoResponse, Response},
    routing::post,
};
use hyper::body::Frame;
use serde_json::{Value, json};
use tokio::{
    net::TcpListener,
    sync::{Semaphore, watch},
};

/// One request the fake received.
#[derive(Debug, Clone)]
pub struct SeenRequest {
    /// The `Authorization` header, if any.
    pub authorization: Option<String>,
    /// The JSON body (`Value::Null` if it was not JSON).
    pub body: Value,
}

/// What the fake answers and has seen.
pub struct FakeOpenAiState {
    /// The answer, in the pieces a stream sends.
    pub chunks: Vec<String>,
    /// Requests received, in order.
    pub requests: Mutex<Vec<SeenRequest>>,
    /// Streams send this many chunks (after the role-only one), then wait for
    /// [`FakeOpenAi::release`]; non-streamed answers wait before answering.
    pub hold_after: Mutex<Option<usize>>,
    /// Streams wait for a [`FakeOpenAi::release`] before every chunk.
    pub step: Mutex<bool>,
    /// Answer this status and body instead (the body is sent as JSON when it is JSON).
    pub fail_with: Mutex<Option<(u16, String)>>,
    /// How many requests were received.
    seen: watch::Sender<usize>,
    /// A stream was dropped before it sent `[DONE]`: the client went away.
    gone: watch::Sender<bool>,
    /// Permits for held answers to go on.
    gate: Arc<Semaphore>,
}

/// An answer chunk starting with this is streamed as reasoning (`reasoning_content`),
/// the rest of it being the reasoning.
pub const THINKING: &str = "THINK:";

/// The running fake.
pub struct FakeOpenAi {
    /// Base URL for `base_url`; ends with `/v1`.
    pub base: String,
    /// Its state.
    pub state: Arc<FakeOpenAiState>,
}

impl FakeOpenAi {
    /// Starts a fake whose answer is `answer_chunks` (concatenated when not streamed).
    pub async fn start(answer_chunks: Vec<String>) -> Self {
        let state = Arc::new(FakeOpenAiState {
            chunks: answer_chunks,
            requests: Mutex::new(Vec::new()),
            hold_after: Mutex::new(None),
            step: Mutex::new(false),
            fail_with: Mutex::new(None),
            seen: watch::channel(0).0,
            gone: watch::channel(false).0,
            gate: Arc::new(Semaphore::new(0)),
        });
        let app = Router::new()
            .route("/v1/chat/completions", post(completions))
            .with_state(state.clone());
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind fake");
        let base = format!("http://{}/v1", listener.local_addr().expect("addr"));
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self { base, state }
    }

    /// Holds answers after `n` chunks until [`FakeOpenAi::release`].
    pub fn hold_after(&self, n: usize) {
        *self.state.hold_after.lock().expect("lock") = Some(n);
    }

    /// Makes streams wait for a [`FakeOpenAi::release`] before each chunk, so a test
    /// sees every piece arrive on its own.
    pub fn step(&self) {
        *self.state.step.lock().expect("lock") = true;
    }

    /// Lets one held answer (or chunk) go on; a release before the hold is kept.
    pub fn release(&self) {
        self.state.gate.add_permits(1);
    }

    /// Makes every later request answer `status` with `body`.
    pub fn fail_with(&self, status: u16, body: &str) {
        *self.state.fail_with.lock().expect("lock") = Some((status, body.to_string()));
    }

    /// Waits until at least `n` requests have arrived; returns all seen so far.
    pub async fn requests(&self, n: usize) -> Vec<SeenRequest> {
        self.state
            .seen
            .subscribe()
            .wait_for(|seen| *seen >= n)
            .await
            .expect("the fake owns the sender");
        self.state.requests.lock().expect("lock").clone()
    }

    /// Waits until a stream is dropped before it finished.
    pub async fn client_gone(&self) {
        self.state
            .gone
            .subscribe()
            .wait_for(|gone| *gone)
            .await
            .expect("the fake owns the sender");
    }

    /// Whether a stream has been dropped before it finished.
    pub fn is_client_gone(&self) -> bool {
        *self.state.gone.borrow()
    }
}

async fn completions(
    State(s): State<Arc<FakeOpenAiState>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let stream = body["stream"].as_bool().unwrap_or(false);
    s.requests.lock().expect("lock").push(SeenRequest {
        authorization: headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string),
        body,
    });
    s.seen.send_modify(|n| *n += 1);

    let failure = s.fail_with.lock().expect("lock").clone();
    if let Some((status, text)) = failure {
        let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let kind = if serde_json::from_str::<Value>(&text).is_ok() {
            "application/json"
        } else {
            "text/plain"
        };
        return (status, [(header::CONTENT_TYPE, kind)], text).into_response();
    }
    let hold_after = *s.hold_after.lock().expect("lock");
    let step = *s.step.lock().expect("lock");
    if !stream {
        if hold_after.is_some()
            && let Ok(permit) = s.gate.acquire().await
        {
            permit.forget();
        }
        let answer = json!({
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "choices": [{
                "index": 0,
                "message": {"role": "assistant", "content": s.chunks.iter()
                    .filter(|c| !c.starts_with(THINKING)).cloned().collect::<String>()},
                "finish_reason": "stop"
            }]
        });
        return axum::Json(answer).into_response();
    }

    let event = |v: Value| Bytes::from(format!("data: {v}\n\n"));
    // (event, wait for a release before sending it)
    let mut events = VecDeque::new();
    events.push_back((
        event(json!({
            "id": "chatcmpl-fake", "object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": {"role": "assistant"}, "finish_reason": null}]
        })),
        false,
    ));
    for (i, chunk) in s.chunks.iter().enumerate() {
        // A chunk marked as reasoning streams as `reasoning_content`, as reasoning models'
        // OpenAI-compatible servers send it.
        let delta = match chunk.strip_prefix(THINKING) {
            Some(thought) => json!({"reasoning_content": thought}),
            None => json!({"content": chunk}),
        };
        events.push_back((
            event(json!({
                "id": "chatcmpl-fake", "object": "chat.completion.chunk",
                "choices": [{"index": 0, "delta": delta, "finish_reason": null}]
            })),
            step || hold_after == Some(i),
        ));
    }
    let last_gated = hold_after.is_some_and(|n| n >= s.chunks.len());
    events.push_back((
        event(json!({
            "id": "chatcmpl-fake", "object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]
        })),
        last_gated,
    ));
    events.push_back((Bytes::from_static(b"data: [DONE]\n\n"), false));
    let body = SseBody {
        events,
        wait: None,
        finished: false,
        state: s.clone(),
    };
    (
        [(header::CONTENT_TYPE, "text/event-stream")],
        Body::new(body),
    )
        .into_response()
}

/// The streamed answer. It is also the guard that notices the client going away: axum
/// drops the body when the connection closes, and a body dropped before it sent
/// `[DONE]` marks the client gone.
struct SseBody {
    /// Events still to send, each with whether it waits for a release first.
    events: VecDeque<(Bytes, bool)>,
    /// The wait for a release, while one is under way.
    wait: Option<Pin<Box<dyn Future<Output = ()> + Send>>>,
    finished: bool,
    state: Arc<FakeOpenAiState>,
}

impl HttpBody for SseBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let this = &mut *self;
        if let Some((_, gated)) = this.events.front_mut()
            && *gated
        {
            let gate = this.state.gate.clone();
            let wait = this.wait.get_or_insert_with(|| {
                Box::pin(async move {
                    if let Ok(permit) = gate.acquire_owned().await {
                        permit.forget();
                    }
                })
            });
            ready!(wait.as_mut().poll(cx));
            this.wait = None;
            *gated = false;
        }
        match this.events.pop_front() {
            Some((bytes, _)) => {
                this.finished = this.events.is_empty();
                Poll::Ready(Some(Ok(Frame::data(bytes))))
            }
            None => Poll::Ready(None),
        }
    }
}

impl Drop for SseBody {
    fn drop(&mut self) {
        if !self.finished {
            self.state.gone.send_replace(true);
        }
    }
}
