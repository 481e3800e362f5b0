//! `GET /agent/{profile}/turns/{turn_id}/asks/{ask_id}`: where a webhook agent's question
//! stands, signed like the agent's other calls, and waited on with `wait_secs` (see
//! `docs/turns.md`, "Asking the user"). [`AskBody`] is also how `GET /turns/{id}` shows
//! a turn's asks.

use std::time::Duration;

use axum::{Json, body::Bytes, extract::State, http::HeaderMap};
use serde::{Deserialize, Serialize};
use tokio::{sync::broadcast::error::RecvError, time::Instant};
use utoipa::{IntoParams, ToSchema};

use super::{
    ApiError, AppState, ErrorBody,
    agent_callback::authenticate,
    extract::{Path, Query},
};
use crate::{
    store::{AskRow, AskState, TurnState},
    util::UnixMs,
};

/// The longest `wait_secs`.
pub const MAX_WAIT_SECS: u64 = 30;
/// How often a wait reads the store again (an answer stored by another replica is not
/// announced in this process).
const REREAD: Duration = Duration::from_millis(500);

/// A question of a turn, and what became of it.
#[derive(Debug, Serialize, ToSchema)]
pub struct AskBody {
    pub turn_id: String,
    /// The ask's id.
    pub id: String,
    pub prompt: String,
    /// `confirm` or `select`.
    pub style: String,
    /// The choices; empty for a plain confirm (`yes`/`no`).
    pub options: Vec<String>,
    /// What a timeout answers (`no` for a plain confirm without one).
    pub default: Option<String>,
    /// `open`, `answered`, `timed_out`, or `closed` (its turn ended first).
    pub state: AskState,
    /// The answer; `null` while open, and for a timeout without a default.
    pub answer: Option<String>,
    /// The presser's open_id; `null` for a timeout.
    pub answered_by: Option<String>,
    /// Unix ms it was answered or timed out.
    pub answered_at: Option<i64>,
    pub timed_out: bool,
    /// Unix ms.
    pub asked_at: i64,
    /// Unix ms it times out.
    pub deadline: i64,
    /// Unix ms the answer was delivered to the agent.
    pub delivered_at: Option<i64>,
}

impl AskBody {
    /// An ask as shown, given whether its turn still runs.
    pub fn of(r: AskRow, turn_running: bool) -> Self {
        Self {
            state: r.state(turn_running),
            turn_id: r.turn_id,
            id: r.ask_id,
            prompt: r.prompt,
            style: r.style,
            options: r.options,
            default: r.default_value,
            answer: r.answer,
            answered_by: r.answered_by,
            answered_at: r.answered_at.map(UnixMs::millis),
            timed_out: r.timed_out,
            asked_at: r.asked_at.millis(),
            deadline: r.deadline.millis(),
            delivered_at: r.delivered_at.map(UnixMs::millis),
        }
    }
}

/// How long to wait for an answer.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct WaitQuery {
    /// Wait up to this many seconds (0 to 30, default 0) while the ask is open.
    pub wait_secs: Option<u64>,
}

/// Where a question of a running (or ended) turn stands; waits for its answer.
#[utoipa::path(get, path = "/agent/{profile}/turns/{turn_id}/asks/{ask_id}", tag = "agents",
    params(
        ("profile" = String, Path, description = "Profile name"),
        ("turn_id" = String, Path, description = "The `turn_id` of the turn"),
        ("ask_id" = String, Path, description = "The `id` of the ask event"),
        WaitQuery,
        ("webhook-id" = String, Header, description = "Message id (any unique string)"),
        ("webhook-timestamp" = String, Header, description = "Unix seconds; within 5 minutes"),
        ("webhook-signature" = String, Header, description = "`v1,` + base64 HMAC-SHA256 of `id.timestamp.` (an empty body) with the agent secret"),
    ),
    responses(
        (status = 200, description = "The ask: still `open` when the wait passed, else `answered`, `timed_out` or `closed`", body = AskBody),
        (status = 400, description = "`bad_request`: `wait_secs` over 30, or a parameter that cannot be read", body = ErrorBody),
        (status = 401, description = "`bad_signature`", body = ErrorBody),
        (status = 404, description = "`unknown_profile`; `unknown_turn`: no turn of this profile under this id; `unknown_ask`: no ask under this id in the turn", body = ErrorBody),
        (status = 503, description = "`store_unavailable`", body = ErrorBody),
    ))]
pub async fn get(
    State(app): State<AppState>,
    Path((profile, turn_id, ask_id)): Path<(String, String, String)>,
    Query(q): Query<WaitQuery>,
    headers: HeaderMap,
) -> Result<Json<AskBody>, ApiError> {
    authenticate(&app, &profile, &headers, Ok(Bytes::new()))?;
    let wait = q.wait_secs.unwrap_or(0);
    if wait > MAX_WAIT_SECS {
        return Err(ApiError::BadRequest(format!(
            "wait_secs is at most {MAX_WAIT_SECS}"
        )));
    }
    // The answer must leave before the request's own timeout cuts it off with a 408.
    let room = app.config.server.request_timeout_secs.saturating_sub(1);
    let until = Instant::now() + Duration::from_secs(wait.min(room));
    // Subscribed before the first read: an answer stored in between still wakes us.
    let mut notes = app.turn_events.subscribe();
    loop {
        let body = read(&app, &profile, &turn_id, &ask_id).await?;
        if body.state != AskState::Open || Instant::now() >= until {
            return Ok(Json(body));
        }
        let announced = async {
            loop {
                match notes.recv().await {
                    Ok(n) if n.turn_id == turn_id => return,
                    Ok(_) | Err(RecvError::Lagged(_)) => {}
                    // No more announcements: the re-read and the deadline remain.
                    Err(RecvError::Closed) => std::future::pending::<()>().await,
                }
            }
        };
        tokio::select! {
            () = announced => {}
            () = tokio::time::sleep(REREAD) => {}
            () = tokio::time::sleep_until(until) => {}
        }
    }
}

/// The ask as it stands now.
async fn read(
    app: &AppState,
    profile: &str,
    turn_id: &str,
    ask_id: &str,
) -> Result<AskBody, ApiError> {
    let turn = app
        .store
        .turn(turn_id)
        .await
        .map_err(ApiError::store)?
        .filter(|t| t.profile == profile)
        .ok_or_else(|| ApiError::NoSuchTurn(turn_id.to_string()))?;
    let ask = app
        .store
        .ask(turn_id, ask_id)
        .await
        .map_err(ApiError::store)?
        .ok_or_else(|| ApiError::UnknownAsk(ask_id.to_string()))?;
    Ok(AskBody::of(ask, turn.state == TurnState::Running))
}
