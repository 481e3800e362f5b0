//! `POST /agent/{profile}/turns/{turn_id}/output`: the asynchronous answer of a webhook
//! agent that replied `202` to its turn, signed the same way as the turn.

use axum::{
    Json,
    body::Bytes,
    extract::{State, rejection::BytesRejection},
    http::HeaderMap,
};
use secrecy::ExposeSecret;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{ApiError, AppState, ErrorBody, extract::Path};
use crate::{
    agent::{
        Answer, HandoffAsk,
        webhook::{self, SignatureError},
    },
    protocol::Rejection,
};

/// The agent's answer.
#[derive(Debug, Deserialize, ToSchema)]
pub struct AgentOutput {
    /// The final answer text.
    pub output: String,
    /// Hands work to another profile of the hub once the answer is posted.
    #[serde(default)]
    pub handoff: Option<HandoffAsk>,
}

/// Accepted.
#[derive(Debug, Serialize, ToSchema)]
pub struct Accepted {
    /// `accepted`.
    pub status: &'static str,
}

/// Delivers a webhook agent's answer to its waiting turn.
#[utoipa::path(post, path = "/agent/{profile}/turns/{turn_id}/output", tag = "agents",
    params(
        ("profile" = String, Path, description = "Profile name"),
        ("turn_id" = String, Path, description = "The `turn_id` (and `webhook-id`) of the turn"),
        ("webhook-id" = String, Header, description = "Message id (any unique string)"),
        ("webhook-timestamp" = String, Header, description = "Unix seconds; within 5 minutes"),
        ("webhook-signature" = String, Header, description = "`v1,` + base64 HMAC-SHA256 of `id.timestamp.body` with the agent secret"),
    ),
    request_body(content = AgentOutput, content_type = "application/json"),
    responses(
        (status = 200, description = "The turn got its answer", body = Accepted),
        (status = 400, description = "`malformed_json`, or `bad_request`: a path parameter is not valid UTF-8", body = ErrorBody),
        (status = 401, description = "`bad_signature`", body = ErrorBody),
        (status = 404, description = "`unknown_profile`, or `unknown_turn`: no turn waits under this id (unknown, answered, timed out or stopped)", body = ErrorBody),
        (status = 413, description = "`payload_too_large`", body = ErrorBody),
    ))]
pub async fn output(
    State(app): State<AppState>,
    Path((profile, turn_id)): Path<(String, String)>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Accepted>, ApiError> {
    let body = authenticate(&app, &profile, &headers, body)?;
    let out: AgentOutput = serde_json::from_slice(&body)
        .map_err(|_| Rejection::MalformedJson("expected {\"output\": \"…\"}".into()))?;
    let answer = Answer {
        text: out.output,
        handoff: out.handoff,
    };
    if app.callbacks.complete(&turn_id, answer) {
        Ok(Json(Accepted { status: "accepted" }))
    } else {
        Err(ApiError::UnknownTurn(turn_id))
    }
}

/// The body of a callback of a profile's agent, once its Standard Webhooks signature
/// (with the profile's agent secret) is checked: `unknown_profile`, a body that cannot
/// be read, or `bad_signature` otherwise.
pub(super) fn authenticate(
    app: &AppState,
    profile: &str,
    headers: &HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Bytes, ApiError> {
    if app.config.profile(profile).is_none() {
        return Err(ApiError::UnknownProfile(profile.to_string()));
    }
    let body = body.map_err(|r| ApiError::unreadable_body(r, app.config.server.max_body_bytes))?;
    verify_signature(app, profile, headers, &body)?;
    Ok(body)
}

/// Checks the Standard Webhooks signature of `body` with `profile`'s agent secret.
pub(super) fn verify_signature(
    app: &AppState,
    profile: &str,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<(), ApiError> {
    let p = app
        .config
        .profile(profile)
        .ok_or_else(|| ApiError::UnknownProfile(profile.to_string()))?;
    let Some(secret) = p
        .agent
        .secret
        .as_ref()
        .filter(|s| !s.expose_secret().is_empty())
    else {
        return Err(Rejection::BadSignature("this profile has no agent secret").into());
    };
    let h = |n: &str| headers.get(n).and_then(|v| v.to_str().ok());
    webhook::verify(
        secret.expose_secret(),
        h("webhook-id"),
        h("webhook-timestamp"),
        h("webhook-signature"),
        body,
    )
    .map_err(|e| match e {
        SignatureError::Missing => Rejection::BadSignature(
            "webhook-id, webhook-timestamp and webhook-signature are required",
        ),
        SignatureError::Stale => {
            Rejection::BadSignature("webhook-timestamp is outside the allowed window")
        }
        SignatureError::Mismatch => Rejection::BadSignature("webhook-signature does not match"),
    })?;
    Ok(())
}
