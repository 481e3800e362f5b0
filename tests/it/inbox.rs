//! The durable inbox: dedup, processing once, restarts, retries and failures.

use std::sync::atomic::Ordering;

use serde_json::json;

use crate::{
    both_backends,
    support::{Signer, TestApp, TestDb, config, config_toml, fake_feishu::FakeFeishu, feishu::Msg},
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
    assert_eq!((a.status, a.outcome.as_deref()), (200, Some("accepted")));
    let concurrent = futures_join3(&app, &copies[1], &copies[2], &copies[3]).await;
    for a in concurrent {
        assert_eq!((a.status, &a.json), (200, &json!({"msg": "success"})));
        assert_eq!(
            a.outcome.as_deref(),
            Some("duplicate"),
            "the header says so"
        );
    }
    let a = app.event(&copies[4]).await;
    assert_eq!((a.status, a.outcome.as_deref()), (200, Some("duplicate")));

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
        (row.event.status.as_str(), row.attempts),
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
    // The backlog view: depth and lag per profile, in /status and /metrics.
    let backlog = &status.json["inbox"]["backlog"];
    assert_eq!(backlog.as_array().map(Vec::len), Some(1), "{}", status.text);
    assert_eq!(backlog[0]["profile"], "planner", "{}", status.text);
    assert_eq!(backlog[0]["depth"], 3, "{}", status.text);
    assert!(
        backlog[0]["oldest_pending_age_secs"].as_f64() >= Some(0.0),
        "{}",
        status.text
    );
    assert_eq!(status.json["inbox"]["worker_events_per_sec"], 0.0);
    let metrics = app.get_anonymous("/metrics").await;
    assert!(
        metrics
            .text
            .contains("feishu_bridge_inbox_depth{profile=\"planner\"} 3"),
        "{}",
        metrics.text
    );
    assert!(
        metrics
            .text
            .contains("feishu_bridge_inbox_oldest_pending_age_seconds{profile=\"planner\"}"),
        "{}",
        metrics.text
    );
    app.stop().await.expect("clean stop");

    // A new process on the same database picks them up.
    let mut app = TestApp::spawn(config(&text)).await;
    for i in 0..3 {
        assert_eq!(app.settled(&format!("ev-r{i}")).await, "done");
    }
    // One more, reported to this test after the worker counted it.
    let a = app.event(&signer.message("ev-r3", "om-r3", "now")).await;
    assert_eq!(a.status, 200);
    assert_eq!(app.processed("ev-r3").await.outcome, "done");
    let status = app.get("/status").await;
    assert_eq!(status.json["inbox"]["pending"], 0, "{}", status.text);
    assert_eq!(
        status.json["inbox"]["backlog"],
        json!([]),
        "{}",
        status.text
    );
    // Events just finished: the moving rate has seen them.
    assert!(
        status.json["inbox"]["worker_events_per_sec"].as_f64() > Some(0.0),
        "{}",
        status.text
    );
    let metrics = app.get_anonymous("/metrics").await;
    assert!(
        metrics
            .text
            .contains("feishu_bridge_inbox_depth{profile=\"planner\"} 0"),
        "{}",
        metrics.text
    );
    assert!(
        metrics
            .text
            .contains("feishu_bridge_worker_events_per_second"),
        "{}",
        metrics.text
    );
    app.stop().await.expect("clean stop");
}
both_backends!(
    events_acked_while_the_worker_is_stopped_are_processed_after_a_restart,
    acked_while_stopped
);

