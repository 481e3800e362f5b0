//! Replies through the (fake) Feishu Open API: in the thread, idempotent, rate-limit aware.

use std::sync::atomic::Ordering;

use feishu_bridge::util::UnixMs;

use crate::{
    both_backends,
    support::{
        TestApp, TestDb,
        cards::until,
        config, config_toml,
        fake_feishu::{FakeFeishu, Storm},
        feishu::Msg,
    },
};

async fn replies_in_thread(db: TestDb) {
    let fake = FakeFeishu::planner().await;
    let text = config_toml(&db, &fake.profile_keys());
    let mut app = TestApp::spawn(config(&text)).await;
    let ask = Msg::group("om_q", "hello").at_bot().in_thread("om_root");
    assert_eq!(app.ask(&ask).await, "answered");
    {
        let sent = fake.state.sent.lock().expect("lock");
        assert_eq!(sent.len(), 1);
        let (target, body) = &sent[0];
        assert_eq!(target, "om_q", "replied to the triggering message");
        assert_eq!(body["reply_in_thread"], true);
        assert_eq!(body["uuid"].as_str().map(str::len), Some(32));
        assert!(
            body["content"]
                .as_str()
                .unwrap_or_default()
                .contains("(echo) planner received")
        );
    }
    // The answer is recorded as agent_output under the id Feishu gave the reply.
    assert!(
        app.planner_outputs()
            .await
            .iter()
            .any(|r| r.message_id == "om_bot_reply_1")
    );

    // Rate limits are retried (HTTP 429, and 230020 in the body); the token is cached.
    fake.state
        .failures
        .lock()
        .expect("lock")
        .extend([(429, 99991400), (400, 230020)]);
    let again = Msg::group("om_q2", "again").at_bot().in_thread("om_root");
    assert_eq!(app.ask(&again).await, "answered");
    assert_eq!(fake.state.sent.lock().expect("lock").len(), 2);
    assert_eq!(
        fake.state.token_requests.load(Ordering::SeqCst),
        1,
        "one token for everything"
    );

    // A request recalled meanwhile (230011) is terminal: the answer is tried once, and
    // no further call goes to that message (not even the failure notice).
    let before = fake.state.send_attempts.load(Ordering::SeqCst);
    fake.state
        .failures
        .lock()
        .expect("lock")
        .extend([(400, 230011), (400, 230011)]);
    let gone = Msg::group("om_q3", "recalled meanwhile")
        .at_bot()
        .in_thread("om_root");
    assert_eq!(app.ask(&gone).await, "failed");
    assert_eq!(
        fake.state.send_attempts.load(Ordering::SeqCst) - before,
        1,
        "the answer once; no retry, no notice to a recalled message"
    );
    app.stop().await.expect("clean stop");
}
both_backends!(
    answers_are_replied_in_the_thread_with_retries_on_rate_limits,
    replies_in_thread
);

async fn storm_outlasted(db: TestDb) {
    let fake = FakeFeishu::planner().await;
    let text = config_toml(&db, &fake.profile_keys());
    let mut app = TestApp::spawn(config(&text)).await;
    // Every reply is refused (429 / 99991400, reset in one second) until the storm ends,
    // which is after more refusals than a transport failure would be retried.
    *fake.state.storm.lock().expect("lock") = Some(Storm {
        path_contains: "/reply".into(),
        reset_secs: 1,
    });
    let ask = Msg::group("om_q", "hello").at_bot().in_thread("om_root");
    app.route(&ask).await;
    until(&fake, || {
        fake.state.storm_refusals.load(Ordering::SeqCst) >= 7
    })
    .await;
    *fake.state.storm.lock().expect("lock") = None;
    let row = app.turn_ended("om_q").await;
    assert_eq!(row.state, "succeeded", "{:?}", row.error);
    let sent = fake.state.sent.lock().expect("lock").clone();
    assert_eq!(sent.len(), 1, "answered once: {sent:?}");
    assert_eq!(sent[0].0, "om_q");
    assert!(
        fake.state.violations.lock().expect("lock").is_empty(),
        "every retry waited its reset"
    );
    app.stop().await.expect("clean stop");
}
both_backends!(
    an_answer_outlasts_a_rate_limit_storm_by_waiting_each_reset,
    storm_outlasted
);

