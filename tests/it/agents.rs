//! The webhook agent backend against a fake agent on 127.0.0.1:0: signed requests,
//! synchronous answers, asynchronous callbacks and their rejections, timeouts.

use std::sync::Arc;

use axum::{Json, Router, extract::State, http::HeaderMap, routing::post};
use base64::{Engine, engine::general_purpose::STANDARD};
use hmac::{Hmac, Mac};
use serde_json::{Value, json};
use sha2::Sha256;
use tokio::{net::TcpListener, sync::mpsc};

use crate::{
    both_backends,
    support::{TestApp, TestDb, config, config_toml, feishu::Msg},
};

const SECRET: &str = crate::support::gated_agent::AGENT_SECRET;

/// What the fake agent shares with its handler: where turns go, and its answer.
type AgentState = Arc<(
    mpsc::UnboundedSender<(HeaderMap, String)>,
    Option<&'static str>,
)>;

/// The fake agent: forwards each turn to the test; answers 200 with an output, or 202.
struct FakeAgent {
    url: String,
    turns: mpsc::UnboundedReceiver<(HeaderMap, String)>,
}

async fn fake_agent(sync_output: Option<&'static str>) -> FakeAgent {
    let (tx, turns) = mpsc::unbounded_channel();
    let state = Arc::new((tx, sync_output));
    async fn turn(
        State(s): State<AgentState>,
        headers: HeaderMap,
        body: String,
    ) -> (axum::http::StatusCode, Json<Value>) {
        s.0.send((headers, body)).ok();
        match s.1 {
            Some(out) => (axum::http::StatusCode::OK, Json(json!({"output": out}))),
            None => (axum::http::StatusCode::ACCEPTED, Json(json!({}))),
        }
    }
    let app = Router::new().route("/turn", post(turn)).with_state(state);
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}/turn", listener.local_addr().expect("addr"));
    tokio::spawn(async move { axum::serve(listener, app).await });
    FakeAgent { url, turns }
}

/// An independent Standard Webhooks signature (base64 key after `whsec_`).
fn sign(id: &str, ts: &str, body: &str) -> String {
    let key = STANDARD
        .decode(SECRET.trim_start_matches("whsec_"))
        .expect("key");
    let mut mac = Hmac::<Sha256>::new_from_slice(&key).expect("key");
    mac.update(format!("{id}.{ts}.{body}").as_bytes());
    format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes()))
}

fn agent_config(db: &TestDb, url: &str, timeout: u64) -> String {
    config_toml(
        db,
        &crate::support::gated_agent::webhook_agent_toml(url, timeout),
    )
}

async fn sync_answers(db: TestDb) {
    let mut agent = fake_agent(Some("Plan: 1. canvas 2. touch controls")).await;
    let mut app = TestApp::spawn(config(&agent_config(&db, &agent.url, 30))).await;
    app.route(&Msg::group("om_root", "H5 snake game")).await;
    assert_eq!(
        app.ask(
            &Msg::group("om_q", "draft a plan")
                .at_bot()
                .in_thread("om_root")
        )
        .await,
        "answered"
    );

    let (headers, raw) = agent.turns.recv().await.expect("the agent got the turn");
    let body: Value = serde_json::from_str(&raw).expect("json body");
    let h = |n: &str| {
        headers
            .get(n)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string()
    };
    assert_eq!(
        h("webhook-id"),
        body["turn_id"].as_str().unwrap_or_default()
    );
    assert_eq!(
        h("webhook-signature"),
        sign(&h("webhook-id"), &h("webhook-timestamp"), &raw),
        "signed the Standard Webhooks way"
    );
    assert_eq!(
        (
            body["request_text"].as_str(),
            body["sender"]["open_id"].as_str()
        ),
        (Some("draft a plan"), Some("ou_alice"))
    );
    assert!(
        body["prompt"]
            .as_str()
            .unwrap_or_default()
            .contains("[Topic root]\nH5 snake game")
    );
    assert_eq!(body["session_key"], "thread:oc_group:om_root");

    assert_eq!(
        app.last_reply("planner").await,
        "Plan: 1. canvas 2. touch controls"
    );
    assert!(
        app.planner_outputs()
            .await
            .iter()
            .any(|r| r.text == "Plan: 1. canvas 2. touch controls")
    );
    app.stop().await.expect("clean stop");
}
both_backends!(
    a_webhook_agents_synchronous_answer_completes_the_turn,
    sync_answers
);

