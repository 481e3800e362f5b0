//! Connection limits: slow and silent clients are closed within their bounds, the number
//! of connections served never passes `server.max_connections` (at the cap, the waiting
//! connection nearest to its deadline makes room), kept-alive connections are bounded
//! apart from request heads, and Feishu's deliveries are answered throughout.

use feishu_bridge::Config;
use tokio::task::JoinSet;

use crate::support::{
    Signer, TestApp, TestDb, config, config_toml,
    raw::{Conn, DEADLINE, get_once, sample},
};

/// A bridge config with these limits (seconds) and no worker: only ingress matters.
pub(crate) fn limited(db: &TestDb, header: u64, body: u64, idle: u64, cap: u32) -> Config {
    let mut cfg = config(&config_toml(db, ""));
    cfg.worker.enabled = false;
    cfg.server.header_timeout_secs = header;
    cfg.server.body_timeout_secs = body;
    cfg.server.idle_timeout_secs = idle;
    cfg.server.max_connections = cap;
    cfg
}

/// How many connections the bridge closed for `reason`.
pub(crate) fn closed_for(metrics: &str, reason: &str) -> f64 {
    sample(
        metrics,
        &format!("feishu_bridge_http_connections_closed_total{{reason=\"{reason}\"}}"),
    )
}

const SLOW_HEAD: &str = "POST /webhook/planner/event HTTP/1.1\r\nHost: bridge\r\nX-Slow: ";
const SLOW_BODY: &str = "POST /webhook/planner/event HTTP/1.1\r\nHost: bridge\r\n\
                         Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"encrypt\":";

#[tokio::test]
async fn slow_and_silent_clients_are_closed_while_feishu_is_served() {
    const CAP: u32 = 32;
    let db = TestDb::sqlite();
    let app = TestApp::spawn(limited(&db, 1, 1, 2, CAP)).await;

    // A kept-alive connection that finished one request and then says nothing more.
    let mut kept = Conn::open(&app.base).await;
    assert_eq!(kept.get("/healthz").await.0, 200);
    let mut clients = JoinSet::new();
    clients.spawn(async move { ("idle after a request", kept.closed_by_server().await) });
    let slow_body = Conn::sending(&app.base, SLOW_BODY).await;
    clients.spawn(async move { ("slow body", slow_body.closed_by_server().await) });
    // Together with these, twice as many clients as there are slots.
    for _ in 0..40 {
        let c = Conn::sending(&app.base, SLOW_HEAD).await;
        clients.spawn(async move { ("slow head", c.closed_by_server().await) });
    }
    for _ in 0..20 {
        let c = Conn::open(&app.base).await;
        clients.spawn(async move { ("silent", c.closed_by_server().await) });
    }

    // Feishu's delivery and a health check get through; the HTTP client's own timeout
    // (20 s) stands for Feishu's patience.
    let delivery = Signer::default().message("ev-crowded", "om-crowded", "still there?");
    let a = app.event(&delivery).await;
    assert_eq!(a.status, 200, "{}", a.text);
    assert_eq!(a.json["msg"], "success");
    let health = app.get_anonymous("/healthz").await;
    assert_eq!(health.status, 200, "{}", health.text);

    let mut closed = 0;
    while let Some(joined) = clients.join_next().await {
        let (what, received) = joined.expect("client task");
        assert!(
            received.is_empty(),
            "{what}: the bridge closed without a word, yet sent {:?}",
            String::from_utf8_lossy(&received)
        );
        closed += 1;
    }
    assert_eq!(closed, 62);

    let (status, metrics) = get_once(&app.base, "/metrics").await;
    assert_eq!(status, 200);
    let peak = sample(&metrics, "feishu_bridge_http_connections_peak");
    assert!(
        (1.0..=f64::from(CAP)).contains(&peak),
        "at most {CAP} connections at once, saw {peak}"
    );
    let closed: f64 = ["header_timeout", "body_timeout", "idle_timeout", "evicted"]
        .iter()
        .map(|reason| closed_for(&metrics, reason))
        .sum();
    assert!(closed >= 62.0, "{metrics}");
    assert_eq!(db.count("inbox_events").await, 1, "the delivery was stored");
    app.stop().await.expect("clean stop");
}

