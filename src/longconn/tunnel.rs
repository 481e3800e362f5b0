//! A tunnel through the egress proxy, as the official Go SDK dials its WebSocket behind
//! one: TCP to the proxy, `CONNECT host:port HTTP/1.1` (with `Proxy-Authorization` when
//! the proxy URL has credentials), the proxy's answer head read and bounded; from then
//! on the stream is the target's, and TLS and the WebSocket handshake go over it.
//!
//! What a failure says names the proxy by `host:port` and the target by `host:port`,
//! and carries the proxy's status and reason phrase: never the credentials, never the
//! WebSocket URL (its query is a credential).

use secrecy::ExposeSecret;
use tokio::{
    io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt},
    net::TcpStream,
};

use crate::config::Route;

/// The longest answer head a proxy may send to CONNECT.
const MAX_HEAD: usize = 8 * 1024;
/// The most header lines read from it.
const MAX_HEADERS: usize = 64;

/// Why a tunnel did not open; each says which proxy and which target.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TunnelError {
    /// No TCP connection to the proxy.
    #[error("the proxy {proxy} cannot be reached")]
    Unreachable { proxy: String },
    /// The proxy answered CONNECT with a status other than 2xx.
    #[error("the proxy {proxy} refused the tunnel to {target}: HTTP {status}{reason}")]
    Refused {
        proxy: String,
        target: String,
        status: u16,
        /// ` Proxy Authentication Required`, or empty.
        reason: String,
    },
    /// What the proxy sent is not an HTTP answer, is too long, or was cut short.
    #[error("the proxy {proxy} did not answer the tunnel to {target} properly: {what}")]
    Garbled {
        proxy: String,
        target: String,
        what: &'static str,
    },
}

/// How far the proxy's answer has come.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Head {
    /// Not all of it yet.
    Partial,
    /// The whole head, `len` bytes, with its status and reason phrase.
    Complete {
        len: usize,
        status: u16,
        reason: String,
    },
}

/// Opens a TCP connection to `route`'s proxy and a tunnel through it to `target`
/// (`host:port`); Nagle is off on the stream.
pub(super) async fn open(route: &Route, target: &str) -> Result<TcpStream, TunnelError> {
    let proxy = route.addr();
    let mut stream = TcpStream::connect(proxy)
        .await
        .map_err(|_| TunnelError::Unreachable {
            proxy: proxy.to_string(),
        })?;
    // An acknowledgement goes out at once, not with the next frame.
    let _ = stream.set_nodelay(true);
    let authorization = route.authorization().map(|a| a.expose_secret());
    connect(&mut stream, proxy, target, authorization).await?;
    Ok(stream)
}

/// Sends `CONNECT target` on `stream` (already at the proxy `proxy`) and reads the
/// answer; `Ok` once the tunnel is open.
pub(super) async fn connect<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
    proxy: &str,
    target: &str,
    authorization: Option<&str>,
) -> Result<(), TunnelError> {
    let garbled = |what| TunnelError::Garbled {
        proxy: proxy.to_string(),
        target: target.to_string(),
        what,
    };
    let mut request = format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n");
    if let Some(auth) = authorization {
        request.push_str(&format!("Proxy-Authorization: {auth}\r\n"));
    }
    request.push_str("\r\n");
    stream
        .write_all(request.as_bytes())
        .await
        .map_err(|_| garbled("the connection broke off"))?;
    let mut buf = Vec::with_capacity(512);
    let mut chunk = [0u8; 1024];
    loop {
        let n = stream
            .read(&mut chunk)
            .await
            .map_err(|_| garbled("the connection broke off"))?;
        if n == 0 {
            return Err(garbled("it closed the connection before answering"));
        }
        buf.extend_from_slice(&chunk[..n]);
        match parse_head(&buf).map_err(garbled)? {
            Head::Partial if buf.len() >= MAX_HEAD => {
                return Err(garbled("its answer is longer than 8 KiB"));
            }
            Head::Partial => continue,
            Head::Complete { status, reason, .. } if !(200..300).contains(&status) => {
                return Err(TunnelError::Refused {
                    proxy: proxy.to_string(),
                    target: target.to_string(),
                    status,
                    reason: shown(&reason),
                });
            }
            // Neither TLS nor the WebSocket handshake lets the server speak first:
            // bytes past the answer mean the proxy is not tunnelling.
            Head::Complete { len, .. } if len < buf.len() => {
                return Err(garbled("it sent data before the tunnel was used"));
            }
            Head::Complete { .. } => return Ok(()),
        }
    }
}

/// Reads the answer head in `buf`.
pub(super) fn parse_head(buf: &[u8]) -> Result<Head, &'static str> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut answer = httparse::Response::new(&mut headers);
    match answer.parse(buf) {
        Ok(httparse::Status::Partial) => Ok(Head::Partial),
        Ok(httparse::Status::Complete(len)) => Ok(Head::Complete {
            len,
            status: answer.code.unwrap_or_default(),
            reason: answer.reason.unwrap_or_default().to_string(),
        }),
        Err(httparse::Error::TooManyHeaders) => Err("its answer has too many header lines"),
        Err(_) => Err("its answer is not HTTP"),
    }
}

/// ` <reason phrase>`, bounded and printable; empty when there is none.
fn shown(reason: &str) -> String {
    match reason.trim() {
        "" => String::new(),
        r => format!(" {}", crate::redact::bounded(r, 80)),
    }
}

#[cfg(test)]
pub(super) mod tests {
    use tokio::net::TcpListener;

    use super::*;

