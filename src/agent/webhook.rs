//! The `webhook` agent backend: the turn is POSTed to the operator's agent runtime,
//! signed the Standard Webhooks way (`webhook-id`, `webhook-timestamp`,
//! `webhook-signature: v1,<base64 HMAC-SHA256 of "id.timestamp.body">`).
//!
//! `200 {"output": …}` completes the turn (with an optional `"handoff": {"profile": …,
//! "text": …}` handing work to another profile of the hub). `202` means the answer comes later as a
//! signed `POST /agent/{profile}/turns/{turn_id}/output`; the turn waits for it until
//! `timeout_secs`.

use std::{collections::HashMap, sync::Mutex, time::Duration};

use async_trait::async_trait;
use base64::{Engine, engine::general_purpose::STANDARD};
use hmac::{Hmac, Mac};
use secrecy::{ExposeSecret, SecretString};
use sha2::Sha256;
use tokio::sync::oneshot;

use super::{Agent, AgentError, AgentTurn, Answer, FeedInject, HandoffAsk, Partial};
use crate::util::now_secs;

/// The signing key: a `whsec_`-prefixed secret is base64 (the Standard Webhooks
/// convention); anything else is used as raw bytes.
pub(crate) fn key_bytes(secret: &str) -> Vec<u8> {
    match secret.strip_prefix("whsec_").map(|b| STANDARD.decode(b)) {
        Some(Ok(bytes)) => bytes,
        _ => secret.as_bytes().to_vec(),
    }
}

/// `v1,<base64 signature>` of one message.
pub fn sign(secret: &str, id: &str, timestamp: &str, body: &[u8]) -> String {
    let mut mac =
        Hmac::<Sha256>::new_from_slice(&key_bytes(secret)).expect("HMAC takes any key length");
    mac.update(id.as_bytes());
    mac.update(b".");
    mac.update(timestamp.as_bytes());
    mac.update(b".");
    mac.update(body);
    format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes()))
}

/// Why a signed callback was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    /// Headers missing.
    #[error("webhook-id, webhook-timestamp and webhook-signature are required")]
    Missing,
    /// Timestamp too far from now.
    #[error("webhook-timestamp is outside the allowed window")]
    Stale,
    /// No signature matches.
    #[error("webhook-signature does not match")]
    Mismatch,
}

/// Verifies a Standard Webhooks signature header (several space-separated `v1,…`
/// signatures may be present; one match suffices), in constant time, within 5 minutes.
pub fn verify(
    secret: &str,
    id: Option<&str>,
    timestamp: Option<&str>,
    signatures: Option<&str>,
    body: &[u8],
) -> Result<(), SignatureError> {
    let (Some(id), Some(ts), Some(sigs)) = (id, timestamp, signatures) else {
        return Err(SignatureError::Missing);
    };
    let when: i64 = ts.trim().parse().map_err(|_| SignatureError::Stale)?;
    if now_secs().abs_diff(when) > 300 {
        return Err(SignatureError::Stale);
    }
    let expected = sign(secret, id, ts, body);
    if sigs
        .split_whitespace()
        .any(|s| crate::protocol::crypto::ct_eq(s.as_bytes(), expected.as_bytes()))
    {
        Ok(())
    } else {
        Err(SignatureError::Mismatch)
    }
}

/// Turns waiting for an asynchronous answer.
#[derive(Debug, Default)]
pub struct PendingCallbacks {
    waiting: Mutex<HashMap<String, oneshot::Sender<Answer>>>,
}

impl PendingCallbacks {
    fn register(&self, turn_id: &str) -> oneshot::Receiver<Answer> {
        let (tx, rx) = oneshot::channel();
        self.lock().insert(turn_id.to_string(), tx);
        rx
    }

