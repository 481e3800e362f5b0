//! `POST /agent/{profile}/turns/{turn_id}/events`: what a webhook agent reports while
//! its turn runs, one signed event at a time (see `docs/turns.md`, "Turn events").

use axum::{
    Json,
    body::Bytes,
    extract::{State, rejection::BytesRejection},
    http::HeaderMap,
};
use serde::Serialize;
use utoipa::ToSchema;

use super::{ApiError, AppState, ErrorBody, agent_callback::authenticate, extract::Path};
use crate::{
    agent::events::{
        self, EventError, MAX_BYTES_PER_TURN, MAX_EVENT_BYTES, MAX_EVENTS_PER_TURN, TurnEvent,
        TurnEventNote, TurnEventRequest,
    },
    protocol::Rejection,
    redact::echo,
    store::{AppendOutcome, NewAsk, NewTurnEvent, TurnEventLimits},
};

/// What became of an event.
#[derive(Debug, Serialize, ToSchema)]
pub struct EventAccepted {
    /// `accepted`.
    pub status: &'static str,
    pub seq: u64,
    /// The same event under this seq was stored before; nothing new was stored.
    pub duplicate: bool,
    /// A newer seq was stored before it: kept in the log, not displayed.
    pub stale: bool,
}

/// Stores one event of a running turn of a webhook agent.
#[utoipa::path(post, path = "/agent/{profile}/turns/{turn_id}/events", tag = "agents",
    params(
        ("profile" = String, Path, description = "Profile name"),
        ("turn_id" = String, Path, description = "The `turn_id` (and `webhook-id`) of the turn"),
        ("webhook-id" = String, Header, description = "Message id (any unique string)"),
        ("webhook-timestamp" = String, Header, description = "Unix seconds; within 5 minutes"),
        ("webhook-signature" = String, Header, description = "`v1,` + base64 HMAC-SHA256 of `id.timestamp.body` with the agent secret"),
    ),
    request_body(content = TurnEventRequest, content_type = "application/json"),
    responses(
        (status = 200, description = "Stored, or a repeat of the event stored under this seq (`duplicate`)", body = EventAccepted),
        (status = 400, description = "`malformed_json`: not a JSON object, or `bad_request`: a path parameter is not valid UTF-8", body = ErrorBody),
        (status = 401, description = "`bad_signature`", body = ErrorBody),
        (status = 404, description = "`unknown_profile`, or `unknown_turn`: no turn of this profile under this id", body = ErrorBody),
        (status = 409, description = "`seq_conflict`: another event is stored under this seq; `ask_conflict`: an ask with this id was asked before in the turn; `turn_not_started`: the turn is still queued; `turn_ended`; `turn_events_full`: the turn's count or byte bound would be passed", body = ErrorBody),
        (status = 413, description = "`payload_too_large`: the body is over 16 KiB", body = ErrorBody),
        (status = 422, description = "`invalid_turn_event`: an unknown kind, a missing or unknown field, a value out of range, a string too long", body = ErrorBody),
        (status = 503, description = "`store_unavailable`: nothing was stored; send it again", body = ErrorBody),
    ))]
pub async fn post(
    State(app): State<AppState>,
    Path((profile, turn_id)): Path<(String, String)>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<EventAccepted>, ApiError> {
    if body.as_ref().is_ok_and(|b| b.len() > MAX_EVENT_BYTES) {
        return Err(ApiError::PayloadTooLarge(MAX_EVENT_BYTES));
    }
    let body = authenticate(&app, &profile, &headers, body)?;
    let parsed = events::parse(&body).map_err(|e| match e {
        EventError::Malformed(m) => Rejection::MalformedJson(m).into(),
        EventError::Invalid(m) => ApiError::InvalidTurnEvent(m),
    })?;
    let new = NewTurnEvent {
        turn_id: &turn_id,
        profile: &profile,
        seq: parsed.seq,
        kind: parsed.event.kind(),
        body: &parsed.body,
        now: app.clock.now(),
        ask: match &parsed.event {
            TurnEvent::Ask(a) => Some(NewAsk {
                ask_id: &a.id,
                prompt: &a.prompt,
                style: a.style.as_str(),
                options: &a.options,
                default_value: a.timeout_answer(),
                timeout_secs: a.timeout_secs,
            }),
            _ => None,
        },
    };
    let limits = TurnEventLimits {
        max_events: MAX_EVENTS_PER_TURN,
        max_bytes: MAX_BYTES_PER_TURN,
    };
    let outcome = app
        .store
        .append_turn_event(&new, limits)
        .await
        .map_err(ApiError::store)?;
    let seq = parsed.seq.unsigned_abs();
    let accepted = |duplicate, stale| {
        Ok(Json(EventAccepted {
            status: "accepted",
            seq,
            duplicate,
            stale,
        }))
    };
    match outcome {
        AppendOutcome::Stored { stale } => {
            let _ = app.turn_events.send(TurnEventNote {
                turn_id: turn_id.clone(),
                seq: parsed.seq,
                stale,
            });
            accepted(false, stale)
        }
        AppendOutcome::Duplicate { stale } => accepted(true, stale),
        AppendOutcome::Conflict => Err(ApiError::Conflict(
            "seq_conflict",
            format!("another event is stored under seq {seq}"),
        )),
        AppendOutcome::AskConflict => Err(ApiError::Conflict(
            "ask_conflict",
            "an ask with this id was asked before in this turn".into(),
        )),
        AppendOutcome::UnknownTurn => Err(ApiError::NoSuchTurn(turn_id)),
        AppendOutcome::NotStarted => Err(ApiError::Conflict(
            "turn_not_started",
            format!(
                "turn {} has not been handed to the agent yet",
                echo(&turn_id)
            ),
        )),
        AppendOutcome::Ended => Err(ApiError::Conflict(
            "turn_ended",
            format!("turn {} has ended", echo(&turn_id)),
        )),
        AppendOutcome::Full => Err(ApiError::Conflict(
            "turn_events_full",
            format!(
                "the turn keeps at most {MAX_EVENTS_PER_TURN} events and {MAX_BYTES_PER_TURN} bytes of them"
            ),
        )),
    }
}