    #[test]
    fn an_answer_head_is_read_whole_or_asked_more_of() {
        let ok = b"HTTP/1.1 200 Connection established\r\nVia: squid\r\n\r\n";
        assert_eq!(
            parse_head(ok),
            Ok(Head::Complete {
                len: ok.len(),
                status: 200,
                reason: "Connection established".into()
            })
        );
        let refused = b"HTTP/1.1 407 Proxy Authentication Required\r\n\
                        Proxy-Authenticate: Basic realm=\"corp\"\r\nContent-Length: 0\r\n\r\n";
        assert!(matches!(
            parse_head(refused),
            Ok(Head::Complete { status: 407, ref reason, .. }) if reason == "Proxy Authentication Required"
        ));
        assert_eq!(parse_head(b"HTTP/1.1 200 OK\r\nVia: x"), Ok(Head::Partial));
        assert_eq!(parse_head(b""), Ok(Head::Partial));
        assert_eq!(
            parse_head(b"SSH-2.0-OpenSSH_9.6\r\n\r\n"),
            Err("its answer is not HTTP")
        );
        let many = format!("HTTP/1.1 200 OK\r\n{}\r\n", "X: y\r\n".repeat(100));
        assert_eq!(
            parse_head(many.as_bytes()),
            Err("its answer has too many header lines")
        );
    }

    /// A proxy on 127.0.0.1 that reads one request head, sends `answer` and returns the
    /// head it read.
    pub(in crate::longconn) async fn proxy(
        answer: Vec<u8>,
    ) -> (String, tokio::task::JoinHandle<String>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr").to_string();
        let task = tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.expect("accept");
            let mut head = Vec::new();
            while !head.ends_with(b"\r\n\r\n") {
                let mut byte = [0u8; 1];
                if s.read(&mut byte).await.unwrap_or(0) == 0 {
                    break;
                }
                head.push(byte[0]);
            }
            let _ = s.write_all(&answer).await;
            let _ = s.shutdown().await;
            String::from_utf8_lossy(&head).into_owned()
        });
        (addr, task)
    }

    async fn through(answer: &[u8], auth: Option<&str>) -> (Result<(), TunnelError>, String) {
        let (addr, task) = proxy(answer.to_vec()).await;
        let mut s = TcpStream::connect(&addr).await.expect("connect");
        let got = connect(
            &mut s,
            "proxy.corp:3128",
            "msg-frontier.feishu.cn:443",
            auth,
        )
        .await;
        (got, task.await.expect("proxy task"))
    }

    #[tokio::test]
    async fn a_200_opens_the_tunnel_and_the_request_is_curls() {
        let auth = "Basic Ym9iOnB3";
        let (got, request) =
            through(b"HTTP/1.1 200 Connection established\r\n\r\n", Some(auth)).await;
        assert_eq!(got, Ok(()));
        assert_eq!(
            request,
            "CONNECT msg-frontier.feishu.cn:443 HTTP/1.1\r\nHost: msg-frontier.feishu.cn:443\r\n\
             Proxy-Authorization: Basic Ym9iOnB3\r\n\r\n"
        );
    }

    #[tokio::test]
    async fn a_refusal_says_which_proxy_which_target_and_why_without_the_credentials() {
        let auth = "Basic Ym9iOnMzY3IzdA==";
        let (got, _) = through(
            b"HTTP/1.1 407 Proxy Authentication Required\r\nContent-Length: 0\r\n\r\n",
            Some(auth),
        )
        .await;
        let e = got.expect_err("refused");
        assert_eq!(
            e.to_string(),
            "the proxy proxy.corp:3128 refused the tunnel to msg-frontier.feishu.cn:443: \
             HTTP 407 Proxy Authentication Required"
        );
        assert!(!format!("{e} {e:?}").contains("Ym9i"));
        let (got, _) = through(b"HTTP/1.1 403 \r\n\r\n", None).await;
        assert!(
            got.expect_err("refused")
                .to_string()
                .ends_with("msg-frontier.feishu.cn:443: HTTP 403")
        );
    }

    #[tokio::test]
    async fn garbage_an_endless_head_and_early_data_are_refused() {
        let (got, _) = through(b"hello there\r\n\r\n", None).await;
        let e = got.expect_err("not HTTP").to_string();
        assert!(e.ends_with("properly: its answer is not HTTP"), "{e}");
        let endless = format!("HTTP/1.1 200 OK\r\nX: {}\r\n", "y".repeat(MAX_HEAD));
        let (got, _) = through(endless.as_bytes(), None).await;
        let e = got.expect_err("too long").to_string();
        assert!(e.ends_with("longer than 8 KiB"), "{e}");
        let (got, _) = through(b"HTTP/1.1 200 OK\r\n\r\nSSH-2.0", None).await;
        assert!(got.is_err(), "bytes past the answer");
        let (got, _) = through(b"HTTP/1.1 200 OK\r\n", None).await;
        let e = got.expect_err("cut short").to_string();
        assert!(e.ends_with("closed the connection before answering"), "{e}");
    }

    #[tokio::test]
    async fn a_proxy_that_is_not_there_cannot_be_reached() {
        let closed = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = closed.local_addr().expect("addr").to_string();
        drop(closed);
        let config = crate::config::load_from_str("", &|k| {
            (k == "HTTPS_PROXY").then(|| format!("http://bob:pw@{addr}"))
        })
        .expect("valid");
        let url = url::Url::parse("wss://msg-frontier.feishu.cn/ws/v2?ticket=t").expect("url");
        let route = config.egress.route(&url).expect("proxied");
        let e = open(&route, "msg-frontier.feishu.cn:443")
            .await
            .expect_err("nothing listens");
        assert_eq!(e.to_string(), format!("the proxy {addr} cannot be reached"));
    }
}
