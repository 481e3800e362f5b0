//! One error type for every route, one JSON shape: `{"error":{"code","message"}}`.
//!
//! `code` is a stable snake_case string users can script against. A 5xx keeps its source
//! for the log; the client sees only the code and a fixed message, never internals. Client
//! input repeated in a message is bounded ([`crate::redact::echo`]).

use axum::{
    Json,
    http::{HeaderValue, StatusCode, header},
    response::{IntoResponse, Response},
};
use serde::Serialize;
use utoipa::{IntoResponses, ToSchema};

use crate::{
    inbox::CommitError, protocol::Rejection, redact, store::StoreError, telemetry::Metrics,
};

/// The most characters of an error message (a backstop behind the bounded echoes).
const MESSAGE_MAX_CHARS: usize = 512;

/// Every error a route can answer with.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// 401 or 400: a callback refused by its signature, token, timestamp, encryption or
    /// shape.
    #[error(transparent)]
    Rejected(#[from] Rejection),
    /// 400: an authentic event the database cannot store (say, U+0000 in an id).
    #[error("{0}")]
    InvalidEvent(String),
    /// 404: no profile with this name.
    #[error("no profile named {:?}", redact::echo(.0))]
    UnknownProfile(String),
    /// 413: body over `server.max_body_bytes`.
    #[error("body is larger than {0} bytes")]
    PayloadTooLarge(usize),
    /// 503: the database did not take the write or answer the read.
    #[error("the store is unavailable; retry later")]
    StoreUnavailable(#[source] Option<Box<dyn std::error::Error + Send + Sync>>),
    /// 401: admin bearer token missing or wrong.
    #[error("missing or wrong bearer token")]
    Unauthorized,
    /// 404: no such route.
    #[error("no route for this path")]
    RouteNotFound,
    /// 404: no such resource.
    #[error("{0}")]
    NotFound(String),
    /// 400: a path or query parameter the endpoint cannot use.
    #[error("{0}")]
    BadRequest(String),
    /// 409: what was asked cannot be done in this state (the code says which).
    #[error("{1}")]
    Conflict(&'static str, String),
    /// 404: no turn waits under this id.
    #[error(
        "no turn {} is waiting for an answer (unknown, already answered, timed out or stopped)",
        redact::echo(.0)
    )]
    UnknownTurn(String),
    /// 404: no turn of this profile under this id.
    #[error("no turn {} of this profile", redact::echo(.0))]
    NoSuchTurn(String),
    /// 404: no ask under this id in the turn.
    #[error("no ask {} in this turn", redact::echo(.0))]
    UnknownAsk(String),
    /// 422: a JSON body that is not what the endpoint takes (the message says why).
    #[error("{0}")]
    InvalidTurnEvent(String),
    /// 405: the route exists but not for this method (the method, bounded).
    #[error("method {0} is not allowed on this route; the Allow header lists the allowed ones")]
    MethodNotAllowed(String),
    /// 408: the request did not finish within `server.request_timeout_secs`.
    #[error("the request took too long and was abandoned")]
    RequestTimeout,
    /// A media URL or an attachment refused: its status, its code and why (e.g. 410
    /// `media_expired`, 413 `attachment_too_large`).
    #[error("{2}")]
    Media(StatusCode, &'static str, String),
    /// Any other error status the HTTP framework answered with by itself.
    #[error("{}", .0.canonical_reason().unwrap_or("the request failed"))]
    Framework(StatusCode),
}

/// Marks a response as already in the error shape (see [`super::reshape`]).
#[derive(Debug, Clone, Copy)]
pub(super) struct Shaped;

/// The error body.
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

/// `error` of [`ErrorBody`].
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorDetail {
    /// Stable code, e.g. `bad_signature`.
    #[schema(example = "bad_signature")]
    pub code: String,
    /// Human-readable explanation.
    pub message: String,
}

/// The errors of an admin endpoint that are not about what it serves: a parameter it
/// cannot read, a missing or wrong token.
#[derive(IntoResponses)]
pub enum AdminErrors {
    /// 400.
    #[response(
        status = 400,
        description = "`bad_request`: a path or query parameter cannot be read (the message names it, not its value)"
    )]
    BadRequest(ErrorBody),
    /// 401.
    #[response(status = 401, description = "`unauthorized`")]
    Unauthorized(ErrorBody),
}

/// The errors every Feishu callback route shares.
#[derive(IntoResponses)]
pub enum CallbackErrors {
    /// 401.
    #[response(
        status = 401,
        description = "`bad_signature`, `bad_token` or `stale_timestamp`"
    )]
    Refused(ErrorBody),
    /// 404.
    #[response(status = 404, description = "`unknown_profile`")]
    UnknownProfile(ErrorBody),
    /// 413.
    #[response(status = 413, description = "`payload_too_large`")]
    TooLarge(ErrorBody),
    /// 503.
    #[response(
        status = 503,
        description = "`store_unavailable`: nothing was stored; Feishu will retry"
    )]
    StoreUnavailable(ErrorBody),
}

