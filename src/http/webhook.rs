//! `POST /webhook/{profile}/event` and `POST /webhook/{profile}/card`.
//!
//! The handler does no slow work: verify the raw bytes, hand the event to the group
//! committer, and answer once it is durably stored. Feishu retries anything that is not
//! a 200 within 3 s, and a duplicate delivery is answered 200 without creating anything.

use std::time::Duration;

use axum::{
    Json,
    body::Bytes,
    extract::{State, rejection::BytesRejection},
    http::HeaderMap,
    response::{IntoResponse, Response},
};
use serde::Serialize;
use serde_json::json;
use tokio::time::Instant;
use utoipa::ToSchema;

use super::{ApiError, AppState, CallbackErrors, ErrorBody, extract::Path};
use crate::{
    inbox::CommitError,
    protocol::{self, Freshness, SignedHeaders, Verified, VerifiedEvent, events},
    store::{InboxStatus, InsertOutcome, NewInboxEvent},
    turns::buttons::{self, ButtonContext},
    util::{UnixMs, now_secs},
};

/// A store failure that travels shared between the waiters of one batch.
fn shared(e: std::sync::Arc<crate::store::StoreError>) -> ApiError {
    ApiError::store(ArcError(e))
}

/// Which endpoint a request came in on (a metrics label).
#[derive(Debug, Clone, Copy)]
enum Kind {
    Event,
    Card,
}

impl Kind {
    fn as_str(self) -> &'static str {
        match self {
            Self::Event => "event",
            Self::Card => "card",
        }
    }
}

/// A Feishu callback body: `{"encrypt": "…"}` when the app has an Encrypt Key, else the
/// plaintext envelope (schema 2.0, schema 1.0 or `url_verification`).
#[derive(Debug, Serialize, ToSchema)]
#[schema(example = json!({"encrypt": "P37w+VZImNgPEO1RBhJ6RtKl7n6zymIbEG1pReEzghk="}))]
pub struct CallbackBody {
    /// base64(iv ‖ AES-256-CBC ciphertext), present when encrypted.
    pub encrypt: Option<String>,
    /// `"2.0"` for schema 2.0 events.
    pub schema: Option<String>,
    /// Schema 2.0 header (`event_id`, `event_type`, `token`, `create_time`, …).
    #[schema(value_type = Option<Object>)]
    pub header: Option<serde_json::Value>,
    /// The event body.
    #[schema(value_type = Option<Object>)]
    pub event: Option<serde_json::Value>,
    /// `url_verification` for the challenge, `event_callback` for schema 1.0.
    #[serde(rename = "type")]
    pub kind: Option<String>,
    /// The challenge to echo.
    pub challenge: Option<String>,
    /// Verification Token (challenge and schema 1.0).
    pub token: Option<String>,
    /// Schema 1.0 event id.
    pub uuid: Option<String>,
}

/// The 200 answer: the challenge echo, `{"msg":"success"}` for an event (stored or a
/// duplicate), or `{}` for a card action.
#[derive(Debug, Serialize, ToSchema)]
pub struct CallbackAck {
    /// Echo of the `url_verification` challenge.
    pub challenge: Option<String>,
    /// `success` for events.
    pub msg: Option<String>,
}

/// Receives Feishu events (and `card.action.trigger` callbacks) for one profile.
#[utoipa::path(
    post,
    path = "/webhook/{profile}/event",
    tag = "ingress",
    params(
        ("profile" = String, Path, description = "Profile name from the config"),
        ("X-Lark-Request-Timestamp" = Option<String>, Header, description = "Unix seconds"),
        ("X-Lark-Request-Nonce" = Option<String>, Header, description = "Nonce"),
        ("X-Lark-Signature" = Option<String>, Header, description = "hex(sha256(timestamp + nonce + encrypt_key + body)); required when the profile has an encrypt key, except on url_verification"),
    ),
    request_body(content = CallbackBody, content_type = "application/json"),
    responses(
        (status = 200, description = "Challenge answered, or event durably stored (or a duplicate)", body = CallbackAck),
        (status = 400, description = "`undecryptable`, `malformed_json`, or `invalid_event` (U+0000 in an id or outside the message text, an id over 512 bytes); `bad_request` when the profile segment is not UTF-8", body = ErrorBody),
        CallbackErrors,
    )
)]
pub async fn event(
    State(app): State<AppState>,
    Path(profile): Path<String>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    receive(app, Kind::Event, profile, headers, body).await
}