    fn forget(&self, turn_id: &str) {
        self.lock().remove(turn_id);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, oneshot::Sender<Answer>>> {
        self.waiting.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Hands an answer to its waiting turn; `false` when no turn waits under that id
    /// (unknown, already answered, timed out or cancelled).
    pub fn complete(&self, turn_id: &str, output: Answer) -> bool {
        match self.lock().remove(turn_id) {
            Some(tx) => tx.send(output).is_ok(),
            None => false,
        }
    }
}

/// The webhook backend of one profile.
pub struct WebhookAgent {
    /// HTTP client.
    pub http: reqwest::Client,
    /// Endpoint.
    pub url: String,
    /// Signing secret.
    pub secret: SecretString,
    /// How long a turn may take, sync or async.
    pub timeout: Duration,
    /// Shared with the callback route.
    pub pending: std::sync::Arc<PendingCallbacks>,
    /// Show the turn events the agent reports in the turn's card.
    pub stream: bool,
}

#[async_trait]
impl Agent for WebhookAgent {
    async fn run(&self, turn: &AgentTurn, _partial: &Partial) -> Result<Answer, AgentError> {
        let body = serde_json::to_vec(turn).map_err(AgentError::Encode)?;
        let ts = now_secs().to_string();
        let signature = sign(self.secret.expose_secret(), &turn.turn_id, &ts, &body);
        // Registered before the request: an agent may call back before answering 202.
        let answer = self.pending.register(&turn.turn_id);
        let result = tokio::time::timeout(self.timeout, async {
            let resp = self
                .http
                .post(&self.url)
                .header("content-type", "application/json")
                .header("webhook-id", &turn.turn_id)
                .header("webhook-timestamp", &ts)
                .header("webhook-signature", &signature)
                .body(body)
                .send()
                .await
                .map_err(AgentError::unreachable)?;
            match resp.status() {
                reqwest::StatusCode::OK => {
                    let bytes = resp.bytes().await.map_err(AgentError::broke_off)?;
                    let v: serde_json::Value =
                        serde_json::from_slice(&bytes).map_err(AgentError::NotJson)?;
                    let text = v["output"]
                        .as_str()
                        .map(str::to_string)
                        .ok_or(AgentError::MissingAnswer("an output"))?;
                    Ok(Answer {
                        text,
                        handoff: handoff_of(&v),
                    })
                }
                reqwest::StatusCode::ACCEPTED => answer.await.map_err(AgentError::CallbackLost),
                status => Err(AgentError::Status {
                    status,
                    detail: None,
                }),
            }
        })
        .await;
        self.pending.forget(&turn.turn_id);
        match result {
            Ok(r) => r,
            Err(_) => Err(AgentError::Timeout(self.timeout)),
        }
    }

    async fn inject(&self, segment: &FeedInject<'_>) -> Result<(), AgentError> {
        let body = serde_json::to_vec(segment).map_err(AgentError::Encode)?;
        let ts = now_secs().to_string();
        // Its own webhook id: an inject is a message of its own, never a turn's.
        let id = format!("feed_{}_{}", segment.session_key, segment.segment_id);
        let signature = sign(self.secret.expose_secret(), &id, &ts, &body);
        let sent = tokio::time::timeout(INJECT_TIMEOUT.min(self.timeout), async {
            self.http
                .post(&self.url)
                .header("content-type", "application/json")
                .header("webhook-id", &id)
                .header("webhook-timestamp", &ts)
                .header("webhook-signature", &signature)
                .body(body)
                .send()
                .await
                .map_err(AgentError::unreachable)
        })
        .await
        .map_err(|_| AgentError::Timeout(INJECT_TIMEOUT.min(self.timeout)))??;
        // No answer is expected: any success status will do.
        match sent.status() {
            s if s.is_success() => Ok(()),
            status => Err(AgentError::Status {
                status,
                detail: None,
            }),
        }
    }

    fn reports_events(&self) -> bool {
        self.stream
    }
}

/// The structured handoff of an answer: a `handoff` object with a `profile` and a
/// `text`, both strings (anything else is no handoff).
pub fn handoff_of(answer: &serde_json::Value) -> Option<HandoffAsk> {
    serde_json::from_value(answer.get("handoff")?.clone()).ok()
}

/// How long an inject may take: it wakes nobody, so it should be quick.
const INJECT_TIMEOUT: Duration = Duration::from_secs(10);

#[cfg(test)]
mod tests {
    use std::{error::Error as _, sync::Arc};

    use super::*;

    const SECRET: &str = "whsec_c2VjcmV0LW5ldmVyLXNob3du";
    const REQUEST: &str = "REQUEST-TEXT-7d41";

    fn turn() -> AgentTurn {
        crate::agent::sample_turn(REQUEST)
    }

    fn agent(url: String) -> WebhookAgent {
        WebhookAgent {
            http: reqwest::Client::new(),
            url,
            secret: SecretString::from(SECRET),
            timeout: Duration::from_secs(10),
            pending: Arc::new(PendingCallbacks::default()),
            stream: true,
        }
    }

    /// An agent on 127.0.0.1:0 answering every turn with `status` and `body`; its URL.
    async fn answering(status: u16, body: &'static str) -> String {
        let status = axum::http::StatusCode::from_u16(status).expect("a status");
        let app = axum::Router::new().fallback(move || async move { (status, body) });
        format!("http://{}/turn", crate::util::testing::serve(app).await)
    }

    async fn run(url: String) -> AgentError {
        let (partial, _rx) = tokio::sync::watch::channel(crate::agent::Progress::default());
        agent(url)
            .run(&turn(), &partial)
            .await
            .expect_err("no answer")
    }

    /// Neither the secret, the signature's key nor the turn's text shows in `err`.
    fn quotes_nothing(err: &AgentError) {
        for shown in [err.to_string(), format!("{err:?}")] {
            assert!(!shown.contains(REQUEST), "{shown}");
            assert!(!shown.contains(SECRET), "{shown}");
        }
    }

    #[tokio::test]
    async fn an_unreachable_agent_is_a_transport_failure_with_its_cause() {
        let addr = crate::util::testing::closed_port();
        let err = run(format!("http://{addr}/turn")).await;
        let AgentError::Unreachable(cause) = &err else {
            panic!("not a transport failure: {err:?}");
        };
        assert!(cause.is_connect() && cause.url().is_none(), "{cause:?}");
        assert!(err.source().is_some_and(|s| s.is::<reqwest::Error>()));
        let text = err.to_string();
        assert!(
            text.starts_with("agent failed: agent unreachable: error sending request"),
            "{text}"
        );
        assert!(!text.contains(&addr.to_string()), "{text}");
        // `Debug` may show the socket address the connection went to, never the URL.
        assert!(!format!("{err:?}").contains("http://"), "{err:?}");
        quotes_nothing(&err);
    }

    #[tokio::test]
    async fn a_refusing_status_is_named_with_its_code() {
        let err = run(answering(500, "stack trace with a secret").await).await;
        assert!(
            matches!(&err, AgentError::Status { status, detail: None } if status.as_u16() == 500),
            "{err:?}"
        );
        assert_eq!(
            err.to_string(),
            "agent failed: agent answered HTTP 500 Internal Server Error"
        );
        assert!(err.source().is_none());
        quotes_nothing(&err);
    }

    #[tokio::test]
    async fn an_answer_that_is_not_json_keeps_the_parsers_reason() {
        let err = run(answering(200, "<html>busy</html>").await).await;
        assert!(matches!(err, AgentError::NotJson(_)), "{err:?}");
        assert!(err.source().is_some_and(|s| s.is::<serde_json::Error>()));
        assert_eq!(
            err.to_string(),
            "agent failed: agent answered without JSON: expected value at line 1 column 1"
        );
    }

    #[tokio::test]
    async fn an_answer_without_an_output_says_so() {
        let err = run(answering(200, r#"{"result":"REQUEST-TEXT-7d41"}"#).await).await;
        assert!(
            matches!(err, AgentError::MissingAnswer("an output")),
            "{err:?}"
        );
        assert_eq!(
            err.to_string(),
            "agent failed: agent answered without an output"
        );
        quotes_nothing(&err);
    }

    #[tokio::test]
    async fn a_callback_that_can_no_longer_come_keeps_its_cause() {
        let url = answering(202, "{}").await;
        let agent = agent(url);
        let (partial, _rx) = tokio::sync::watch::channel(crate::agent::Progress::default());
        let t = turn();
        // A second registration under the same id drops the first turn's sender.
        let run = agent.run(&t, &partial);
        let replace = async {
            while agent.pending.lock().is_empty() {
                tokio::task::yield_now().await;
            }
            drop(agent.pending.register(&t.turn_id));
        };
        let (err, ()) = tokio::join!(run, replace);
        let err = err.expect_err("no answer");
        assert!(matches!(err, AgentError::CallbackLost(_)), "{err:?}");
        assert!(err.source().is_some());
        assert_eq!(
            err.to_string(),
            "agent failed: the agent's callback never came"
        );
    }

    #[test]
    fn signatures_verify_and_reject() {
        let ts = now_secs().to_string();
        let sig = sign("whsec_c2VjcmV0", "msg_1", &ts, b"{}");
        assert!(
            verify(
                "whsec_c2VjcmV0",
                Some("msg_1"),
                Some(&ts),
                Some(&format!("v1,bogus {sig}")),
                b"{}"
            )
            .is_ok()
        );
        assert_eq!(
            verify(
                "whsec_c2VjcmV0",
                Some("msg_1"),
                Some(&ts),
                Some(&sig),
                b"{ }"
            ),
            Err(SignatureError::Mismatch)
        );
        assert_eq!(
            verify("whsec_c2VjcmV0", None, Some(&ts), Some(&sig), b"{}"),
            Err(SignatureError::Missing)
        );
        assert_eq!(
            verify(
                "whsec_c2VjcmV0",
                Some("msg_1"),
                Some("1000"),
                Some(&sig),
                b"{}"
            ),
            Err(SignatureError::Stale)
        );
        // whsec_ secrets are base64: "c2VjcmV0" is "secret".
        assert_eq!(sig, sign("secret", "msg_1", &ts, b"{}"));
    }
}
