//! `/healthz` (the process answers) and `/readyz` (the database takes writes).

use axum::{Json, extract::State};
use serde::Serialize;
use utoipa::ToSchema;

use super::{ApiError, AppState, ErrorBody};

/// Health answer.
#[derive(Debug, Serialize, ToSchema)]
pub struct HealthBody {
    /// `ok` or `ready`.
    pub status: &'static str,
}

/// Liveness: the process is up and serving HTTP.
#[utoipa::path(get, path = "/healthz", tag = "operations",
    responses((status = 200, description = "Alive", body = HealthBody)))]
pub async fn healthz() -> Json<HealthBody> {
    Json(HealthBody { status: "ok" })
}

/// Readiness: the database takes a write within `database.timeout_ms` (room for a few
/// pages is allocated and given back, and a small row committed), so a full disk or
/// database, a read-only one or an unreachable one is not ready.
#[utoipa::path(get, path = "/readyz", tag = "operations",
    responses(
        (status = 200, description = "Ready", body = HealthBody),
        (status = 503, description = "`store_unavailable`", body = ErrorBody),
    ))]
pub async fn readyz(State(app): State<AppState>) -> Result<Json<HealthBody>, ApiError> {
    app.store
        .probe_write(crate::util::UnixMs::now())
        .await
        .map_err(|e| {
            app.metrics.store_error("probe_write");
            ApiError::store(e)
        })?;
    Ok(Json(HealthBody { status: "ready" }))
}
