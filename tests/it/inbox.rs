//! The durable inbox: dedup, processing once, restarts, retries and failures.

use serde_json::json;

use crate::{
    both_backends,
    support::{Signer, TestApp, TestDb, config, config_toml},
};

async fn same_event_five_times(db: TestDb) {
    let mut app = TestApp::spawn(config(&config_toml(&db, ""))).await;
    let signer = Signer::default();
    // Feishu's retries re-encrypt with a new IV and re-sign with a new nonce: the same
    // event, different bytes.
    let copies: Vec<_> = (0..5)
        .map(|_| signer.message("ev-dup", "om-dup", "run it"))
        .collect();
    let a = app.event(&copies[0]).await;
    assert_eq!(a.status, 200);
    let concurrent = futures_join3(&app, &copies[1], &copies[2], &copies[3]).await;
    for a in concurrent {
        assert_eq!((a.status, &a.json), (200, &json!({"msg": "success"})));
    }
    let a = app.event(&copies[4]).await;
    assert_eq!(a.status, 200);

    let p = app.processed("ev-dup").await;
    assert_eq!(p.outcome, "done");
    assert_eq!(db.count("inbox_events").await, 1);
    let row = app
        .state
        .store
        .inbox_event("planner", "ev-dup")
        .await
        .expect("store")
        .expect("row");
    assert_eq!(
        (row.status.as_str(), row.attempts),
        ("done", 1),
        "processed exactly once"
    );

    // Feishu's own advice: a message delivered under a new event id is still one message.
    let a = app
        .event(&signer.message("ev-other", "om-dup", "run it"))
        .await;
    assert_eq!(a.status, 200);
    assert_eq!(db.count("inbox_events").await, 1);

    let metrics = app.get_anonymous("/metrics").await.text;
    assert!(metrics.contains(r#"feishu_bridge_webhook_requests_total{kind="event",outcome="accepted",profile="planner"} 1"#), "{metrics}");
    assert!(metrics.contains(r#"feishu_bridge_webhook_requests_total{kind="event",outcome="duplicate",profile="planner"} 5"#), "{metrics}");
    assert!(metrics.contains(r#"feishu_bridge_events_processed_total{event_type="im.message.receive_v1",outcome="done",profile="planner"} 1"#), "{metrics}");
    app.stop().await.expect("clean stop");
}
both_backends!(
    the_same_event_five_times_is_stored_and_processed_once,
    same_event_five_times
);

async fn futures_join3(
    app: &TestApp,
    a: &crate::support::Request,
    b: &crate::support::Request,
    c: &crate::support::Request,
) -> [crate::support::Answer; 3] {
    let (x, y, z) = tokio::join!(app.event(a), app.event(b), app.event(c));
    [x, y, z]
}

async fn acked_while_stopped(db: TestDb) {
    let text = config_toml(&db, "");
    let mut cfg = config(&text);
    cfg.worker.enabled = false;
    let app = TestApp::spawn(cfg).await;
    let signer = Signer::default();
    for i in 0..3 {
        let a = app
            .event(&signer.message(&format!("ev-r{i}"), &format!("om-r{i}"), "later"))
            .await;
        assert_eq!(a.status, 200);
    }
    let status = app.get("/status").await;
    assert_eq!(status.json["inbox"]["pending"], 3, "{}", status.text);
    app.stop().await.expect("clean stop");

    // A new process on the same database picks them up.
    let mut app = TestApp::spawn(config(&text)).await;
    for i in 0..3 {
        assert_eq!(app.settled(&format!("ev-r{i}")).await, "done");
    }
    let status = app.get("/status").await;
    assert_eq!(status.json["inbox"]["pending"], 0, "{}", status.text);
    app.stop().await.expect("clean stop");
}
both_backends!(
    events_acked_while_the_worker_is_stopped_are_processed_after_a_restart,
    acked_while_stopped
);

async fn failures_retry_then_fail(db: TestDb) {
    let mut cfg = config(&config_toml(&db, ""));
    cfg.worker.max_attempts = 3;
    let mut app = TestApp::spawn(cfg).await;
    let signer = Signer::default();
    // Well-formed and authentic, but the message has no chat: processing cannot parse it.
    let broken = json!({"sender": {"sender_type": "user", "sender_id": {"open_id": "ou_x"}},
                        "message": {"message_id": "om-broken"}});
    let a = app
        .event(&signer.request(&signer.envelope("ev-broken", "im.message.receive_v1", broken)))
        .await;
    assert_eq!(
        a.status, 200,
        "acknowledged: Feishu must not retry what we stored"
    );

    let mut outcomes = Vec::new();
    for _ in 0..3 {
        outcomes.push(app.processed("ev-broken").await.outcome);
    }
    assert_eq!(outcomes, ["retry", "retry", "failed"]);

    let status = app.get("/status").await;
    assert_eq!(status.json["inbox"]["failed"], 1, "{}", status.text);
    let problem = &status.json["inbox"]["problems"][0];
    assert_eq!(
        (problem["event_id"].as_str(), problem["attempts"].as_i64()),
        (Some("ev-broken"), Some(3))
    );
    assert!(
        problem["last_error"]
            .as_str()
            .unwrap_or_default()
            .contains("chat_id"),
        "{problem}"
    );

    let metrics = app.get_anonymous("/metrics").await.text;
    assert!(
        metrics.contains("feishu_bridge_inbox_failed 1"),
        "{metrics}"
    );
    assert!(metrics.contains(r#"feishu_bridge_events_processed_total{event_type="im.message.receive_v1",outcome="retry",profile="planner"} 2"#), "{metrics}");

    // A good event still flows past the failed one.
    let a = app
        .event(&signer.message("ev-good", "om-good", "fine"))
        .await;
    assert_eq!(a.status, 200);
    assert_eq!(app.processed("ev-good").await.outcome, "done");
    app.stop().await.expect("clean stop");
}
both_backends!(
    processing_failures_are_retried_with_backoff_and_then_visible_as_failed,
    failures_retry_then_fail
);
