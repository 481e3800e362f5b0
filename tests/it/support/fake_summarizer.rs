//! A fake OpenAI-compatible summarizer on 127.0.0.1:0, answering as the real API does
//! where the digest depends on it: `401 invalid_api_key` without the right bearer key,
//! `choices[0].message.content` on success, an error object with a 5xx.
//!
//! What it answers depends on the transcript it is sent, so one run can hold every
//! outcome: a transcript containing `FAIL` gets a 500, `EMPTY` a blank summary, `SLOW`
//! no answer at all (until the client gives up); any other a summary naming how many
//! lines it read.

use std::sync::{Arc, Mutex};

use axum::{
    Json, Router,
    extract::State,
    http::{HeaderMap, StatusCode, header},
    response::{IntoResponse, Response},
    routing::post,
};
use serde_json::{Value, json};
use tokio::{net::TcpListener, sync::watch};

/// The key the fake accepts.
pub const KEY: &str = "sk-digest-test-key";

/// The running fake.
pub struct FakeSummarizer {
    /// Base URL for `base_url`; ends with `/v1`.
    pub base: String,
    state: Arc<Seen>,
}

struct Seen {
    /// The transcripts (the user message) of every authorized request, in order.
    transcripts: Mutex<Vec<String>>,
    /// The system messages.
    instructions: Mutex<Vec<String>>,
    count: watch::Sender<usize>,
}

impl FakeSummarizer {
    /// Starts one.
    pub async fn start() -> Self {
        let state = Arc::new(Seen {
            transcripts: Mutex::new(Vec::new()),
            instructions: Mutex::new(Vec::new()),
            count: watch::channel(0).0,
        });
        let app = Router::new()
            .route("/v1/chat/completions", post(completions))
            .with_state(state.clone());
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind fake");
        let base = format!("http://{}/v1", listener.local_addr().expect("addr"));
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self { base, state }
    }

    /// The transcripts it was asked to summarize, in order.
    pub fn transcripts(&self) -> Vec<String> {
        self.state.transcripts.lock().expect("lock").clone()
    }

    /// The system messages it was sent.
    pub fn instructions(&self) -> Vec<String> {
        self.state.instructions.lock().expect("lock").clone()
    }

    /// The summary it answers for `transcript` (when it answers one).
    pub fn summary_of(transcript: &str) -> String {
        format!(
            "They talked it through in {} line(s) and agreed on the plan.",
            transcript.lines().count()
        )
    }
}

async fn completions(
    State(s): State<Arc<Seen>>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    let authorized = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v == format!("Bearer {KEY}"));
    if !authorized {
        let error = json!({"error": {
            "message": "Incorrect API key provided.",
            "type": "invalid_request_error",
            "param": null,
            "code": "invalid_api_key"
        }});
        return (StatusCode::UNAUTHORIZED, Json(error)).into_response();
    }
    let message = |role: &str| {
        body["messages"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|m| m["role"] == role)
            .and_then(|m| m["content"].as_str())
            .unwrap_or_default()
            .to_string()
    };
    let transcript = message("user");
    s.instructions.lock().expect("lock").push(message("system"));
    s.transcripts.lock().expect("lock").push(transcript.clone());
    s.count.send_modify(|n| *n += 1);
    if transcript.contains("FAIL") {
        let error = json!({"error": {
            "message": "The server had an error while processing your request.",
            "type": "server_error",
            "param": null,
            "code": null
        }});
        return (StatusCode::INTERNAL_SERVER_ERROR, Json(error)).into_response();
    }
    if transcript.contains("SLOW") {
        // Never answers: the client's timeout ends it.
        std::future::pending::<()>().await;
    }
    let content = if transcript.contains("EMPTY") {
        " \n ".to_string()
    } else {
        FakeSummarizer::summary_of(&transcript)
    };
    Json(json!({
        "id": "chatcmpl-digest",
        "object": "chat.completion",
        "model": body["model"],
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": content},
            "finish_reason": "stop"
        }],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
    }))
    .into_response()
}
