//! The fake long connection itself, driven by a tiny client written here (reqwest plus
//! tokio-tungstenite, not the bridge's client; it encodes with the fake's own `Frame`,
//! whose bytes are pinned against a hand-written encoding below): the wire format,
//! one-shot URLs and refusals here; traffic on an open connection in `frames`.

mod frames;

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio_tungstenite::{
    MaybeTlsStream, WebSocketStream, connect_async,
    tungstenite::{self, Message},
};

use crate::support::{
    fake_feishu::FakeFeishu,
    fake_longconn::{
        BAD_CREDENTIALS, BAD_TICKET, ClientConfigJson, EndpointAnswer, FakeLongConn, Frame,
        HandshakeAnswer, Header, SERVICE_ID, TOO_MANY_CONNECTIONS, frame::missing_required,
    },
    feishu::APP_ID,
};

/// The test client's patience for one frame (the fake's own waits are bounded too).
const PATIENCE: Duration = Duration::from_secs(30);

/// `POST /callback/ws/endpoint` with these credentials: (HTTP status, body text).
async fn endpoint_raw(fake: &FakeFeishu, app_id: &str, secret: &str) -> (u16, String) {
    let r = reqwest::Client::new()
        .post(format!("{}/callback/ws/endpoint", fake.base))
        .header("locale", "zh")
        .json(&json!({"AppID": app_id, "AppSecret": secret}))
        .send()
        .await
        .expect("endpoint answers");
    (r.status().as_u16(), r.text().await.expect("body"))
}

/// A fresh URL for the planner app.
async fn url(fake: &FakeFeishu) -> String {
    let (_, body) = endpoint_raw(fake, APP_ID, "s").await;
    let v: Value = serde_json::from_str(&body).expect("JSON");
    v["data"]["URL"].as_str().expect("a URL").to_string()
}

struct Client {
    ws: WebSocketStream<MaybeTlsStream<TcpStream>>,
}

impl Client {
    async fn dial(url: &str) -> Result<Self, tungstenite::Error> {
        connect_async(url).await.map(|(ws, _)| Self { ws })
    }

    /// A fresh URL, dialled, pinged, its pong read.
    async fn connected(fake: &FakeFeishu) -> Self {
        let mut c = Self::dial(&url(fake).await).await.expect("upgraded");
        c.ping().await;
        assert_eq!(c.next_frame().await.header("type"), Some("pong"));
        c
    }

    async fn send(&mut self, f: &Frame) {
        self.send_raw(f.encode()).await;
    }

    async fn send_raw(&mut self, bytes: Vec<u8>) {
        self.ws
            .send(Message::Binary(bytes.into()))
            .await
            .expect("sent");
    }

    async fn ping(&mut self) {
        self.send(&Frame::new(0, 0, SERVICE_ID, 0, &[("type", "ping")]))
            .await;
    }

    async fn next_message(&mut self) -> Message {
        let next = tokio::time::timeout(PATIENCE, self.ws.next()).await;
        next.expect("a message in time")
            .expect("open")
            .expect("readable")
    }

    async fn next_frame(&mut self) -> Frame {
        match self.next_message().await {
            Message::Binary(b) => Frame::decode(&b).expect("a Frame"),
            other => panic!("expected a binary frame, got {other:?}"),
        }
    }

    /// The next data frame, past any pongs.
    async fn next_data(&mut self) -> Frame {
        loop {
            let f = self.next_frame().await;
            if f.method == 1 {
                return f;
            }
        }
    }

    /// Echoes `f` as the SDKs do: same frame plus `biz_rt`, payload replaced.
    async fn ack(&mut self, f: &Frame, payload: &Value) {
        let mut a = f.clone();
        a.headers.push(Header {
            key: "biz_rt".into(),
            value: "3".into(),
        });
        a.payload = Some(payload.to_string().into_bytes());
        self.send(&a).await;
    }
}

