//! How the fake answers and refuses: Feishu's `{"code","msg"}` bodies and rate-limit
//! headers, and the checks every Open API call passes first (an injected storm, the
//! tenant token, the app's frequency limits).

use std::{
    sync::atomic::{AtomicUsize, Ordering},
    time::Instant,
};

use axum::{
    Json,
    body::{Body, Bytes},
    http::{HeaderMap, HeaderValue, StatusCode, header},
    response::{IntoResponse, Response},
};
use serde_json::{Value, json};

use super::{FakeState, limits::APP_PER_SEC};

/// A refusal (or a transport fault), already recorded; boxed, as responses are large.
pub(super) struct Refused(Box<Response>);

impl Refused {
    pub(super) fn headers_mut(&mut self) -> &mut HeaderMap {
        self.0.headers_mut()
    }
}

impl From<Response> for Refused {
    fn from(response: Response) -> Self {
        Self(Box::new(response))
    }
}

impl IntoResponse for Refused {
    fn into_response(self) -> Response {
        *self.0
    }
}

/// A handler's outcome.
pub(super) type Answer = Result<Response, Refused>;

/// Either side of an [`Answer`].
pub(super) fn either(answer: Answer) -> Response {
    answer.unwrap_or_else(IntoResponse::into_response)
}

/// Feishu's rate-limit code ("request trigger frequency limit", HTTP 429).
pub(super) const FREQUENCY_LIMIT: i64 = 99991400;

/// An injected rate-limit storm: while set, every request whose path contains
/// `path_contains` is answered HTTP 429 / 99991400 with `x-ogw-ratelimit-reset:
/// reset_secs`, and nothing is applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Storm {
    /// A part of the URL path (no query) that selects the refused requests.
    pub path_contains: String,
    /// The `x-ogw-ratelimit-reset` it answers.
    pub reset_secs: u64,
}

/// A one-off refusal of the next request to `endpoint`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The endpoint as `METHOD /path/{template}`, e.g.
    /// `PUT /open-apis/cardkit/v1/cards/{card_id}`.
    pub endpoint: String,
    /// The HTTP status it answers.
    pub status: u16,
    /// The Feishu code it answers.
    pub code: i64,
}

/// The code of a refusal, kept in the response's extensions (never sent) so the CardKit
/// op log can read it back.
#[derive(Debug, Clone, Copy)]
pub(super) struct RefusedCode(pub i64);

/// `{"code":0,"msg":"success","data":…}`.
pub(super) fn success(data: Value) -> Response {
    Json(json!({"code": 0, "msg": "success", "data": data})).into_response()
}

/// Takes one from `counter` when it is above zero.
pub(super) fn take_one(counter: &AtomicUsize) -> bool {
    counter
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
        .is_ok()
}

/// A gateway failure: HTTP 502 with an HTML body, as a proxy in front of Feishu gives.
pub(super) fn bad_gateway() -> Response {
    (
        StatusCode::BAD_GATEWAY,
        [(header::CONTENT_TYPE, "text/html")],
        "<html><body><h1>502 Bad Gateway</h1></body></html>",
    )
        .into_response()
}

/// `answer`, cut in transit: it promises the whole body (`Content-Length`) but sends
/// half of it and then breaks the connection, so the client sees a transport error
/// although the request was carried out.
pub(super) fn cut(answer: &Value) -> Response {
    let whole = answer.to_string().into_bytes();
    let half = Bytes::copy_from_slice(&whole[..whole.len() / 2]);
    let broken = std::io::Error::new(std::io::ErrorKind::ConnectionReset, "answer lost");
    let stream = futures_util::stream::iter([Ok(half), Err(broken)]);
    let mut response = Response::new(Body::from_stream(stream));
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    headers.insert(header::CONTENT_LENGTH, HeaderValue::from(whole.len()));
    response
}

impl FakeState {
    /// Refuses a request to `endpoint` (`METHOD /path/{template}`) with HTTP `status`
    /// and Feishu `code`: recorded in `refusals` and as `refused:<code>` activity.
    pub(super) fn refuse(
        &self,
        endpoint: &'static str,
        status: StatusCode,
        code: i64,
        msg: &str,
    ) -> Refused {
        self.refusals
            .lock()
            .expect("lock")
            .push((endpoint.to_string(), code));
        self.activity.send(format!("refused:{code}")).ok();
        let mut response = (status, Json(json!({"code": code, "msg": msg}))).into_response();
        response.extensions_mut().insert(RefusedCode(code));
        response.into()
    }

