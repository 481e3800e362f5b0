//! Context in the order things were said: bots record a thread independently (and the
//! worker takes chats side by side), so what one bot recorded early can have been said
//! late. Every bot's view of the thread follows Feishu's create times.

use serde_json::Value;

use crate::{
    both_backends,
    support::{
        Signer, TestApp, TestDb, config, config_toml,
        fake_feishu::FakeFeishu,
        feishu::{CODER_PROFILE, Msg, now_ms},
    },
};

/// The planner sends through `fake`; the coder records its replies; thread context on.
fn planner_and_coder(db: &TestDb, fake: &FakeFeishu) -> String {
    config_toml(
        db,
        &format!(
            "{}{CODER_PROFILE}\n[context]\nshared_thread_enabled = true\n",
            fake.profile_keys()
        ),
    )
}

/// Each listed item's type and when it was said, in the order the report lists them.
fn listed(e: &Value, list: &str) -> Vec<(String, Option<i64>)> {
    e[list]
        .as_array()
        .into_iter()
        .flatten()
        .map(|s| {
            let kind = s["item_type"].as_str().unwrap_or_default().to_string();
            (kind, s["created_at"].as_i64())
        })
        .collect()
}

async fn answer_before_question(db: TestDb) {
    let fake = FakeFeishu::planner().await;
    // An hour ago, in steps of a second: well clear of the coder's own answers, which
    // are stamped when recorded.
    let t0 = now_ms() - 3_600_000;
    // Feishu created the planner's answer after the question it answers.
    *fake.state.create_time.lock().expect("lock") = Some(t0 + 2_000);
    let mut app = TestApp::spawn(config(&planner_and_coder(&db, &fake))).await;
    let coder = Signer::coder();

    let root = Msg::group("om_root", "We need an H5 snake game").at(t0);
    app.route(&root).await;
    app.route_as("coder", &coder, &root).await;
    // The planner is asked and answers before the coder has recorded the question.
    let question = Msg::group("om_q", "what is the first milestone?")
        .at_bot()
        .in_thread("om_root")
        .at(t0 + 1_000);
    assert_eq!(app.ask(&question).await, "answered");
    app.route_as("coder", &coder, &question).await;

    let answer_record = app.state.store.message_events("om_bot_reply_1").await;
    let question_records = app.state.store.message_events("om_q").await;
    let answer_id = answer_record.expect("rows")[0].id;
    let coders_question = question_records
        .expect("rows")
        .into_iter()
        .find(|r| r.bot_profile == "coder")
        .expect("the coder's record of the question");
    assert!(
        answer_id < coders_question.id,
        "the answer was recorded first"
    );

    let build = Msg::group("om_build", "build the first milestone")
        .mentioning("ou_bot_coder", "Coder")
        .in_thread("om_root")
        .at(t0 + 3_000);
    app.route(&build).await;
    assert_eq!(app.ask_as("coder", &coder, &build).await, "answered");

    let e = app.explain("coder", "om_root", Some("om_build")).await;
    assert_eq!(e.status, 200, "{}", e.text);
    let said = |kind: &str, at: Option<i64>| (kind.to_string(), at);
    assert_eq!(
        listed(&e.json, "selected"),
        [
            said("topic_root_block", None),
            said("human_message", Some(t0 + 1_000)),
            said("agent_output", Some(t0 + 2_000)),
        ],
        "question before answer: {}",
        e.text
    );
    assert_eq!(
        listed(&e.json, "excluded"),
        [said("topic_root", Some(t0))],
        "{}",
        e.text
    );
    let prompt = e.json["prompt_preview"].as_str().unwrap_or_default();
    let asked = prompt.find("what is the first milestone?");
    let answered = prompt.find("planner (agent): ");
    assert!(
        matches!((asked, answered), (Some(q), Some(a)) if q < a),
        "{prompt}"
    );
    app.stop().await.expect("clean stop");
}
both_backends!(
    an_answer_recorded_before_its_question_still_comes_after_it,
    answer_before_question
);
