//! Asks: a webhook agent's question is stored with its event, answered once from a card
//! button by whoever may invoke the session, delivered to the agent as one signed
//! `kind: answer` POST, read back (and waited on) through the signed GET, timed out to
//! its default, closed with its turn, and kept across a restart.

use serde_json::{Value, json};

use crate::support::gated_agent::post_event;
use crate::{
    both_backends,
    support::{
        Answer, TestApp, TestDb,
        app::answer,
        cards::{post_within_3s, press_value_request},
        config, config_toml,
        feishu::Msg,
        gated_agent::{Delivered, GatedAgent, sign},
    },
};

/// The planner (only ou_alice may invoke it) with the gated agent.
fn planner(db: &TestDb, agent: &GatedAgent) -> String {
    config_toml(
        db,
        &format!("allow_users = [\"ou_alice\"]\n{}", agent.config()),
    )
}

/// POSTs one signed event of `turn_id`.
async fn event(app: &TestApp, turn_id: &str, body: &str) -> Answer {
    post_event(app, ("planner", turn_id), body, None).await
}

/// The signed `GET …/asks/{ask_id}` (the empty body signed), waiting `wait` seconds.
async fn get_ask(app: &TestApp, turn_id: &str, ask_id: &str, wait: u64) -> Answer {
    let ts = feishu_bridge::util::now_secs().to_string();
    let r = app
        .client
        .get(format!(
            "{}/agent/planner/turns/{turn_id}/asks/{ask_id}?wait_secs={wait}",
            app.base
        ))
        .header("webhook-id", "get-ask")
        .header("webhook-timestamp", &ts)
        .header("webhook-signature", sign("get-ask", &ts, ""))
        .send()
        .await
        .expect("sent");
    answer(r).await
}

/// Presses the answer `value` of `ask_id` as `operator`, under `event_id`.
async fn press(
    app: &TestApp,
    event_id: &str,
    operator: &str,
    turn_id: &str,
    ask_id: &str,
    value: &str,
) -> Value {
    let v = json!({"action": "answer", "turn_id": turn_id, "ask_id": ask_id, "value": value});
    let req = press_value_request(event_id, operator, v, "om_card");
    let a = post_within_3s(app, "event", &req).await;
    assert_eq!(a.status, 200, "{}", a.text);
    a.json
}

fn toast(answer: &Value) -> &str {
    answer["toast"]["content"].as_str().unwrap_or_default()
}

/// Asks the planner; the turn id once the agent holds the turn.
async fn running_turn(app: &mut TestApp, agent: &mut GatedAgent, message_id: &str) -> String {
    app.route(&Msg::group(message_id, "deploy it").at_bot())
        .await;
    let turn = agent.next().await;
    turn["turn_id"].as_str().expect("turn id").to_string()
}

/// A delivered answer is signed with the agent secret under its stable id.
fn check_signed(d: &Delivered) {
    assert_eq!(d.signature, sign(&d.id, &d.timestamp, &d.body), "{d:?}");
    assert!(d.id.starts_with("answer_"), "{}", d.id);
}

const ASK: &str = r#"{"seq":1,"kind":"ask","id":"q1","prompt":"Deploy now?","style":"select","options":["now","later"],"timeout_secs":600,"default":"later"}"#;
const ASK_AGAIN: &str = r#"{"seq":2,"kind":"ask","id":"q1","prompt":"Deploy tomorrow?","style":"select","options":["now","later"],"timeout_secs":600}"#;
const OPEN_ASK: &str =
    r#"{"seq":3,"kind":"ask","id":"q2","prompt":"Tag it?","style":"confirm","timeout_secs":600}"#;