fn refusal(e: tungstenite::Error) -> (u16, [Option<String>; 3]) {
    let tungstenite::Error::Http(r) = e else {
        panic!("expected an HTTP refusal, got {e}");
    };
    let h = |n: &str| {
        r.headers()
            .get(n)
            .map(|v| v.to_str().expect("ascii").to_string())
    };
    let names = ["handshake-status", "handshake-msg", "handshake-autherrcode"];
    (r.status().as_u16(), names.map(h))
}

#[test]
fn frames_have_the_proto2_wire_format() {
    // Written by hand from the proto (§3): fields 1–4 as varints even when 0, then
    // header {key="type", value="ping"}.
    let mut ping = vec![0x08, 0, 0x10, 0, 0x18, 42, 0x20, 0, 0x2a, 12, 0x0a, 4];
    ping.extend(b"type\x12\x04ping");
    let ours = Frame::new(0, 0, SERVICE_ID, 0, &[("type", "ping")]);
    assert_eq!(ours.encode(), ping);
    assert_eq!(Frame::decode(&ping).expect("decodes"), ours);
    assert!(missing_required(&ping).is_empty());
    // Without `method`, and with a header that has no value.
    let sloppy = [
        0x08, 0, 0x10, 0, 0x18, 42, 0x2a, 6, 0x0a, 4, b't', b'y', b'p', b'e',
    ];
    assert_eq!(missing_required(&sloppy), ["Frame.method", "Header.value"]);
    assert_eq!(missing_required(&[0xff]), ["Frame (malformed)"]);
}

#[tokio::test]
async fn the_endpoint_hands_out_fresh_urls_and_refuses_wrong_credentials() {
    let (fake, lc) = FakeFeishu::planner_with_long_connection().await;
    let port = fake.base.rsplit(':').next().expect("port").to_string();
    let mut urls = Vec::new();
    for n in 1..=2 {
        let (status, body) = endpoint_raw(&fake, APP_ID, "s").await;
        let v: Value = serde_json::from_str(&body).expect("JSON");
        assert_eq!(
            (status, &v["code"], &v["msg"]),
            (200, &json!(0), &json!("ok"))
        );
        let want = format!(
            "ws://127.0.0.1:{port}/ws/v2?device_id=d{n}&service_id=42&access_key=k{n}&ticket=t{n}"
        );
        assert_eq!(v["data"]["URL"], want);
        let config = json!({"ReconnectCount": -1, "ReconnectInterval": 1,
                            "ReconnectNonce": 0, "PingInterval": 1});
        assert_eq!(v["data"]["ClientConfig"], config);
        urls.push(want);
    }
    for (app, secret) in [(APP_ID, "wrong"), ("cli_other", "s")] {
        let (status, body) = endpoint_raw(&fake, app, secret).await;
        let v: Value = serde_json::from_str(&body).expect("JSON");
        assert_eq!((status, &v["code"]), (200, &json!(BAD_CREDENTIALS)));
        assert!(v.get("data").is_none(), "{v}");
    }
    let stats = lc
        .until("four endpoint requests", |s| s.endpoint_requests == 4)
        .await;
    assert_eq!(stats.urls, urls);
    assert_eq!(lc.violations(), Vec::<String>::new());
}

