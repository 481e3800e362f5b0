//! The web view under `/ui`: server-rendered pages that show, per thread, why the agent
//! saw what it saw (messages and verdicts, turns, context decisions, the batched feed and
//! digests). Signed in with the admin token (`session`); every page escapes what it shows
//! (`html`); no script runs on any page, and the one stylesheet is compiled in.
//!
//! These are HTML pages, not API operations: they are not in the OpenAPI document, and
//! they answer in HTML, errors included. They read through the store and the explain
//! module only, and change nothing but the browser's own cookies.

mod html;
mod pages;
mod session;

use axum::{
    Router,
    http::{HeaderName, HeaderValue, header},
    middleware,
    response::{IntoResponse, Response},
    routing::{get, post},
};

use super::AppState;

/// Stylesheet of every page.
const STYLE: &str = include_str!("style.css");

/// No script at all, styles and images only from here, no framing, forms only to here.
const CSP: &str = "default-src 'self'; script-src 'none'; style-src 'self'; img-src 'self'; \
     form-action 'self'; frame-ancestors 'none'; base-uri 'none'; object-src 'none'";

/// The web view's routes.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/ui", get(pages::threads::index))
        .route("/ui/", get(pages::threads::index))
        .route(
            "/ui/login",
            get(pages::login::form).post(pages::login::submit),
        )
        .route("/ui/logout", post(pages::login::logout))
        .route("/ui/threads/{root_msg_id}", get(pages::thread::show))
        .route(
            "/ui/threads/{root_msg_id}/what-if",
            post(pages::what_if::run),
        )
        .route("/ui/static/style.css", get(style))
        .layer(middleware::map_response(protect))
}

async fn style() -> Response {
    ([(header::CONTENT_TYPE, "text/css; charset=utf-8")], STYLE).into_response()
}

/// The headers of every web-view response.
async fn protect(mut resp: Response) -> Response {
    let h = resp.headers_mut();
    let set = [
        (header::CONTENT_SECURITY_POLICY, CSP),
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::REFERRER_POLICY, "no-referrer"),
        (header::CACHE_CONTROL, "no-store"),
        (
            HeaderName::from_static("cross-origin-opener-policy"),
            "same-origin",
        ),
    ];
    for (name, value) in set {
        h.insert(name, HeaderValue::from_static(value));
    }
    resp
}
