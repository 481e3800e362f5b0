//! One accepted connection: reads the client's frames (pings and ACKs, protocol note §3,
//! §4, §5), answers pings with pongs, writes pushed frames, and carries out close and
//! silence. Everything the client sends is checked; breaches go to the violations.

use std::{sync::Arc, time::Duration};

use futures_util::{SinkExt, StreamExt};
use hyper::upgrade::Upgraded;
use hyper_util::rt::TokioIo;
use tokio::sync::mpsc;
use tokio_tungstenite::{
    WebSocketStream,
    tungstenite::{
        Message,
        protocol::{CloseFrame, frame::coding::CloseCode},
    },
};

use super::{
    Cmd, Conn, LongConnState, Phase, SERVICE_ID, ack,
    frame::{self, Frame, METHOD_CONTROL, METHOD_DATA},
};

type Ws = WebSocketStream<TokioIo<Upgraded>>;

/// Serves one upgraded connection until its socket is gone (or forever, once silent).
pub(super) async fn run(s: Arc<LongConnState>, mut ws: Ws) {
    let (tx, mut cmds) = mpsc::unbounded_channel();
    let (n, ping_interval) = s.update(|i| {
        i.conns.push(Conn {
            cmds: tx,
            phase: Phase::Open,
            pings: 0,
        });
        (i.conns.len(), i.config.ping_interval)
    });
    // The first ping goes out right after connecting (§4); twice the interval is the
    // fake's allowance for "right after".
    let allowance = Duration::from_secs(2 * u64::try_from(ping_interval.max(1)).unwrap_or(1));
    let no_ping = tokio::time::sleep(allowance);
    tokio::pin!(no_ping);
    let mut waiting_for_ping = true;
    loop {
        tokio::select! {
            // Commands first: once `go_silent` or `close` returns, nothing the client
            // sends afterwards is read as if the connection were still open.
            biased;
            cmd = cmds.recv() => match cmd {
                Some(Cmd::Send(bytes)) => {
                    if ws.send(Message::Binary(bytes.into())).await.is_ok() {
                        s.update(|i| i.frames_out += 1);
                    }
                }
                Some(Cmd::Close) => {
                    waiting_for_ping = false;
                    // Keep reading: the client answers with its own close frame, and
                    // ACKs may still be in flight.
                    let normal = CloseFrame { code: CloseCode::Normal, reason: "".into() };
                    let _ = ws.close(Some(normal)).await;
                }
                // A half-open socket: hold it, never poll it again.
                Some(Cmd::Silent) | None => std::future::pending::<()>().await,
            },
            msg = ws.next() => match msg {
                Some(Ok(Message::Binary(bytes))) => {
                    let was_ping = received(&s, n, &mut ws, &bytes).await;
                    waiting_for_ping &= !was_ping;
                }
                Some(Ok(Message::Text(_))) => s.violation(format!(
                    "conn {n}: a text message (every message must be a binary Frame, §3)"
                )),
                // WebSocket-level ping/pong/close are tungstenite's business.
                Some(Ok(_)) => {}
                Some(Err(_)) | None => break,
            },
            () = &mut no_ping, if waiting_for_ping => {
                waiting_for_ping = false;
                s.violation(format!("conn {n}: no ping within 2×PingInterval of connecting (§4)"));
            }
        }
    }
    s.update(|i| i.conns[n - 1].phase = Phase::Ended);
}

/// Handles one binary message; true when it was a ping.
async fn received(s: &LongConnState, n: usize, ws: &mut Ws, bytes: &[u8]) -> bool {
    s.update(|i| i.frames_in += 1);
    for field in frame::missing_required(bytes) {
        s.violation(format!(
            "conn {n}: required {field} missing on the wire (§3)"
        ));
    }
    let f = match Frame::decode(bytes) {
        Ok(f) => f,
        Err(e) => {
            s.violation(format!("conn {n}: a message that is not a Frame: {e}"));
            return false;
        }
    };
    match (f.method, f.header("type")) {
        (METHOD_CONTROL, Some("ping")) => {
            check_ping(s, n, &f);
            let open = s.update(|i| {
                let c = &mut i.conns[n - 1];
                c.pings += 1;
                c.phase == Phase::Open
            });
            if open {
                pong(s, ws).await;
            }
            true
        }
        (METHOD_DATA, _) => {
            ack::ack_received(s, n, f);
            false
        }
        (method, kind) => {
            s.violation(format!(
                "conn {n}: unexpected frame from the client: method {method}, type {kind:?}"
            ));
            false
        }
    }
}

/// A ping is `method=0, service=<service_id>, SeqID=0, LogID=0, [type=ping]`, no
/// payload (§4).
fn check_ping(s: &LongConnState, n: usize, f: &Frame) {
    let mut wrong = Vec::new();
    if f.service != SERVICE_ID {
        wrong.push(format!(
            "service {} (the URL's service_id is {SERVICE_ID})",
            f.service
        ));
    }
    if f.seq_id != 0 {
        wrong.push(format!("SeqID {}", f.seq_id));
    }
    if f.log_id != 0 {
        wrong.push(format!("LogID {}", f.log_id));
    }
    if f.payload.as_ref().is_some_and(|p| !p.is_empty()) {
        wrong.push("a payload".into());
    }
    if !wrong.is_empty() {
        s.violation(format!("conn {n}: ping with {} (§4)", wrong.join(", ")));
    }
}

/// The pong carries the full ClientConfig (§4, §8.3).
async fn pong(s: &LongConnState, ws: &mut Ws) {
    let config = s.lock().config;
    let mut f = Frame::new(0, 0, SERVICE_ID, METHOD_CONTROL, &[("type", "pong")]);
    f.payload = Some(serde_json::to_vec(&config).expect("config JSON"));
    if ws.send(Message::Binary(f.encode().into())).await.is_ok() {
        s.update(|i| i.frames_out += 1);
    }
}
