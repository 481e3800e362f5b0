//! The WebSocket handshake to a fetched URL: straight to its host, or through the egress
//! proxy with an HTTP CONNECT tunnel ([`super::tunnel`]) when the environment names one
//! for it; then TLS (for `wss`) and the upgrade. The whole attempt is bounded by
//! [`ATTEMPT_TIMEOUT`], and Nagle is off either way.
//!
//! A refused upgrade is read as the Go and Python SDKs read it: 403, or 514 with
//! 1000040350 (too many connections), is the app's to fix; anything else, and every
//! failure on the way (a proxy that refuses the tunnel or cannot be reached included:
//! a proxy may be fixed without restarting the bridge), is worth another attempt.

use secrecy::{ExposeSecret, SecretString};
use tokio::{net::TcpStream, time::Instant};
use tokio_tungstenite::tungstenite::{self, http::Response};

use super::{
    endpoint::{ATTEMPT_TIMEOUT, ConnectError, Socket},
    tunnel,
};
use crate::config::Egress;

/// The handshake's "too many connections" code.
const TOO_MANY_CONNECTIONS: &str = "1000040350";

/// The WebSocket handshake to `url`, leaving as `egress` says.
pub async fn dial(url: &SecretString, egress: &Egress) -> Result<Socket, ConnectError> {
    let retry = |why: String| ConnectError::Retry(why);
    let parsed = url::Url::parse(url.expose_secret())
        .map_err(|_| retry("the endpoint's URL is not a URL".into()))?;
    let (Some(host), Some(port)) = (parsed.host(), parsed.port_or_known_default()) else {
        return Err(retry("the endpoint's URL has no host".into()));
    };
    // `host:port`, what messages show of the URL: never its query.
    let target = format!("{host}:{port}");
    let deadline = Instant::now() + ATTEMPT_TIMEOUT;
    let secs = ATTEMPT_TIMEOUT.as_secs();
    let stream = match egress.route(&parsed) {
        Some(route) => {
            let opened = tokio::time::timeout_at(deadline, tunnel::open(&route, &target)).await;
            let timed_out = || {
                retry(format!(
                    "the proxy {} did not open the tunnel to {target} within {secs} s",
                    route.addr()
                ))
            };
            opened
                .map_err(|_| timed_out())?
                .map_err(|e| retry(e.to_string()))?
        }
        None => {
            let connected = tokio::time::timeout_at(deadline, TcpStream::connect(&target)).await;
            let stream = connected
                .map_err(|_| retry(format!("connecting to {target} timed out")))?
                .map_err(|_| retry(format!("{target} cannot be reached")))?;
            // An acknowledgement goes out at once, not with the next frame.
            let _ = stream.set_nodelay(true);
            stream
        }
    };
    let handshake =
        tokio_tungstenite::client_async_tls_with_config(url.expose_secret(), stream, None, None);
    let shaken = tokio::time::timeout_at(deadline, handshake)
        .await
        .map_err(|_| retry("the handshake timed out".into()))?;
    match shaken {
        Ok((socket, _)) => Ok(socket),
        Err(tungstenite::Error::Http(resp)) => Err(refused(&resp)),
        // Never the error's own text: it can quote the URL.
        Err(e) => Err(retry(format!("the handshake failed ({})", kind(&e)))),
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
