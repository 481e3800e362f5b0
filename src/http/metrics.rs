//! `/metrics` (Prometheus text format) and the middleware that times every route.

use std::time::Instant;

use axum::{
    extract::{MatchedPath, Request, State},
    http::{HeaderMap, header},
    middleware::Next,
    response::{IntoResponse, Response},
};

use super::{ApiError, AppState, auth};
use crate::state::App;

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
    // Inbox and feed gauges are read from the database at scrape time, so they are right
    // across replicas and restarts. On failure the last values stay and the error is
    // counted.
    refresh_inbox(&app).await;
    refresh_feed_pending(&app).await;
    app.metrics
        .worker_events_per_second
        .set(app.metrics.worker_rate.per_second());
    Ok((
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        app.metrics.render(),
    )
        .into_response())
}

/// `inbox_pending`, `inbox_failed` and `inbox_retrying`; `inbox_depth` and
/// `inbox_oldest_pending_age_seconds`, by profile: one read of the database.
async fn refresh_inbox(app: &App) {
    let Ok(depth) = app.store.inbox_depth().await else {
        app.metrics.store_error("inbox_depth");
        return;
    };
    let c = depth.counts;
    app.metrics.inbox_pending.set(c.pending);
    app.metrics.inbox_failed.set(c.failed);
    app.metrics.inbox_retrying.set(c.retrying);
    let backlog = depth.backlog;
    let now = crate::util::UnixMs::now();
    // Profiles without a backlog read 0; rows of profiles no longer configured are
    // counted together, so labels stay bounded.
    app.metrics.inbox_depth.reset();
    app.metrics.inbox_oldest_age.reset();
    for p in &app.config.profiles {
        app.metrics.inbox_depth.with_label_values(&[&p.name]).set(0);
        app.metrics
            .inbox_oldest_age
            .with_label_values(&[&p.name])
            .set(0.0);
    }
    for b in backlog {
        let label = if app.profiles.contains_key(&b.profile) {
            b.profile.as_str()
        } else {
            "unknown"
        };
        let age = b
            .oldest_received_at
            .map(|t| age_secs(now, t))
            .unwrap_or(0.0);
        app.metrics
            .inbox_depth
            .with_label_values(&[label])
            .add(b.depth);
        let oldest = app.metrics.inbox_oldest_age.with_label_values(&[label]);
        if age > oldest.get() {
            oldest.set(age);
        }
    }
}

/// `feed_pending`, by configured profile and what waits.
async fn refresh_feed_pending(app: &App) {
    let Ok(counts) = app.store.feed_counts().await else {
        app.metrics.store_error("feed_counts");
        return;
    };
    let pending = &app.metrics.feed.pending;
    pending.reset();
    for c in counts
        .iter()
        .filter(|c| app.profiles.contains_key(&c.profile))
    {
        for (what, n) in [
            ("gathered", c.gathered),
            ("waiting", c.waiting),
            ("attached", c.attached),
        ] {
            pending
                .with_label_values(&[c.profile.as_str(), what])
                .set(n);
        }
    }
}

/// Seconds from `then` to `now`, never negative (clocks of replicas may differ).
pub(super) fn age_secs(now: crate::util::UnixMs, then: crate::util::UnixMs) -> f64 {
    (now.millis() - then.millis()).max(0) as f64 / 1000.0
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
