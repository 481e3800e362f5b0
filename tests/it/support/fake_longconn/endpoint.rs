//! `POST /callback/ws/endpoint`: hands out one-shot connection URLs (protocol note §1,
//! §2), or the failures a test queued.

use std::sync::Arc;

use axum::{
    Json,
    body::Bytes,
    extract::State,
    http::StatusCode,
    response::{IntoResponse, Response},
};
use serde::Serialize;
use serde_json::{Value, json};

use super::{Issued, LongConnState, SERVICE_ID};

/// `data.ClientConfig`, in seconds (§1). Serialised with Feishu's exact key names, all
/// four always present: the SDKs copy missing keys as 0 (§4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct ClientConfigJson {
    /// Reconnect attempts; negative: forever.
    pub reconnect_count: i64,
    /// Seconds between reconnect attempts.
    pub reconnect_interval: i64,
    /// Upper bound of the random wait before the first reconnect attempt.
    pub reconnect_nonce: i64,
    /// Seconds between pings.
    pub ping_interval: i64,
}

impl Default for ClientConfigJson {
    /// §8.1: short intervals keep tests fast, and a nonce of 0 turns jitter off.
    fn default() -> Self {
        Self {
            reconnect_count: -1,
            reconnect_interval: 1,
            reconnect_nonce: 0,
            ping_interval: 1,
        }
    }
}

/// One queued answer of the endpoint, given instead of a URL (see
/// [`super::FakeLongConn::fail_endpoint`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EndpointAnswer {
    /// HTTP `status` with `{"code":code,"msg":msg}` and no `data`.
    Code {
        /// HTTP status.
        status: u16,
        /// Feishu code.
        code: i64,
        /// Message.
        msg: String,
    },
    /// HTTP `status` with a body that is not JSON (a gateway error page).
    Http(u16),
    /// `code` 0 with an empty `data.URL` (the SDKs retry, §1).
    EmptyUrl,
}

impl EndpointAnswer {
    /// HTTP 200 with a non-zero `code`.
    pub fn code(code: i64) -> Self {
        Self::Code {
            status: 200,
            code,
            msg: format!("fake failure {code}"),
        }
    }

    /// A code every SDK treats as fatal (no reconnect): any code but 0, 1 and
    /// 1000040343 (§1). 10003 is the one §8.11 suggests.
    pub fn fatal() -> Self {
        Self::code(10003)
    }

    /// 1000040343, "internal error": retried by every SDK (§1).
    pub fn retryable() -> Self {
        Self::code(1000040343)
    }

    /// 1, "system busy": retried by Go and Python, fatal in Node (§1, §7).
    pub fn busy() -> Self {
        Self::code(1)
    }

    /// An HTTP error status with a non-JSON body: retried (§1).
    pub fn http(status: u16) -> Self {
        Self::Http(status)
    }
}

/// The code it answers for credentials that do not match. The docs are silent; any
/// code other than 0, 1 and 1000040343 is fatal for the SDKs, which is what a wrong
/// secret should be.
pub const BAD_CREDENTIALS: i64 = 10003;

pub(super) async fn endpoint(State(s): State<Arc<LongConnState>>, raw: Bytes) -> Response {
    let body: Value = serde_json::from_slice(&raw).unwrap_or_else(|_| {
        s.violation("endpoint: the request body is not JSON".into());
        Value::Null
    });
    let queued = s.update(|i| {
        i.endpoint_requests += 1;
        i.endpoint_answers.pop_front()
    });
    if let Some(answer) = queued {
        return answered(answer);
    }
    // Python and Node match these key names case-sensitively (§1); so does the fake.
    if body["AppID"] != s.app_id.as_str() || body["AppSecret"] != s.app_secret.as_str() {
        return Json(json!({"code": BAD_CREDENTIALS, "msg": "invalid app_id or app_secret"}))
            .into_response();
    }
    let (url, config) = s.update(|i| {
        i.issued_count += 1;
        let n = i.issued_count;
        let issued = Issued {
            device_id: format!("d{n}"),
            access_key: format!("k{n}"),
            ticket: format!("t{n}"),
            used: false,
        };
        // The real URL is `wss://…/ws/v2?fpid=…&access_key=…&service_id=…&ticket=…`
        // (§2); the fake keeps the parameters the SDKs read plus the two credentials.
        let url = format!(
            "{}/ws/v2?device_id={}&service_id={SERVICE_ID}&access_key={}&ticket={}",
            s.ws_base, issued.device_id, issued.access_key, issued.ticket
        );
        i.urls.push(url.clone());
        i.issued.insert(issued.ticket.clone(), issued);
        (url, i.config)
    });
    Json(json!({"code": 0, "msg": "ok", "data": {"URL": url, "ClientConfig": config}}))
        .into_response()
}

fn answered(answer: EndpointAnswer) -> Response {
    let status = |s: u16| StatusCode::from_u16(s).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    match answer {
        EndpointAnswer::Code {
            status: st,
            code,
            msg,
        } => (status(st), Json(json!({"code": code, "msg": msg}))).into_response(),
        EndpointAnswer::Http(st) => (status(st), "<html>upstream error</html>").into_response(),
        EndpointAnswer::EmptyUrl => Json(json!({"code": 0, "msg": "ok", "data": {
            "URL": "", "ClientConfig": ClientConfigJson::default(),
        }}))
        .into_response(),
    }
}
