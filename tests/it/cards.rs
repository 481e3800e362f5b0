//! Streaming answers in a card, and the card's buttons: an OpenAI-compatible fake that
//! streams (and can stall), the fake Open API receiving the card and its updates, and
//! signed `card.action.trigger` callbacks.

use std::sync::atomic::Ordering;

use serde_json::{Value, json};

use crate::{
    both_backends,
    support::{
        Signer, TestApp, TestDb,
        cards::{press, press_legacy, streaming, until},
        config,
        fake_feishu::FakeFeishu,
        fake_openai::FakeOpenAi,
        feishu::Msg,
    },
};

fn coder() -> Signer {
    Signer::coder()
}

/// The current session id of a planner session.
async fn session_id(app: &TestApp, key: &str) -> String {
    app.state
        .store
        .session("planner", key)
        .await
        .expect("store answers")
        .expect("the session exists")
        .session_id
}

fn button_values(card: &Value) -> Vec<Value> {
    card["body"]["elements"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["tag"] == "button")
        .map(|b| b["behaviors"][0]["value"].clone())
        .collect()
}

async fn streamed_answer(db: TestDb) {
    let fake = FakeFeishu::planner().await;
    let llm = FakeOpenAi::start(vec!["Hello".into(), " wide".into(), " world".into()]).await;
    llm.hold_after(1);
    let mut app = TestApp::spawn(config(&streaming(&db, &fake, &llm, ""))).await;
    let root = Msg::group("om_root", "We need a greeting");
    app.route(&root).await;
    app.route_as("coder", &coder(), &root).await;
    let ask = Msg::group("om_q", "say hello")
        .at_bot()
        .in_thread("om_root");
    app.route_as("coder", &coder(), &ask).await;
    app.route(&ask).await;

    // The card is posted in the thread at once, as a CardKit entity, with a stop
    // button for this turn.
    until(&fake, || !fake.state.sent.lock().expect("lock").is_empty()).await;
    let turn = app.turn_of("om_q").await;
    let (target, body) = fake.state.sent.lock().expect("lock")[0].clone();
    assert_eq!(target, "om_q");
    assert_eq!(body["msg_type"], "interactive");
    assert_eq!(body["reply_in_thread"], true);
    let card_message = "om_bot_reply_1";
    let entity = fake.state.entity_of(card_message).expect("sent by card_id");
    let card = fake.state.shown_card(card_message).expect("a card");
    assert_eq!(card["config"]["update_multi"], true);
    assert_eq!(card["config"]["streaming_mode"], true);
    assert_eq!(
        button_values(&card),
        [json!({"action": "stop", "turn_id": turn.turn_id})]
    );

    // The first piece shows while the model stalls; then the rest, and the final text.
    until(&fake, || {
        fake.state.entity_text(&entity).as_deref() == Some("Hello")
    })
    .await;
    llm.release();
    let row = app.turn_ended("om_q").await;
    assert_eq!(row.state, "succeeded", "{:?}", row.error);
    assert_eq!(row.output.as_deref(), Some("Hello wide world"));
    assert_eq!(row.reply_message_id.as_deref(), Some(card_message));
    let output = app.planner_outputs().await;
    let said = output
        .iter()
        .map(|r| Some(r.created_at.millis()))
        .collect::<Vec<_>>();
    assert_eq!(
        said,
        [fake.state.created_at(card_message)],
        "the answer sits where Feishu put its card"
    );
    assert_eq!(
        fake.state.entity_text(&entity).as_deref(),
        Some("Hello wide world")
    );
    // Every operation on the card came in order (the fake refuses a sequence that does
    // not grow) and within its limits.
    assert!(
        fake.state
            .card_ops
            .lock()
            .expect("lock")
            .iter()
            .all(|op| op.refused.is_none())
    );
    assert!(fake.state.violations.lock().expect("lock").is_empty());
    let last = fake.state.shown_card(card_message).expect("a card");
    assert_eq!(last["config"]["streaming_mode"], false);
    assert_eq!(
        button_values(&last),
        [json!({"action": "new_session", "turn_id": turn.turn_id})]
    );
    assert_eq!(
        fake.state.sent.lock().expect("lock").len(),
        1,
        "one message: the card"
    );

    // The model got the prompt; the final text is what the next bot sees.
    let requests = llm.requests(1).await;
    assert_eq!(requests[0].body["stream"], true);
    let build = Msg::group("om_build", "build it")
        .mentioning("ou_bot_coder", "Coder")
        .in_thread("om_root");
    app.route(&build).await;
    assert_eq!(app.ask_as("coder", &coder(), &build).await, "answered");
    let e = app.explain("coder", "om_root", Some("om_build")).await;
    let prompt = e.json["prompt_preview"].as_str().unwrap_or_default();
    assert!(
        prompt.contains("planner (agent): Hello wide world"),
        "{prompt}"
    );

    // A second turn in the same session gets the first as history.
    let again = Msg::group("om_q2", "and again")
        .at_bot()
        .in_thread("om_root");
    llm.release();
    assert_eq!(app.ask(&again).await, "answered");
    let requests = llm.requests(2).await;
    let messages = requests[1].body["messages"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(messages.len(), 3, "{messages:?}");
    assert_eq!(messages[0], json!({"role": "user", "content": "say hello"}));
    assert_eq!(
        messages[1],
        json!({"role": "assistant", "content": "Hello wide world"})
    );
    assert!(
        messages[2]["content"]
            .as_str()
            .unwrap_or_default()
            .ends_with("and again")
    );
    app.stop().await.expect("clean stop");
}
both_backends!(
    a_streamed_answer_grows_in_a_card_and_its_final_text_is_recorded,
    streamed_answer
);

async fn buttons(db: TestDb) {
    let fake = FakeFeishu::planner().await;
    let llm = FakeOpenAi::start(vec!["Working".into(), " on it".into()]).await;
    llm.hold_after(1);
    let text = streaming(&db, &fake, &llm, "allow_users = [\"ou_alice\", \"ou_bob\"]");
    let mut app = TestApp::spawn(config(&text)).await;
    let a = Msg::group("om_a", "task a").at_bot().in_thread("om_root_a");
    let b = Msg::group("om_b", "task b")
        .at_bot()
        .in_thread("om_root_b")
        .by("ou_bob");
    app.route(&a).await;
    app.route(&b).await;
    llm.requests(2).await;
    until(&fake, || fake.state.sent.lock().expect("lock").len() == 2).await;
    let (ta, tb) = (app.turn_of("om_a").await, app.turn_of("om_b").await);
    let card_a = ta.card_message_id.clone().expect("card posted");
    let entity_a = ta.card_id.clone().expect("a CardKit card");
    until(&fake, || {
        fake.state.entity_text(&entity_a).as_deref() == Some("Working")
    })
    .await;

    // Someone who may not invoke the bot cannot stop it.
    let refused = press(&app, "ou_mallory", "stop", &ta.turn_id, &card_a).await;
    assert_eq!(refused.status, 200);
    assert_eq!(refused.json["toast"]["type"], "error", "{}", refused.text);
    assert_eq!(app.turn_of("om_a").await.state, "running");

    // The stop button answers at once while the model is stalled, and stops only A.
    let stopped = press(&app, "ou_alice", "stop", &ta.turn_id, &card_a).await;
    assert_eq!(stopped.json["toast"]["type"], "success", "{}", stopped.text);
    let row = app.turn_ended("om_a").await;
    assert_eq!(
        (row.state.as_str(), row.error.as_deref()),
        ("cancelled", Some("stopped by the user"))
    );
    llm.client_gone().await;
    assert_eq!(
        fake.state.entity_text(&entity_a).as_deref(),
        Some("Working")
    );
    // The card is closed after the turn's state is written.
    until(&fake, || {
        fake.state
            .shown_card(&card_a)
            .is_some_and(|c| c.to_string().contains("Stopped."))
    })
    .await;
    assert_eq!(app.turn_of("om_b").await.state, "running", "B is untouched");
    let report = app
        .client
        .get(format!("{}/explain/om_root_a?profile=planner", app.base))
        .bearer_auth(crate::support::ADMIN)
        .header("accept", "text/plain")
        .send()
        .await
        .expect("explain answers")
        .text()
        .await
        .unwrap_or_default();
    assert!(
        report.contains(&format!(
            "turn         {} cancelled: stopped by the user",
            ta.turn_id
        )),
        "{report}"
    );
    assert!(
        app.recorded("planner", "om_a")
            .await
            .iter()
            .all(|t| t != "agent_output")
    );

    // Pressing stop on a finished answer changes nothing.
    let late = press(&app, "ou_alice", "stop", &ta.turn_id, &card_a).await;
    assert_eq!(late.json["toast"]["type"], "info", "{}", late.text);

    // /stop in B's thread stops B.
    let stop_b = Msg::group("om_stop_b", "/stop")
        .at_bot()
        .in_thread("om_root_b")
        .by("ou_bob");
    app.route(&stop_b).await;
    let row = app.turn_ended("om_b").await;
    assert_eq!(row.state, "cancelled");
    assert_eq!(tb.session_key, row.session_key);

    // "New session" resets exactly A's session.
    let key_a = ta.session_key.clone();
    let before_a = session_id(&app, &key_a).await;
    let before_b = session_id(&app, &tb.session_key).await;
    let fresh = press(&app, "ou_alice", "new_session", &ta.turn_id, &card_a).await;
    assert_eq!(fresh.json["toast"]["type"], "success", "{}", fresh.text);
    let after_a = session_id(&app, &key_a).await;
    let after_b = session_id(&app, &tb.session_key).await;
    assert_ne!(before_a, after_a);
    assert_eq!(before_b, after_b);

    // The legacy card URL works the same way.
    let legacy = press_legacy(&app, "ou_bob", "new_session", &tb.turn_id).await;
    assert_eq!(legacy.status, 200, "{}", legacy.text);
    assert_eq!(legacy.json["toast"]["type"], "success", "{}", legacy.text);
    let reset_b = session_id(&app, &tb.session_key).await;
    assert_ne!(reset_b, after_b);
    assert_eq!(
        fake.state.send_attempts.load(Ordering::SeqCst),
        3,
        "two cards and the /stop reply"
    );
    app.stop().await.expect("clean stop");
}
both_backends!(card_buttons_and_stop_act_only_on_their_own_session, buttons);
