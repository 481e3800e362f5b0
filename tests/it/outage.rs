//! A database that stops answering: 503 within a bound, readiness fails, nothing is
//! acknowledged, and the bridge recovers by itself when the database is back.

use std::net::ToSocketAddrs;

use crate::support::{Signer, TestApp, TestDb, config, config_toml, proxy::Proxy};

#[tokio::test]
#[cfg_attr(
    pg_unreachable,
    ignore = "Postgres was unreachable when the tests were built"
)]
async fn an_unreachable_postgres_answers_503_and_recovers_without_a_restart() {
    let db = TestDb::postgres().await;
    let base = url::Url::parse(&crate::support::db::pg_base_url()).expect("pg url");
    let upstream = (
        base.host_str().unwrap_or("127.0.0.1"),
        base.port().unwrap_or(5432),
    )
        .to_socket_addrs()
        .expect("resolve")
        .next()
        .expect("an address");
    let proxy = Proxy::start(upstream).await;
    let through_proxy = db.url.replacen(
        &format!(
            "{}:{}",
            base.host_str().unwrap_or_default(),
            base.port().unwrap_or(5432)
        ),
        &proxy.addr.to_string(),
        1,
    );
    assert_ne!(through_proxy, db.url);
    let mut cfg = config(&config_toml(&db, ""));
    cfg.database.url = through_proxy.into();
    cfg.worker.enabled = false;
    let app = TestApp::spawn(cfg).await;
    let signer = Signer::default();

    let a = app
        .event(&signer.message("ev-before", "om-before", "hi"))
        .await;
    assert_eq!(a.status, 200);

    proxy.down();
    // The client's own timeout (20 s) is the outer bound; the bridge answers within
    // about two database timeouts (1.5 s each here).
    let during = signer.message("ev-during", "om-during", "hi");
    let a = app.event(&during).await;
    assert_eq!(
        (a.status, a.code()),
        (503, "store_unavailable"),
        "{}",
        a.text
    );
    let a = app.get_anonymous("/readyz").await;
    assert_eq!((a.status, a.code()), (503, "store_unavailable"));
    let status = app.get("/status").await;
    assert_eq!(
        (status.status, &status.json["database"]["ok"]),
        (200, &serde_json::json!(false))
    );
    assert_eq!(
        db.count("inbox_events").await,
        1,
        "the refused event was not stored"
    );

    proxy.up();
    // The pool reconnects on demand; Feishu's retry of the refused event gets through.
    let mut answered = Vec::new();
    for _ in 0..3 {
        let a = app.event(&during).await;
        answered.push(a.status);
        if a.status == 200 {
            break;
        }
    }
    assert_eq!(
        answered.last(),
        Some(&200),
        "recovered without a restart: {answered:?}"
    );
    assert_eq!(app.get_anonymous("/readyz").await.status, 200);
    assert_eq!(db.count("inbox_events").await, 2);
    let metrics = app.get_anonymous("/metrics").await.text;
    assert!(metrics.contains("feishu_bridge_webhook_requests_total{kind=\"event\",outcome=\"store_unavailable\",profile=\"planner\"}"), "{metrics}");
    app.stop().await.expect("clean stop");
}