    /// A rate-limit refusal: [`Self::refuse`] plus Feishu's `x-ogw-ratelimit-limit` and
    /// `x-ogw-ratelimit-reset` (seconds to wait) headers.
    pub(super) fn limited(
        &self,
        endpoint: &'static str,
        status: StatusCode,
        code: i64,
        limit: usize,
        reset_secs: u64,
    ) -> Refused {
        let msg = if code == FREQUENCY_LIMIT {
            "request trigger frequency limit"
        } else {
            "message rate limit exceeded"
        };
        let mut refused = self.refuse(endpoint, status, code, msg);
        let headers = refused.headers_mut();
        headers.insert("x-ogw-ratelimit-limit", HeaderValue::from(limit));
        headers.insert("x-ogw-ratelimit-reset", HeaderValue::from(reset_secs));
        refused
    }

    /// Records a refusal the bridge caused by going over a limit.
    pub(super) fn violation(&self, what: String) {
        self.violations.lock().expect("lock").push(what);
    }

    /// Refuses the request when a storm covers `path` (deliberate: not a violation).
    pub(super) fn check_storm(&self, endpoint: &'static str, path: &str) -> Result<(), Refused> {
        let storm = self.storm.lock().expect("lock").clone();
        match storm {
            Some(storm) if path.contains(&storm.path_contains) => {
                self.storm_refusals.fetch_add(1, Ordering::SeqCst);
                Err(self.limited(
                    endpoint,
                    StatusCode::TOO_MANY_REQUESTS,
                    FREQUENCY_LIMIT,
                    APP_PER_SEC,
                    storm.reset_secs,
                ))
            }
            _ => Ok(()),
        }
    }

    /// Refuses the request when a one-off refusal names `endpoint` (using it up).
    pub(super) fn check_refuse_next(&self, endpoint: &'static str) -> Result<(), Refused> {
        let refusal = {
            let mut next = self.refuse_next.lock().expect("lock");
            let at = next.iter().position(|r| r.endpoint == endpoint);
            at.map(|i| next.remove(i))
        };
        match refusal {
            Some(r) => {
                let status = StatusCode::from_u16(r.status).unwrap_or(StatusCode::BAD_REQUEST);
                Err(self.refuse(endpoint, status, r.code, "refused on purpose"))
            }
            None => Ok(()),
        }
    }

    /// Refuses a request without the current tenant token (99991663, with HTTP 200 as
    /// this fake always answered it; the bridge reads the code, not the status).
    pub(super) fn check_token(
        &self,
        endpoint: &'static str,
        headers: &HeaderMap,
    ) -> Result<(), Refused> {
        if self.authorized(headers) {
            return Ok(());
        }
        Err(self.refuse(endpoint, StatusCode::OK, 99991663, "invalid access token"))
    }

    /// Counts the request against the app's limits (every Open API call but the token
    /// endpoint) and refuses it over them. Requests refused here go no further, so
    /// they are not counted by the per-message or per-card windows.
    pub(super) fn check_app_rate(&self, endpoint: &'static str) -> Result<(), Refused> {
        let verdict = self.limits.lock().expect("lock").app(Instant::now());
        verdict.map_err(|(which, reset)| {
            self.violation(which.to_string());
            self.limited(
                endpoint,
                StatusCode::TOO_MANY_REQUESTS,
                FREQUENCY_LIMIT,
                APP_PER_SEC,
                reset,
            )
        })
    }

    /// The checks, in a gateway's order, before a call is looked at: storm, token, app
    /// frequency. Requests refused for their token are not counted against the app
    /// (Feishu cannot tell whose they are; the docs are silent).
    pub(super) fn admit(
        &self,
        endpoint: &'static str,
        path: &str,
        headers: &HeaderMap,
    ) -> Result<(), Refused> {
        self.check_storm(endpoint, path)?;
        self.check_refuse_next(endpoint)?;
        self.check_token(endpoint, headers)?;
        self.check_app_rate(endpoint)
    }
}
