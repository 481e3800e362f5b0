//! A small fake of Feishu for the long-connection examples (`examples/longconn_demo.rs`
//! and `examples/longconn_load.rs` include this file through `#[path]`). On one port of
//! 127.0.0.1 it serves what a bridge with `connection = "websocket"` and `api_base`
//! pointed here needs, after the protocol note (`feishu-ws-protocol.md` §1–§5):
//!
//! * `POST /callback/ws/endpoint`: checks `AppID`/`AppSecret`, hands out a fresh
//!   `ws://…/ws/v2?device_id=…&service_id=42&ticket=…` URL (a random ticket, good for
//!   one upgrade) and the ClientConfig [`CLIENT_CONFIG`];
//! * `GET /ws/v2`: the WebSocket upgrade (tokio-tungstenite, server side). Pings are
//!   answered with pongs carrying the ClientConfig; [`FakeFeishu::push`] writes data
//!   frames; acknowledgements are matched to them by SeqID and reported as [`Ack`]s
//!   (code, `biz_rt`, the time from push to acknowledgement);
//! * the Open API calls of a plain answer: the tenant token, bot info, reply and send
//!   (reported as [`Reply`]s), and reading a message (always 230011, not found).
//!
//! What it does not model: TLS and real credentials (string compares; a fixed tenant
//! token it does not check); redelivery of what is answered 500 or not within 3 s (the
//! examples count those); fragments (`sum` > 1) and card callbacks; more than one live
//! connection (pushes go to the newest); handshake refusals other than an unknown or
//! spent ticket; the Open API's rate limits, uuid idempotency, cards and errors. It
//! never prints the URL it hands out.