/// Receives legacy message-card callbacks (SHA-1 signed, plaintext) for one profile.
#[utoipa::path(
    post,
    path = "/webhook/{profile}/card",
    tag = "ingress",
    params(
        ("profile" = String, Path, description = "Profile name from the config"),
        ("X-Lark-Request-Timestamp" = Option<String>, Header, description = "Timestamp"),
        ("X-Lark-Request-Nonce" = Option<String>, Header, description = "Nonce"),
        ("X-Lark-Signature" = Option<String>, Header, description = "hex(sha1(timestamp + nonce + verification_token + body))"),
    ),
    request_body(content = Object, content_type = "application/json", description = "Legacy card action (`open_id`, `open_message_id`, `action`, …) or `url_verification`"),
    responses(
        (status = 200, description = "Challenge answered, or `{}` once the action is stored", body = CallbackAck),
        (status = 400, description = "`malformed_json` or `invalid_event`; `bad_request` when the profile segment is not UTF-8", body = ErrorBody),
        CallbackErrors,
    )
)]
pub async fn card(
    State(app): State<AppState>,
    Path(profile): Path<String>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    receive(app, Kind::Card, profile, headers, body).await
}

async fn receive(
    app: AppState,
    kind: Kind,
    profile: String,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let deadline = Instant::now() + Duration::from_millis(app.config.server.ack_deadline_ms);
    let handled = handle(&app, kind, &profile, &headers, body, deadline).await;
    let (label, outcome, response) = match handled {
        Ok((outcome, resp)) => (profile.as_str(), outcome, resp),
        Err(e) => {
            let label = if matches!(e, ApiError::UnknownProfile(_)) {
                "unknown"
            } else {
                profile.as_str()
            };
            if !matches!(e, ApiError::StoreUnavailable(_)) {
                tracing::info!(
                    profile = label,
                    kind = kind.as_str(),
                    code = e.code(),
                    "callback rejected"
                );
            }
            (label, e.code(), e.into_response())
        }
    };
    app.metrics
        .webhook_requests
        .with_label_values(&[label, kind.as_str(), outcome])
        .inc();
    response
}

async fn handle(
    app: &AppState,
    kind: Kind,
    profile: &str,
    headers: &HeaderMap,
    body: Result<Bytes, BytesRejection>,
    deadline: Instant,
) -> Result<(&'static str, Response), ApiError> {
    let creds = app
        .profiles
        .get(profile)
        .ok_or_else(|| ApiError::UnknownProfile(profile.to_string()))?;
    let body = body.map_err(|r| ApiError::unreadable_body(r, app.config.server.max_body_bytes))?;
    let signed = SignedHeaders {
        timestamp: header(headers, "x-lark-request-timestamp"),
        nonce: header(headers, "x-lark-request-nonce"),
        signature: header(headers, "x-lark-signature"),
    };
    let freshness = Freshness {
        now_secs: now_secs(),
        tolerance_secs: app.config.server.timestamp_tolerance_secs,
    };
    let verified = match kind {
        Kind::Event => {
            protocol::verify::verify_event(creds.credentials(), signed, &body, freshness)
        }
        Kind::Card => {
            protocol::verify::verify_card(creds.verification_token(), signed, &body, freshness)
        }
    }?;
    match verified {
        Verified::Challenge(challenge) => Ok((
            "challenge",
            Json(json!({ "challenge": challenge })).into_response(),
        )),
        Verified::Event(event) => store(app, kind, profile, event, deadline).await,
    }
}