#[tokio::test]
async fn queued_endpoint_failures_come_in_order() {
    let (fake, lc) = FakeFeishu::planner_with_long_connection().await;
    lc.fail_endpoint(vec![
        EndpointAnswer::fatal(),
        EndpointAnswer::retryable(),
        EndpointAnswer::busy(),
        EndpointAnswer::http(500),
        EndpointAnswer::EmptyUrl,
    ]);
    let mut seen = Vec::new();
    for _ in 0..5 {
        let (status, body) = endpoint_raw(&fake, APP_ID, "s").await;
        let v: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
        seen.push((status, v["code"].clone(), v["data"]["URL"].clone()));
    }
    let want = [
        (200, json!(10003), Value::Null),
        (200, json!(1000040343), Value::Null),
        (200, json!(1), Value::Null),
        (500, Value::Null, Value::Null),
        (200, json!(0), json!("")),
    ];
    assert_eq!(seen, want);
    lc.set_config(ClientConfigJson {
        ping_interval: 7,
        ..ClientConfigJson::default()
    });
    let (_, body) = endpoint_raw(&fake, APP_ID, "s").await;
    let v: Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(v["data"]["ClientConfig"]["PingInterval"], 7);
    assert_eq!(lc.stats().urls.len(), 1, "failures hand out no URL");
}

#[tokio::test]
async fn a_ticket_connects_once() {
    let (fake, lc) = FakeFeishu::planner_with_long_connection().await;
    let first = url(&fake).await;
    let mut c = Client::dial(&first).await.expect("upgraded");
    c.ping().await;
    lc.connected(1).await;
    let again = Client::dial(&first).await.err().expect("refused");
    let bad_ticket = (
        403,
        [
            Some("514".into()),
            Some("auth failed".into()),
            Some(BAD_TICKET.to_string()),
        ],
    );
    assert_eq!(refusal(again), bad_ticket);
    assert!(lc.violations()[0].contains("t1 was already used"));
    let made_up = first.replace("ticket=t1", "ticket=t99");
    assert_eq!(
        refusal(Client::dial(&made_up).await.err().expect("refused")),
        bad_ticket
    );
    lc.violation("\"t99\" was never handed out").await;
    let forged = url(&fake).await.replace("access_key=k2", "access_key=k1");
    assert_eq!(
        refusal(Client::dial(&forged).await.err().expect("refused")),
        bad_ticket
    );
    lc.violation("access_key does not match ticket t2").await;
    let stats = lc.stats();
    assert_eq!((stats.connections, stats.handshakes_refused), (1, 3));
    assert_eq!(stats.tickets_used, ["t1", "t2"]);
}

#[tokio::test]
async fn no_first_ping_is_a_violation() {
    let (fake, lc) = FakeFeishu::planner_with_long_connection().await;
    let _quiet = Client::dial(&url(&fake).await).await.expect("upgraded");
    lc.violation("conn 1: no ping within 2×PingInterval").await;
}

#[tokio::test]
async fn handshake_refusals_carry_the_headers() {
    let (fake, lc) = FakeFeishu::planner_with_long_connection().await;
    lc.fail_handshake(vec![
        HandshakeAnswer::too_many_connections(),
        HandshakeAnswer::server_error(),
        HandshakeAnswer::bare(403),
    ]);
    let mut seen = Vec::new();
    for _ in 0..3 {
        seen.push(refusal(
            Client::dial(&url(&fake).await)
                .await
                .err()
                .expect("refused"),
        ));
    }
    let s = |v: &str| Some(v.to_string());
    let want = [
        (
            403,
            [
                s("514"),
                s("auth failed"),
                s(&TOO_MANY_CONNECTIONS.to_string()),
            ],
        ),
        (500, [s("500"), s("internal error"), None]),
        (403, [None, None, None]),
    ];
    assert_eq!(seen, want);
    let _c = Client::connected(&fake).await;
    let stats = lc.stats();
    assert_eq!((stats.handshakes_refused, stats.connections), (3, 1));
    assert_eq!(stats.tickets_used, ["t1", "t2", "t3", "t4"]);
    assert_eq!(lc.violations(), Vec::<String>::new());
}

/// `FakeLongConn` is cheap to clone and shares its state.
#[tokio::test]
async fn clones_share_the_state() {
    let (fake, lc) = FakeFeishu::planner_with_long_connection().await;
    let other: FakeLongConn = lc.clone();
    url(&fake).await;
    assert_eq!(other.stats().endpoint_requests, 1);
}
