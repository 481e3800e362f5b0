//! Error responses the HTTP framework makes by itself, rewritten into our JSON shape.
//!
//! Handlers and our extractors answer with [`ApiError`], which marks its responses. Other
//! error responses come from the framework and its layers: the router's 405 for a known
//! path with another method, the timeout layer's 408, a body limit's 413. They carry
//! plain text or nothing. This middleware sits outside all of them and gives any unmarked
//! error response the error shape, keeping its status and headers (`Allow` on a 405). The
//! extractors in [`super::extract`] stay the first line: they know which parameter was
//! wrong; this layer is the net for what no extractor sees, and its messages are fixed.

use axum::{
    extract::Request,
    http::{StatusCode, header},
    middleware::Next,
    response::{IntoResponse, Response},
};

use super::{ApiError, error::Shaped};
use crate::redact::echo;

/// Gives any error response not made by [`ApiError`] the error shape; `max_body_bytes`
/// is named in a 413's message.
pub async fn json_errors(max_body_bytes: usize, req: Request, next: Next) -> Response {
    let method = req.method().clone();
    let resp = next.run(req).await;
    let status = resp.status();
    let is_error = status.is_client_error() || status.is_server_error();
    if !is_error || resp.extensions().get::<Shaped>().is_some() {
        return resp;
    }
    let error = match status {
        StatusCode::METHOD_NOT_ALLOWED => ApiError::MethodNotAllowed(echo(method.as_str())),
        StatusCode::REQUEST_TIMEOUT => ApiError::RequestTimeout,
        StatusCode::NOT_FOUND => ApiError::RouteNotFound,
        StatusCode::PAYLOAD_TOO_LARGE => ApiError::PayloadTooLarge(max_body_bytes),
        other => ApiError::Framework(other),
    };
    let (mut parts, _) = resp.into_parts();
    let (shaped, body) = error.into_response().into_parts();
    parts.headers.remove(header::CONTENT_TYPE);
    parts.headers.remove(header::CONTENT_LENGTH);
    parts.headers.extend(shaped.headers);
    parts.extensions.insert(Shaped);
    Response::from_parts(parts, body)
}

#[cfg(test)]
mod tests {
    use axum::{Router, body::Body, middleware, routing::get};
    use tower::ServiceExt;

    use super::*;

    fn app() -> Router {
        Router::new()
            .route(
                "/teapot",
                get(|| async { (StatusCode::IM_A_TEAPOT, "short and stout") }),
            )
            .route(
                "/late",
                get(|| async { StatusCode::REQUEST_TIMEOUT.into_response() }),
            )
            .route(
                "/ours",
                get(|| async { ApiError::NotFound("kept as it is".into()) }),
            )
            .layer(middleware::from_fn(|req, next| {
                json_errors(1024, req, next)
            }))
    }

    async fn call(
        method: &str,
        path: &str,
    ) -> (StatusCode, axum::http::HeaderMap, serde_json::Value) {
        let req = Request::builder()
            .method(method)
            .uri(path)
            .body(Body::empty())
            .expect("request");
        let resp = app().oneshot(req).await.expect("infallible");
        let (parts, body) = resp.into_parts();
        let bytes = axum::body::to_bytes(body, 1 << 16).await.expect("body");
        let json = serde_json::from_slice(&bytes).unwrap_or(serde_json::Value::Null);
        (parts.status, parts.headers, json)
    }

    #[tokio::test]
    async fn framework_errors_get_the_shape_and_keep_status_and_headers() {
        let (status, headers, json) = call("POST", "/ours").await;
        assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
        assert_eq!(json["error"]["code"], "method_not_allowed", "{json}");
        assert_eq!(
            headers.get(header::ALLOW).map(|v| v.as_bytes()),
            Some(&b"GET,HEAD"[..])
        );
        assert_eq!(
            headers.get(header::CONTENT_TYPE).map(|v| v.as_bytes()),
            Some(&b"application/json"[..])
        );

        let (status, _, json) = call("GET", "/late").await;
        assert_eq!(
            (status, &json["error"]["code"]),
            (StatusCode::REQUEST_TIMEOUT, &"request_timeout".into())
        );

        let (status, _, json) = call("GET", "/teapot").await;
        assert_eq!(status, StatusCode::IM_A_TEAPOT);
        assert_eq!(json["error"]["code"], "bad_request", "{json}");
        assert!(
            !json.to_string().contains("stout"),
            "the framework's text is replaced"
        );
    }

    #[tokio::test]
    async fn our_own_errors_pass_untouched() {
        let (status, _, json) = call("GET", "/ours").await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        assert_eq!(
            (&json["error"]["code"], &json["error"]["message"]),
            (&"not_found".into(), &"kept as it is".into())
        );
    }
}
