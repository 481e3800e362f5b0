//! What cards say besides the answer. A provider's error text in a failure note pings
//! nobody, on a card or in a notice (the fake counts every mention tag it accepts); and
//! a card is previewed in the chat list by its `config.summary`: "Working…" while it
//! runs, then the answer's first line.

use std::sync::atomic::Ordering;

use serde_json::json;

use crate::{
    both_backends,
    support::{
        TestApp, TestDb,
        cards::{streaming, until},
        config, config_toml,
        fake_feishu::FakeFeishu,
        fake_openai::FakeOpenAi,
        feishu::Msg,
    },
};

/// A provider's error message that would ping the whole group and a person.
const PINGING_ERROR: &str = "quota exceeded, ask <at id=all></at> or <at user_id=\"ou_x\">x</at>";

fn failing(llm: &FakeOpenAi) {
    let body = json!({"error": {"message": PINGING_ERROR, "type": "rate_limit"}});
    llm.fail_with(429, &body.to_string());
}

/// Every text the fake accepted from the bridge: messages sent, card updates, entities.
fn everything_accepted(fake: &FakeFeishu) -> String {
    let sent = fake.state.sent.lock().expect("lock").clone();
    let patches = fake.state.patches.lock().expect("lock").clone();
    let cards = fake.state.cards.lock().expect("lock").clone();
    format!("{sent:?} {patches:?} {cards:?}")
}

async fn failure_on_a_card(db: TestDb) {
    let fake = FakeFeishu::planner().await;
    let llm = FakeOpenAi::start(vec!["unused".into()]).await;
    failing(&llm);
    let mut app = TestApp::spawn(config(&streaming(&db, &fake, &llm, ""))).await;
    let ask = Msg::group("om_q", "go").at_bot().in_thread("om_root");
    app.route(&ask).await;
    let row = app.turn_ended("om_q").await;
    assert_eq!(row.state, "failed");
    assert!(
        row.error.as_deref().unwrap_or("").contains("<at id=all>"),
        "the record keeps what the provider said: {:?}",
        row.error
    );
    let card = row.card_message_id.clone().expect("a card");
    until(&fake, || {
        fake.state
            .shown_card(&card)
            .is_some_and(|c| c.to_string().contains("Failed: "))
    })
    .await;
    let shown = fake.state.shown_card(&card).expect("a card").to_string();
    assert!(
        shown.contains("quota exceeded, ask ＜at id=all>"),
        "{shown}"
    );
    let summary = fake.state.summary_of(&card).unwrap_or_default();
    assert!(summary.starts_with("Failed: "), "{summary}");
    assert!(
        fake.state.notified.lock().expect("lock").is_empty(),
        "nobody is pinged: {}",
        everything_accepted(&fake)
    );
    app.stop().await.expect("clean stop");
}
both_backends!(
    a_providers_error_text_on_a_failed_card_pings_nobody,
    failure_on_a_card
);

async fn failure_in_a_notice(db: TestDb) {
    let fake = FakeFeishu::planner().await;
    let llm = FakeOpenAi::start(vec!["unused".into()]).await;
    failing(&llm);
    let text = config_toml(
        &db,
        &format!(
            "{}\n[profiles.agent]\nkind = \"openai\"\nbase_url = \"{}\"\nmodel = \"m\"\nstream = false\n",
            fake.profile_keys(),
            llm.base
        ),
    );
    let mut app = TestApp::spawn(config(&text)).await;
    let ask = Msg::group("om_q", "go").at_bot().in_thread("om_root");
    app.route(&ask).await;
    assert_eq!(app.turn_ended("om_q").await.state, "failed");
    until(&fake, || !fake.state.sent.lock().expect("lock").is_empty()).await;
    let sent = fake.state.sent.lock().expect("lock").clone();
    let notice = sent[0].1["content"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(notice.contains("The agent did not answer"), "{notice}");
    assert!(notice.contains("＜at id=all>"), "{notice}");
    assert!(
        fake.state.notified.lock().expect("lock").is_empty(),
        "nobody is pinged: {}",
        everything_accepted(&fake)
    );
    app.stop().await.expect("clean stop");
}
both_backends!(
    a_providers_error_text_in_a_notice_pings_nobody,
    failure_in_a_notice
);

async fn summaries(db: TestDb) {
    let fake = FakeFeishu::planner().await;
    let answer = vec![
        "## 部署计划\n\n".into(),
        "先备份数据库，".into(),
        "再升级。".into(),
    ];
    let llm = FakeOpenAi::start(answer).await;
    llm.hold_after(1);
    let mut app = TestApp::spawn(config(&streaming(&db, &fake, &llm, ""))).await;

    // A CardKit card: "Working…" while it runs, then the answer's first line.
    let ask = Msg::group("om_q", "plan it").at_bot().in_thread("om_root");
    app.route(&ask).await;
    until(&fake, || fake.state.entity_of("om_bot_reply_1").is_some()).await;
    let running = fake.state.summary_of("om_bot_reply_1");
    assert_eq!(running.as_deref(), Some("Working…"));
    llm.release();
    let row = app.turn_ended("om_q").await;
    assert_eq!(row.state, "succeeded", "{:?}", row.error);
    let done = fake.state.summary_of("om_bot_reply_1");
    assert_eq!(done.as_deref(), Some("部署计划"));

    // A card posted as a message: the same, through its PATCH updates.
    fake.state.cardkit_refused.store(true, Ordering::SeqCst);
    let again = Msg::group("om_q2", "and again")
        .at_bot()
        .in_thread("om_root");
    app.route(&again).await;
    until(&fake, || fake.state.sent.lock().expect("lock").len() == 2).await;
    let posted = fake.state.sent.lock().expect("lock")[1].1.clone();
    let card: serde_json::Value =
        serde_json::from_str(posted["content"].as_str().unwrap_or_default()).unwrap_or_default();
    assert_eq!(card["config"]["summary"]["content"], "Working…");
    llm.release();
    let row = app.turn_ended("om_q2").await;
    assert_eq!(row.state, "succeeded", "{:?}", row.error);
    let message = row.reply_message_id.clone().expect("its card");
    assert_eq!(row.card_id, None);
    let done = fake.state.summary_of(&message);
    assert_eq!(done.as_deref(), Some("部署计划"));
    app.stop().await.expect("clean stop");
}
both_backends!(
    a_card_is_previewed_by_working_then_by_its_answers_first_line,
    summaries
);