async fn async_callbacks(db: TestDb) {
    let mut agent = fake_agent(None).await;
    let mut app = TestApp::spawn(config(&agent_config(&db, &agent.url, 30))).await;
    let base = app.base.clone();
    let http = reqwest::Client::new();
    let callback = async move {
        let (_, raw) = agent.turns.recv().await.expect("turn");
        let turn: Value = serde_json::from_str(&raw).expect("json");
        let turn_id = turn["turn_id"].as_str().unwrap_or_default().to_string();
        let url = format!("{base}/agent/planner/turns/{turn_id}/output");
        let body = r#"{"output":"done asynchronously"}"#;
        let ts = feishu_bridge::util::now_secs().to_string();
        let post = |sig: String, url: String| {
            http.post(url)
                .header("webhook-id", "cb-1")
                .header("webhook-timestamp", &ts)
                .header("webhook-signature", sig)
                .body(body)
                .send()
        };
        let unsigned = http.post(&url).body(body).send().await.expect("sent");
        assert_eq!(unsigned.status(), 401);
        let wrong = post("v1,AAAA".into(), url.clone()).await.expect("sent");
        assert_eq!(wrong.status(), 401);
        let unknown = post(
            sign("cb-1", &ts, body),
            format!("{base}/agent/planner/turns/turn_nope/output"),
        )
        .await
        .expect("sent");
        let unknown: Value = unknown.json().await.expect("json");
        assert_eq!(unknown["error"]["code"], "unknown_turn");
        let ok = post(sign("cb-1", &ts, body), url.clone())
            .await
            .expect("sent");
        assert_eq!(ok.status(), 200);
        let again = post(sign("cb-1", &ts, body), url).await.expect("sent");
        assert_eq!(
            again.status(),
            404,
            "an answered turn takes no second answer"
        );
    };
    let ask = Msg::group("om_q", "take your time").at_bot();
    let (outcome, ()) = tokio::join!(app.ask(&ask), callback);
    assert_eq!(outcome, "answered");
    assert_eq!(app.last_reply("planner").await, "done asynchronously");
    let turn = app.turn_of("om_q").await;
    assert_eq!(
        (turn.state.as_str(), turn.output.as_deref()),
        ("succeeded", Some("done asynchronously"))
    );
    app.stop().await.expect("clean stop");
}
both_backends!(
    a_webhook_agents_signed_callback_completes_the_turn_and_bad_ones_are_refused,
    async_callbacks
);

async fn timeouts(db: TestDb) {
    let agent = fake_agent(None).await;
    let mut app = TestApp::spawn(config(&agent_config(&db, &agent.url, 1))).await;
    assert_eq!(
        app.ask(&Msg::group("om_q", "hello?").at_bot()).await,
        "agent_failed"
    );
    assert_eq!(
        app.last_reply("planner").await,
        "The agent did not answer: agent failed: no answer within 1 s"
    );
    let rows = app.state.store.message_events("om_q").await.expect("rows");
    assert!(
        rows.iter().all(|r| r.event_type != "agent_output"),
        "nothing recorded as an answer"
    );
    let turn = app.turn_of("om_q").await;
    assert_eq!(turn.state, "failed");
    assert_eq!(
        turn.error.as_deref(),
        Some("agent failed: no answer within 1 s")
    );
    assert!(turn.output.is_none() && turn.finished_at.is_some());
    drop(agent);
    app.stop().await.expect("clean stop");
}
both_backends!(
    a_webhook_agent_that_never_answers_fails_the_turn_and_tells_the_user,
    timeouts
);

/// A URL on 127.0.0.1 where nobody listens.
fn nobody_listens() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    drop(listener);
    format!("http://{addr}/turn")
}

async fn unreachable(db: TestDb) {
    let url = nobody_listens();
    let mut app = TestApp::spawn(config(&agent_config(&db, &url, 30))).await;
    assert_eq!(
        app.ask(&Msg::group("om_q", "anyone there?").at_bot()).await,
        "agent_failed"
    );
    let turn = app.turn_of("om_q").await;
    assert_eq!(turn.state, "failed");
    let error = turn.error.unwrap_or_default();
    assert!(
        error.starts_with("agent failed: agent unreachable: error sending request"),
        "the turn names what failed: {error}"
    );
    let address = url.trim_start_matches("http://").trim_end_matches("/turn");
    assert!(!error.contains(address), "the URL is left out: {error}");
    assert!(
        !error.contains(SECRET) && !error.contains("anyone there"),
        "{error}"
    );
    assert_eq!(
        app.last_reply("planner").await,
        format!("The agent did not answer: {error}")
    );
    app.stop().await.expect("clean stop");
}
both_backends!(
    an_unreachable_webhook_agent_fails_the_turn_as_a_transport_failure,
    unreachable
);

async fn refused(db: TestDb) {
    let agent = Router::new().route(
        "/turn",
        post(|| async {
            (
                axum::http::StatusCode::SERVICE_UNAVAILABLE,
                "maintenance until noon",
            )
        }),
    );
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}/turn", listener.local_addr().expect("addr"));
    tokio::spawn(async move { axum::serve(listener, agent).await });
    let mut app = TestApp::spawn(config(&agent_config(&db, &url, 30))).await;
    assert_eq!(
        app.ask(&Msg::group("om_q", "hello?").at_bot()).await,
        "agent_failed"
    );
    let turn = app.turn_of("om_q").await;
    assert_eq!(
        (turn.state.as_str(), turn.error.as_deref()),
        (
            "failed",
            Some("agent failed: agent answered HTTP 503 Service Unavailable")
        ),
        "the status is named, the body is not quoted"
    );
    app.stop().await.expect("clean stop");
}
both_backends!(
    a_webhook_agent_refusing_with_a_status_fails_the_turn_naming_it,
    refused
);
