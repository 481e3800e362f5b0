//! The long connection and the Open API behind an HTTP proxy that the bridge's own
//! environment names (given in process, as the config loader's lookup): the endpoint
//! and the Open API go through it, the WebSocket through a CONNECT tunnel; a proxy that
//! refuses shows in `/status` with its reason and without its credentials while the
//! bridge keeps trying; `NO_PROXY` sends the bridge straight to the host.

use std::time::Duration;

use feishu_bridge::longconn::status::{ConnState, ConnView};

use crate::support::{
    TestApp, TestDb, config_toml, config_with_env,
    connect_proxy::ConnectProxy,
    fake_feishu::FakeFeishu,
    fake_longconn::{FakeLongConn, Push, message_event},
};

const USER: &str = "proxy-user";
/// A password with characters a URL must percent-encode.
const PASSWORD: &str = "p@ss w0rd:x";

/// The planner over the long connection of a fresh fake, with `env` as its environment.
async fn bridge(db: &TestDb, env: &[(&str, &str)]) -> (TestApp, FakeFeishu, FakeLongConn) {
    let (fake, lc) = FakeFeishu::planner_with_long_connection().await;
    let text = config_toml(
        db,
        &format!("{}connection = \"websocket\"\n", fake.profile_keys()),
    );
    let app = TestApp::spawn(config_with_env(&text, env)).await;
    (app, fake, lc)
}

/// `host:port` of the fake (the target of the WebSocket's tunnel).
fn authority(fake: &FakeFeishu) -> String {
    fake.base.trim_start_matches("http://").to_string()
}

/// Waits until the planner's connection satisfies `done`.
async fn until(app: &TestApp, what: &str, done: impl FnMut(&ConnView) -> bool) -> ConnView {
    let wait = app.state.connections.wait_for("planner", done);
    tokio::time::timeout(Duration::from_secs(30), wait)
        .await
        .unwrap_or_else(|_| panic!("the connection never showed {what}"))
}

/// Pushes one message over the open connection; asserts it is acknowledged, stored
/// and processed.
async fn delivered(app: &mut TestApp, lc: &FakeLongConn, n: &str) {
    let (event_id, message_id) = (format!("ev-px-{n}"), format!("om_px_{n}"));
    let ack = lc
        .push(Push::event(message_event(
            &event_id,
            &message_id,
            "oc_group",
            "hello",
            true,
        )))
        .await;
    assert_eq!(ack.code, 200, "{event_id}");
    let stored = app.state.store.inbox_event("planner", &event_id).await;
    assert!(stored.expect("store").is_some(), "{event_id} stored");
    assert_eq!(app.processed(&event_id).await.outcome, "done");
}

#[tokio::test]
async fn the_endpoint_the_websocket_and_the_open_api_go_through_the_environments_proxy() {
    let proxy = ConnectProxy::start().await;
    proxy.require(USER, PASSWORD);
    let url = proxy.url_with(USER, PASSWORD);
    let db = TestDb::sqlite();
    let env = [("HTTPS_PROXY", url.as_str()), ("http_proxy", url.as_str())];
    let (mut app, fake, lc) = bridge(&db, &env).await;
    lc.connected(1).await;
    delivered(&mut app, &lc, "1").await;
    // The answer went out through the proxy too.
    let turn = app.turn_ended("om_px_1").await;
    assert_eq!(turn.state, "succeeded", "{:?}", turn.error);
    assert_eq!(fake.state.sent.lock().expect("lock").len(), 1);

    let seen = proxy.seen();
    let endpoint = format!("POST {}/callback/ws/endpoint", fake.base);
    assert!(seen.forwarded.contains(&endpoint), "{seen:?}");
    assert_eq!(
        seen.tunnels,
        [authority(&fake)],
        "the WebSocket went through one CONNECT tunnel, not direct: {seen:?}"
    );
    assert!(
        seen.forwarded.iter().any(|r| r.contains("/open-apis/im/")),
        "the reply went through the proxy: {seen:?}"
    );
    assert!(
        seen.refused.is_empty(),
        "credentials on every request: {seen:?}"
    );

    let status = app.get("/status").await;
    let conn = &status.json["profiles"][0]["long_connection"];
    assert_eq!(conn["state"], "connected", "{}", status.text);
    assert!(lc.violations().is_empty(), "{:?}", lc.violations());
    app.stop().await.expect("clean stop");
}

