//! Where a long connection goes: a fresh WebSocket URL for every connect, fetched with
//! the app's credentials from `{api_base}/callback/ws/endpoint` (so Feishu, Lark and a
//! local fake work the same way), and the WebSocket handshake to it. The URL carries
//! credentials (an access key and a one-time ticket): it is kept as a secret and never
//! logged or shown.
//!
//! What is fatal follows the Go and Python SDKs: any non-zero endpoint code but "system
//! busy" (1) and "internal error" (1000040343) is the app's to fix, and so are a
//! handshake refused with 403, or with 514 and 1000040350 (too many connections).
//! Everything else is worth another attempt.

use std::time::Duration;

use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;
use tokio_tungstenite::{
    MaybeTlsStream, WebSocketStream,
    tungstenite::{self, http::Response},
};

use super::ClientConfig;

/// The connection's socket.
pub type Socket = WebSocketStream<MaybeTlsStream<tokio::net::TcpStream>>;

/// How long fetching an endpoint, or the handshake, may take.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(15);

/// Endpoint codes that say "try again".
const ENDPOINT_RETRY: [i64; 2] = [1, 1000040343];
/// The handshake's "too many connections" code.
const TOO_MANY_CONNECTIONS: &str = "1000040350";

/// Why a connect did not succeed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConnectError {
    /// The app's to fix: no more attempts.
    #[error("{0}")]
    Fatal(String),
    /// Worth another attempt.
    #[error("{0}")]
    Retry(String),
}

/// A fetched endpoint.
pub struct Endpoint {
    /// The WebSocket URL (a credential).
    pub url: SecretString,
    /// The server's client settings.
    pub config: ClientConfig,
}

#[derive(Deserialize)]
struct Answer {
    code: i64,
    #[serde(default)]
    msg: String,
    #[serde(default)]
    data: Option<AnswerData>,
}

#[derive(Deserialize)]
struct AnswerData {
    #[serde(rename = "URL", default)]
    url: String,
    #[serde(rename = "ClientConfig", default)]
    client_config: Option<serde_json::Value>,
}

/// Fetches a fresh endpoint for app `app_id`.
pub async fn fetch(
    http: &reqwest::Client,
    api_base: &str,
    app_id: &str,
    app_secret: &SecretString,
) -> Result<Endpoint, ConnectError> {
    let url = format!("{}/callback/ws/endpoint", api_base.trim_end_matches('/'));
    let body = serde_json::json!({"AppID": app_id, "AppSecret": app_secret.expose_secret()});
    let sent = http
        .post(url)
        .header("locale", "zh")
        .timeout(ATTEMPT_TIMEOUT)
        .json(&body)
        .send()
        .await;
    let resp = sent.map_err(|e| ConnectError::Retry(transport("the endpoint request", &e)))?;
    let status = resp.status();
    let bytes = resp
        .bytes()
        .await
        .map_err(|e| ConnectError::Retry(transport("the endpoint answer", &e)))?;
    if !status.is_success() {
        return Err(ConnectError::Retry(format!(
            "the endpoint answered HTTP {}",
            status.as_u16()
        )));
    }
    let answer: Answer = serde_json::from_slice(&bytes).map_err(|_| {
        ConnectError::Retry("the endpoint answer is not the documented JSON".into())
    })?;
    if answer.code != 0 {
        let why = format!(
            "the endpoint refused: code {} ({})",
            answer.code,
            crate::redact::bounded(&answer.msg, 120)
        );
        return Err(if ENDPOINT_RETRY.contains(&answer.code) {
            ConnectError::Retry(why)
        } else {
            ConnectError::Fatal(why)
        });
    }
    let data = answer
        .data
        .filter(|d| !d.url.is_empty())
        .ok_or_else(|| ConnectError::Retry("the endpoint answer has no URL".into()))?;
    let config = data
        .client_config
        .and_then(|c| ClientConfig::from_value(&c))
        .unwrap_or_default();
    Ok(Endpoint {
        url: SecretString::from(data.url),
        config,
    })
}

/// The WebSocket handshake to `url`.
pub async fn dial(url: &SecretString) -> Result<Socket, ConnectError> {
    let dialled = tokio::time::timeout(
        ATTEMPT_TIMEOUT,
        // Nagle off: an acknowledgement goes out at once, not with the next frame.
        tokio_tungstenite::connect_async_with_config(url.expose_secret(), None, true),
    )
    .await
    .map_err(|_| ConnectError::Retry("the handshake timed out".into()))?;
    match dialled {
        Ok((socket, _)) => Ok(socket),
        Err(tungstenite::Error::Http(resp)) => Err(refused(&resp)),
        // Never the error's own text: it can quote the URL.
        Err(e) => Err(ConnectError::Retry(format!(
            "the handshake failed ({})",
            kind(&e)
        ))),
    }
}

/// What a refused handshake means, from Feishu's `Handshake-*` headers (or, without
/// them, the HTTP status).
fn refused(resp: &Response<Option<Vec<u8>>>) -> ConnectError {
    let header = |name: &str| {
        resp.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let status = header("handshake-status")
        .and_then(|s| s.trim().parse::<u16>().ok())
        .unwrap_or(resp.status().as_u16());
    let code = header("handshake-autherrcode").unwrap_or_default();
    let msg = header("handshake-msg")
        .map(|m| format!(": {}", crate::redact::bounded(&m, 120)))
        .unwrap_or_default();
    let why = format!("the handshake was refused (status {status}, code {code:?}){msg}");
    match (status, code.trim()) {
        (514, TOO_MANY_CONNECTIONS) => ConnectError::Fatal(format!(
            "{why}: too many connections for this app (Feishu allows 50)"
        )),
        (403, _) => ConnectError::Fatal(why),
        _ => ConnectError::Retry(why),
    }
}

fn kind(e: &tungstenite::Error) -> &'static str {
    match e {
        tungstenite::Error::Io(_) => "connection",
        tungstenite::Error::Tls(_) => "TLS",
        tungstenite::Error::Url(_) => "the URL",
        tungstenite::Error::Protocol(_) => "protocol",
        _ => "other",
    }
}

fn transport(what: &str, e: &reqwest::Error) -> String {
    let how = if e.is_timeout() {
        "timed out"
    } else if e.is_connect() {
        "could not connect"
    } else {
        "broke off"
    };
    format!("{what} {how}")
}
