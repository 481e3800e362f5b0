//! One profile's long connection, kept up for the bridge's life: a fresh endpoint for
//! every connect, a ping at once and every `PingInterval`, pong settings applied, frames
//! read, reassembled and handed to [`Ingest`], acknowledgements written as their events
//! are stored.
//!
//! Reconnects follow the SDKs: after a lost connection, and when the first connect
//! fails, a random jitter within `ReconnectNonce`, then an attempt every
//! `ReconnectInterval` — fixed, never growing, because Feishu pushes an unacknowledged
//! event again only after about an hour; `ReconnectCount` ≥ 0 caps the attempts of a
//! round. Better behaved than the official clients where they fall short: a connection
//! that stops answering (a half-open socket) is noticed by a pong timeout and made
//! again; a fatal refusal (bad credentials, too many connections) stops this profile's
//! connection with a clear log line and a `/status` entry instead of a hot loop; a
//! connection dropped before the server said a word counts as a failed attempt, and the
//! interval has a floor, so a server that accepts and drops at once cannot make a busy
//! loop; and a shutdown stops reading, lets what was read be stored and acknowledged,
//! then closes the socket.

use std::time::Duration;

use futures_util::{SinkExt, StreamExt, stream::SplitSink};
use secrecy::{ExposeSecret, SecretString};
use tokio::{
    sync::mpsc,
    time::{Instant, Interval},
};
use tokio_tungstenite::tungstenite::Message;
use tokio_util::{sync::CancellationToken, task::TaskTracker};

use super::Parts;
use super::{
    Timing,
    clock::{before_attempt, ping_timer, pong_timeout, sleep_until},
    dial,
    endpoint::{self, ConnectError, Socket},
    fragments::{FragmentLimits, Fragments},
    frame::{Frame, Kind},
    ingest::Ingest,
    status::ConnState,
};
use crate::{config::Profile, protocol::crypto::AesKey, util::UnixMs};

/// Acknowledgements queued for the socket.
const OUTBOX: usize = 1024;

/// One profile's connection.
pub struct LongConnection {
    parts: Parts,
    profile: String,
    app_id: String,
    app_secret: SecretString,
    api_base: String,
    http: reqwest::Client,
    ingest: Ingest,
    stop: CancellationToken,
}

/// How one connect ended.
enum Ended {
    /// The bridge is shutting down.
    Shutdown,
    /// Never to be tried again.
    Fatal(String),
    /// The attempt failed before the connection was up.
    Failed(String),
    /// The connection was up, then ended; `true` when the server had said anything on
    /// it (a connection that ends before a word counts as a failed attempt, so that a
    /// server accepting and dropping at once cannot make a hot loop).
    Lost(String, bool),
}

impl LongConnection {
    /// `profile`'s connection (it has an app secret: validated), until `stop`.
    pub fn new(
        parts: Parts,
        profile: &Profile,
        http: reqwest::Client,
        stop: CancellationToken,
    ) -> Self {
        let aes = profile.encrypt_key().map(AesKey::derive);
        Self {
            ingest: Ingest::new(parts.clone(), &profile.name, aes),
            parts,
            profile: profile.name.clone(),
            app_id: profile.app_id.clone(),
            app_secret: profile
                .app_secret
                .clone()
                .unwrap_or_else(|| SecretString::from("")),
            api_base: profile.api_base.clone(),
            http,
            stop,
        }
    }