use std::{
    collections::{HashMap, HashSet},
    sync::{
        Arc, Mutex, MutexGuard,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use axum::{
    Json, Router,
    body::{Body, Bytes},
    extract::{Path, Query, Request, State},
    http::{HeaderValue, StatusCode, header},
    response::{IntoResponse, Response},
    routing::{get, post},
    serve::ListenerExt,
};
use feishu_bridge::longconn::{Frame, Header, Kind, METHOD_CONTROL, METHOD_DATA};
use futures_util::{SinkExt, StreamExt};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::{net::TcpListener, sync::mpsc, sync::watch, time::Instant};
use tokio_tungstenite::{
    WebSocketStream,
    tungstenite::{Message, handshake::derive_accept_key, protocol::Role},
};
use tokio_util::{sync::CancellationToken, task::TaskTracker};

/// The `service_id` of every URL, and the `service` of every frame.
pub const SERVICE_ID: i32 = 42;
/// The ClientConfig of the endpoint answer and of every pong, in seconds.
pub const CLIENT_CONFIG: &str =
    r#"{"ReconnectCount":-1,"ReconnectInterval":1,"ReconnectNonce":0,"PingInterval":5}"#;
/// A pushed frame's LogID is this plus its SeqID (past 32 bits, as real ones may be).
const LOG_ID_BASE: u64 = 1 << 40;

/// An acknowledgement of a pushed frame.
#[derive(Debug, Clone)]
pub struct Ack {
    /// The SeqID it echoed.
    pub seq_id: u64,
    /// `code` of its payload (200: stored, 500: not); 0 when missing.
    pub code: i64,
    /// Its `biz_rt` header: the client's own time on the message, in ms.
    pub biz_rt_ms: Option<u64>,
    /// From the `since` given to [`FakeFeishu::push`] to its arrival.
    pub latency: Duration,
}

/// A message the bridge posted: the message replied to (or the chat sent to), its
/// `msg_type`, and its text (a text message's, else the text and markdown of a card).
#[derive(Debug, Clone)]
pub struct Reply {
    pub to: String,
    pub msg_type: String,
    pub text: String,
}

/// What the fake reports, as it happens.
pub struct Observed {
    pub acks: mpsc::UnboundedReceiver<Ack>,
    pub replies: mpsc::UnboundedReceiver<Reply>,
}

/// A `type=event` data frame, encoded once, ready to push.
pub struct Push {
    seq_id: u64,
    bytes: Bytes,
}

impl Push {
    /// SeqID `seq_id` carrying `payload` (a plaintext schema 2.0 event), unsplit.
    pub fn event(seq_id: u64, payload: Vec<u8>) -> Self {
        let (message_id, trace_id) = (format!("fake-msg-{seq_id}"), format!("fake-trace-{seq_id}"));
        let headers = [
            ("type", "event"),
            ("message_id", message_id.as_str()),
            ("sum", "1"),
            ("seq", "0"),
            ("trace_id", trace_id.as_str()),
        ];
        let f = frame(seq_id, METHOD_DATA, &headers, payload);
        Self {
            seq_id,
            bytes: f.encode_bytes().into(),
        }
    }
}

fn frame(seq_id: u64, method: i32, headers: &[(&str, &str)], payload: Vec<u8>) -> Frame {
    Frame {
        seq_id,
        log_id: if seq_id == 0 { 0 } else { LOG_ID_BASE + seq_id },
        service: SERVICE_ID,
        method,
        headers: headers.iter().map(|(k, v)| Header::new(*k, *v)).collect(),
        payload_encoding: None,
        payload_type: None,
        payload: Some(payload),
        log_id_new: None,
    }
}

/// The running fake.
pub struct FakeFeishu {
    /// `http://127.0.0.1:P`: the profile's `api_base`.
    pub api_base: String,
    shared: Arc<Shared>,
}

struct Shared {
    app_id: String,
    app_secret: String,
    bot_open_id: String,
    ws_base: String,
    /// Tickets handed out and not yet presented.
    tickets: Mutex<HashSet<String>>,
    urls_issued: AtomicU64,
    /// Frames from the client the fake could not place (an ACK of nothing pushed, or
    /// with another LogID; not a frame; neither a ping nor data).
    strays: AtomicU64,
    /// The newest connection's writer.
    conn: Mutex<Option<mpsc::UnboundedSender<Message>>>,
    /// Connections whose first ping arrived.
    pinged: watch::Sender<u64>,
    /// Pushed frames awaiting their acknowledgement: SeqID → since.
    in_flight: Mutex<HashMap<u64, Instant>>,
    acks: mpsc::UnboundedSender<Ack>,
    replies: mpsc::UnboundedSender<Reply>,
    stop: CancellationToken,
    tasks: TaskTracker,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl FakeFeishu {
    /// Starts the fake of app `app_id`/`app_secret`, whose bot is `bot_open_id`, on a
    /// port of 127.0.0.1 the system picks.
    pub async fn start(id: &str, secret: &str, bot: &str) -> std::io::Result<(Self, Observed)> {
        // Frames leave when written: no Nagle delay on the fake's side.
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let listener = listener.tap_io(|tcp| {
            let _ = tcp.set_nodelay(true);
        });
        let (acks_tx, acks) = mpsc::unbounded_channel();
        let (replies_tx, replies) = mpsc::unbounded_channel();
        let shared = Arc::new(Shared {
            app_id: id.into(),
            app_secret: secret.into(),
            bot_open_id: bot.into(),
            ws_base: format!("ws://{addr}"),
            tickets: Mutex::default(),
            urls_issued: AtomicU64::new(0),
            strays: AtomicU64::new(0),
            conn: Mutex::default(),
            pinged: watch::channel(0).0,
            in_flight: Mutex::default(),
            acks: acks_tx,
            replies: replies_tx,
            stop: CancellationToken::new(),
            tasks: TaskTracker::new(),
        });
        let token = "/open-apis/auth/v3/tenant_access_token/internal";
        let router = Router::new()
            .route("/callback/ws/endpoint", post(endpoint))
            .route("/ws/v2", get(upgrade))
            .route(token, post(tenant_token))
            .route("/open-apis/bot/v3/info", get(bot_info))
            .route("/open-apis/im/v1/messages/{id}", get(get_message))
            .route("/open-apis/im/v1/messages/{id}/reply", post(posted))
            .route("/open-apis/im/v1/messages", post(posted))
            .with_state(shared.clone());
        let stop = shared.stop.clone().cancelled_owned();
        let served = axum::serve(listener, router).with_graceful_shutdown(stop);
        shared.tasks.spawn(async move {
            if let Err(e) = served.await {
                eprintln!("fake Feishu: serving failed: {e}");
            }
        });
        let api_base = format!("http://{addr}");
        Ok((Self { api_base, shared }, Observed { acks, replies }))
    }

    /// Waits until `n` connections have been made and have sent their first ping.
    pub async fn connected(&self, n: u64) {
        let mut pinged = self.shared.pinged.subscribe();
        // The sender lives in `self`, so this ends only once the condition holds.
        let _ = pinged.wait_for(|&count| count >= n).await;
    }

    /// Writes `push` to the newest connection; its [`Ack`]'s latency counts from
    /// `since`. False when no connection is open.
    pub fn push(&self, push: &Push, since: Instant) -> bool {
        let Some(writer) = lock(&self.shared.conn).clone() else {
            return false;
        };
        lock(&self.shared.in_flight).insert(push.seq_id, since);
        let sent = writer.send(Message::Binary(push.bytes.clone())).is_ok();
        if !sent {
            lock(&self.shared.in_flight).remove(&push.seq_id);
        }
        sent
    }

    /// Frames from the client the fake could not place.
    pub fn strays(&self) -> u64 {
        self.shared.strays.load(Ordering::Relaxed)
    }

    /// Connection URLs handed out (one per connect attempt).
    pub fn urls_issued(&self) -> u64 {
        self.shared.urls_issued.load(Ordering::Relaxed)
    }

    /// Closes the connection (a close frame), stops serving, and waits (at most 5 s)
    /// for every task of the fake to end.
    pub async fn stop(self) {
        if let Some(writer) = lock(&self.shared.conn).take() {
            let _ = writer.send(Message::Close(None));
        }
        self.shared.stop.cancel();
        self.shared.tasks.close();
        let ended = tokio::time::timeout(Duration::from_secs(5), self.shared.tasks.wait());
        if ended.await.is_err() {
            eprintln!("fake Feishu: a connection was still open 5 s after the stop");
        }
    }
}

/// `POST /callback/ws/endpoint` (§1).
async fn endpoint(State(s): State<Arc<Shared>>, body: Bytes) -> Json<Value> {
    let creds: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    if creds["AppID"] != s.app_id.as_str() || creds["AppSecret"] != s.app_secret.as_str() {
        return Json(json!({"code": 10003, "msg": "invalid app_id or app_secret"}));
    }
    let n = s.urls_issued.fetch_add(1, Ordering::Relaxed) + 1;
    let ticket = format!("{:032x}", rand::random::<u128>());
    lock(&s.tickets).insert(ticket.clone());
    let (base, id) = (&s.ws_base, SERVICE_ID);
    let url = format!("{base}/ws/v2?device_id=fake-device-{n}&service_id={id}&ticket={ticket}");
    let config: Value = serde_json::from_str(CLIENT_CONFIG).unwrap_or(Value::Null);
    Json(json!({"code": 0, "msg": "ok", "data": {"URL": url, "ClientConfig": config}}))
}

/// `GET /ws/v2` (§2): a ticket handed out and not yet presented upgrades; anything else
/// is refused with 403 and `Handshake-Status: 514` (an auth failure the client retries).
async fn upgrade(
    State(s): State<Arc<Shared>>,
    Query(query): Query<HashMap<String, String>>,
    mut req: Request,
) -> Response {
    let ticket = query.get("ticket").map_or("", String::as_str);
    let known = lock(&s.tickets).remove(ticket);
    let service = query.get("service_id").and_then(|v| v.parse().ok());
    let key = req.headers().get(header::SEC_WEBSOCKET_KEY).cloned();
    let (true, Some(SERVICE_ID), Some(key)) = (known, service, key) else {
        let mut refused = StatusCode::FORBIDDEN.into_response();
        let status = HeaderValue::from_static("514");
        refused.headers_mut().insert("Handshake-Status", status);
        return refused;
    };
    let on_upgrade = hyper::upgrade::on(&mut req);
    let conn = s.clone();
    s.tasks.spawn(async move {
        if let Ok(upgraded) = on_upgrade.await {
            let io = TokioIo::new(upgraded);
            serve_socket(
                conn,
                WebSocketStream::from_raw_socket(io, Role::Server, None).await,
            )
            .await;
        }
    });
    let accept = derive_accept_key(key.as_bytes());
    Response::builder()
        .status(StatusCode::SWITCHING_PROTOCOLS)
        .header(header::UPGRADE, "websocket")
        .header(header::CONNECTION, "Upgrade")
        .header(header::SEC_WEBSOCKET_ACCEPT, accept)
        .body(Body::empty())
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

/// One connection until its socket ends: a writer draining its queue beside a reader that answers pings (§4) and matches acknowledgements (§5).
async fn serve_socket<S>(s: Arc<Shared>, ws: WebSocketStream<S>)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let (mut sink, mut stream) = ws.split();
    let (writer, mut queue) = mpsc::unbounded_channel();
    *lock(&s.conn) = Some(writer.clone());
    let write = async move {
        while let Some(message) = queue.recv().await {
            let closing = matches!(message, Message::Close(_));
            if sink.send(message).await.is_err() || closing {
                break;
            }
        }
    };
    let read = async {
        let pong = frame(0, METHOD_CONTROL, &[("type", "pong")], CLIENT_CONFIG.into());
        let pong = Bytes::from(pong.encode_bytes());
        let mut pinged = false;
        while let Some(Ok(message)) = stream.next().await {
            let Message::Binary(bytes) = message else {
                continue;
            };
            match Frame::decode_bytes(&bytes) {
                Ok(f) if f.kind() == Kind::Ping => {
                    if !std::mem::replace(&mut pinged, true) {
                        s.pinged.send_modify(|count| *count += 1);
                    }
                    let _ = writer.send(Message::Binary(pong.clone()));
                }
                Ok(f) if f.method == METHOD_DATA => s.acknowledged(&f),
                _ => {
                    s.strays.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        // The socket is gone: forget it, so the writer ends too.
        let mut conn = lock(&s.conn);
        if conn.as_ref().is_some_and(|w| w.same_channel(&writer)) {
            *conn = None;
        }
        drop(writer);
    };
    tokio::join!(read, write);
}

impl Shared {
    /// Matches an acknowledgement to its pushed frame and reports it.
    fn acknowledged(&self, f: &Frame) {
        let Some(since) = lock(&self.in_flight).remove(&f.seq_id) else {
            self.strays.fetch_add(1, Ordering::Relaxed);
            return;
        };
        if f.log_id != LOG_ID_BASE + f.seq_id {
            self.strays.fetch_add(1, Ordering::Relaxed);
        }
        let body = f
            .payload
            .as_deref()
            .and_then(|p| serde_json::from_slice(p).ok());
        let _ = self.acks.send(Ack {
            seq_id: f.seq_id,
            code: body.and_then(|b: Value| b["code"].as_i64()).unwrap_or(0),
            biz_rt_ms: f.header("biz_rt").and_then(|v| v.parse().ok()),
            latency: since.elapsed(),
        });
    }
}

async fn tenant_token(State(s): State<Arc<Shared>>, body: Bytes) -> Json<Value> {
    let creds: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    if creds["app_id"] != s.app_id.as_str() || creds["app_secret"] != s.app_secret.as_str() {
        return Json(json!({"code": 10014, "msg": "app secret invalid"}));
    }
    Json(
        json!({"code": 0, "msg": "ok", "tenant_access_token": "t-fake-tenant-token", "expire": 7200}),
    )
}

async fn bot_info(State(s): State<Arc<Shared>>) -> Json<Value> {
    let bot = json!({"activate_status": 2, "app_name": "Demo Bot", "open_id": s.bot_open_id});
    Json(json!({"code": 0, "msg": "ok", "bot": bot}))
}

/// Every message is unknown to the fake (as a quoted one the bridge never stored).
async fn get_message() -> (StatusCode, Json<Value>) {
    let body = json!({"code": 230011, "msg": "message not found"});
    (StatusCode::BAD_REQUEST, Json(body))
}

/// A reply (to the message in the path) or a send (to `receive_id`): reported, and
/// answered with the message it created.
async fn posted(
    State(s): State<Arc<Shared>>,
    reply_to: Option<Path<String>>,
    body: Bytes,
) -> Json<Value> {
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let msg_type = body["msg_type"].as_str().unwrap_or_default().to_string();
    let content = body["content"]
        .as_str()
        .and_then(|c| serde_json::from_str(c).ok());
    let mut texts = Vec::new();
    collect_text(&content.unwrap_or(Value::Null), &mut texts);
    let to = match reply_to {
        Some(Path(id)) => id,
        None => body["receive_id"].as_str().unwrap_or_default().to_string(),
    };
    let text = texts.join("\n");
    let _ = s.replies.send(Reply {
        to,
        msg_type: msg_type.clone(),
        text,
    });
    let now = feishu_bridge::util::now_ms().to_string();
    let id = format!("om_fake_{:016x}", rand::random::<u64>());
    let data = json!({"message_id": id, "msg_type": msg_type, "create_time": now,
                      "update_time": now, "deleted": false});
    Json(json!({"code": 0, "msg": "success", "data": data}))
}

/// The `text` and (markdown) `content` strings anywhere in a message's content.
fn collect_text(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(map) => map.iter().for_each(|(key, value)| match value {
            Value::String(s) if key == "text" || key == "content" => out.push(s.clone()),
            _ => collect_text(value, out),
        }),
        Value::Array(items) => items.iter().for_each(|item| collect_text(item, out)),
        _ => {}
    }
}