async fn answered_once(db: TestDb) {
    let mut agent = GatedAgent::start().await;
    let text = planner(&db, &agent);
    let mut app = TestApp::spawn(config(&text)).await;
    let turn_id = running_turn(&mut app, &mut agent, "om_deploy").await;
    let t = turn_id.as_str();
    assert_eq!(event(&app, t, ASK).await.status, 200);
    let open = get_ask(&app, t, "q1", 0).await;
    assert_eq!(
        (open.status, open.json["state"].as_str()),
        (200, Some("open")),
        "{}",
        open.text
    );

    // A long poll, answered when the press lands.
    let waiting = get_ask(&app, t, "q1", 20);
    let pressing = async {
        let bob = press(&app, "ev-bob", "ou_bob", t, "q1", "now").await;
        assert_eq!(bob["toast"]["type"], "error", "{bob}");
        let stored = app.state.store.ask(t, "q1").await.expect("store");
        assert!(
            stored.is_some_and(|a| a.answer.is_none()),
            "a refused press stores nothing"
        );
        let bad = press(&app, "ev-bad", "ou_alice", t, "q1", "never").await;
        assert_eq!(toast(&bad), "That is not one of this question's answers.");
        let ok = press(&app, "ev-ok", "ou_alice", t, "q1", "now").await;
        assert_eq!(toast(&ok), "Answer recorded: now");
    };
    let (waited, ()) = tokio::join!(waiting, pressing);
    assert_eq!(waited.json["state"], "answered", "{}", waited.text);
    assert_eq!(
        (
            waited.json["answer"].as_str(),
            waited.json["answered_by"].as_str()
        ),
        (Some("now"), Some("ou_alice"))
    );

    let d = agent.next_answer().await;
    check_signed(&d);
    let at = waited.json["answered_at"].clone();
    assert_eq!(
        d.json,
        json!({"kind": "answer", "turn_id": t, "profile": "planner", "ask_id": "q1",
               "answer": "now", "answered_by": "ou_alice", "timed_out": false, "answered_at": at})
    );

    // Pressed again, and the same callback replayed: the first answer stands.
    let again = press(&app, "ev-again", "ou_alice", t, "q1", "later").await;
    assert_eq!(toast(&again), "Already answered: now by you");
    let replay = press(&app, "ev-ok", "ou_alice", t, "q1", "later").await;
    assert_eq!(replay, json!({}));

    // An id asked before, with other content: refused, nothing stored.
    let conflict = event(&app, t, ASK_AGAIN).await;
    assert_eq!(
        (conflict.status, conflict.code()),
        (409, "ask_conflict"),
        "{}",
        conflict.text
    );
    assert_eq!(
        app.state.store.turn_events(t).await.expect("store").len(),
        1
    );
    assert_eq!(event(&app, t, OPEN_ASK).await.status, 200);

    let shown = app.get(&format!("/turns/{t}")).await;
    let asks = &shown.json["asks"];
    assert_eq!(
        (
            asks[0]["id"].as_str(),
            asks[0]["state"].as_str(),
            asks[0]["answered_by"].as_str()
        ),
        (Some("q1"), Some("answered"), Some("ou_alice")),
        "{}",
        shown.text
    );
    assert_eq!(
        (asks[1]["state"].as_str(), asks[1]["default"].as_str()),
        (Some("open"), Some("no"))
    );

    // The turn ends: its open ask closes, and no ask is taken any more.
    agent.open();
    assert_eq!(app.turn_ended("om_deploy").await.state, "succeeded");
    let late = press(&app, "ev-late", "ou_alice", t, "q2", "yes").await;
    assert_eq!(toast(&late), "This question is closed.");
    assert_eq!(get_ask(&app, t, "q2", 5).await.json["state"], "closed");
    let after =
        r#"{"seq":4,"kind":"ask","id":"q3","prompt":"More?","style":"confirm","timeout_secs":5}"#;
    let refused = event(&app, t, after).await;
    assert_eq!((refused.status, refused.code()), (409, "turn_ended"));
    let explained = app.explain("planner", "om_deploy", Some("om_deploy")).await;
    let ask = &explained.json["turn"]["asks"][0];
    assert_eq!(
        (
            ask["ask_id"].as_str(),
            ask["answered_by"].as_str(),
            ask["answered_at"].clone()
        ),
        (Some("q1"), Some("ou_alice"), at.clone()),
        "{}",
        explained.text
    );
    app.stop().await.expect("clean stop");

    // After a restart: the answer is there, a press is told so, nothing is sent again.
    let app = TestApp::spawn(config(&text)).await;
    let kept = get_ask(&app, t, "q1", 0).await;
    assert_eq!(
        (kept.json["state"].as_str(), kept.json["answer"].as_str()),
        (Some("answered"), Some("now"))
    );
    assert!(
        kept.json["delivered_at"].as_i64().is_some(),
        "{}",
        kept.text
    );
    let later = press(&app, "ev-restart", "ou_alice", t, "q1", "later").await;
    assert_eq!(toast(&later), "Already answered: now by you");
    app.stop().await.expect("clean stop");
    assert!(
        agent.answers.try_recv().is_err(),
        "one answer, delivered once"
    );
    assert_eq!(agent.answer_attempts(), 1);
}
both_backends!(
    an_ask_is_answered_once_by_an_allowed_user_and_delivered_once,
    answered_once
);

async fn timeouts(db: TestDb) {
    let mut agent = GatedAgent::start().await;
    let mut app = TestApp::spawn(config(&planner(&db, &agent))).await;
    let turn_id = running_turn(&mut app, &mut agent, "om_wait").await;
    let t = turn_id.as_str();
    // The first POST of an answer fails: it is sent again.
    agent.fail_answers(1);
    let confirm =
        r#"{"seq":1,"kind":"ask","id":"c","prompt":"Go?","style":"confirm","timeout_secs":1}"#;
    let select = r#"{"seq":2,"kind":"ask","id":"s","prompt":"Which?","style":"select","options":["a","b"],"timeout_secs":1}"#;
    for body in [confirm, select] {
        let a = event(&app, t, body).await;
        assert_eq!(a.status, 200, "{}", a.text);
    }
    let mut got = [agent.next_answer().await, agent.next_answer().await];
    got.sort_by_key(|d| d.json["ask_id"].as_str().unwrap_or_default().to_string());
    for d in &got {
        check_signed(d);
        assert_eq!(
            (d.json["timed_out"].as_bool(), &d.json["answered_by"]),
            (Some(true), &Value::Null)
        );
    }
    assert_eq!(
        got[0].json["answer"], "no",
        "a plain confirm times out to no"
    );
    assert_eq!(
        got[1].json["answer"],
        Value::Null,
        "a select without a default answers nothing"
    );
    assert!(
        agent.answer_attempts() >= 3,
        "the refused POST was tried again"
    );
    let shown = get_ask(&app, t, "c", 0).await;
    assert_eq!(shown.json["state"], "timed_out", "{}", shown.text);
    let late = press(&app, "ev-c", "ou_alice", t, "c", "yes").await;
    assert_eq!(toast(&late), "This question is closed.");
    let unknown = get_ask(&app, t, "nope", 0).await;
    assert_eq!((unknown.status, unknown.code()), (404, "unknown_ask"));
    agent.open();
    assert_eq!(app.turn_ended("om_wait").await.state, "succeeded");
    app.stop().await.expect("clean stop");
}
both_backends!(
    an_ask_past_its_deadline_takes_its_default_and_is_delivered,
    timeouts
);