    /// Keeps the connection up until the shutdown or a fatal refusal.
    pub async fn run(self) {
        let profile = self.profile.as_str();
        let conns = &self.parts.connections;
        let metrics = &self.parts.metrics.long_connection;
        let mut timing = Timing::default();
        // Reconnect attempts in this round: since the start, or since a connection that
        // was up was lost.
        let mut attempt = 0u64;
        // Why the last attempt failed, shown while the next one runs.
        let mut last: Option<String> = None;
        loop {
            conns.set(profile, ConnState::Connecting, last.take(), None);
            let why = match self.connect_once(&mut timing).await {
                Ended::Shutdown => {
                    conns.set(
                        profile,
                        ConnState::Stopped,
                        Some("the bridge shut down".into()),
                        None,
                    );
                    return;
                }
                Ended::Fatal(why) => {
                    tracing::error!(profile, reason = %why, "long connection stopped: Feishu refused it for good; fix the app's settings and restart");
                    conns.set(profile, ConnState::Stopped, Some(why), None);
                    return;
                }
                Ended::Failed(why) | Ended::Lost(why, false) => why,
                Ended::Lost(why, true) => {
                    // A connection that was up starts a new round of attempts.
                    attempt = 0;
                    why
                }
            };
            if timing.reconnect_count >= 0 && attempt >= timing.reconnect_count as u64 {
                let why =
                    format!("{why}; gave up after {attempt} reconnect attempts (ReconnectCount)");
                tracing::error!(profile, reason = %why, "long connection stopped");
                conns.set(profile, ConnState::Stopped, Some(why), None);
                return;
            }
            let wait = before_attempt(&timing, attempt);
            tracing::warn!(profile, reason = %why, wait_ms = wait.as_millis() as u64, "long connection down; connecting again");
            let at = UnixMs(UnixMs::now().millis() + wait.as_millis() as i64);
            conns.set(profile, ConnState::BackingOff, Some(why.clone()), Some(at));
            tokio::select! {
                () = self.stop.cancelled() => {
                    conns.set(profile, ConnState::Stopped, Some("the bridge shut down".into()), None);
                    return;
                }
                () = tokio::time::sleep(wait) => {}
            }
            last = Some(why);
            attempt += 1;
            conns.reconnecting(profile);
            metrics.reconnects.with_label_values(&[profile]).inc();
        }
    }

    /// Fetches an endpoint, dials it and serves the connection until it ends.
    async fn connect_once(&self, timing: &mut Timing) -> Ended {
        let fetched = tokio::select! {
            () = self.stop.cancelled() => return Ended::Shutdown,
            f = endpoint::fetch(&self.http, &self.parts.config().egress, &self.api_base, &self.app_id, &self.app_secret) => f,
        };
        let endpoint = match fetched {
            Ok(e) => e,
            Err(e) => return refused(e),
        };
        *timing = endpoint.config.merged_over(timing);
        let Some(service) = service_id(&endpoint.url) else {
            return Ended::Failed("the endpoint's URL has no service_id".into());
        };
        let dialled = tokio::select! {
            () = self.stop.cancelled() => return Ended::Shutdown,
            d = dial::dial(&endpoint.url, &self.parts.config().egress) => d,
        };
        let socket = match dialled {
            Ok(s) => s,
            Err(e) => return refused(e),
        };
        let profile = self.profile.as_str();
        tracing::info!(profile, "long connection up");
        self.parts
            .connections
            .set(profile, ConnState::Connected, None, None);
        let gauge = self
            .parts
            .metrics
            .long_connection
            .connected
            .with_label_values(&[profile]);
        gauge.set(1);
        let ended = self.serve(socket, service, timing).await;
        gauge.set(0);
        ended
    }