#[tokio::test]
async fn at_the_cap_the_waiting_connection_nearest_its_deadline_makes_room() {
    // Bounds far beyond the test's deadline: only the cap closes anything here.
    let db = TestDb::sqlite();
    let app = TestApp::spawn(limited(&db, 300, 300, 600, 4)).await;
    // The first slot goes to a head that never ends. It has the nearest deadline (its
    // 300 s run out before the kept-alive connections' 600 s, and before it was read it
    // had been waiting the longest), so the fifth client takes its place.
    let slow = Conn::sending(&app.base, SLOW_HEAD).await;
    let mut kept = Vec::new();
    for _ in 0..3 {
        let mut c = Conn::open(&app.base).await;
        assert_eq!(c.get("/healthz").await.0, 200);
        kept.push(c);
    }
    let (status, metrics) = get_once(&app.base, "/metrics").await;
    assert_eq!(status, 200);
    assert_eq!(
        sample(&metrics, "feishu_bridge_http_connections"),
        4.0,
        "three kept-alive connections and this one"
    );
    assert_eq!(sample(&metrics, "feishu_bridge_http_connections_peak"), 4.0);
    assert_eq!(closed_for(&metrics, "evicted"), 1.0, "{metrics}");
    assert!(slow.closed_by_server().await.is_empty());
    for c in &mut kept {
        assert_eq!(
            c.get("/healthz").await.0,
            200,
            "kept-alive connections stay"
        );
    }
    app.stop().await.expect("clean stop");
}

#[tokio::test]
async fn kept_alive_connections_outlive_the_header_timeout() {
    let db = TestDb::sqlite();
    let app = TestApp::spawn(limited(&db, 1, 600, 600, 64)).await;
    let mut kept = Conn::open(&app.base).await;
    assert_eq!(kept.get("/healthz").await.0, 200);
    // This head starts after the kept-alive connection went idle, so once the bridge has
    // given up on it, the kept-alive one has been idle longer than the head bound.
    let slow = Conn::sending(&app.base, SLOW_HEAD).await;
    assert!(slow.closed_by_server().await.is_empty());
    assert_eq!(kept.get("/healthz").await.0, 200);
    let (_, metrics) = get_once(&app.base, "/metrics").await;
    assert_eq!(closed_for(&metrics, "header_timeout"), 1.0, "{metrics}");
    assert_eq!(closed_for(&metrics, "idle_timeout"), 0.0, "{metrics}");
    assert_eq!(closed_for(&metrics, "evicted"), 0.0, "{metrics}");
    app.stop().await.expect("clean stop");
}

#[tokio::test]
async fn a_new_connection_waits_for_its_first_byte_like_a_kept_alive_one() {
    // An HTTP client dials a connection and parks it unused in its pool: closing it at
    // the head bound would race the request the client later sends on it.
    let db = TestDb::sqlite();
    let app = TestApp::spawn(limited(&db, 1, 600, 600, 64)).await;
    let mut parked = Conn::open(&app.base).await;
    // Accepted after the parked one, and its head's first byte later still: once the
    // bridge has given up on it, the parked connection has waited past the head bound.
    let slow = Conn::sending(&app.base, SLOW_HEAD).await;
    assert!(slow.closed_by_server().await.is_empty());
    assert_eq!(
        parked.get("/healthz").await.0,
        200,
        "the parked connection serves"
    );
    let (_, metrics) = get_once(&app.base, "/metrics").await;
    assert_eq!(closed_for(&metrics, "header_timeout"), 1.0, "{metrics}");
    assert_eq!(closed_for(&metrics, "idle_timeout"), 0.0, "{metrics}");
    app.stop().await.expect("clean stop");
}

#[tokio::test]
async fn an_idle_kept_alive_connection_does_not_hold_up_shutdown() {
    let db = TestDb::sqlite();
    let mut cfg = limited(&db, 600, 600, 600, 8);
    // A shutdown that waited for the idle connection would take the whole grace period.
    cfg.server.shutdown_grace_secs = 600;
    let app = TestApp::spawn(cfg).await;
    let mut kept = Conn::open(&app.base).await;
    assert_eq!(kept.get("/healthz").await.0, 200);
    let stopped = tokio::time::timeout(DEADLINE, app.stop()).await;
    stopped
        .expect("shutdown does not wait for idle connections")
        .expect("clean stop");
    assert!(kept.closed_by_server().await.is_empty());
}
