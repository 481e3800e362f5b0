//! Feishu's long connection against a fake long-connection server on 127.0.0.1: a
//! profile with `connection = "websocket"` fetches an endpoint, connects, stores what is
//! pushed before acknowledging it, answers card presses in the acknowledgement, survives
//! closes and half-open sockets, stops on fatal refusals, and loses nothing it
//! acknowledged when the bridge shuts down mid-stream.

use feishu_bridge::longconn::status::ConnState;
use serde_json::json;

use crate::{
    both_backends,
    support::{
        TestApp, TestDb, config, config_toml,
        db_lock::Lock,
        fake_feishu::FakeFeishu,
        fake_longconn::{
            EndpointAnswer, FakeLongConn, HandshakeAnswer, Push, card_action, event_payload,
            message_event,
        },
        feishu::{Msg, Signer},
    },
};

/// The planner, receiving over the long connection of `fake` (and still open on HTTP).
async fn websocket(db: &TestDb) -> (TestApp, FakeFeishu, FakeLongConn) {
    websocket_with(db, |_| {}).await
}

/// Like [`websocket`], with `before` applied to the fake before the bridge starts.
async fn websocket_with(
    db: &TestDb,
    before: impl FnOnce(&FakeLongConn),
) -> (TestApp, FakeFeishu, FakeLongConn) {
    let (fake, lc) = FakeFeishu::planner_with_long_connection().await;
    before(&lc);
    let text = config_toml(
        db,
        &format!("{}connection = \"websocket\"\n", fake.profile_keys()),
    );
    let app = TestApp::spawn(config(&text)).await;
    (app, fake, lc)
}

/// Waits until the planner's connection is in `state`.
async fn state(app: &TestApp, state: ConnState) -> feishu_bridge::longconn::status::ConnView {
    let wait = app
        .state
        .connections
        .wait_for("planner", |v| v.state == state);
    tokio::time::timeout(std::time::Duration::from_secs(30), wait)
        .await
        .unwrap_or_else(|_| panic!("the connection never became {state:?}"))
}

