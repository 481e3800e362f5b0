//! `/metrics` (Prometheus text format) and the middleware that times every route.

use std::time::Instant;

use axum::{
    extract::{MatchedPath, Request, State},
    http::{HeaderMap, header},
    middleware::Next,
    response::{IntoResponse, Response},
};

use super::{ApiError, AppState, auth};

/// Prometheus metrics. Open unless `server.protect_metrics` is set.
#[utoipa::path(get, path = "/metrics", tag = "operations",
    responses(
        (status = 200, description = "Prometheus text exposition format 0.0.4", body = String, content_type = "text/plain"),
        (status = 401, description = "`unauthorized` (only with `protect_metrics`)", body = super::ErrorBody),
    ))]
pub async fn metrics(
    State(app): State<AppState>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    if app.config.server.protect_metrics {
        auth::check(&headers, &app)?;
    }
    // Inbox gauges are read from the database at scrape time, so they are right across
    // replicas and restarts. On failure the last values stay and the error is counted.
    match app.store.inbox_counts().await {
        Ok(c) => {
            app.metrics.inbox_pending.set(c.pending);
            app.metrics.inbox_failed.set(c.failed);
            app.metrics.inbox_retrying.set(c.retrying);
        }
        Err(_) => app.metrics.store_error("inbox_counts"),
    }
    Ok((
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        app.metrics.render(),
    )
        .into_response())
}

/// Records the duration of every matched route (a `route_layer`, so unmatched paths
/// cannot create label values).
pub async fn track(State(app): State<AppState>, req: Request, next: Next) -> Response {
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map(|p| p.as_str().to_owned())
        .unwrap_or_else(|| "unmatched".into());
    let method = req.method().as_str().to_owned();
    let start = Instant::now();
    let resp = next.run(req).await;
    app.metrics
        .http_duration
        .with_label_values(&[&route, &method, resp.status().as_str()])
        .observe(start.elapsed().as_secs_f64());
    resp
}
