//! `GET /turns` and `GET /turns/{turn_id}`: what became of each request handed to an
//! agent — its state, timings, error, the decision it made and the reply it posted.

use axum::Json;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::{
    Admin, AdminErrors, ApiError, ErrorBody,
    asks::AskBody,
    attachments::AttachmentBody,
    extract::{Path, Query},
};
use crate::{
    agent::events::{TurnEvent, TurnEventSummary, summarize},
    redact::echo,
    store::{TurnEventRow, TurnFilter, TurnRow, TurnState},
    util::UnixMs,
};

/// A turn.
#[derive(Debug, Serialize, ToSchema)]
pub struct TurnBody {
    /// `turn_<hex>`; also the webhook agent's `webhook-id`.
    pub turn_id: String,
    pub profile: String,
    pub session_key: String,
    /// Session id it ran in (set when it started).
    pub session_id: Option<String>,
    pub chat_id: String,
    pub message_id: String,
    /// `queued`, `running`, `succeeded`, `failed` or `cancelled`.
    pub state: String,
    /// Its context decision (`GET /explain/{root}?decision_id=`).
    pub decision_id: Option<i64>,
    /// The posted answer (or its card).
    pub reply_message_id: Option<String>,
    /// The card a streaming answer is shown in.
    pub card_message_id: Option<String>,
    /// Why it failed or was cancelled.
    pub error: Option<String>,
    /// Characters of the agent's answer, once it answered.
    pub output_chars: Option<usize>,
    /// Unix ms.
    pub queued_at: i64,
    /// Unix ms.
    pub started_at: Option<i64>,
    /// Unix ms the agent answered.
    pub answered_at: Option<i64>,
    /// Unix ms.
    pub finished_at: Option<i64>,
    /// The handoff chain it runs in, when another bot's answer queued it.
    pub chain_id: Option<String>,
    /// Its hop in that chain (1 for the first handoff).
    pub hop: Option<i64>,
    /// The request text (with `verbose`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_text: Option<String>,
    /// The agent's answer (with `verbose`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
    /// What a webhook agent reported while the turn ran, in seq order (one turn only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub events: Option<Vec<TurnEventBody>>,
    /// What those events add up to, stale ones left out (one turn only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub event_summary: Option<TurnEventSummary>,
    /// The agent's questions, in seq order, and their answers (one turn only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub asks: Option<Vec<AskBody>>,
    /// The files and images its agent sent into the chat, oldest first (one turn only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attachments: Option<Vec<AttachmentBody>>,
}

/// One stored turn event.
#[derive(Debug, Serialize, ToSchema)]
pub struct TurnEventBody {
    pub seq: i64,
    /// `text`, `tool`, `status`, `ask` or `error`.
    pub kind: String,
    /// Unix ms.
    pub received_at: i64,
    /// Stored after a newer seq: in the log, not displayed.
    pub stale: bool,
    /// The event as the agent sent it, without `seq`.
    pub event: TurnEvent,
}

impl TurnBody {
    fn of(r: TurnRow, verbose: bool) -> Self {
        Self {
            output_chars: r.output.as_ref().map(|o| o.chars().count()),
            request_text: verbose.then(|| r.request_text.clone()),
            output: if verbose { r.output.clone() } else { None },
            turn_id: r.turn_id,
            profile: r.profile,
            session_key: r.session_key,
            session_id: r.session_id,
            chat_id: r.chat_id,
            message_id: r.message_id,
            state: r.state.to_string(),
            decision_id: r.decision_id,
            reply_message_id: r.reply_message_id,
            card_message_id: r.card_message_id,
            error: r.error,
            queued_at: r.queued_at.millis(),
            started_at: r.started_at.map(UnixMs::millis),
            answered_at: r.answered_at.map(UnixMs::millis),
            finished_at: r.finished_at.map(UnixMs::millis),
            chain_id: r.chain_id,
            hop: r.hop,
            events: None,
            event_summary: None,
            asks: None,
            attachments: None,
        }
    }
}

/// `GET /turns`.
#[derive(Debug, Serialize, ToSchema)]
pub struct TurnList {
    /// Newest first.
    pub turns: Vec<TurnBody>,
}

