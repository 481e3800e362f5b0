//! `POST /webhook/{profile}/event` and `POST /webhook/{profile}/card`.
//!
//! The handler does no slow work: verify the raw bytes, hand the event to the group
//! committer, and answer once it is durably stored. Feishu retries an event that is not
//! answered 200 within 3 s, so one not stored by `server.ack_deadline_ms` is answered
//! 503, and a duplicate delivery is answered 200 without creating anything. Card
//! callbacks, which Feishu never retries, are answered by [`super::card_callback`].

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

use super::{ApiError, AppState, CallbackErrors, ErrorBody, card_callback, extract::Path};
use crate::{
    inbox::arrival::Arrival,
    protocol::{self, Freshness, SignedHeaders, Verified, VerifiedEvent},
    util::now_secs,
};

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
        (status = 200, description = "Challenge answered, or event durably stored (or a duplicate). A `card.action.trigger` press gets the button's toast, `{}` when repeated, or, when storing and answering it takes longer than `server.ack_deadline_ms`, an `info` toast, and it is finished after the answer", body = CallbackAck),
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

/// Receives card callbacks on the legacy message-card URL for one profile.
///
/// Legacy ones (plaintext, SHA-1 signed), and, as on `/event`, encrypted or schema 2.0
/// ones (SHA-256 signed), told apart by a top-level `encrypt` or `schema` member.
#[utoipa::path(
    post,
    path = "/webhook/{profile}/card",
    tag = "ingress",
    params(
        ("profile" = String, Path, description = "Profile name from the config"),
        ("X-Lark-Request-Timestamp" = Option<String>, Header, description = "Timestamp"),
        ("X-Lark-Request-Nonce" = Option<String>, Header, description = "Nonce"),
        ("X-Lark-Signature" = Option<String>, Header, description = "hex(sha1(timestamp + nonce + verification_token + body)); for a body with a top-level `encrypt` or `schema` member, as on `/event`: hex(sha256(timestamp + nonce + encrypt_key + body))"),
    ),
    request_body(content = Object, content_type = "application/json", description = "Legacy card action (`open_id`, `open_message_id`, `action`, …) or `url_verification`; or a callback in the event formats (`{\"encrypt\": …}`, schema 2.0 `card.action.trigger`)"),
    responses(
        (status = 200, description = "Challenge answered; or, for a press, the button's toast, `{}` for anything else or a repeated delivery, or, when storing and answering it takes longer than `server.ack_deadline_ms`, an `info` toast, and it is finished after the answer", body = CallbackAck),
        (status = 400, description = "`undecryptable`, `malformed_json` or `invalid_event`; `bad_request` when the profile segment is not UTF-8", body = ErrorBody),
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
        Ok((outcome, mut resp)) => {
            // What became of the callback, for people and tools (Feishu ignores it).
            resp.headers_mut().insert(
                crate::inbox::OUTCOME_HEADER,
                axum::http::HeaderValue::from_static(outcome),
            );
            (profile.as_str(), outcome, resp)
        }
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
            protocol::verify::verify_card_url(creds.credentials(), signed, &body, freshness)
        }
    }?;
    match verified {
        Verified::Challenge(challenge) => Ok((
            "challenge",
            Json(json!({ "challenge": challenge })).into_response(),
        )),
        Verified::Event(event) => store(app, profile, event, deadline).await,
    }
}

async fn store(
    app: &AppState,
    profile: &str,
    event: VerifiedEvent,
    deadline: Instant,
) -> Result<(&'static str, Response), ApiError> {
    let arrival = Arrival::of(profile, event).map_err(ApiError::InvalidEvent)?;
    // Feishu never retries a card callback: a press is answered within its budget
    // whatever the database does, and finished after the answer if need be.
    if arrival.is_press {
        return card_callback::receive(app, arrival.row, deadline).await;
    }
    // Feishu gives up after 3 s; a 200 is never sent for an event that was not committed.
    let (event_id, event_type, handled) = (
        arrival.row.event_id.clone(),
        arrival.row.event_type.clone(),
        arrival.handled,
    );
    let outcome = arrival
        .store(&app.committer, deadline)
        .await
        .map_err(|e| ApiError::not_stored(e, &app.metrics, profile, &event_id))?;
    let label = Arrival::label(outcome, handled);
    // One line per accepted event would cost more than acknowledging it: debug only
    // (the count is in `feishu_bridge_webhook_requests_total`).
    tracing::debug!(profile, %event_id, %event_type, outcome = label, "callback stored");
    Ok((label, Json(json!({ "msg": "success" })).into_response()))
}

fn header<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}
