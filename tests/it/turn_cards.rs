//! A webhook agent's turn in its card, against the fake Open API with its real limits:
//! the card opens with the agent's first event and shows the answer as it streams, the
//! tool calls in a collapsed panel, the status line with the time elapsed; events out of
//! order or repeated change nothing shown; a tool panel past the card's size is cut,
//! never refused; the Stop button stops the turn. Without `stream`, and for answers that
//! come without a card, the answer is a markdown card whose tables and code blocks
//! render; a reasoning model's thinking shows collapsed when asked for, never in the
//! answer.

use serde_json::Value;

use crate::support::gated_agent::post_event;
use crate::{
    both_backends,
    support::{
        TestApp, TestDb,
        app::config_toml,
        cards::{button_actions, post_within_3s, press, press_value_request, until},
        config,
        fake_feishu::FakeFeishu,
        fake_openai::{FakeOpenAi, THINKING},
        feishu::Msg,
        gated_agent::GatedAgent,
    },
};

/// Reports one event of `turn_id` as the planner's agent; its HTTP status.
async fn report(app: &TestApp, turn_id: &str, body: &str) -> u16 {
    let a = post_event(app, ("planner", turn_id), body, None).await;
    assert!(a.status == 200, "{body}: {} {}", a.status, a.text);
    a.status
}

/// The planner's agent is `agent`; its replies go through `fake`.
fn webhook_planner(db: &TestDb, fake: &FakeFeishu, agent: &GatedAgent, more: &str) -> String {
    config_toml(
        db,
        &format!("{}{}{more}", fake.profile_keys(), agent.config()),
    )
}

/// Asks the planner in a thread; the turn id once the agent holds it.
async fn held_turn(
    app: &mut TestApp,
    agent: &mut GatedAgent,
    message_id: &str,
    text: &str,
) -> String {
    app.route(&Msg::group(message_id, text).at_bot().in_thread("om_root"))
        .await;
    let turn = agent.next().await;
    turn["turn_id"].as_str().expect("turn id").to_string()
}

/// The card replying to `message_id` (its message and how the fake shows it now).
fn card_of(fake: &FakeFeishu, message_id: &str) -> (String, Value) {
    let card_message = card_message(fake, message_id).expect("a card was posted");
    let card = fake.state.shown_card(&card_message).expect("card shown");
    (card_message, card)
}

/// Every markdown content of `card`, joined by newlines.
fn texts(card: &Value) -> String {
    let mut out = Vec::new();
    collect(card, &mut out);
    out.join("\n")
}

fn collect(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            if m.get("tag").and_then(Value::as_str) == Some("markdown")
                && let Some(c) = m.get("content").and_then(Value::as_str)
            {
                out.push(c.to_string());
            }
            m.values().for_each(|x| collect(x, out));
        }
        Value::Array(a) => a.iter().for_each(|x| collect(x, out)),
        _ => {}
    }
}

/// The message of the card entity the fake was asked to send in reply to `message_id`.
fn card_message(fake: &FakeFeishu, message_id: &str) -> Option<String> {
    let card_id = fake
        .state
        .sent
        .lock()
        .expect("lock")
        .iter()
        .filter(|(to, _)| to == message_id)
        .find_map(|(_, body)| {
            let content: Value =
                serde_json::from_str(body["content"].as_str().unwrap_or_default()).ok()?;
            content["data"]["card_id"].as_str().map(str::to_string)
        })?;
    fake.state
        .cards
        .lock()
        .expect("lock")
        .get(&card_id)?
        .message_id
        .clone()
}

/// Waits until the card replying to `message_id` satisfies `done`.
async fn card_until(fake: &FakeFeishu, message_id: &str, done: impl Fn(&Value) -> bool) {
    until(fake, || {
        card_message(fake, message_id)
            .and_then(|m| fake.state.shown_card(&m))
            .is_some_and(|c| done(&c))
    })
    .await;
}