async fn sent_answer_stamped(db: TestDb) {
    let fake = FakeFeishu::planner().await;
    // Feishu's clock, not the bridge's: the answer was created a minute from now.
    let feishu_time = feishu_bridge::util::now_ms() + 60_000;
    *fake.state.create_time.lock().expect("lock") = Some(feishu_time);
    let text = config_toml(&db, &fake.profile_keys());
    let mut app = TestApp::spawn(config(&text)).await;
    let ask = Msg::group("om_q", "hello").at_bot().in_thread("om_root");
    assert_eq!(app.ask(&ask).await, "answered");
    let outputs = app.planner_outputs().await;
    let stamped: Vec<_> = outputs
        .iter()
        .map(|r| (r.message_id.as_str(), r.created_at))
        .collect();
    assert_eq!(stamped, [("om_bot_reply_1", UnixMs(feishu_time))]);
    app.stop().await.expect("clean stop");
}
both_backends!(
    a_sent_answer_is_recorded_at_the_create_time_feishu_gave_it,
    sent_answer_stamped
);

async fn dry_run_records(db: TestDb) {
    let fake = FakeFeishu::planner().await;
    let text = config_toml(&db, &format!("{}dry_run = true", fake.profile_keys()));
    let mut app = TestApp::spawn(config(&text)).await;
    app.ask(&Msg::group("om_q", "hello").at_bot()).await;
    assert!(
        fake.state.sent.lock().expect("lock").is_empty(),
        "dry run sends nothing"
    );
    assert!(
        app.last_reply("planner").await.starts_with("(echo)"),
        "but records the reply"
    );
    app.stop().await.expect("clean stop");
}
both_backends!(
    dry_run_profiles_record_replies_instead_of_sending,
    dry_run_records
);

async fn private_chat_replies(db: TestDb) {
    let fake = FakeFeishu::planner().await;
    let text = config_toml(&db, &fake.profile_keys());
    let mut app = TestApp::spawn(config(&text)).await;
    assert_eq!(app.ask(&Msg::dm("om_dm_1", "hello")).await, "answered");
    app.route(&Msg::dm("om_dm_2", "/status")).await;
    let sent = fake.state.sent.lock().expect("lock").clone();
    assert_eq!(sent.len(), 2, "{sent:?}");
    for (target, body) in &sent {
        assert!(
            target.starts_with("om_dm_"),
            "a reply to the message: {target}"
        );
        assert_eq!(
            body["reply_in_thread"], false,
            "a private chat is one conversation: no thread per message"
        );
    }
    app.stop().await.expect("clean stop");
}
both_backends!(
    private_chat_answers_are_replies_in_the_chat_not_new_threads,
    private_chat_replies
);

async fn send_to_chat(db: TestDb) {
    use feishu_bridge::feishu_api::{
        FeishuClient,
        reply::{Content, Destination},
    };
    let fake = FakeFeishu::planner().await;
    let cfg = config(&config_toml(&db, &fake.profile_keys()));
    let client = FeishuClient::new(reqwest::Client::new(), &cfg.profiles[0], Default::default());
    let text_id = client
        .post(
            Destination::Chat("oc_group"),
            Content::Text("good morning"),
            "uuid-text-1",
        )
        .await
        .expect("sent");
    let card = serde_json::json!({"schema": "2.0", "body": {"elements": []}});
    let card_id = client
        .post(
            Destination::Chat("oc_group"),
            Content::Card(&card),
            "uuid-card-1",
        )
        .await
        .expect("sent");
    assert_ne!(text_id, card_id);
    // The same uuid again posts nothing new and answers the first message's id.
    let again = client
        .post(
            Destination::Chat("oc_group"),
            Content::Text("good morning"),
            "uuid-text-1",
        )
        .await
        .expect("sent");
    assert_eq!(again, text_id);
    let sent = fake.state.sent.lock().expect("lock").clone();
    assert_eq!(sent.len(), 2);
    assert_eq!(sent[0].0, "oc_group");
    assert_eq!(
        (sent[0].1["msg_type"].as_str(), sent[0].1["uuid"].as_str()),
        (Some("text"), Some("uuid-text-1"))
    );
    assert_eq!(sent[1].1["msg_type"], "interactive");
    let posted: serde_json::Value =
        serde_json::from_str(sent[1].1["content"].as_str().unwrap_or_default()).expect("card");
    assert_eq!(posted, card);
    assert_eq!(fake.state.token_requests.load(Ordering::SeqCst), 1);
}
both_backends!(messages_and_cards_can_be_sent_to_a_chat, send_to_chat);
