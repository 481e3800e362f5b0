//! A fake of Feishu's long connection (长连接), the real one being outside our control.
//! Mounted into the fake Open API (the bridge has one `api_base` for both), it hands
//! out one-shot WebSocket URLs, accepts the upgrade, answers pings with the
//! ClientConfig, pushes event/card frames (fragmented on request) and matches their
//! ACKs. It checks everything the client sends against the protocol note
//! (`/work/shared/feishu-ws-protocol.md`, section numbers below) and lists what breaks
//! it in [`LongConnState::violations`], which tests assert to be empty.
//!
//! `frame`: the protobuf structs, written here (not shared with the bridge) so the fake
//! checks the client's encoding; `endpoint`: the URL endpoint; `upgrade`: the handshake;
//! `conn`: one connection's task (pings, pongs, close, silence); `push`: data frames
//! out; `ack`: their ACKs in, matched and checked; `stats`: counters; `payloads`:
//! schema 2.0 event bodies.

mod ack;
mod conn;
mod endpoint;
pub mod frame;
mod payloads;
mod push;
mod stats;
mod upgrade;

use std::{
    collections::{HashMap, VecDeque},
    sync::{Arc, Mutex, MutexGuard},
    time::Duration,
};

pub use ack::Ack;
use axum::{
    Router,
    routing::{get, post},
};
pub use endpoint::{BAD_CREDENTIALS, ClientConfigJson, EndpointAnswer};
pub use frame::{Frame, Header};
pub use payloads::{CARD_MESSAGE_ID, card_action, event_payload, message_event, without_token};
pub use push::{Order, Push};
pub use stats::Stats;
use stats::stats;
use tokio::sync::{mpsc, watch};
pub use upgrade::{BAD_TICKET, HandshakeAnswer, TOO_MANY_CONNECTIONS};

/// The `service_id` in every URL the fake hands out; pings must carry it (§2, §4).
pub const SERVICE_ID: i32 = 42;
/// Connections per app the real Feishu allows (§0); the next upgrade is refused with
/// "too many connections".
pub const MAX_CONNECTIONS: usize = 50;
/// How long every wait of the fake's API may take (as `next_matching`).
const PATIENCE: Duration = Duration::from_secs(30);

/// Where one connection stands, as the fake sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Reading, writing, answering pings; pushes go to the newest open connection.
    Open,
    /// The fake sent a close frame and reads until the client's close (ACKs read
    /// meanwhile still count: the docs are silent on what Feishu does with them).
    Closing,
    /// [`FakeLongConn::go_silent`]: neither read nor written, never closed.
    Silent,
    /// The socket is gone.
    Ended,
}

/// Everything the fake knows and has seen.
pub struct LongConnState {
    /// The app's `AppID`.
    pub app_id: String,
    /// The app's `AppSecret`.
    pub app_secret: String,
    /// What the client did against the protocol, one line each; tests assert it empty.
    pub violations: Mutex<Vec<String>>,
    /// `ws://127.0.0.1:P`, the same listener as the Open API.
    ws_base: String,
    inner: Mutex<Inner>,
    /// Bumped after every change of `inner` or `violations`: the waits watch it.
    changed: watch::Sender<()>,
}

/// One URL handed out: its credentials and whether they were presented yet.
struct Issued {
    device_id: String,
    access_key: String,
    ticket: String,
    used: bool,
}

/// A command to a connection's task.
enum Cmd {
    Send(Vec<u8>),
    Close,
    Silent,
}

/// One accepted connection.
struct Conn {
    cmds: mpsc::UnboundedSender<Cmd>,
    phase: Phase,
    pings: usize,
}

#[derive(Default)]
struct Inner {
    config: ClientConfigJson,
    endpoint_answers: VecDeque<EndpointAnswer>,
    handshake_answers: VecDeque<HandshakeAnswer>,
    endpoint_requests: usize,
    issued_count: usize,
    issued: HashMap<String, Issued>,
    urls: Vec<String>,
    tickets_used: Vec<String>,
    handshakes_refused: usize,
    conns: Vec<Conn>,
    frames_in: usize,
    frames_out: usize,
    push: push::Pushed,
}

impl LongConnState {
    /// Runs `f` on the state, then wakes every waiter. Never hold the lock across the
    /// wake-up (a waiter checks its condition under the same lock).
    fn update<R>(&self, f: impl FnOnce(&mut Inner) -> R) -> R {
        let r = f(&mut self.lock());
        self.changed.send_modify(|_| ());
        r
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().expect("fake long connection state")
    }

    /// Records a protocol violation by the client.
    fn violation(&self, what: String) {
        self.violations.lock().expect("violations").push(what);
        self.changed.send_modify(|_| ());
    }
}