impl ApiError {
    /// The stable code.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Rejected(r) => r.code(),
            Self::InvalidEvent(_) => "invalid_event",
            Self::UnknownProfile(_) => "unknown_profile",
            Self::PayloadTooLarge(_) => "payload_too_large",
            Self::StoreUnavailable(_) => "store_unavailable",
            Self::Unauthorized => "unauthorized",
            Self::RouteNotFound => "route_not_found",
            Self::NotFound(_) => "not_found",
            Self::UnknownTurn(_) | Self::NoSuchTurn(_) => "unknown_turn",
            Self::UnknownAsk(_) => "unknown_ask",
            Self::InvalidTurnEvent(_) => "invalid_turn_event",
            Self::BadRequest(_) => "bad_request",
            Self::Conflict(code, _) | Self::Media(_, code, _) => code,
            Self::MethodNotAllowed(_) => "method_not_allowed",
            Self::RequestTimeout => "request_timeout",
            Self::Framework(s) if s.is_server_error() => "internal_error",
            Self::Framework(_) => "bad_request",
        }
    }

    /// The HTTP status.
    pub fn status(&self) -> StatusCode {
        match self {
            Self::Rejected(
                Rejection::BadSignature(_) | Rejection::BadToken | Rejection::StaleTimestamp(_),
            )
            | Self::Unauthorized => StatusCode::UNAUTHORIZED,
            Self::Rejected(Rejection::Undecryptable(_) | Rejection::MalformedJson(_))
            | Self::InvalidEvent(_)
            | Self::BadRequest(_) => StatusCode::BAD_REQUEST,
            Self::UnknownProfile(_)
            | Self::RouteNotFound
            | Self::NotFound(_)
            | Self::UnknownTurn(_)
            | Self::NoSuchTurn(_)
            | Self::UnknownAsk(_) => StatusCode::NOT_FOUND,
            Self::InvalidTurnEvent(_) => StatusCode::UNPROCESSABLE_ENTITY,
            Self::PayloadTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            Self::Conflict(..) => StatusCode::CONFLICT,
            Self::StoreUnavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            Self::MethodNotAllowed(_) => StatusCode::METHOD_NOT_ALLOWED,
            Self::RequestTimeout => StatusCode::REQUEST_TIMEOUT,
            Self::Framework(s) | Self::Media(s, ..) => *s,
        }
    }

    /// A request body that could not be read: too large (413), or cut off (400).
    pub fn unreadable_body(
        rejection: axum::extract::rejection::BytesRejection,
        max_body_bytes: usize,
    ) -> Self {
        if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
            Self::PayloadTooLarge(max_body_bytes)
        } else {
            Rejection::MalformedJson("body could not be read".into()).into()
        }
    }

    /// A store failure, keeping its source for the log.
    pub fn store(e: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self::StoreUnavailable(Some(Box::new(e)))
    }

    /// The answer for a callback of `profile` the committer did not store.
    pub(super) fn not_stored(
        e: CommitError,
        metrics: &Metrics,
        profile: &str,
        event_id: &str,
    ) -> Self {
        match e {
            CommitError::Store(e) => Self::store(ArcError(e)),
            CommitError::Refused(e) => {
                tracing::warn!(profile, %event_id, error = %ArcError(e), "the database refused an authentic event");
                Self::InvalidEvent("the database refused this event".into())
            }
            CommitError::Stopped => Self::StoreUnavailable(None),
            CommitError::Late => {
                metrics.store_error("insert_inbox_timeout");
                Self::StoreUnavailable(None)
            }
        }
    }
}

/// Lets a store error shared between the waiters of one batch travel as an error source.
#[derive(Debug)]
struct ArcError(std::sync::Arc<StoreError>);

impl std::fmt::Display for ArcError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(&self.0, f)
    }
}

impl std::error::Error for ArcError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        std::error::Error::source(&*self.0)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        if status.is_server_error() {
            let source = std::error::Error::source(&self).map(|s| s.to_string());
            tracing::error!(
                code = self.code(),
                source = source.as_deref().unwrap_or(""),
                "request failed"
            );
        }
        let body = ErrorBody {
            error: ErrorDetail {
                code: self.code().to_string(),
                message: redact::bounded(&self.to_string(), MESSAGE_MAX_CHARS),
            },
        };
        let mut resp = (status, Json(body)).into_response();
        resp.extensions_mut().insert(Shaped);
        if matches!(self, Self::Unauthorized) {
            resp.headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        if matches!(self, Self::StoreUnavailable(_)) {
            resp.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("5"));
        }
        resp
    }
}

/// Fallback for unknown paths, in the same JSON shape.
pub async fn not_found() -> ApiError {
    ApiError::RouteNotFound
}
