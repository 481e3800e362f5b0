//! `GET /sessions`, `GET /sessions/{session_key}`, `DELETE /sessions/{session_key}`.

use axum::Json;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::{
    Admin, AdminErrors, ApiError, AppState, ErrorBody,
    extract::{Path, Query},
};
use crate::{
    redact::echo,
    store::{SessionReset, SessionRow},
    util::{UnixMs, new_session_id},
};

/// A session mapping.
#[derive(Debug, Serialize, ToSchema)]
pub struct SessionBody {
    /// `dm:<open_id>`, `group:<chat_id>`, `group-user:<chat_id>:<open_id>` or
    /// `thread:<chat_id>:<root_id>`.
    pub session_key: String,
    pub profile: String,
    pub chat_id: String,
    /// `p2p` or `group`.
    pub chat_type: String,
    /// The user who opened it (the owner of `dm:`/`group-user:` keys).
    pub user_id: Option<String>,
    /// Thread root, for group sessions.
    pub root_msg_id: Option<String>,
    /// Agent-side session id; rotates on `/new`, `/reset` and DELETE.
    pub session_id: String,
    /// The topic root was injected into this session's first turn.
    pub topic_root_prompt_delivered: bool,
    /// Unix ms.
    pub created_at: i64,
    /// Unix ms.
    pub updated_at: i64,
}

impl From<SessionRow> for SessionBody {
    fn from(r: SessionRow) -> Self {
        Self {
            session_key: r.session_key,
            profile: r.profile,
            chat_id: r.chat_id,
            chat_type: r.chat_type.to_string(),
            user_id: r.user_id,
            root_msg_id: r.root_msg_id,
            session_id: r.session_id,
            topic_root_prompt_delivered: r.topic_root_prompt_delivered,
            created_at: r.created_at.millis(),
            updated_at: r.updated_at.millis(),
        }
    }
}

/// `GET /sessions`.
#[derive(Debug, Serialize, ToSchema)]
pub struct SessionList {
    /// Most recently used first.
    pub sessions: Vec<SessionBody>,
}

/// Filters of `GET /sessions`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    /// Only this profile.
    pub profile: Option<String>,
    /// Only this chat.
    pub chat_id: Option<String>,
}

/// Which profile's session (keys are per profile).
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ProfileQuery {
    /// Profile; defaults to the first configured profile.
    pub profile: Option<String>,
}

/// Session mappings, most recently used first.
#[utoipa::path(get, path = "/sessions", tag = "sessions", security(("bearer" = [])),
    params(ListQuery),
    responses(
        (status = 200, description = "Session mappings", body = SessionList),
        AdminErrors,
        (status = 503, description = "`store_unavailable`", body = ErrorBody),
    ))]
pub async fn list(
    Admin(app): Admin,
    Query(q): Query<ListQuery>,
) -> Result<Json<SessionList>, ApiError> {
    let rows = app
        .store
        .sessions(q.profile.as_deref(), q.chat_id.as_deref())
        .await
        .map_err(ApiError::store)?;
    Ok(Json(SessionList {
        sessions: rows.into_iter().map(SessionBody::from).collect(),
    }))
}

/// One session mapping.
#[utoipa::path(get, path = "/sessions/{session_key}", tag = "sessions", security(("bearer" = [])),
    params(("session_key" = String, Path, description = "e.g. `thread:oc_xxx:om_xxx`"), ProfileQuery),
    responses(
        (status = 200, description = "The session", body = SessionBody),
        AdminErrors,
        (status = 404, description = "`not_found` or `unknown_profile`", body = ErrorBody),
    ))]
pub async fn get(
    Admin(app): Admin,
    Path(key): Path<String>,
    Query(q): Query<ProfileQuery>,
) -> Result<Json<SessionBody>, ApiError> {
    let (_, row) = find(&app, q.profile, &key).await?;
    Ok(Json(row.into()))
}

/// The profile (named or first) and its session under `key`, or the right 404.
async fn find(
    app: &AppState,
    profile: Option<String>,
    key: &str,
) -> Result<(String, SessionRow), ApiError> {
    let profile = super::profile_or_first(app, profile)?;
    match app
        .store
        .session(&profile, key)
        .await
        .map_err(ApiError::store)?
    {
        Some(row) => Ok((profile, row)),
        None => Err(no_session(key, &profile)),
    }
}

fn no_session(key: &str, profile: &str) -> ApiError {
    ApiError::NotFound(format!(
        "no session {:?} for profile {profile:?}",
        echo(key)
    ))
}

/// Resets a session: a new `session_id`, and its history scope cleared (like `/new`).
#[utoipa::path(delete, path = "/sessions/{session_key}", tag = "sessions", security(("bearer" = [])),
    params(("session_key" = String, Path, description = "e.g. `thread:oc_xxx:om_xxx`"), ProfileQuery),
    responses(
        (status = 200, description = "The session after the reset", body = SessionBody),
        AdminErrors,
        (status = 404, description = "`not_found` or `unknown_profile`", body = ErrorBody),
    ))]
pub async fn reset(
    Admin(app): Admin,
    Path(key): Path<String>,
    Query(q): Query<ProfileQuery>,
) -> Result<Json<SessionBody>, ApiError> {
    let (profile, current) = find(&app, q.profile, &key).await?;
    let row = app
        .store
        .reset_session(&SessionReset {
            profile: &profile,
            key: &key,
            history_scope: &current.history_scope,
            new_session_id: &new_session_id(),
            now: UnixMs::now(),
        })
        .await
        .map_err(ApiError::store)?;
    row.map(|r| Json(r.into()))
        .ok_or_else(|| no_session(&key, &profile))
}
