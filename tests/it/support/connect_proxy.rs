//! A real HTTP proxy on 127.0.0.1, as a corporate one behaves (the proxy being outside
//! our control): `CONNECT host:port` opens a tunnel that carries bytes both ways, and a
//! request in absolute form (`POST http://host:port/path`, how reqwest sends a plain
//! `http://` request to a proxy) is forwarded, one request per connection. It can
//! require credentials (407 without them) and refuse tunnels with any status, and it
//! records everything that went through it or was refused.

use std::{
    net::SocketAddr,
    sync::{Arc, Mutex},
};

use axum::http::StatusCode;
use base64::{Engine, engine::general_purpose::STANDARD};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt, copy_bidirectional},
    net::{TcpListener, TcpStream},
};

/// The longest request head read.
const MAX_HEAD: usize = 64 * 1024;

/// What the proxy lets through.
#[derive(Debug, Clone, Default)]
struct Policy {
    /// The `Proxy-Authorization` every request must carry, when set.
    authorization: Option<String>,
    /// The status every `CONNECT` is refused with, when set.
    refuse_tunnels: Option<u16>,
}

/// What went through the proxy, in order.
#[derive(Debug, Clone, Default)]
pub struct Seen {
    /// `host:port` of every tunnel opened.
    pub tunnels: Vec<String>,
    /// `METHOD absolute-URL` of every request forwarded.
    pub forwarded: Vec<String>,
    /// `(status, request line)` of every refusal.
    pub refused: Vec<(u16, String)>,
}

impl Seen {
    /// Whether nothing reached the proxy at all.
    pub fn is_empty(&self) -> bool {
        self.tunnels.is_empty() && self.forwarded.is_empty() && self.refused.is_empty()
    }
}

struct State {
    policy: Mutex<Policy>,
    seen: Mutex<Seen>,
}

impl State {
    fn policy(&self) -> Policy {
        self.policy.lock().expect("policy").clone()
    }

    fn record(&self, f: impl FnOnce(&mut Seen)) {
        f(&mut self.seen.lock().expect("seen"));
    }
}

/// The running proxy; stops accepting when dropped.
pub struct ConnectProxy {
    /// Where it listens.
    pub addr: SocketAddr,
    state: Arc<State>,
    task: tokio::task::JoinHandle<()>,
}

impl ConnectProxy {
    /// Starts a proxy that lets everything through.
    pub async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
        let addr = listener.local_addr().expect("addr");
        let state = Arc::new(State {
            policy: Mutex::default(),
            seen: Mutex::default(),
        });
        let accepting = state.clone();
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                tokio::spawn(serve(accepting.clone(), client));
            }
        });
        Self { addr, state, task }
    }

    /// `http://user:password@127.0.0.1:port`, each part percent-encoded as a URL needs.
    pub fn url_with(&self, user: &str, password: &str) -> String {
        let mut url = url::Url::parse(&format!("http://{}", self.addr)).expect("url");
        url.set_username(user).expect("a user");
        url.set_password(Some(password)).expect("a password");
        url.to_string().trim_end_matches('/').to_string()
    }

    /// From now on, every request must carry these credentials (Basic), else 407.
    pub fn require(&self, user: &str, password: &str) {
        let basic = format!("Basic {}", STANDARD.encode(format!("{user}:{password}")));
        self.state.policy.lock().expect("policy").authorization = Some(basic);
    }

    /// From now on, requests need no credentials.
    pub fn open_to_all(&self) {
        self.state.policy.lock().expect("policy").authorization = None;
    }

    /// From now on, every `CONNECT` is refused with `status` (or, with `None`, opened).
    pub fn refuse_tunnels(&self, status: Option<u16>) {
        self.state.policy.lock().expect("policy").refuse_tunnels = status;
    }

    /// What went through so far.
    pub fn seen(&self) -> Seen {
        self.state.seen.lock().expect("seen").clone()
    }
}

