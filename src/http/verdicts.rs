//! `GET /explain/message/{message_id}`: why a message was ignored, observed or invoked.

use axum::Json;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::{
    Admin, AdminErrors, ApiError, ErrorBody,
    extract::{Path, Query},
};
use crate::redact::echo;

/// Filter.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct MessageQuery {
    /// Only this profile (default: every profile that received the message).
    pub profile: Option<String>,
}

/// The routing verdicts of one message.
#[derive(Debug, Serialize, ToSchema)]
pub struct MessageVerdicts {
    pub message_id: String,
    /// One per profile that received it.
    pub verdicts: Vec<VerdictBody>,
}

/// One profile's verdict.
#[derive(Debug, Serialize, ToSchema)]
pub struct VerdictBody {
    pub profile: String,
    /// `ignored`, `observed` (recorded as context) or `invoked` (a turn or command).
    pub verdict: String,
    /// Why: `no_mention`, `user_not_allowed`, `chat_not_allowed`, `dm_disabled`,
    /// `group_disabled`, `own_message`, `bot_sender`, `bot_identity_unknown`,
    /// `not_owner`, `empty_request`, `recalled`, `mention`, `reply_all`, `command`, `dm`,
    /// `handoff` (another bot's answer handed work to this one), `handoff_cut` (a
    /// handoff the loop guard cut).
    pub reason: String,
    /// The handoff chain, for a verdict a handoff decided.
    pub chain_id: Option<String>,
    /// The session, for invocations.
    pub session_key: Option<String>,
    /// The context decision of the turn, once made.
    pub decision_id: Option<i64>,
    /// Unix ms.
    pub at: i64,
}

/// Why the bot did (not) answer a message.
#[utoipa::path(get, path = "/explain/message/{message_id}", tag = "explain", security(("bearer" = [])),
    params(("message_id" = String, Path, description = "`om_…`"), MessageQuery),
    responses(
        (status = 200, description = "Verdicts", body = MessageVerdicts),
        AdminErrors,
        (status = 404, description = "`not_found`: no profile received this message (check the event subscription and permissions)", body = ErrorBody),
    ))]
pub async fn message(
    Admin(app): Admin,
    Path(message_id): Path<String>,
    Query(q): Query<MessageQuery>,
) -> Result<Json<MessageVerdicts>, ApiError> {
    if let Some(p) = &q.profile
        && !app.profiles.contains_key(p)
    {
        return Err(ApiError::UnknownProfile(p.clone()));
    }
    let rows = app
        .store
        .verdicts(&message_id, q.profile.as_deref())
        .await
        .map_err(ApiError::store)?;
    if rows.is_empty() {
        return Err(ApiError::NotFound(format!(
            "no verdict for {}: the bridge has not processed this message{} (is the event subscribed, the permission granted, the bot in the chat?)",
            echo(&message_id),
            q.profile
                .map(|p| format!(" for profile {p}"))
                .unwrap_or_default()
        )));
    }
    Ok(Json(MessageVerdicts {
        message_id,
        verdicts: rows
            .into_iter()
            .map(|r| VerdictBody {
                profile: r.profile,
                verdict: r.verdict.to_string(),
                reason: r.reason.to_string(),
                session_key: r.session_key,
                decision_id: r.decision_id,
                chain_id: r.chain_id,
                at: r.created_at.millis(),
            })
            .collect(),
    }))
}
