//! Where a long connection goes: a fresh WebSocket URL for every connect, fetched with
//! the app's credentials from `{api_base}/callback/ws/endpoint` (so Feishu, Lark and a
//! local fake work the same way); [`super::dial`] makes the handshake to it. The URL
//! carries credentials (an access key and a one-time ticket): it is kept as a secret and
//! never logged or shown.
//!
//! What is fatal follows the Go and Python SDKs: any non-zero endpoint code but "system
//! busy" (1) and "internal error" (1000040343) is the app's to fix. Everything else is
//! worth another attempt, a proxy's refusal included; a failure through the egress
//! proxy says so, naming the proxy by `host:port` only.

use std::time::Duration;

use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use super::ClientConfig;
use crate::config::Egress;

/// The connection's socket.
pub type Socket = WebSocketStream<MaybeTlsStream<tokio::net::TcpStream>>;

/// How long fetching an endpoint, or dialling it, may take.
pub(super) const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(15);

/// Endpoint codes that say "try again".
const ENDPOINT_RETRY: [i64; 2] = [1, 1000040343];

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

/// Fetches a fresh endpoint for app `app_id` (`egress` only to say which proxy a
/// failure went through: `http` leaves that way already).
pub async fn fetch(
    http: &reqwest::Client,
    egress: &Egress,
    api_base: &str,
    app_id: &str,
    app_secret: &SecretString,
) -> Result<Endpoint, ConnectError> {
    let url = format!("{}/callback/ws/endpoint", api_base.trim_end_matches('/'));
    let proxy = url::Url::parse(&url)
        .ok()
        .and_then(|u| egress.route(&u))
        .map(|r| r.addr().to_string());
    let body = serde_json::json!({"AppID": app_id, "AppSecret": app_secret.expose_secret()});
    let sent = http
        .post(url)
        .header("locale", "zh")
        .timeout(ATTEMPT_TIMEOUT)
        .json(&body)
        .send()
        .await;
    let failed =
        |what: &str, e: &reqwest::Error| ConnectError::Retry(transport(what, e, proxy.as_deref()));
    let resp = sent.map_err(|e| failed("the endpoint request", &e))?;
    let status = resp.status();
    let bytes = resp
        .bytes()
        .await
        .map_err(|e| failed("the endpoint answer", &e))?;
    if !status.is_success() {
        return Err(ConnectError::Retry(match (&proxy, status.as_u16()) {
            // Only a proxy answers 407.
            (Some(proxy), 407) => format!(
                "the proxy {proxy} refused the endpoint request: HTTP 407 Proxy Authentication Required"
            ),
            (Some(proxy), code) => {
                format!("the endpoint answered HTTP {code} (through the proxy {proxy})")
            }
            (None, code) => format!("the endpoint answered HTTP {code}"),
        }));
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

/// What went wrong with a request, in words: how, and through which proxy. A tunnel
/// the proxy refused is recognized by hyper-util's words for it (reqwest tunnels
/// `https` through hyper-util), and said in ours.
fn transport(what: &str, e: &reqwest::Error, proxy: Option<&str>) -> String {
    let how = if e.is_timeout() {
        "timed out"
    } else if e.is_connect() {
        "could not connect"
    } else {
        "broke off"
    };
    let Some(proxy) = proxy else {
        return format!("{what} {how}");
    };
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        let refusal = match s.to_string().as_str() {
            "tunnel error: proxy authorization required" => {
                Some("HTTP 407 Proxy Authentication Required")
            }
            "tunnel error: unsuccessful" => Some("it answered CONNECT with an error"),
            "tunnel error: failed to create underlying connection" => {
                return format!("{what} {how}: the proxy {proxy} cannot be reached");
            }
            _ => None,
        };
        if let Some(refusal) = refusal {
            return format!("the proxy {proxy} refused the tunnel for {what}: {refusal}");
        }
        source = s.source();
    }
    format!("{what} {how} (through the proxy {proxy})")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The endpoint fetched over `https` through a proxy on 127.0.0.1 that answers
    /// CONNECT with `answer`: what the fetch says, and what the proxy was asked.
    async fn through_proxy(answer: &[u8]) -> (String, String, String) {
        let (addr, asked) = super::super::tunnel::tests::proxy(answer.to_vec()).await;
        let env = |k: &str| (k == "HTTPS_PROXY").then(|| format!("http://bob:pw@{addr}"));
        let config = crate::config::load_from_str("", &env).expect("valid");
        let http = crate::config::clients::unbounded(&config.egress);
        let secret = SecretString::from("app-secret");
        let base = "https://open.feishu.invalid";
        let got = fetch(&http, &config.egress, base, "cli_x", &secret).await;
        let Err(ConnectError::Retry(why)) = got else {
            panic!("a retry expected");
        };
        (why, asked.await.expect("proxy"), addr)
    }

    #[tokio::test]
    async fn an_https_endpoint_goes_through_the_proxy_and_its_refusal_is_said() {
        let (why, asked, addr) =
            through_proxy(b"HTTP/1.1 407 Proxy Authentication Required\r\n\r\n").await;
        assert!(
            asked.starts_with("CONNECT open.feishu.invalid:443 HTTP/1.1\r\n"),
            "{asked}"
        );
        // base64("bob:pw"), from the proxy URL.
        assert!(asked.contains("Basic Ym9iOnB3\r\n"), "{asked}");
        assert_eq!(
            why,
            format!(
                "the proxy {addr} refused the tunnel for the endpoint request: HTTP 407 Proxy \
                 Authentication Required"
            )
        );
        let (why, _, addr) = through_proxy(b"HTTP/1.1 403 Forbidden\r\n\r\n").await;
        assert_eq!(
            why,
            format!(
                "the proxy {addr} refused the tunnel for the endpoint request: it answered \
                 CONNECT with an error"
            )
        );
        assert!(!why.contains("pw") && !why.contains("bob"), "{why}");
    }
}
