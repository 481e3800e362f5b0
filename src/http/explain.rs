//! `GET /explain/{root_msg_id}`: what the agent saw for a turn in this thread, and why.

use axum::{
    Json,
    http::{HeaderMap, header},
    response::{IntoResponse, Response},
};
use serde::Deserialize;
use utoipa::IntoParams;

use super::schemas::ExplanationSchema;
use super::{
    Admin, AdminErrors, ApiError, ErrorBody,
    extract::{Path, Query},
};
use crate::context::report::render_text;

/// Which decision.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ExplainQuery {
    /// Profile (default: the first configured profile).
    pub profile: Option<String>,
    /// The request message (default: the latest decision in the thread).
    pub message_id: Option<String>,
    /// A specific decision.
    pub decision_id: Option<i64>,
    /// Include the full thread context and prompt preview.
    #[serde(default)]
    pub verbose: bool,
}

/// Explains the latest (or a chosen) context decision of a thread.
#[utoipa::path(get, path = "/explain/{root_msg_id}", tag = "explain", security(("bearer" = [])),
    params(("root_msg_id" = String, Path, description = "The thread's root message id"), ExplainQuery),
    responses(
        (status = 200, description = "The decision (`Accept: text/plain` for a readable report)",
         content((ExplanationSchema = "application/json"), (String = "text/plain"))),
        AdminErrors,
        (status = 404, description = "`not_found` (no decision) or `unknown_profile`", body = ErrorBody),
    ))]
pub async fn explain(
    Admin(app): Admin,
    Path(root_msg_id): Path<String>,
    Query(q): Query<ExplainQuery>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let profile = super::profile_or_first(&app, q.profile)?;
    let query = crate::explain::Query {
        profile: &profile,
        root_msg_id: &root_msg_id,
        message_id: q.message_id.as_deref(),
        decision_id: q.decision_id,
        verbose: q.verbose,
    };
    let found = crate::explain::load(app.store.as_ref(), &query)
        .await
        .map_err(ApiError::store)?;
    let Some(e) = found else {
        return Err(ApiError::NotFound(query.not_found()));
    };
    let wants_text = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|a| a.contains("text/plain") && !a.contains("application/json"));
    if wants_text {
        return Ok((
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            render_text(&e),
        )
            .into_response());
    }
    Ok(Json(e).into_response())
}