async fn a_webhook_turn_streams_into_its_card(db: TestDb) {
    let fake = FakeFeishu::planner().await;
    let mut agent = GatedAgent::start().await;
    let mut app = TestApp::spawn(config(&webhook_planner(&db, &fake, &agent, ""))).await;
    let turn = held_turn(&mut app, &mut agent, "om_q", "fix the build").await;
    assert!(
        fake.state.sent.lock().expect("lock").is_empty(),
        "no card before the agent shows anything"
    );

    report(
        &app,
        &turn,
        r#"{"seq":1,"kind":"text","text":"Looking","mode":"delta"}"#,
    )
    .await;
    report(&app, &turn, r#"{"seq":2,"kind":"tool","id":"c1","phase":"start","name":"cargo_build","input_summary":"--release","status":"running"}"#).await;
    report(
        &app,
        &turn,
        r#"{"seq":3,"kind":"status","text":"Building the crate"}"#,
    )
    .await;
    card_until(&fake, "om_q", |c| {
        let t = texts(c);
        t.contains("Tools · 1 call · 1 running")
            && t.contains("⏳ **cargo_build** — --release")
            && t.contains("Building the crate · ")
            && t.contains("Looking")
    })
    .await;
    let (_, card) = card_of(&fake, "om_q");
    assert_eq!(
        button_actions(&card),
        ["stop"],
        "a running card can be stopped"
    );
    let panel = &card["body"]["elements"][0];
    assert_eq!(
        (panel["tag"].as_str(), panel["expanded"].as_bool()),
        (Some("collapsible_panel"), Some(false))
    );

    // A repeat, and an older seq after a newer one: nothing they say is shown.
    report(&app, &turn, r#"{"seq":2,"kind":"tool","id":"c1","phase":"start","name":"cargo_build","input_summary":"--release","status":"running"}"#).await;
    report(
        &app,
        &turn,
        r#"{"seq":6,"kind":"status","text":"Running the tests"}"#,
    )
    .await;
    report(
        &app,
        &turn,
        r#"{"seq":5,"kind":"status","text":"an old line"}"#,
    )
    .await;
    report(&app, &turn, r#"{"seq":7,"kind":"tool","id":"c1","phase":"end","name":"cargo_build","input_summary":"--release","status":"ok","duration_ms":1500}"#).await;
    report(
        &app,
        &turn,
        r#"{"seq":8,"kind":"text","text":" at the logs","mode":"delta"}"#,
    )
    .await;
    card_until(&fake, "om_q", |c| {
        let t = texts(c);
        t.contains("✅ **cargo_build** — --release · 1.5 s") && t.contains("Looking at the logs")
    })
    .await;
    let (_, card) = card_of(&fake, "om_q");
    let t = texts(&card);
    assert!(t.contains("Running the tests"), "{t}");
    assert!(
        !t.contains("an old line"),
        "a stale event is not displayed: {t}"
    );

    agent.open();
    let row = app.turn_ended("om_q").await;
    assert_eq!(row.state, "succeeded", "{:?}", row.error);
    let (card_message, card) = card_of(&fake, "om_q");
    assert_eq!(
        row.reply_message_id.as_deref(),
        Some(card_message.as_str()),
        "answered in the card"
    );
    assert_eq!(
        fake.state.shown_text(&card_message).as_deref(),
        Some("answer: fix the build"),
        "the final answer is the agent's output"
    );
    let t = texts(&card);
    assert!(
        t.contains("✅ **cargo_build**"),
        "the tool panel stays: {t}"
    );
    assert!(
        !t.contains("Running the tests"),
        "no status line once done: {t}"
    );
    assert_eq!(button_actions(&card), ["new_session"]);
    let sent = fake.state.sent.lock().expect("lock").len();
    assert_eq!(sent, 1, "the card alone: no separate reply");
}

async fn a_tool_panel_past_the_cards_size_is_cut_never_refused(db: TestDb) {
    let fake = FakeFeishu::planner().await;
    let mut agent = GatedAgent::start().await;
    let mut app = TestApp::spawn(config(&webhook_planner(&db, &fake, &agent, ""))).await;
    let turn = held_turn(&mut app, &mut agent, "om_t", "scan everything").await;
    // 120 calls of about 1 KB each: four times what a card can hold.
    let summary = "路径/".repeat(140);
    for i in 1..=120 {
        let body = format!(
            r#"{{"seq":{i},"kind":"tool","id":"c{i}","phase":"end","name":"read_file_{i}","input_summary":"{summary}","status":"ok","duration_ms":{i}}}"#
        );
        report(&app, &turn, &body).await;
    }
    card_until(&fake, "om_t", |c| {
        let t = texts(c);
        t.contains("read_file_120") && t.contains("earlier calls not shown")
    })
    .await;
    agent.open();
    let row = app.turn_ended("om_t").await;
    assert_eq!(row.state, "succeeded", "{:?}", row.error);
    let (card_message, card) = card_of(&fake, "om_t");
    assert_eq!(
        fake.state.shown_text(&card_message).as_deref(),
        Some("answer: scan everything")
    );
    let t = texts(&card);
    assert!(
        t.contains("Tools · 120 calls") && t.contains("read_file_120"),
        "{t}"
    );
    assert!(!t.contains("read_file_1 "), "the oldest calls are left out");
    let too_large: Vec<(String, i64)> = fake
        .state
        .refusals
        .lock()
        .expect("lock")
        .iter()
        .filter(|(_, code)| [230025, 200860].contains(code))
        .cloned()
        .collect();
    assert!(
        too_large.is_empty(),
        "no card was refused for its size: {too_large:?}"
    );
}

async fn the_stop_button_stops_a_webhook_turn(db: TestDb) {
    let fake = FakeFeishu::planner().await;
    let mut agent = GatedAgent::start().await;
    let mut app = TestApp::spawn(config(&webhook_planner(&db, &fake, &agent, ""))).await;
    let turn = held_turn(&mut app, &mut agent, "om_s", "long job").await;
    report(
        &app,
        &turn,
        r#"{"seq":1,"kind":"status","text":"Working through the list"}"#,
    )
    .await;
    card_until(&fake, "om_s", |c| {
        texts(c).contains("Working through the list")
    })
    .await;
    let (card_message, _) = card_of(&fake, "om_s");
    let pressed = press(&app, "ou_alice", "stop", &turn, &card_message).await;
    assert_eq!(pressed.status, 200, "{}", pressed.text);
    let row = app.turn_ended("om_s").await;
    assert_eq!(row.state, "cancelled", "{:?}", row.error);
    card_until(&fake, "om_s", |c| texts(c).contains("*Stopped.*")).await;
    let (_, card) = card_of(&fake, "om_s");
    assert_eq!(button_actions(&card), ["new_session"]);
    agent.open();
}

async fn without_stream_events_are_kept_and_the_answer_is_a_markdown_reply(db: TestDb) {
    let fake = FakeFeishu::planner().await;
    let mut agent = GatedAgent::start().await;
    let more = "stream = false\n";
    let mut app = TestApp::spawn(config(&webhook_planner(&db, &fake, &agent, more))).await;
    let request = "| name | size |\n|---|---|\n| a.rs | 10 |\n\n```rust\nfn main() {\n    println!(\"hi\");\n}\n```";
    let turn = held_turn(&mut app, &mut agent, "om_m", request).await;
    report(
        &app,
        &turn,
        r#"{"seq":1,"kind":"status","text":"quietly working"}"#,
    )
    .await;
    agent.open();
    let row = app.turn_ended("om_m").await;
    assert_eq!(row.state, "succeeded", "{:?}", row.error);
    assert!(row.card_message_id.is_none(), "no card without stream");
    let stored = app.state.store.turn_events(&turn).await.expect("events");
    assert_eq!(stored.len(), 1, "the event is kept all the same");
    let sent = fake.state.sent.lock().expect("lock").clone();
    assert_eq!(sent.len(), 1, "{sent:?}");
    let (to, body) = &sent[0];
    assert_eq!(to, "om_m");
    assert_eq!(body["msg_type"], "interactive", "{body}");
    let card: Value =
        serde_json::from_str(body["content"].as_str().unwrap_or_default()).expect("card");
    assert_eq!(card["schema"], "2.0");
    let md = &card["body"]["elements"][0];
    assert_eq!(md["tag"], "markdown");
    assert_eq!(
        md["content"].as_str(),
        Some(format!("answer: {request}").as_str()),
        "the table and the code block arrive as markdown, unchanged"
    );
}

async fn thinking_shows_collapsed_only_when_asked_and_never_in_the_answer(db: TestDb) {
    for show in [true, false] {
        let fake = FakeFeishu::planner().await;
        let chunks = vec![
            format!("{THINKING}The user wants a plan. "),
            format!("{THINKING}Two steps will do."),
            "## Plan\n".to_string(),
            "1. Store it.".to_string(),
        ];
        let llm = FakeOpenAi::start(chunks).await;
        llm.hold_after(3);
        let more = format!(
            "{}\n[profiles.agent]\nkind = \"openai\"\nbase_url = \"{}\"\nmodel = \"m\"\n\
             stream_interval_ms = 200\nshow_thinking = {show}\n",
            fake.profile_keys(),
            llm.base
        );
        let mut app = TestApp::spawn(config(&config_toml(&db, &more))).await;
        let id = format!("om_think_{show}");
        app.route(&Msg::group(&id, "plan it").at_bot().in_thread("om_root"))
            .await;
        if show {
            card_until(&fake, &id, |c| {
                let t = texts(c);
                t.contains("Two steps will do.") && t.contains("## Plan")
            })
            .await;
            let (_, card) = card_of(&fake, &id);
            let panel = &card["body"]["elements"][0];
            assert_eq!(panel["tag"], "collapsible_panel");
            assert_eq!(panel["expanded"], false, "thinking is collapsed");
            assert_eq!(panel["header"]["title"]["content"], "Thinking");
        } else {
            card_until(&fake, &id, |c| texts(c).contains("## Plan")).await;
            let (_, card) = card_of(&fake, &id);
            assert!(
                !texts(&card).contains("Two steps"),
                "hidden unless asked for"
            );
        }
        llm.release();
        let row = app.turn_ended(&id).await;
        assert_eq!(row.state, "succeeded", "{:?}", row.error);
        assert_eq!(
            row.output.as_deref(),
            Some("## Plan\n1. Store it."),
            "thinking is never in the answer"
        );
        let (card_message, _) = card_of(&fake, &id);
        assert_eq!(
            fake.state.shown_text(&card_message).as_deref(),
            Some("## Plan\n1. Store it.")
        );
        app.stop().await.expect("stopped");
    }
}

/// The values of the answer buttons of `card`.
fn answer_values(card: &Value) -> Vec<String> {
    let mut out = Vec::new();
    fn walk(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::Object(m) => {
                let value = &m
                    .get("behaviors")
                    .and_then(|b| b.get(0))
                    .map(|b| b["value"].clone())
                    .unwrap_or_default();
                if value["action"] == "answer" {
                    out.push(value["value"].as_str().unwrap_or_default().to_string());
                }
                m.values().for_each(|x| walk(x, out));
            }
            Value::Array(a) => a.iter().for_each(|x| walk(x, out)),
            _ => {}
        }
    }
    walk(card, &mut out);
    out
}

async fn questions_are_answered_in_the_card_and_time_out_there(db: TestDb) {
    let fake = FakeFeishu::planner().await;
    let mut agent = GatedAgent::start().await;
    let mut app = TestApp::spawn(config(&webhook_planner(&db, &fake, &agent, ""))).await;
    let turn = held_turn(&mut app, &mut agent, "om_a", "ship it").await;
    report(&app, &turn, r#"{"seq":1,"kind":"ask","id":"deploy","prompt":"Deploy to staging?","style":"confirm","timeout_secs":600}"#).await;
    card_until(&fake, "om_a", |c| answer_values(c) == ["yes", "no"]).await;
    let (card_message, card) = card_of(&fake, "om_a");
    assert!(
        texts(&card).contains("**❓ Deploy to staging?**"),
        "{}",
        texts(&card)
    );
    let value = serde_json::json!({"action": "answer", "turn_id": turn, "ask_id": "deploy", "value": "yes"});
    let req = press_value_request("ev-answer", "ou_alice", value, &card_message);
    let pressed = post_within_3s(&app, "event", &req).await;
    assert_eq!(pressed.status, 200, "{}", pressed.text);
    card_until(&fake, "om_a", |c| {
        texts(c).contains("Answered: **yes** (by ou_alice)") && answer_values(c).is_empty()
    })
    .await;

    // A second question nobody answers: its default applies, and the card says so.
    report(&app, &turn, r#"{"seq":2,"kind":"ask","id":"notify","prompt":"Tell the team?","style":"select","options":["now","later"],"timeout_secs":1,"default":"later"}"#).await;
    card_until(&fake, "om_a", |c| {
        texts(c).contains("No answer in time; went with the default: **later**")
    })
    .await;
    agent.open();
    let row = app.turn_ended("om_a").await;
    assert_eq!(row.state, "succeeded", "{:?}", row.error);
    let (_, card) = card_of(&fake, "om_a");
    let t = texts(&card);
    assert!(
        t.contains("Answered: **yes** (by ou_alice)") && t.contains("default: **later**"),
        "{t}"
    );
}

both_backends!(streams_into_its_card, a_webhook_turn_streams_into_its_card);
both_backends!(
    tool_panel_is_cut,
    a_tool_panel_past_the_cards_size_is_cut_never_refused
);
both_backends!(stop_button, the_stop_button_stops_a_webhook_turn);
both_backends!(
    markdown_reply_without_stream,
    without_stream_events_are_kept_and_the_answer_is_a_markdown_reply
);
both_backends!(
    thinking,
    thinking_shows_collapsed_only_when_asked_and_never_in_the_answer
);
both_backends!(
    questions_in_the_card,
    questions_are_answered_in_the_card_and_time_out_there
);
