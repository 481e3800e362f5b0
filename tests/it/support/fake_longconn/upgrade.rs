//! `GET /ws/v2`: the WebSocket upgrade (protocol note §2). The URL is one-shot
//! credentials: a ticket that was never handed out, or was already presented, is
//! refused. Refusals carry the `Handshake-*` headers the Go and Python SDKs read.
//!
//! The upgrade is done by hand (hyper's upgrade plus tungstenite's accept key) rather
//! than with axum's `ws` feature, so the fake and its test client share one WebSocket
//! library (tokio-tungstenite) and the fake can refuse with any status and headers.

use std::{collections::HashMap, sync::Arc};

use axum::{
    body::Body,
    extract::{Query, Request, State},
    http::{HeaderMap, HeaderValue, StatusCode, header},
    response::{IntoResponse, Response},
};
use hyper_util::rt::TokioIo;
use tokio_tungstenite::{
    WebSocketStream,
    tungstenite::{handshake::derive_accept_key, protocol::Role},
};

use super::{LongConnState, MAX_CONNECTIONS, Phase, SERVICE_ID, conn};

/// A queued refusal of the next upgrade (see [`super::FakeLongConn::fail_handshake`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HandshakeAnswer {
    /// HTTP status of the refusal (anything but 101).
    pub status: u16,
    /// `Handshake-Status`, e.g. 514 (auth failed) or 500.
    pub handshake_status: Option<u16>,
    /// `Handshake-Msg`.
    pub msg: Option<String>,
    /// `Handshake-Autherrcode`, e.g. 1000040350 (too many connections).
    pub autherrcode: Option<i64>,
}

/// `Handshake-Autherrcode` for "too many connections" (§2).
pub const TOO_MANY_CONNECTIONS: i64 = 1000040350;

/// `Handshake-Autherrcode` the fake gives a stale or unknown ticket. The docs are silent
/// on what Feishu answers; the fake picks 514 with a code the SDKs do not single out, so
/// a client would retry with a fresh URL.
pub const BAD_TICKET: i64 = 1000040399;

impl HandshakeAnswer {
    /// HTTP `status` and nothing else: no `Handshake-*` headers (G-new then reads the
    /// HTTP status itself, so a bare 403 is fatal, §2).
    pub fn bare(status: u16) -> Self {
        Self {
            status,
            handshake_status: None,
            msg: None,
            autherrcode: None,
        }
    }

    /// 403 with `Handshake-Status: 514` and autherrcode 1000040350: fatal (§2, §8.2).
    pub fn too_many_connections() -> Self {
        Self::auth_failed(TOO_MANY_CONNECTIONS)
    }

    /// 403 with `Handshake-Status: 514` and `autherrcode`: retried unless it is
    /// 1000040350 (§2).
    pub fn auth_failed(autherrcode: i64) -> Self {
        Self {
            handshake_status: Some(514),
            msg: Some("auth failed".into()),
            autherrcode: Some(autherrcode),
            ..Self::bare(403)
        }
    }

    /// 500 with `Handshake-Status: 500`: retried (§8.2).
    pub fn server_error() -> Self {
        Self {
            handshake_status: Some(500),
            msg: Some("internal error".into()),
            ..Self::bare(500)
        }
    }

    fn into_response(self) -> Response {
        let mut r = StatusCode::from_u16(self.status)
            .unwrap_or(StatusCode::FORBIDDEN)
            .into_response();
        let h = r.headers_mut();
        let mut set = |name: &'static str, value: Option<String>| {
            if let Some(v) = value.and_then(|v| HeaderValue::from_str(&v).ok()) {
                h.insert(name, v);
            }
        };
        set(
            "Handshake-Status",
            self.handshake_status.map(|s| s.to_string()),
        );
        set("Handshake-Msg", self.msg);
        set(
            "Handshake-Autherrcode",
            self.autherrcode.map(|c| c.to_string()),
        );
        r
    }
}

pub(super) async fn upgrade(
    State(s): State<Arc<LongConnState>>,
    Query(q): Query<HashMap<String, String>>,
    mut req: Request,
) -> Response {
    let Some(key) = websocket_key(req.headers()) else {
        s.violation("upgrade: not a WebSocket upgrade request".into());
        return StatusCode::BAD_REQUEST.into_response();
    };
    let ticket = q.get("ticket").cloned().unwrap_or_default();
    let refusal = s.update(|i| {
        let live = i.conns.iter().filter(|c| c.phase != Phase::Ended).count();
        let Some(issued) = i.issued.get_mut(&ticket) else {
            return Some(Err(format!(
                "upgrade: ticket {ticket:?} was never handed out"
            )));
        };
        if issued.used {
            return Some(Err(format!("upgrade: ticket {ticket} was already used")));
        }
        // Whatever happens next, the ticket has been presented and is spent.
        issued.used = true;
        let expected = [
            ("device_id", issued.device_id.clone()),
            ("access_key", issued.access_key.clone()),
            ("service_id", SERVICE_ID.to_string()),
        ];
        i.tickets_used.push(ticket.clone());
        if let Some((name, _)) = expected.iter().find(|(k, v)| q.get(*k) != Some(v)) {
            return Some(Err(format!(
                "upgrade: {name} does not match ticket {ticket}"
            )));
        }
        if let Some(answer) = i.handshake_answers.pop_front() {
            return Some(Ok(answer));
        }
        // At most 50 connections per app (§0).
        (live >= MAX_CONNECTIONS).then(|| Ok(HandshakeAnswer::too_many_connections()))
    });
    match refusal {
        Some(Err(why)) => {
            s.violation(why);
            s.update(|i| i.handshakes_refused += 1);
            return HandshakeAnswer::auth_failed(BAD_TICKET).into_response();
        }
        Some(Ok(answer)) => {
            s.update(|i| i.handshakes_refused += 1);
            return answer.into_response();
        }
        None => {}
    }
    let on_upgrade = hyper::upgrade::on(&mut req);
    tokio::spawn(async move {
        let Ok(upgraded) = on_upgrade.await else {
            return;
        };
        let ws = WebSocketStream::from_raw_socket(TokioIo::new(upgraded), Role::Server, None).await;
        conn::run(s, ws).await;
    });
    Response::builder()
        .status(StatusCode::SWITCHING_PROTOCOLS)
        .header(header::UPGRADE, "websocket")
        .header(header::CONNECTION, "Upgrade")
        .header(
            header::SEC_WEBSOCKET_ACCEPT,
            derive_accept_key(key.as_bytes()),
        )
        .body(Body::empty())
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

/// `Sec-WebSocket-Key` of a well-formed RFC 6455 upgrade request.
fn websocket_key(h: &HeaderMap) -> Option<String> {
    let has = |name, token: &str| {
        h.get_all(name).iter().any(|v| {
            v.to_str()
                .is_ok_and(|v| v.split(',').any(|t| t.trim().eq_ignore_ascii_case(token)))
        })
    };
    let ok = has(header::UPGRADE, "websocket")
        && has(header::CONNECTION, "upgrade")
        && has(header::SEC_WEBSOCKET_VERSION, "13");
    let key = h.get(header::SEC_WEBSOCKET_KEY)?.to_str().ok()?;
    ok.then(|| key.to_string())
}
