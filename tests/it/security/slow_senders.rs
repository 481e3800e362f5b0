//! Slow senders cannot hold a connection past its bounds, however they pace their bytes:
//! a head or a body that keeps trickling in is cut at its deadline (which runs from the
//! head's first byte, and from the end of the head, never from the latest byte), with a
//! Content-Length, chunked, or undeclared; on the event URL and on a REST route that never
//! reads its body. A crowd of them at once still leaves Feishu's delivery answered.

use std::time::Duration;

use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
    task::JoinSet,
};

use crate::{
    connections::{closed_for, limited},
    support::{
        Signer, TestApp, TestDb,
        raw::{DEADLINE, get_once, sample},
    },
};

/// How often a trickling client sends its next byte: far inside every bound set here, so
/// each deadline passes while bytes are still arriving.
const PACE: Duration = Duration::from_millis(50);

const EVENT_HEAD: &str = "POST /webhook/planner/event HTTP/1.1\r\nHost: bridge\r\nX-Slow: ";
const EVENT_SIZED: &str = "POST /webhook/planner/event HTTP/1.1\r\nHost: bridge\r\n\
                           Content-Type: application/json\r\nContent-Length: 65536\r\n\r\n";
const EVENT_CHUNKED: &str = "POST /webhook/planner/event HTTP/1.1\r\nHost: bridge\r\n\
                             Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n";
/// No Content-Length and not chunked: in HTTP/1.1 the request has no body, so what
/// follows is read as the next request's head.
const EVENT_UNDECLARED: &str = "POST /webhook/planner/event HTTP/1.1\r\nHost: bridge\r\n\
                                Content-Type: application/json\r\n\r\n";
/// A REST route whose handler refuses the request without reading its body.
const REST_CHUNKED: &str =
    "POST /digests/run HTTP/1.1\r\nHost: bridge\r\nTransfer-Encoding: chunked\r\n\r\n";

const HEADER_BYTES: &[u8] = b"a";
const BODY_BYTES: &[u8] = b"{\"encrypt\":\"aaaa";
/// An endless chunked body: one-byte chunks, never the last (zero-length) one.
const CHUNKS: &[u8] = b"1\r\na\r\n";

/// A connection that sent `head` and now sends `drip`, one byte every [`PACE`], round
/// and round.
struct Trickler(TcpStream);

impl Trickler {
    async fn start(base: &str, head: &str) -> Self {
        let mut stream = TcpStream::connect(base.trim_start_matches("http://"))
            .await
            .expect("connect");
        stream.write_all(head.as_bytes()).await.expect("send head");
        Self(stream)
    }

    /// Keeps dripping until the bridge closes the connection; returns what it sent back.
    /// Panics if the connection is still open after [`DEADLINE`].
    async fn until_closed(self, drip: &'static [u8]) -> Vec<u8> {
        let (mut rd, mut wr) = self.0.into_split();
        let writer = tokio::spawn(async move {
            let mut tick = tokio::time::interval(PACE);
            for byte in drip.iter().cycle() {
                tick.tick().await;
                if wr.write_all(std::slice::from_ref(byte)).await.is_err() {
                    break;
                }
            }
        });
        let mut received = Vec::new();
        let read = tokio::time::timeout(DEADLINE, rd.read_to_end(&mut received)).await;
        writer.abort();
        match read {
            Ok(Ok(_)) => {}
            Ok(Err(e)) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
            Ok(Err(e)) => panic!("read failed: {e}"),
            Err(_) => panic!("the bridge kept a trickling connection open past the deadline"),
        }
        received
    }
}

/// The status codes of the answers in `received`.
fn statuses(received: &[u8]) -> Vec<u16> {
    String::from_utf8_lossy(received)
        .split("HTTP/1.1 ")
        .skip(1)
        .filter_map(|rest| rest.get(..3)?.parse().ok())
        .collect()
}

/// The bridge's close counters: (header_timeout, body_timeout).
async fn timeouts(app: &TestApp) -> (f64, f64) {
    let (status, metrics) = get_once(&app.base, "/metrics").await;
    assert_eq!(status, 200);
    (
        closed_for(&metrics, "header_timeout"),
        closed_for(&metrics, "body_timeout"),
    )
}

