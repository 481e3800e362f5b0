//! `POST /explain/{root_msg_id}/what-if`: a stored decision's selection made again under
//! other settings (no agent is called), with a diff against the real one.

use axum::{Json, body::Bytes, extract::rejection::BytesRejection};
use serde::Deserialize;
use utoipa::{IntoParams, ToSchema};

use super::{
    Admin, AdminErrors, ApiError, ErrorBody,
    extract::{Path, Query},
};
use crate::{
    explain::{Overrides, WhatIf},
    protocol::Rejection,
};

/// Which decision (as for `GET /explain/{root_msg_id}`).
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct WhatIfQuery {
    /// Profile (default: the first configured profile).
    pub profile: Option<String>,
    /// The request message (default: the latest decision in the thread).
    pub message_id: Option<String>,
    /// A specific decision.
    pub decision_id: Option<i64>,
}

/// The settings to re-run the decision under.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct WhatIfRequest {
    /// `thread_context_limit`, `max_context_chars`, `max_agent_output_chars` (numbers),
    /// `shared_thread_enabled`, `group_chat_history_share` (booleans), `workspace_mode`
    /// (`shared` or `owner_only`); a setting left out keeps the decision's.
    #[serde(default)]
    #[schema(value_type = Overrides)]
    pub settings: serde_json::Map<String, serde_json::Value>,
}

/// Re-runs the latest (or a chosen) context decision of a thread under other settings.
#[utoipa::path(post, path = "/explain/{root_msg_id}/what-if", tag = "explain", security(("bearer" = [])),
    params(("root_msg_id" = String, Path, description = "The thread's root message id"), WhatIfQuery),
    request_body(content = WhatIfRequest, content_type = "application/json"),
    responses(
        (status = 200, description = "The would-be selection and its diff against the decision's", body = WhatIf),
        (status = 400, description = "`bad_request`: an unknown setting or a bad value; `malformed_json`: the body is not `{\"settings\": {…}}`", body = ErrorBody),
        AdminErrors,
        (status = 404, description = "`not_found` (no decision) or `unknown_profile`", body = ErrorBody),
        (status = 413, description = "`payload_too_large`", body = ErrorBody),
    ))]
pub async fn what_if(
    Admin(app): Admin,
    Path(root_msg_id): Path<String>,
    Query(q): Query<WhatIfQuery>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<WhatIf>, ApiError> {
    let body = body.map_err(|r| ApiError::unreadable_body(r, app.config.server.max_body_bytes))?;
    let request: WhatIfRequest = if body.iter().all(u8::is_ascii_whitespace) {
        WhatIfRequest::default()
    } else {
        serde_json::from_slice(&body).map_err(|_| {
            Rejection::MalformedJson("expected {\"settings\": {\"key\": value, …}}".into())
        })?
    };
    let overrides = Overrides::from_json(&request.settings).map_err(ApiError::BadRequest)?;
    let profile = super::profile_or_first(&app, q.profile)?;
    let query = crate::explain::Query {
        profile: &profile,
        root_msg_id: &root_msg_id,
        message_id: q.message_id.as_deref(),
        decision_id: q.decision_id,
        verbose: false,
    };
    let found = crate::explain::what_if(app.store.as_ref(), &query, &overrides, &app.config)
        .await
        .map_err(ApiError::store)?;
    found
        .map(Json)
        .ok_or_else(|| ApiError::NotFound(query.not_found()))
}
