//! The route table and its layers.

use std::time::Duration;

use axum::{Router, extract::DefaultBodyLimit, http::StatusCode, middleware};
use tower_http::{
    request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer},
    timeout::TimeoutLayer,
    trace::{DefaultOnResponse, TraceLayer},
};
use tracing::Level;
use utoipa::OpenApi;
use utoipa_axum::{router::OpenApiRouter, routes};

use super::{
    AppState, agent_callback, api_doc::ApiDoc, asks, attachments, digests, error, explain, feed,
    health, media, metrics, reshape, sessions, status, turn_events, turns, ui, verdicts, webhook,
    what_if,
};

/// Every route, with its OpenAPI description (no state, no layers).
pub fn api_router() -> OpenApiRouter<AppState> {
    OpenApiRouter::with_openapi(ApiDoc::openapi())
        .routes(routes!(webhook::event))
        .routes(routes!(webhook::card))
        .routes(routes!(health::healthz))
        .routes(routes!(health::readyz))
        .routes(routes!(status::status))
        .routes(routes!(metrics::metrics))
        .routes(routes!(sessions::list))
        .routes(routes!(sessions::get, sessions::reset))
        .routes(routes!(verdicts::message))
        .routes(routes!(explain::explain))
        .routes(routes!(what_if::what_if))
        .routes(routes!(agent_callback::output))
        .routes(routes!(turn_events::post))
        .routes(routes!(attachments::post))
        .routes(routes!(media::get))
        .routes(routes!(asks::get))
        .routes(routes!(turns::list))
        .routes(routes!(turns::get))
        .routes(routes!(feed::show))
        .routes(routes!(feed::flush))
        .routes(routes!(digests::run))
        .routes(routes!(digests::list))
}

/// The service: routes plus layers, bound to its state.
pub fn router(state: AppState) -> Router {
    let server = &state.config.server;
    let (routes, _) = api_router().split_for_parts();
    // The web view's HTML pages are not API operations, so not in the OpenAPI document.
    let routes = routes.merge(ui::routes());
    let x_request_id = axum::http::HeaderName::from_static("x-request-id");
    let max_body_bytes = server.max_body_bytes;
    routes
        // Layer order (outermost last): the route layer times matched routes only, so
        // unknown paths cannot mint metric labels; the body limit makes the webhook's
        // `Bytes` extractor refuse oversized bodies, which the handler turns into 413
        // `payload_too_large` in our JSON shape.
        .route_layer(middleware::from_fn_with_state(state.clone(), metrics::track))
        .layer(DefaultBodyLimit::max(server.max_body_bytes))
        .fallback(error::not_found)
        .layer(TimeoutLayer::with_status_code(
            StatusCode::REQUEST_TIMEOUT,
            Duration::from_secs(server.request_timeout_secs),
        ))
        // Outside the routes (405), the body limit (413) and the timeout (408): whatever
        // error they answer with by themselves leaves in our JSON shape.
        .layer(middleware::from_fn(move |req, next| {
            reshape::json_errors(max_body_bytes, req, next)
        }))
        .layer(
            TraceLayer::new_for_http()
                .make_span_with(|req: &axum::http::Request<_>| {
                    let id = req
                        .headers()
                        .get("x-request-id")
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or("");
                    tracing::info_span!("http", method = %req.method(), path = %req.uri().path(), request_id = %id)
                })
                .on_request(())
                .on_response(DefaultOnResponse::new().level(Level::DEBUG)),
        )
        // Feishu sends X-Request-Id; keep it, or mint one, and echo it back.
        .layer(PropagateRequestIdLayer::new(x_request_id.clone()))
        .layer(SetRequestIdLayer::new(x_request_id, MakeRequestUuid))
        .with_state(state)
}