#[tokio::test]
async fn a_proxy_that_refuses_shows_in_status_and_the_bridge_keeps_trying() {
    let proxy = ConnectProxy::start().await;
    proxy.require(USER, PASSWORD);
    let wrong = "not-the-password";
    let url = proxy.url_with(USER, wrong);
    let db = TestDb::sqlite();
    let (mut app, fake, lc) = bridge(&db, &[("HTTP_PROXY", url.as_str())]).await;
    let (at, target) = (proxy.addr, authority(&fake));

    // Wrong credentials: the proxy answers the endpoint request 407.
    let expected = format!(
        "the proxy {at} refused the endpoint request: HTTP 407 Proxy Authentication Required"
    );
    let view = until(&app, "the 407", |v| v.reason.as_deref() == Some(&expected)).await;
    assert_ne!(view.state, ConnState::Connected);
    shows(&app, &expected, &[USER, wrong]).await;

    // Credentials no longer asked, but no tunnels: 403, then 407, for the WebSocket.
    proxy.open_to_all();
    for (status, words) in [(403, "Forbidden"), (407, "Proxy Authentication Required")] {
        proxy.refuse_tunnels(Some(status));
        let expected =
            format!("the proxy {at} refused the tunnel to {target}: HTTP {status} {words}");
        until(&app, "the tunnel's refusal", |v| {
            v.reason.as_deref() == Some(&expected)
        })
        .await;
        shows(&app, &expected, &[USER, wrong]).await;
    }
    assert!(lc.stats().endpoint_requests > 0);

    // The proxy is fixed: the bridge, still trying, connects and events flow.
    proxy.refuse_tunnels(None);
    lc.connected(1).await;
    until(&app, "connected", |v| v.state == ConnState::Connected).await;
    delivered(&mut app, &lc, "2").await;
    assert!(proxy.seen().tunnels.contains(&target));
    assert!(lc.violations().is_empty(), "{:?}", lc.violations());
    app.stop().await.expect("clean stop");
}

/// `/status` shows the connection down with `reason`, and none of `secrets`, the
/// WebSocket URL's query or a credential header.
async fn shows(app: &TestApp, reason: &str, secrets: &[&str]) {
    let status = app.get("/status").await;
    let conn = &status.json["profiles"][0]["long_connection"];
    assert_ne!(conn["state"], "connected", "{}", status.text);
    assert_eq!(conn["reason"], reason, "{}", status.text);
    for secret in secrets
        .iter()
        .chain(&["ticket", "access_key", "Basic ", PASSWORD])
    {
        assert!(!status.text.contains(secret), "{secret}: {}", status.text);
    }
}

#[tokio::test]
async fn no_proxy_covering_the_host_sends_the_bridge_straight_to_it() {
    let proxy = ConnectProxy::start().await;
    // Were anything sent to it, it would fail.
    proxy.require(USER, PASSWORD);
    proxy.refuse_tunnels(Some(403));
    let url = proxy.url_with(USER, "wrong");
    let db = TestDb::sqlite();
    let env = [
        ("HTTPS_PROXY", url.as_str()),
        ("HTTP_PROXY", url.as_str()),
        ("no_proxy", "localhost, 127.0.0.0/8"),
    ];
    let (mut app, _fake, lc) = bridge(&db, &env).await;
    lc.connected(1).await;
    delivered(&mut app, &lc, "3").await;
    let seen = proxy.seen();
    assert!(seen.is_empty(), "the proxy saw {seen:?}");
    app.stop().await.expect("clean stop");
}
