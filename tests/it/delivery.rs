//! Replies against a fake Open API that keeps the real tenant's rules: chats that refuse
//! replies in thread, aggregated messages that refuse one, uuids kept for an hour
//! whatever the content, answers lost on the way back, gateways answering 5xx, and
//! mention tags that would ping people.

use std::sync::atomic::Ordering;

use feishu_bridge::{
    feishu_api::outbound::{FeishuOutbound, Format, Outbound, Reply},
    store::ReplyKind,
};
use serde_json::Value;

use crate::{
    both_backends,
    support::{
        TestApp, TestDb, config, config_toml, fake_feishu::FakeFeishu, fake_openai::FakeOpenAi,
        feishu::Msg,
    },
};

/// The text of a sent message's content (text, or a card's markdown).
fn shown(body: &Value) -> String {
    body["content"].as_str().unwrap_or_default().to_string()
}

/// How many requests the fake refused with `code`.
fn refused(fake: &FakeFeishu, code: i64) -> usize {
    let refusals = fake.state.refusals.lock().expect("lock");
    refusals.iter().filter(|(_, c)| *c == code).count()
}

async fn no_thread(db: TestDb) {
    let fake = FakeFeishu::planner().await;
    let mut app = TestApp::spawn(config(&config_toml(&db, &fake.profile_keys()))).await;
    fake.state
        .no_thread
        .lock()
        .expect("lock")
        .extend(["om_q".to_string(), "om_q2".to_string()]);
    let ask = Msg::group("om_q", "hello").at_bot().in_thread("om_root");
    assert_eq!(app.ask(&ask).await, "answered");
    {
        let sent = fake.state.sent.lock().expect("lock");
        assert_eq!(sent.len(), 1, "the answer, once");
        let (target, body) = &sent[0];
        assert_eq!(target, "om_q");
        assert_eq!(body["reply_in_thread"], false, "quoted in the chat instead");
        assert!(shown(body).contains("(echo) planner received"));
    }
    assert_eq!(refused(&fake, 230071), 1);
    let row = app.turn_ended("om_q").await;
    assert_eq!(row.state, "succeeded", "{:?}", row.error);
    assert_eq!(row.reply_message_id.as_deref(), Some("om_bot_reply_1"));

    // Once learned, the chat's next answer goes to the chat at once.
    let again = Msg::group("om_q2", "again").at_bot().in_thread("om_root");
    assert_eq!(app.ask(&again).await, "answered");
    assert_eq!(refused(&fake, 230071), 1, "not asked for a thread again");
    assert_eq!(fake.state.sent.lock().expect("lock").len(), 2);
    app.stop().await.expect("clean stop");
}
both_backends!(
    a_chat_without_thread_replies_still_gets_its_answer,
    no_thread
);

async fn aggregated_message(db: TestDb) {
    let fake = FakeFeishu::planner().await;
    let mut app = TestApp::spawn(config(&config_toml(&db, &fake.profile_keys()))).await;
    fake.state
        .aggregated
        .lock()
        .expect("lock")
        .insert("om_merged".to_string());
    // The request is an aggregated message: its answer goes to the chat.
    let merged = Msg::group("om_merged", "hello")
        .at_bot()
        .in_thread("om_root");
    assert_eq!(app.ask(&merged).await, "answered");
    assert_eq!(refused(&fake, 230072), 1);
    {
        let sent = fake.state.sent.lock().expect("lock");
        assert_eq!(sent.len(), 1, "the answer, once");
        assert_eq!(sent[0].0, "om_merged");
        assert_eq!(sent[0].1["reply_in_thread"], false, "quoted in the chat");
    }

    // That said nothing about the chat: the next request there is answered in thread.
    let next = Msg::group("om_q2", "again").at_bot().in_thread("om_root");
    assert_eq!(app.ask(&next).await, "answered");
    let sent = fake.state.sent.lock().expect("lock").clone();
    assert_eq!(sent.len(), 2);
    assert_eq!(sent[1].0, "om_q2");
    assert_eq!(sent[1].1["reply_in_thread"], true, "in its thread again");
    assert_eq!(refused(&fake, 230072), 1);
    assert_eq!(refused(&fake, 230071), 0);
    app.stop().await.expect("clean stop");
}
both_backends!(
    an_aggregated_message_is_answered_in_the_chat_and_the_next_in_its_thread,
    aggregated_message
);