/// The running fake long connection; cheap to clone.
#[derive(Clone)]
pub struct FakeLongConn {
    /// Its state.
    pub state: Arc<LongConnState>,
}

impl FakeLongConn {
    /// A fake for app `app_id`/`app_secret` whose URLs point at `http_base`
    /// (`http://127.0.0.1:P`, where [`FakeLongConn::router`] must be served).
    pub fn new(app_id: &str, app_secret: &str, http_base: &str) -> Self {
        Self {
            state: Arc::new(LongConnState {
                app_id: app_id.into(),
                app_secret: app_secret.into(),
                violations: Mutex::default(),
                ws_base: http_base.replacen("http://", "ws://", 1),
                inner: Mutex::default(),
                changed: watch::channel(()).0,
            }),
        }
    }

    /// `POST /callback/ws/endpoint` and `GET /ws/v2`, to merge into the Open API's router.
    pub fn router(&self) -> Router {
        Router::new()
            .route("/callback/ws/endpoint", post(endpoint::endpoint))
            .route("/ws/v2", get(upgrade::upgrade))
            .with_state(self.state.clone())
    }

    /// What the endpoint and every later pong carry (default: [`ClientConfigJson::default`]).
    pub fn set_config(&self, c: ClientConfigJson) {
        self.state.update(|i| i.config = c);
    }

    /// The next endpoint requests get these answers, in order, instead of a URL.
    pub fn fail_endpoint(&self, answers: Vec<EndpointAnswer>) {
        self.state.update(|i| i.endpoint_answers.extend(answers));
    }

    /// The next upgrades with a valid ticket are refused with these, in order (the
    /// ticket is spent all the same).
    pub fn fail_handshake(&self, answers: Vec<HandshakeAnswer>) {
        self.state.update(|i| i.handshake_answers.extend(answers));
    }

    /// Waits until connection `n` (1-based) is up and its first ping arrived.
    pub async fn connected(&self, n: usize) {
        assert!(n >= 1, "connections count from 1");
        self.wait(&format!("connection {n} and its first ping"), |i| {
            i.conns
                .get(n - 1)
                .is_some_and(|c| c.pings > 0)
                .then_some(())
        })
        .await;
    }

    /// Waits until connection `n`'s socket is gone.
    pub async fn ended(&self, n: usize) {
        assert!(n >= 1, "connections count from 1");
        self.wait(&format!("the end of connection {n}"), |i| {
            let c = i.conns.get(n - 1)?;
            (c.phase == Phase::Ended).then_some(())
        })
        .await;
    }

    /// Waits until the stats satisfy `done` and returns them (e.g. a third endpoint
    /// request, a refused handshake).
    pub async fn until(&self, what: &str, mut done: impl FnMut(&Stats) -> bool) -> Stats {
        self.wait(what, |i| Some(stats(i)).filter(&mut done)).await
    }

    /// Waits until a violation containing `part` has been recorded, and returns it.
    pub async fn violation(&self, part: &str) -> String {
        let found = || {
            let v = self.state.violations.lock().expect("violations");
            v.iter().find(|v| v.contains(part)).cloned()
        };
        self.wait(&format!("a violation with {part:?}"), |_| found())
            .await
    }

    /// The violations so far.
    pub fn violations(&self) -> Vec<String> {
        self.state.violations.lock().expect("violations").clone()
    }

    /// Closes the newest open connection with a normal (1000) close frame, after the
    /// frames already queued on it.
    pub fn close(&self) {
        self.command(Phase::Closing, Cmd::Close);
    }

    /// The newest open connection stops reading and writing (no pongs, no ACKs read)
    /// without closing: a half-open socket (§4 "Timeouts", §8.10).
    pub fn go_silent(&self) {
        self.command(Phase::Silent, Cmd::Silent);
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> Stats {
        stats(&self.state.lock())
    }

    fn command(&self, phase: Phase, cmd: Cmd) {
        self.state.update(|i| {
            let c = i
                .conns
                .iter_mut()
                .rev()
                .find(|c| c.phase == Phase::Open)
                .expect("an open long connection");
            c.phase = phase;
            // A task that already ended has dropped its receiver: nothing to do.
            let _ = c.cmds.send(cmd);
        });
    }

    /// Waits (event-driven, at most 30 s) until `f` gives a value.
    async fn wait<T>(&self, what: &str, mut f: impl FnMut(&Inner) -> Option<T>) -> T {
        let mut changed = self.state.changed.subscribe();
        let wait = async {
            loop {
                let got = f(&self.state.lock());
                if let Some(t) = got {
                    return t;
                }
                changed
                    .changed()
                    .await
                    .expect("the state outlives its waiters");
            }
        };
        tokio::time::timeout(PATIENCE, wait)
            .await
            .unwrap_or_else(|_| panic!("timed out waiting for {what}"))
    }
}