#[tokio::test]
async fn a_trickled_head_or_body_is_cut_at_its_bound() {
    let db = TestDb::sqlite();
    let app = TestApp::spawn(limited(&db, 1, 1, 2, 64)).await;

    let slow = Trickler::start(&app.base, EVENT_HEAD).await;
    let received = slow.until_closed(HEADER_BYTES).await;
    assert!(
        received.is_empty(),
        "{:?}",
        String::from_utf8_lossy(&received)
    );
    assert_eq!(timeouts(&app).await, (1.0, 0.0), "a head that never ends");

    let slow = Trickler::start(&app.base, EVENT_SIZED).await;
    let received = slow.until_closed(BODY_BYTES).await;
    assert!(
        received.is_empty(),
        "{:?}",
        String::from_utf8_lossy(&received)
    );
    assert_eq!(
        timeouts(&app).await,
        (1.0, 1.0),
        "a sized body that never ends"
    );

    let slow = Trickler::start(&app.base, EVENT_CHUNKED).await;
    let received = slow.until_closed(CHUNKS).await;
    assert!(
        received.is_empty(),
        "{:?}",
        String::from_utf8_lossy(&received)
    );
    assert_eq!(
        timeouts(&app).await,
        (1.0, 2.0),
        "a chunked body that never ends"
    );

    // An undeclared body: the request is answered as bodyless, and the bytes that follow
    // are no request the bridge waits for.
    let slow = Trickler::start(&app.base, EVENT_UNDECLARED).await;
    let answers = statuses(&slow.until_closed(BODY_BYTES).await);
    assert!(
        !answers.is_empty() && answers.iter().all(|s| (400..500).contains(s)),
        "{answers:?}"
    );

    // The handler refuses at once (no token) and never reads the body: the connection
    // does not stay open to take the rest of it.
    let slow = Trickler::start(&app.base, REST_CHUNKED).await;
    let answers = statuses(&slow.until_closed(CHUNKS).await);
    assert_eq!(answers, [401]);

    assert_eq!(app.get_anonymous("/healthz").await.status, 200);
    app.stop().await.expect("clean stop");
}

#[tokio::test]
async fn a_crowd_of_trickling_senders_leaves_feishu_answered() {
    const CAP: u32 = 32;
    const EACH: usize = 16;
    let db = TestDb::sqlite();
    // Bounds well above the moment the delivery arrives: the crowd still holds every slot
    // then, so only the cap's eviction can make room for Feishu.
    let app = TestApp::spawn(limited(&db, 3, 3, 3, CAP)).await;
    let mut crowd = JoinSet::new();
    for (head, drip) in [
        (EVENT_HEAD, HEADER_BYTES),
        (EVENT_SIZED, BODY_BYTES),
        (EVENT_CHUNKED, CHUNKS),
    ] {
        for _ in 0..EACH {
            let slow = Trickler::start(&app.base, head).await;
            crowd.spawn(async move { (head, slow.until_closed(drip).await) });
        }
    }

    let delivery = Signer::default().message("ev-trickled", "om-trickled", "still there?");
    let a = app.event(&delivery).await;
    assert_eq!(a.status, 200, "{}", a.text);
    assert_eq!(a.json["msg"], "success");
    assert_eq!(app.get_anonymous("/healthz").await.status, 200);

    let mut closed = 0;
    while let Some(joined) = crowd.join_next().await {
        let (head, received) = joined.expect("trickler task");
        assert!(
            received.is_empty(),
            "{head:?}: closed without a word, yet sent {:?}",
            String::from_utf8_lossy(&received)
        );
        closed += 1;
    }
    assert_eq!(closed, 3 * EACH);

    let (status, metrics) = get_once(&app.base, "/metrics").await;
    assert_eq!(status, 200);
    assert_eq!(
        sample(&metrics, "feishu_bridge_http_connections_peak"),
        f64::from(CAP),
        "the crowd filled every slot, and never more"
    );
    let closed: f64 = ["header_timeout", "body_timeout", "evicted"]
        .iter()
        .map(|reason| closed_for(&metrics, reason))
        .sum();
    assert!(closed >= (3 * EACH) as f64, "{metrics}");
    assert!(
        closed_for(&metrics, "evicted") >= (3 * EACH) as f64 - f64::from(CAP),
        "{metrics}"
    );
    assert_eq!(db.count("inbox_events").await, 1, "the delivery was stored");
    app.stop().await.expect("clean stop");
}