async fn content_keyed_uuids(db: TestDb) {
    let fake = FakeFeishu::planner().await;
    let app = TestApp::spawn(config(&config_toml(&db, &fake.profile_keys()))).await;
    let outbound = FeishuOutbound::new(
        app.state.config.clone(),
        app.state.clients.clone(),
        app.state.store.clone(),
    );
    let reply = |text: &str| Reply {
        profile: "planner".into(),
        chat_id: "oc_group".into(),
        reply_to: Some("om_q".into()),
        in_thread: true,
        kind: ReplyKind::Notice,
        text: text.into(),
        turn_id: Some("turn_uuid_test".into()),
        format: Format::Text,
    };
    let first = outbound.send(reply("first")).await.expect("sent");
    let second = outbound.send(reply("second")).await.expect("sent");
    assert_ne!(
        first.message_id, second.message_id,
        "a different text is a new message, not a repeat"
    );
    let repeat = outbound.send(reply("first")).await.expect("sent");
    assert_eq!(
        repeat.message_id, first.message_id,
        "the same text posts once"
    );
    let sent = fake.state.sent.lock().expect("lock").clone();
    let texts: Vec<String> = sent.iter().map(|(_, b)| shown(b)).collect();
    assert_eq!(texts.len(), 2, "{texts:?}");
    assert!(
        texts[0].contains("first") && texts[1].contains("second"),
        "{texts:?}"
    );
    app.stop().await.expect("clean stop");
}
both_backends!(
    a_repeated_send_with_a_different_text_is_not_swallowed,
    content_keyed_uuids
);

async fn transport_retries(db: TestDb) {
    let fake = FakeFeishu::planner().await;
    let mut app = TestApp::spawn(config(&config_toml(&db, &fake.profile_keys()))).await;
    let uuids = || fake.state.attempt_uuids.lock().expect("lock").clone();

    // The answer is created but its acknowledgement is lost on the way back: the retry
    // carries the same uuid, and Feishu answers with the message it made.
    fake.state.lose_answers.store(1, Ordering::SeqCst);
    let ask = Msg::group("om_q", "hello").at_bot().in_thread("om_root");
    assert_eq!(app.ask(&ask).await, "answered");
    let seen = uuids();
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert_eq!(seen[0], seen[1], "retried with the same uuid");
    assert_eq!(
        fake.state.sent.lock().expect("lock").len(),
        1,
        "posted once"
    );
    assert_eq!(
        app.turn_of("om_q").await.reply_message_id.as_deref(),
        Some("om_bot_reply_1")
    );

    // A gateway answering 502 twice: the third attempt goes through.
    fake.state.server_errors.store(2, Ordering::SeqCst);
    let again = Msg::group("om_q2", "again").at_bot().in_thread("om_root");
    assert_eq!(app.ask(&again).await, "answered");
    let seen = uuids();
    assert_eq!(seen.len(), 5, "{seen:?}");
    assert!(seen[2..].iter().all(|u| *u == seen[2]), "{seen:?}");
    assert_eq!(fake.state.sent.lock().expect("lock").len(), 2);

    // Rate limits of the message API (11247, 230049) are waited out; an invalid tenant
    // token (99991664) is replaced once.
    let tokens = fake.state.token_requests.load(Ordering::SeqCst);
    fake.state.failures.lock().expect("lock").extend([
        (400, 11247),
        (400, 230049),
        (400, 99991664),
    ]);
    let third = Msg::group("om_q3", "third").at_bot().in_thread("om_root");
    assert_eq!(app.ask(&third).await, "answered");
    assert_eq!(fake.state.sent.lock().expect("lock").len(), 3);
    assert_eq!(
        fake.state.token_requests.load(Ordering::SeqCst),
        tokens + 1,
        "one fresh token"
    );
    app.stop().await.expect("clean stop");
}
both_backends!(
    transport_failures_and_server_errors_are_retried_with_the_same_uuid,
    transport_retries
);

async fn no_mentions(db: TestDb) {
    let fake = FakeFeishu::planner().await;
    let llm = FakeOpenAi::start(vec![
        "Done. Telling everyone: <at user_id=\"all\">所有人</at> and <at id=all></at>, \
         and the boss <at user_id=\"ou_boss\">Boss</at>."
            .into(),
    ])
    .await;
    let text = config_toml(
        &db,
        &format!(
            "{}\n[profiles.agent]\nkind = \"openai\"\nbase_url = \"{}\"\nmodel = \"m\"\nstream = false\n",
            fake.profile_keys(),
            llm.base
        ),
    );
    let mut app = TestApp::spawn(config(&text)).await;
    let ask = Msg::group("om_q", "announce it")
        .at_bot()
        .in_thread("om_root");
    assert_eq!(app.ask(&ask).await, "answered");
    let sent = fake.state.sent.lock().expect("lock").clone();
    assert_eq!(sent.len(), 1);
    let content = shown(&sent[0].1);
    assert!(
        content.contains("所有人") && content.contains("Boss"),
        "{content}"
    );
    assert!(
        fake.state.notified.lock().expect("lock").is_empty(),
        "nobody is pinged: {content}"
    );
    app.stop().await.expect("clean stop");
}
both_backends!(an_at_all_in_agent_output_notifies_no_one, no_mentions);