async fn store(
    app: &AppState,
    kind: Kind,
    profile: &str,
    event: VerifiedEvent,
    deadline: Instant,
) -> Result<(&'static str, Response), ApiError> {
    let handled = events::is_handled(&event.event_type);
    let status = if handled {
        InboxStatus::Pending
    } else {
        InboxStatus::Skipped
    };
    let is_card = matches!(kind, Kind::Card) || event.event_type == events::CARD_ACTION;
    let (event_id, event_type) = (event.event_id.clone(), event.event_type.clone());
    let card_payload = is_card.then(|| event.payload.clone());
    let row = NewInboxEvent {
        profile: profile.to_string(),
        event_id: event.event_id,
        event_type: event.event_type,
        message_id: event.message_id,
        chat_key: event.chat_key,
        payload: event.payload,
        received_at: UnixMs::now(),
        status,
    };
    // Refused here, before it joins a batch, so it cannot fail its batch-mates.
    if let Some(why) = row.unstorable() {
        return Err(ApiError::InvalidEvent(why));
    }
    // The whole wait, queueing for the committer included, ends by the deadline: Feishu
    // gives up after 3 s. A batch that commits after the 503 only makes Feishu's retry a
    // duplicate; a 200 is never sent for an event that was not committed.
    let outcome = match tokio::time::timeout_at(deadline, app.committer.submit(row, deadline)).await
    {
        Ok(Ok(o)) => o,
        Ok(Err(CommitError::Store(e))) => return Err(shared(e)),
        Ok(Err(CommitError::Refused(e))) => {
            tracing::warn!(profile, %event_id, error = %ArcError(e), "the database refused an authentic event");
            return Err(ApiError::InvalidEvent(
                "the database refused this event".into(),
            ));
        }
        Ok(Err(CommitError::Stopped)) => return Err(ApiError::StoreUnavailable(None)),
        Ok(Err(CommitError::Late)) | Err(_) => {
            app.metrics.store_error("insert_inbox_timeout");
            return Err(ApiError::StoreUnavailable(None));
        }
    };
    let label = match (outcome, handled) {
        (InsertOutcome::Duplicate, _) => "duplicate",
        (InsertOutcome::Inserted, true) => "accepted",
        (InsertOutcome::Inserted, false) => "skipped",
    };
    tracing::info!(profile, %event_id, %event_type, outcome = label, "callback stored");
    // A card button is answered with a toast (Feishu shows it; it wants the answer within
    // 3 s), and what the button does runs after the answer. A repeated delivery is only
    // acknowledged.
    let body = match (card_payload, outcome) {
        (Some(payload), InsertOutcome::Inserted) => {
            card_answer(app, profile, &event_type, payload, deadline).await
        }
        (Some(_), InsertOutcome::Duplicate) => json!({}),
        (None, _) => json!({ "msg": "success" }),
    };
    Ok((label, Json(body).into_response()))
}

/// The toast for a stored card action; if working it out (a database read, a reset)
/// would outlast the deadline, a toast that says it is under way — what the button does
/// goes on after the answer.
async fn card_answer(
    app: &AppState,
    profile: &str,
    event_type: &str,
    payload: String,
    deadline: Instant,
) -> serde_json::Value {
    let (state, profile, event_type) = (app.clone(), profile.to_string(), event_type.to_string());
    let work = tokio::spawn(async move {
        let cx = ButtonContext {
            config: &state.config,
            turns: state.store.clone(),
            sessions: state.store.clone(),
            queues: &state.queues,
        };
        buttons::answer(cx, &profile, &event_type, &payload).await
    });
    match tokio::time::timeout_at(deadline, work).await {
        Ok(Ok(body)) => body,
        _ => {
            json!({"toast": {"type": "info", "content": "Working on it; this can take a moment."}})
        }
    }
}

fn header<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// Lets a shared store error travel as an error source.
#[derive(Debug)]
struct ArcError(std::sync::Arc<crate::store::StoreError>);

impl std::fmt::Display for ArcError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(&self.0, f)
    }
}

impl std::error::Error for ArcError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        std::error::Error::source(&*self.0)
    }
}