impl Drop for ConnectProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// One client connection: one request, tunnelled, forwarded or refused.
async fn serve(state: Arc<State>, mut client: TcpStream) {
    let Some((head, rest)) = read_head(&mut client).await else {
        return;
    };
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut request = httparse::Request::new(&mut headers);
    let Ok(httparse::Status::Complete(_)) = request.parse(&head) else {
        return answer(&mut client, 400).await;
    };
    let (Some(method), Some(target)) = (request.method, request.path) else {
        return answer(&mut client, 400).await;
    };
    let line = format!("{method} {target}");
    let header = |name: &str| {
        request
            .headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case(name))
            .map(|h| String::from_utf8_lossy(h.value).into_owned())
    };
    let policy = state.policy();
    if policy.authorization.is_some() && header("proxy-authorization") != policy.authorization {
        state.record(|s| s.refused.push((407, line)));
        return answer(&mut client, 407).await;
    }
    if method == "CONNECT" {
        if let Some(status) = policy.refuse_tunnels {
            state.record(|s| s.refused.push((status, line)));
            return answer(&mut client, status).await;
        }
        let Ok(mut upstream) = TcpStream::connect(target).await else {
            return answer(&mut client, 502).await;
        };
        state.record(|s| s.tunnels.push(target.to_string()));
        let opened = b"HTTP/1.1 200 Connection established\r\n\r\n";
        if client.write_all(opened).await.is_err() || upstream.write_all(&rest).await.is_err() {
            return;
        }
        let _ = copy_bidirectional(&mut client, &mut upstream).await;
        return;
    }
    let Some((authority, path)) = absolute(target) else {
        return answer(&mut client, 400).await;
    };
    let Ok(mut upstream) = TcpStream::connect(&authority).await else {
        return answer(&mut client, 502).await;
    };
    state.record(|s| s.forwarded.push(line));
    // Origin form, without the proxy's own headers, and one request per connection.
    let mut out = format!("{method} {path} HTTP/1.1\r\n");
    for h in request.headers.iter() {
        let hop = [
            "proxy-authorization",
            "proxy-connection",
            "connection",
            "keep-alive",
        ];
        if !hop.iter().any(|n| h.name.eq_ignore_ascii_case(n)) {
            out.push_str(&format!(
                "{}: {}\r\n",
                h.name,
                String::from_utf8_lossy(h.value)
            ));
        }
    }
    out.push_str("Connection: close\r\n\r\n");
    if upstream.write_all(out.as_bytes()).await.is_err() || upstream.write_all(&rest).await.is_err()
    {
        return;
    }
    let _ = copy_bidirectional(&mut client, &mut upstream).await;
}

/// The request head (through its blank line) and whatever was read past it.
async fn read_head(client: &mut TcpStream) -> Option<(Vec<u8>, Vec<u8>)> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let rest = buf.split_off(end + 4);
            return Some((buf, rest));
        }
        if buf.len() > MAX_HEAD {
            return None;
        }
        let n = client.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// `host:port` and the origin-form path of an absolute `http://` request target.
fn absolute(target: &str) -> Option<(String, String)> {
    let url = url::Url::parse(target).ok()?;
    let authority = format!("{}:{}", url.host_str()?, url.port_or_known_default()?);
    let path = match url.query() {
        Some(q) => format!("{}?{q}", url.path()),
        None => url.path().to_string(),
    };
    Some((authority, path))
}

/// An answer without a body, as a proxy refuses.
async fn answer(client: &mut TcpStream, status: u16) {
    let reason = StatusCode::from_u16(status)
        .ok()
        .and_then(|s| s.canonical_reason())
        .unwrap_or("");
    let challenge = if status == 407 {
        "Proxy-Authenticate: Basic realm=\"test\"\r\n"
    } else {
        ""
    };
    let head = format!(
        "HTTP/1.1 {status} {reason}\r\n{challenge}Content-Length: 0\r\nConnection: close\r\n\r\n"
    );
    let _ = client.write_all(head.as_bytes()).await;
    let _ = client.shutdown().await;
}