async fn parse_failure_fails_at_once(db: TestDb) {
    let mut cfg = config(&config_toml(&db, ""));
    cfg.worker.max_attempts = 3;
    let mut app = TestApp::spawn(cfg).await;
    let signer = Signer::default();
    // Authentic, but the chat id is a number: no retry can make it parse.
    let broken = json!({"sender": {"sender_type": "user", "sender_id": {"open_id": "ou_x"}},
                        "message": {"message_id": "om-broken", "chat_id": 730_193_871,
                                    "chat_type": "group", "message_type": "text",
                                    "content": "{\"text\":\"hi\"}"}});
    let a = app
        .event(&signer.request(&signer.envelope("ev-broken", "im.message.receive_v1", broken)))
        .await;
    assert_eq!(
        a.status, 200,
        "acknowledged: Feishu must not retry what we stored"
    );
    assert_eq!(app.processed("ev-broken").await.outcome, "failed");

    let row = app
        .state
        .store
        .inbox_event("planner", "ev-broken")
        .await
        .expect("store")
        .expect("row");
    assert_eq!(
        (row.event.status.as_str(), row.attempts),
        ("failed", 1),
        "failed after exactly one attempt"
    );
    let reason = "im.message.receive_v1: wrong type at event.message.chat_id: expected a string, found an integer";
    let status = app.get("/status").await;
    assert_eq!(status.json["inbox"]["failed"], 1, "{}", status.text);
    let problem = &status.json["inbox"]["problems"][0];
    assert_eq!(
        (
            problem["event_id"].as_str(),
            problem["attempts"].as_i64(),
            problem["last_error"].as_str()
        ),
        (Some("ev-broken"), Some(1), Some(reason)),
        "the reason names the path and the kinds, not the value"
    );
    assert!(!status.text.contains("730193871"), "{}", status.text);

    let metrics = app.get_anonymous("/metrics").await.text;
    assert!(metrics.contains(r#"feishu_bridge_events_processed_total{event_type="im.message.receive_v1",outcome="failed",profile="planner"} 1"#), "{metrics}");
    assert!(!metrics.contains(r#"outcome="retry""#), "{metrics}");

    // A good event still flows past the failed one.
    let a = app
        .event(&signer.message("ev-good", "om-good", "fine"))
        .await;
    assert_eq!(a.status, 200);
    assert_eq!(app.processed("ev-good").await.outcome, "done");
    app.stop().await.expect("clean stop");
}
both_backends!(
    a_payload_that_does_not_parse_fails_after_one_attempt_without_its_values,
    parse_failure_fails_at_once
);

/// The worker's reports on `event_id`, until one is final.
async fn outcomes(app: &mut TestApp, event_id: &str) -> Vec<&'static str> {
    let mut seen = Vec::new();
    loop {
        let outcome = app.processed(event_id).await.outcome;
        seen.push(outcome.as_str());
        if outcome != "retry" {
            return seen;
        }
    }
}

async fn transient_failures_retry(db: TestDb) {
    let fake = FakeFeishu::planner().await;
    let mut cfg = config(&config_toml(&db, &fake.profile_keys()));
    cfg.worker.max_attempts = 3;
    let mut app = TestApp::spawn(cfg).await;
    let signer = Signer::default();
    // The Open API refuses the /help reply twice with a code its client does not retry
    // by itself (server errors and rate limits it retries within the call), then takes
    // it: the worker tries the event again.
    fake.state
        .failures
        .lock()
        .expect("lock")
        .extend([(400, 1000), (400, 1000)]);
    let help = Msg::group("om_help", "/help").at_bot();
    assert_eq!(app.event(&signer.deliver(&help)).await.status, 200);
    assert_eq!(
        outcomes(&mut app, "ev-om_help").await,
        ["retry", "retry", "done"]
    );
    assert_eq!(fake.state.send_attempts.load(Ordering::SeqCst), 3);
    assert_eq!(
        fake.state.sent.lock().expect("lock").len(),
        1,
        "answered once"
    );
    assert_eq!(app.recorded("planner", "om_help").await, ["command"]);

    // Refused on every attempt: failed after max_attempts, and visible as such.
    fake.state
        .failures
        .lock()
        .expect("lock")
        .extend([(400, 1000), (400, 1000), (400, 1000)]);
    let again = Msg::group("om_help_2", "/help").at_bot();
    assert_eq!(app.event(&signer.deliver(&again)).await.status, 200);
    assert_eq!(
        outcomes(&mut app, "ev-om_help_2").await,
        ["retry", "retry", "failed"]
    );
    let status = app.get("/status").await;
    assert_eq!(status.json["inbox"]["failed"], 1, "{}", status.text);
    let problem = &status.json["inbox"]["problems"][0];
    assert_eq!(
        (problem["event_id"].as_str(), problem["attempts"].as_i64()),
        (Some("ev-om_help_2"), Some(3))
    );
    assert!(
        problem["last_error"]
            .as_str()
            .unwrap_or_default()
            .starts_with("reply not sent: "),
        "{problem}"
    );
    let metrics = app.get_anonymous("/metrics").await.text;
    assert!(metrics.contains(r#"feishu_bridge_events_processed_total{event_type="im.message.receive_v1",outcome="retry",profile="planner"} 4"#), "{metrics}");
    app.stop().await.expect("clean stop");
}
both_backends!(
    transient_failures_are_retried_with_backoff_and_then_visible_as_failed,
    transient_failures_retry
);