    /// Reads and writes frames until the connection ends or the bridge shuts down.
    async fn serve(&self, socket: Socket, service: i32, timing: &mut Timing) -> Ended {
        let profile = self.profile.as_str();
        let (mut sink, mut stream) = socket.split();
        let (out, mut outbox) = mpsc::channel::<(Frame, &'static str)>(OUTBOX);
        let inflight = TaskTracker::new();
        let mut fragments = Fragments::new(FragmentLimits::default());
        let mut pings = ping_timer(timing.ping_interval, true);
        let mut pong_due: Option<Instant> = None;
        let mut heard = false;
        let ended = loop {
            let due = pong_due;
            tokio::select! {
                () = self.stop.cancelled() => break Ended::Shutdown,
                Some((frame, kind)) = outbox.recv() => {
                    if let Err(e) = self.write(&mut sink, &frame, kind).await {
                        break Ended::Lost(e, heard);
                    }
                }
                _ = pings.tick() => {
                    if let Err(e) = self.write(&mut sink, &Frame::ping(service), "ping").await {
                        break Ended::Lost(e, heard);
                    }
                    self.parts.connections.pinged(profile);
                    pong_due.get_or_insert(Instant::now() + pong_timeout(timing.ping_interval));
                }
                () = sleep_until(due) => {
                    break Ended::Lost(format!(
                        "no answer within {} s of a ping: the connection is half-open",
                        pong_timeout(timing.ping_interval).as_secs()
                    ), heard);
                }
                read = stream.next() => {
                    let bytes = match read {
                        Some(Ok(Message::Binary(bytes))) => bytes,
                        Some(Ok(Message::Close(_))) | None => break Ended::Lost("Feishu closed the connection".into(), heard),
                        Some(Ok(_)) => continue,
                        Some(Err(_)) => break Ended::Lost("reading from the connection failed".into(), heard),
                    };
                    // Anything from the server shows the connection is alive.
                    pong_due = None;
                    heard = true;
                    self.received(&bytes, timing, &mut pings, &mut fragments, &out, &inflight);
                }
            }
        };
        if matches!(ended, Ended::Shutdown) {
            self.close_for_shutdown(sink, &mut outbox, &inflight).await;
        }
        ended
    }

    /// One binary message from the server: a pong's settings adopted, a data frame
    /// taken in, anything else counted.
    fn received(
        &self,
        bytes: &[u8],
        timing: &mut Timing,
        pings: &mut Interval,
        fragments: &mut Fragments,
        out: &mpsc::Sender<(Frame, &'static str)>,
        inflight: &TaskTracker,
    ) {
        let profile = self.profile.as_str();
        let now = Instant::now();
        let frame = match Frame::decode_bytes(bytes) {
            Ok(f) => f,
            Err(e) => {
                self.count("in", "other");
                tracing::warn!(profile, error = %e, "an unreadable frame was dropped");
                return;
            }
        };
        fragments.expire(now);
        match frame.kind() {
            Kind::Pong => {
                self.count("in", "pong");
                self.parts.connections.ponged(profile);
                self.adopt_settings(&frame, timing, pings);
            }
            Kind::Event | Kind::Card => {
                let kind = if frame.kind() == Kind::Card {
                    "card"
                } else {
                    "event"
                };
                self.count("in", kind);
                self.take(fragments, frame, now, out, inflight);
            }
            Kind::Ping => self.count("in", "ping"),
            Kind::Other(_) => self.count("in", "other"),
        }
    }

    /// The client settings a pong carries, merged over `timing`; the pings follow a new
    /// interval.
    fn adopt_settings(&self, pong: &Frame, timing: &mut Timing, pings: &mut Interval) {
        let before = timing.ping_interval;
        if let Some(config) = pong
            .payload
            .as_deref()
            .and_then(super::ClientConfig::from_json)
        {
            *timing = config.merged_over(timing);
        }
        if timing.ping_interval != before {
            *pings = ping_timer(timing.ping_interval, false);
        }
    }

    /// Stores and acknowledges what was read, then closes the socket.
    async fn close_for_shutdown(
        &self,
        mut sink: SplitSink<Socket, Message>,
        outbox: &mut mpsc::Receiver<(Frame, &'static str)>,
        inflight: &TaskTracker,
    ) {
        self.drain(&mut sink, outbox, inflight).await;
        let _ = sink.send(Message::Close(None)).await;
        let _ = sink.close().await;
        tracing::info!(
            profile = self.profile.as_str(),
            "long connection closed for the shutdown"
        );
    }

    /// Adds a data frame's fragment; once its message is whole, stores it and queues the
    /// acknowledgement (on the completing fragment) — in a task, so reading goes on.
    fn take(
        &self,
        fragments: &mut Fragments,
        frame: Frame,
        now: Instant,
        out: &mpsc::Sender<(Frame, &'static str)>,
        inflight: &TaskTracker,
    ) {
        let profile = self.profile.as_str();
        let number = |key: &str, default: usize| {
            frame
                .header(key)
                .and_then(|v| v.trim().parse::<usize>().ok())
                .unwrap_or(default)
        };
        let (sum, seq) = (number("sum", 1), number("seq", 0));
        let message_id = frame.header("message_id").unwrap_or_default().to_string();
        let payload = frame.payload.clone().unwrap_or_default();
        let whole = match fragments.add(&message_id, sum, seq, payload, now) {
            Ok(Some(whole)) => whole,
            Ok(None) => return,
            Err(e) => {
                tracing::warn!(profile, error = %e, "a fragment was dropped; Feishu will push its message again");
                return;
            }
        };
        let (ingest, out) = (self.ingest.clone(), out.clone());
        let metrics = self.parts.metrics.long_connection.clone();
        let profile = profile.to_string();
        inflight.spawn(async move {
            let handled = ingest.handle(&whole, now).await;
            let took = now.elapsed();
            let ack = frame.ack(handled.code, handled.data.as_ref(), took.as_millis() as u64);
            metrics
                .ack_seconds
                .with_label_values(&[profile.as_str(), &handled.code.to_string()])
                .observe(took.as_secs_f64());
            // The connection may be gone: then Feishu pushes the message again, and the
            // inbox knows it.
            let _ = out.send((ack, "ack")).await;
        });
    }

    /// After the shutdown signal: no more reading; what was read is stored and
    /// acknowledged (bounded by the ack deadline).
    async fn drain(
        &self,
        sink: &mut SplitSink<Socket, Message>,
        outbox: &mut mpsc::Receiver<(Frame, &'static str)>,
        inflight: &TaskTracker,
    ) {
        inflight.close();
        let deadline = Instant::now()
            + Duration::from_millis(self.parts.config().server.ack_deadline_ms)
            + Duration::from_millis(500);
        loop {
            tokio::select! {
                Some((frame, kind)) = outbox.recv() => {
                    if self.write(sink, &frame, kind).await.is_err() {
                        return;
                    }
                }
                () = inflight.wait() => {
                    // Whatever the last tasks queued.
                    while let Ok((frame, kind)) = outbox.try_recv() {
                        if self.write(sink, &frame, kind).await.is_err() {
                            return;
                        }
                    }
                    return;
                }
                () = tokio::time::sleep_until(deadline) => return,
            }
        }
    }

    async fn write(
        &self,
        sink: &mut SplitSink<Socket, Message>,
        frame: &Frame,
        kind: &'static str,
    ) -> Result<(), String> {
        self.count("out", kind);
        sink.send(Message::Binary(frame.encode_bytes().into()))
            .await
            .map_err(|_| "writing to the connection failed".to_string())
    }

    fn count(&self, direction: &str, kind: &str) {
        self.parts
            .metrics
            .long_connection
            .frames
            .with_label_values(&[self.profile.as_str(), direction, kind])
            .inc();
    }
}

/// A failed connect, fatal or not.
fn refused(e: ConnectError) -> Ended {
    match e {
        ConnectError::Fatal(why) => Ended::Fatal(why),
        ConnectError::Retry(why) => Ended::Failed(why),
    }
}

/// The `service_id` of the URL (every ping carries it).
fn service_id(url: &SecretString) -> Option<i32> {
    let url = url::Url::parse(url.expose_secret()).ok()?;
    url.query_pairs()
        .find(|(k, _)| k == "service_id")
        .and_then(|(_, v)| v.parse::<i32>().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_service_id_is_read_from_the_url() {
        let url = SecretString::from("wss://x/ws/v2?device_id=d&service_id=42&ticket=t");
        assert_eq!(service_id(&url), Some(42));
        assert_eq!(
            service_id(&SecretString::from("wss://x/ws/v2?ticket=t")),
            None
        );
    }
}