async fn end_to_end(db: TestDb) {
    let (mut app, fake, lc) = websocket(&db).await;
    lc.connected(1).await;
    state(&app, ConnState::Connected).await;

    // Pushed, stored, acknowledged, routed and answered.
    let ack = lc
        .push(Push::event(message_event(
            "ev-lc-1", "om_lc_1", "oc_group", "hello", true,
        )))
        .await;
    assert_eq!(ack.code, 200);
    assert!(ack.header("biz_rt").is_some());
    assert!(
        app.state
            .store
            .inbox_event("planner", "ev-lc-1")
            .await
            .expect("store")
            .is_some()
    );
    assert_eq!(app.processed("ev-lc-1").await.outcome, "done");
    let row = app.turn_ended("om_lc_1").await;
    assert_eq!(row.state, "succeeded", "{:?}", row.error);
    let sent = || fake.state.sent.lock().expect("lock").clone();
    assert_eq!(sent().len(), 1);
    assert_eq!(
        sent()[0].0,
        "om_lc_1",
        "answered in the thread of the pushed message"
    );

    // The same event over the event URL is a duplicate: one row, one answer.
    let msg = Msg::group("om_lc_1", "hello").in_chat("oc_group").at_bot();
    let again = String::from_utf8(event_payload("ev-lc-1", &msg)).expect("utf-8");
    let answer = app.event(&Signer::default().request(&again)).await;
    assert_eq!(
        (answer.status, answer.json["msg"].as_str()),
        (200, Some("success"))
    );
    // Pushed again after a reconnect, under a new frame message_id: acknowledged, not
    // processed twice.
    let ack = lc
        .push(
            Push::event(message_event(
                "ev-lc-1", "om_lc_1", "oc_group", "hello", true,
            ))
            .message_id("m-again"),
        )
        .await;
    assert_eq!(ack.code, 200);

    // A message split in three, sent last part first, is one event.
    let split = message_event("ev-lc-2", "om_lc_2", "oc_group", &"long ".repeat(400), true);
    let ack = lc.push(Push::event(split).fragments(3).reversed()).await;
    assert_eq!(ack.code, 200);
    assert_eq!(app.processed("ev-lc-2").await.outcome, "done");
    assert_eq!(app.turn_ended("om_lc_2").await.state, "succeeded");
    assert_eq!(
        sent().len(),
        2,
        "one answer each: the duplicates changed nothing"
    );

    // /status and /metrics show the connection.
    let status = app.get("/status").await;
    let profile = &status.json["profiles"][0];
    assert_eq!(profile["connection"], "websocket", "{}", status.text);
    assert_eq!(profile["long_connection"]["state"], "connected");
    assert!(
        profile["long_connection"]["last_ping_at"].is_i64(),
        "{}",
        status.text
    );
    let metrics = app.get_anonymous("/metrics").await.text;
    assert!(
        metrics.contains(r#"feishu_bridge_long_connection_connected{profile="planner"} 1"#),
        "{metrics}"
    );
    assert!(metrics.contains(r#"feishu_bridge_long_connection_frames_total{direction="out",profile="planner",type="ack"} 3"#), "{metrics}");
    assert!(metrics.contains("feishu_bridge_long_connection_ack_seconds_bucket"));
    assert!(lc.violations().is_empty(), "{:?}", lc.violations());
    app.stop().await.expect("clean stop");
}
both_backends!(
    a_websocket_profile_receives_stores_routes_and_answers_over_the_long_connection,
    end_to_end
);

async fn not_stored_not_acknowledged(db: TestDb) {
    let (mut app, _fake, lc) = websocket(&db).await;
    lc.connected(1).await;
    let payload = message_event("ev-lc-down", "om_lc_down", "oc_group", "hi", false);
    let lock = Lock::take(&db).await;
    let ack = lc.push(Push::event(payload.clone())).await;
    assert_eq!(ack.code, 500, "never 200 for an event that was not stored");
    lock.release().await;
    // Feishu pushes it again: now it is stored.
    let ack = lc.push(Push::event(payload)).await;
    assert_eq!(ack.code, 200);
    assert_eq!(app.processed("ev-lc-down").await.outcome, "done");
    assert!(lc.violations().is_empty(), "{:?}", lc.violations());
    app.stop().await.expect("clean stop");
}
both_backends!(
    an_event_the_database_cannot_take_is_answered_500_and_stored_when_pushed_again,
    not_stored_not_acknowledged
);

async fn card_presses(db: TestDb) {
    let (mut app, _fake, lc) = websocket(&db).await;
    lc.connected(1).await;
    lc.push(Push::event(message_event(
        "ev-lc-q", "om_lc_q", "oc_group", "hi", true,
    )))
    .await;
    assert_eq!(app.processed("ev-lc-q").await.outcome, "done");
    let turn = app.turn_ended("om_lc_q").await;
    let before = app
        .state
        .store
        .session("planner", &turn.session_key)
        .await
        .expect("store")
        .expect("session")
        .session_id;
    for (event_id, push) in [
        ("ev-press-1", Push::event as fn(Vec<u8>) -> Push),
        ("ev-press-2", Push::card),
    ] {
        let value = json!({"action": "new_session", "turn_id": turn.turn_id});
        let ack = lc
            .push(push(card_action(event_id, value, "ou_alice", "oc_group")))
            .await;
        assert_eq!(ack.code, 200, "{event_id}");
        let data = ack.data.clone().expect("the toast comes back in data");
        assert_eq!(data["toast"]["type"], "success", "{event_id}: {data}");
    }
    let after = app
        .state
        .store
        .session("planner", &turn.session_key)
        .await
        .expect("store")
        .expect("session")
        .session_id;
    assert_ne!(before, after, "the press started a new session");
    assert!(lc.violations().is_empty(), "{:?}", lc.violations());
    let _ = app.processed("ev-press-2").await;
    app.stop().await.expect("clean stop");
}
both_backends!(
    a_card_press_over_the_long_connection_gets_its_toast_in_the_acknowledgement,
    card_presses
);

async fn reconnects(db: TestDb) {
    let (app, _fake, lc) = websocket(&db).await;
    lc.connected(1).await;

    // Feishu closes the connection: a fresh endpoint, a new connection.
    lc.close();
    lc.connected(2).await;
    // The connection goes silent without closing: the pong timeout notices.
    lc.go_silent();
    lc.connected(3).await;
    // A handshake refused for a passing reason is tried again after the interval.
    lc.fail_handshake(vec![HandshakeAnswer::server_error()]);
    lc.close();
    lc.connected(4).await;
    let stats = lc.stats();
    assert_eq!(
        stats.endpoint_requests, 5,
        "a fresh endpoint for every attempt"
    );
    let mut urls = stats.urls.clone();
    urls.dedup();
    assert_eq!(urls.len(), stats.urls.len(), "never the same URL twice");
    let view = state(&app, ConnState::Connected).await;
    assert_eq!(view.reconnects, 4);
    let ack = lc
        .push(Push::event(message_event(
            "ev-lc-r", "om_lc_r", "oc_group", "hi", false,
        )))
        .await;
    assert_eq!(ack.code, 200);
    assert!(lc.violations().is_empty(), "{:?}", lc.violations());
    app.stop().await.expect("clean stop");
}
both_backends!(
    a_closed_or_silent_connection_is_made_again_with_a_fresh_url,
    reconnects
);

async fn fatal(db: TestDb) {
    let (app, _fake, lc) =
        websocket_with(&db, |lc| lc.fail_endpoint(vec![EndpointAnswer::fatal()])).await;
    let view = state(&app, ConnState::Stopped).await;
    let reason = view.reason.unwrap_or_default();
    assert!(reason.contains("10003"), "{reason}");
    assert_eq!(lc.stats().endpoint_requests, 1, "no hot loop");
    let status = app.get("/status").await;
    let conn = &status.json["profiles"][0]["long_connection"];
    assert_eq!(conn["state"], "stopped", "{}", status.text);
    assert!(
        conn["reason"]
            .as_str()
            .unwrap_or_default()
            .contains("10003")
    );
    assert!(!status.text.contains("ticket="), "the URL is never shown");
    app.stop().await.expect("clean stop");
}
both_backends!(
    a_fatal_endpoint_refusal_stops_the_connection_and_says_why_in_status,
    fatal
);

async fn too_many(db: TestDb) {
    let (app, _fake, lc) = websocket_with(&db, |lc| {
        lc.fail_handshake(vec![HandshakeAnswer::too_many_connections()])
    })
    .await;
    let view = state(&app, ConnState::Stopped).await;
    assert!(
        view.reason
            .unwrap_or_default()
            .contains("too many connections"),
        "stopped with the reason"
    );
    assert_eq!(lc.stats().endpoint_requests, 1);
    app.stop().await.expect("clean stop");
}
both_backends!(
    too_many_connections_stops_the_connection_instead_of_retrying,
    too_many
);

async fn shutdown_mid_stream(db: TestDb) {
    let (app, _fake, lc) = websocket(&db).await;
    lc.connected(1).await;
    let store = app.state.store.clone();
    let mut pushed = Vec::new();
    for i in 0..40 {
        let event_id = format!("ev-lc-s{i}");
        let payload = message_event(&event_id, &format!("om_lc_s{i}"), "oc_group", "hi", false);
        pushed.push((lc.push_no_wait(Push::event(payload)).await, event_id));
    }
    // Once the first is acknowledged, the bridge is told to stop while the rest stream in.
    let first = pushed[0].0;
    assert_eq!(lc.ack(first).await.map(|a| a.code), Some(200));
    app.stop().await.expect("clean stop");
    let mut acknowledged = 0;
    for (seq, event_id) in pushed {
        let Some(ack) = lc.ack(seq).await else {
            continue;
        };
        if ack.code == 200 {
            acknowledged += 1;
            assert!(
                store
                    .inbox_event("planner", &event_id)
                    .await
                    .expect("store")
                    .is_some(),
                "{event_id} was acknowledged, so it is stored"
            );
        }
    }
    assert!(
        acknowledged > 0,
        "what was read before the shutdown was acknowledged"
    );
    assert!(lc.violations().is_empty(), "{:?}", lc.violations());
}
both_backends!(
    a_shutdown_mid_stream_loses_nothing_it_acknowledged,
    shutdown_mid_stream
);