/// Filters of `GET /turns`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct TurnsQuery {
    /// Only this profile.
    pub profile: Option<String>,
    /// Only this session key.
    pub session_key: Option<String>,
    /// Only this state.
    // Read as a string, so that an unknown one is named in the 400.
    #[param(value_type = Option<TurnState>, inline)]
    pub state: Option<String>,
    /// At most this many (default 50, at most 500).
    pub limit: Option<i64>,
    /// Include request texts and answers.
    #[serde(default)]
    pub verbose: bool,
}

/// Include texts?
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct VerboseQuery {
    /// Include the request text and the answer.
    #[serde(default)]
    pub verbose: bool,
}

/// Turns, newest first.
#[utoipa::path(get, path = "/turns", tag = "turns", security(("bearer" = [])),
    params(TurnsQuery),
    responses(
        (status = 200, description = "Turns", body = TurnList),
        (status = 400, description = "`bad_request`: unknown state, or a query parameter that cannot be read", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 503, description = "`store_unavailable`", body = ErrorBody),
    ))]
pub async fn list(
    Admin(app): Admin,
    Query(q): Query<TurnsQuery>,
) -> Result<Json<TurnList>, ApiError> {
    if let Some(s) = q.state.as_deref().filter(|s| TurnState::parse(s).is_none()) {
        return Err(ApiError::BadRequest(format!(
            "unknown state {:?}: use queued, running, succeeded, failed or cancelled",
            echo(s)
        )));
    }
    let rows = app
        .store
        .turns(&TurnFilter {
            profile: q.profile,
            session_key: q.session_key,
            state: q.state,
            limit: q.limit.unwrap_or(50).clamp(1, 500),
        })
        .await
        .map_err(ApiError::store)?;
    Ok(Json(TurnList {
        turns: rows
            .into_iter()
            .map(|r| TurnBody::of(r, q.verbose))
            .collect(),
    }))
}

/// One turn.
#[utoipa::path(get, path = "/turns/{turn_id}", tag = "turns", security(("bearer" = [])),
    params(("turn_id" = String, Path, description = "`turn_<hex>`"), VerboseQuery),
    responses(
        (status = 200, description = "The turn", body = TurnBody),
        AdminErrors,
        (status = 404, description = "`not_found`", body = ErrorBody),
        (status = 503, description = "`store_unavailable`", body = ErrorBody),
    ))]
pub async fn get(
    Admin(app): Admin,
    Path(turn_id): Path<String>,
    Query(q): Query<VerboseQuery>,
) -> Result<Json<TurnBody>, ApiError> {
    let row = app.store.turn(&turn_id).await.map_err(ApiError::store)?;
    let row = row.ok_or_else(|| ApiError::NotFound(format!("no turn {}", echo(&turn_id))))?;
    let rows = app
        .store
        .turn_events(&turn_id)
        .await
        .map_err(ApiError::store)?;
    let events: Vec<TurnEventBody> = rows.into_iter().filter_map(event_body).collect();
    let summary = summarize(events.iter().filter(|e| !e.stale).map(|e| &e.event));
    let asks = app
        .store
        .turn_asks(&turn_id)
        .await
        .map_err(ApiError::store)?;
    let running = row.state == TurnState::Running;
    let mut body = TurnBody::of(row, q.verbose);
    body.events = Some(events);
    body.event_summary = Some(summary);
    body.asks = Some(asks.into_iter().map(|a| AskBody::of(a, running)).collect());
    let attachments = app
        .store
        .turn_attachments(&turn_id)
        .await
        .map_err(ApiError::store)?;
    body.attachments = Some(attachments.into_iter().map(AttachmentBody::of).collect());
    Ok(Json(body))
}

/// A stored event as shown; one this version cannot read is left out (and logged).
fn event_body(r: TurnEventRow) -> Option<TurnEventBody> {
    match serde_json::from_str::<TurnEvent>(&r.body) {
        Ok(event) => Some(TurnEventBody {
            seq: r.seq,
            kind: r.kind,
            received_at: r.received_at.millis(),
            stale: r.stale,
            event,
        }),
        Err(e) => {
            tracing::warn!(turn_id = %r.turn_id, seq = r.seq, error = %e, "a stored turn event cannot be read");
            None
        }
    }
}
