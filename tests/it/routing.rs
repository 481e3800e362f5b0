//! From event to recorded fact: collection rules per workspace mode, normalization,
//! permissions, thread scopes, recall, and verdicts — over real HTTP, both databases.

use serde_json::json;

use crate::{
    both_backends,
    support::{
        Signer, TestApp, TestDb, config, config_toml,
        feishu::{BOT_OPEN_ID, Msg},
    },
};

const OWNER_ONLY: &str = r#"
[[workspaces]]
chat_id = "oc_owned"
mode = "owner_only"
owner = "ou_boss"
"#;

async fn shared_mode_collection(db: TestDb) {
    let mut app = TestApp::spawn(config(&config_toml(&db, ""))).await;
    // A topic root (any sender type), discussion in its thread, an @ request, a command,
    // this bot's own message and another app's message.
    app.route(&Msg::group("om_root", "We need to fix the login callback"))
        .await;
    app.route(
        &Msg::group("om_h1", "it fails after 11pm")
            .in_thread("om_root")
            .by("ou_bob"),
    )
    .await;
    app.route(
        &Msg::group("om_req", "find the root cause")
            .at_bot()
            .in_thread("om_root"),
    )
    .await;
    app.route(
        &Msg::group("om_cmd", "/status")
            .at_bot()
            .in_thread("om_root"),
    )
    .await;
    app.route(
        &Msg::group("om_own", "Here is my plan")
            .in_thread("om_root")
            .by_app(BOT_OPEN_ID),
    )
    .await;
    app.route(
        &Msg::group("om_app", "Reviewer notes")
            .in_thread("om_root")
            .by_app("ou_reviewer_bot"),
    )
    .await;
    app.route(&Msg::group("om_botroot", "Daily report").by_app("ou_reporter_bot"))
        .await;

    assert_eq!(app.recorded("planner", "om_root").await, ["topic_root"]);
    assert_eq!(app.recorded("planner", "om_h1").await, ["human_message"]);
    assert_eq!(app.recorded("planner", "om_req").await, ["user_request"]);
    assert_eq!(app.recorded("planner", "om_cmd").await, ["command"]);
    assert!(
        app.recorded("planner", "om_own").await.is_empty(),
        "own output never comes back as discussion"
    );
    assert!(
        app.recorded("planner", "om_app").await.is_empty(),
        "other apps never become human_message"
    );
    assert_eq!(
        app.recorded("planner", "om_botroot").await,
        ["topic_root"],
        "a root from a bot is still the topic root"
    );

    let events = app
        .state
        .store
        .thread_events(feishu_bridge::store::ProfileThread::new(
            "planner", "oc_group", "om_root",
        ))
        .await
        .expect("events");
    let root = &events[0];
    assert_eq!(
        (
            root.event_type.as_str(),
            root.actor_type.as_str(),
            root.item_text.as_deref()
        ),
        (
            "topic_root",
            "user",
            Some("We need to fix the login callback")
        )
    );
    let request = events
        .iter()
        .find(|e| e.event_type == "user_request")
        .expect("request");
    assert_eq!(
        (request.text.as_str(), request.item_id),
        ("find the root cause", None),
        "a request is never an item"
    );
    let bot_root = app
        .state
        .store
        .message_events("om_botroot")
        .await
        .expect("events");
    assert_eq!(
        bot_root[0].actor_type, "app",
        "the actual sender type is kept"
    );

    assert_eq!(
        app.verdict("planner", "om_root").await,
        ("observed".into(), "no_mention".into())
    );
    assert_eq!(
        app.verdict("planner", "om_h1").await,
        ("observed".into(), "no_mention".into())
    );
    assert_eq!(
        app.verdict("planner", "om_req").await,
        ("invoked".into(), "mention".into())
    );
    assert_eq!(
        app.verdict("planner", "om_cmd").await,
        ("invoked".into(), "command".into())
    );
    assert_eq!(
        app.verdict("planner", "om_own").await,
        ("ignored".into(), "own_message".into())
    );
    assert_eq!(
        app.verdict("planner", "om_app").await,
        ("ignored".into(), "bot_sender".into())
    );
    app.stop().await.expect("clean stop");
}
both_backends!(
    shared_mode_records_topic_roots_discussion_requests_and_commands,
    shared_mode_collection
);

async fn owner_only_collection(db: TestDb) {
    let mut app = TestApp::spawn(config(&config_toml(&db, OWNER_ONLY))).await;
    let owned = |id: &str, text: &str| Msg::group(id, text).in_chat("oc_owned");
    app.route(&owned("om_root", "Ship the H5 game").by("ou_boss"))
        .await;
    app.route(&owned("om_talk", "I think we should use canvas").in_thread("om_root"))
        .await;
    app.route(
        &owned("om_intruder", "delete the repo")
            .at_bot()
            .in_thread("om_root"),
    )
    .await;
    app.route(
        &owned("om_owner", "draft the plan")
            .at_bot()
            .in_thread("om_root")
            .by("ou_boss"),
    )
    .await;

    assert_eq!(app.recorded("planner", "om_root").await, ["topic_root"]);
    assert!(
        app.recorded("planner", "om_talk").await.is_empty(),
        "owner_only records no discussion"
    );
    assert!(app.recorded("planner", "om_intruder").await.is_empty());
    assert_eq!(app.recorded("planner", "om_owner").await, ["user_request"]);
    assert_eq!(
        app.verdict("planner", "om_talk").await,
        ("ignored".into(), "no_mention".into())
    );
    assert_eq!(
        app.verdict("planner", "om_intruder").await,
        ("ignored".into(), "not_owner".into())
    );
    assert_eq!(
        app.verdict("planner", "om_owner").await,
        ("invoked".into(), "mention".into())
    );
    app.stop().await.expect("clean stop");
}
both_backends!(
    owner_only_records_roots_and_the_owners_requests_only,
    owner_only_collection
);

async fn mention_normalization(db: TestDb) {
    let mut app = TestApp::spawn(config(&config_toml(&db, ""))).await;
    let ask = Msg::group("om_ask", "and @_user_3 review it")
        .mentioning("ou_alice2", "Alice 的 Planner")
        .at_bot();
    // Mentions were prefixed: text is "@_user_2 @_user_1 and @_user_3 review it".
    let mut ask = ask;
    ask.mentions.push(json!({"key": "@_user_3", "id": {"open_id": "ou_carol"}, "name": "Carol", "mentioned_type": "user"}));
    app.route(&ask).await;
    let rows = app
        .state
        .store
        .message_events("om_ask")
        .await
        .expect("events");
    assert_eq!(rows[0].text, "@Alice 的 Planner and @Carol review it");

    app.route(&Msg::group("om_all", "@_all standup now").in_thread("om_x"))
        .await;
    let rows = app
        .state
        .store
        .message_events("om_all")
        .await
        .expect("events");
    assert_eq!(
        (rows[0].event_type.as_str(), rows[0].text.as_str()),
        ("human_message", "@all standup now")
    );
    assert_eq!(
        app.verdict("planner", "om_all").await,
        ("observed".into(), "no_mention".into()),
        "@all is not a mention of this bot"
    );

    // Names learned from mentions label later discussion.
    app.route(
        &Msg::group("om_carol", "done")
            .in_thread("om_x")
            .by("ou_carol"),
    )
    .await;
    let rows = app
        .state
        .store
        .message_events("om_carol")
        .await
        .expect("events");
    assert_eq!(rows[0].author_label.as_deref(), Some("Carol"));
    let all = app
        .state
        .store
        .thread_events(feishu_bridge::store::ProfileThread::new(
            "planner", "oc_group", "om_x",
        ))
        .await
        .expect("events");
    assert!(
        all.iter()
            .all(|e| !e.text.contains("@_user") && !e.text.contains("@_all"))
    );
    app.stop().await.expect("clean stop");
}
both_backends!(
    mentions_are_resolved_to_names_and_at_all_is_not_a_mention,
    mention_normalization
);

async fn content_formats(db: TestDb) {
    let mut app = TestApp::spawn(config(&config_toml(&db, ""))).await;
    let post = json!({"title": "Plan", "content": [
        [{"tag": "text", "text": "see "}, {"tag": "a", "text": "the doc", "href": "https://example.com/d"}],
        [{"tag": "code_block", "language": "Rust", "text": "fn main() {}"}]
    ]});
    app.route(
        &Msg::group("om_post", "")
            .typed("post", post)
            .in_thread("om_t"),
    )
    .await;
    let wrapped =
        json!({"en_us": {"title": "", "content": [[{"tag": "text", "text": "wrapped post"}]]}});
    app.route(
        &Msg::group("om_wrapped", "")
            .typed("post", wrapped)
            .in_thread("om_t"),
    )
    .await;
    app.route(
        &Msg::group("om_img", "")
            .typed("image", json!({"image_key": "img_1"}))
            .in_thread("om_t"),
    )
    .await;
    app.route(
        &Msg::group("om_file", "")
            .typed("file", json!({"file_key": "f", "file_name": "spec.pdf"}))
            .in_thread("om_t"),
    )
    .await;

    let text_of = |rows: Vec<feishu_bridge::store::ContextEventRow>| rows[0].text.clone();
    let store = &app.state.store;
    assert_eq!(
        text_of(store.message_events("om_post").await.expect("rows")),
        "Plan\nsee [the doc](https://example.com/d)\n```rust\nfn main() {}\n```"
    );
    assert_eq!(
        text_of(store.message_events("om_wrapped").await.expect("rows")),
        "wrapped post"
    );
    assert_eq!(
        text_of(store.message_events("om_img").await.expect("rows")),
        "[image]"
    );
    assert_eq!(
        text_of(store.message_events("om_file").await.expect("rows")),
        "[file: spec.pdf]"
    );
    app.stop().await.expect("clean stop");
}
both_backends!(
    text_post_and_other_formats_become_plain_text,
    content_formats
);

async fn dms_stay_private(db: TestDb) {
    let mut app = TestApp::spawn(config(&config_toml(&db, ""))).await;
    app.route(&Msg::dm("om_dm", "my salary question")).await;
    assert_eq!(app.recorded("planner", "om_dm").await, ["user_request"]);
    assert_eq!(
        app.verdict("planner", "om_dm").await,
        ("invoked".into(), "dm".into())
    );
    let session = app.get("/sessions/dm:ou_alice").await;
    assert_eq!(
        (session.status, session.json["chat_type"].as_str()),
        (200, Some("p2p")),
        "{}",
        session.text
    );
    let group = app
        .state
        .store
        .sessions(None, Some("oc_group"))
        .await
        .expect("sessions");
    assert!(group.is_empty());
    let rows = app.state.store.message_events("om_dm").await.expect("rows");
    assert!(
        rows.iter().all(|r| r.item_id.is_none()),
        "a DM never becomes a context item"
    );

    let off = config(&config_toml(&db, "dm_enabled = false"));
    app.stop().await.expect("clean stop");
    let mut app = TestApp::spawn(off).await;
    app.route(&Msg::dm("om_dm2", "hello?")).await;
    assert_eq!(
        app.verdict("planner", "om_dm2").await,
        ("ignored".into(), "dm_disabled".into())
    );
    app.stop().await.expect("clean stop");

    let mut app = TestApp::spawn(config(&config_toml(&db, "group_enabled = false"))).await;
    app.route(&Msg::group("om_g", "anyone?").at_bot()).await;
    assert_eq!(
        app.verdict("planner", "om_g").await,
        ("ignored".into(), "group_disabled".into())
    );
    assert!(app.recorded("planner", "om_g").await.is_empty());
    app.stop().await.expect("clean stop");
}
both_backends!(
    private_chats_never_enter_workspace_context,
    dms_stay_private
);

async fn observe_vs_invoke(db: TestDb) {
    let extra = "allow_chats = [\"oc_group\"]\nallow_users = [\"ou_boss\"]";
    let mut app = TestApp::spawn(config(&config_toml(&db, extra))).await;
    app.route(
        &Msg::group("om_other", "elsewhere")
            .at_bot()
            .in_chat("oc_other"),
    )
    .await;
    app.route(&Msg::group("om_talk", "context from alice").in_thread("om_t"))
        .await;
    app.route(
        &Msg::group("om_alice_at", "do it")
            .at_bot()
            .in_thread("om_t"),
    )
    .await;
    app.route(
        &Msg::group("om_boss_at", "do it")
            .at_bot()
            .in_thread("om_t")
            .by("ou_boss"),
    )
    .await;

    assert_eq!(
        app.verdict("planner", "om_other").await,
        ("ignored".into(), "chat_not_allowed".into())
    );
    assert!(app.recorded("planner", "om_other").await.is_empty());
    assert_eq!(
        app.verdict("planner", "om_talk").await,
        ("observed".into(), "no_mention".into()),
        "observing needs no invoke right"
    );
    assert_eq!(
        app.verdict("planner", "om_alice_at").await,
        ("observed".into(), "user_not_allowed".into()),
        "observing never grants invocation"
    );
    assert!(
        !app.recorded("planner", "om_alice_at")
            .await
            .contains(&"user_request".to_string())
    );
    assert_eq!(
        app.verdict("planner", "om_boss_at").await,
        ("invoked".into(), "mention".into())
    );
    let sessions = app
        .state
        .store
        .sessions(Some("planner"), None)
        .await
        .expect("sessions");
    assert_eq!(sessions.len(), 1, "only the allowed user opened a session");
    app.stop().await.expect("clean stop");
}
both_backends!(
    allow_chats_decides_observation_and_allow_users_invocation,
    observe_vs_invoke
);

async fn fail_closed(db: TestDb) {
    let text = config_toml(&db, "").replace(&format!("bot_open_id = \"{BOT_OPEN_ID}\"\n"), "");
    let mut app = TestApp::spawn(config(&text)).await;
    app.route(&Msg::group("om_talk", "discussion").in_thread("om_t"))
        .await;
    app.route(&Msg::group("om_at", "do it").at_bot().in_thread("om_t"))
        .await;
    assert_eq!(
        app.verdict("planner", "om_talk").await,
        ("ignored".into(), "bot_identity_unknown".into())
    );
    assert_eq!(
        app.verdict("planner", "om_at").await,
        ("ignored".into(), "bot_identity_unknown".into())
    );
    assert!(
        app.recorded("planner", "om_talk").await.is_empty(),
        "nothing captured while the identity is unknown"
    );
    app.route(&Msg::dm("om_dm", "hi")).await;
    assert_eq!(
        app.verdict("planner", "om_dm").await.0,
        "invoked",
        "private chats need no mention detection"
    );
    app.stop().await.expect("clean stop");
}
both_backends!(
    group_capture_fails_closed_when_the_bot_identity_is_unknown,
    fail_closed
);

async fn thread_scopes(db: TestDb) {
    let mut app = TestApp::spawn(config(&config_toml(&db, ""))).await;
    app.route(&Msg::group("om_main", "main chat").at_bot())
        .await;
    app.route(
        &Msg::group("om_reply", "in the thread")
            .at_bot()
            .in_thread("om_main"),
    )
    .await;
    app.route(
        &Msg::group("om_quote", "quoting")
            .at_bot()
            .quoting("om_main"),
    )
    .await;
    let scope = |rows: Vec<feishu_bridge::store::ContextEventRow>| {
        (
            rows[0].root_msg_id.clone(),
            rows[0].history_scope.clone(),
            rows[0].session_name.clone(),
        )
    };
    let store = &app.state.store;
    assert_eq!(
        scope(store.message_events("om_main").await.expect("rows")),
        (
            "om_main".into(),
            "chat:oc_group".into(),
            Some("thread:oc_group:om_main".into())
        )
    );
    assert_eq!(
        scope(store.message_events("om_reply").await.expect("rows")),
        (
            "om_main".into(),
            "thread:oc_group:om_main".into(),
            Some("thread:oc_group:om_main".into())
        )
    );
    assert_eq!(
        scope(store.message_events("om_quote").await.expect("rows")),
        (
            "om_quote".into(),
            "chat:oc_group".into(),
            Some("thread:oc_group:om_quote".into())
        ),
        "a quote-reply outside a thread forks no thread scope"
    );
    app.stop().await.expect("clean stop");

    let shared = config(&config_toml(&db, "thread_isolation = false"));
    let mut app = TestApp::spawn(shared).await;
    app.route(
        &Msg::group("om_reply2", "again")
            .at_bot()
            .in_thread("om_main"),
    )
    .await;
    let store = &app.state.store;
    assert_eq!(
        scope(store.message_events("om_reply2").await.expect("rows")),
        (
            "om_main".into(),
            "chat:oc_group".into(),
            Some("group:oc_group".into())
        )
    );
    app.stop().await.expect("clean stop");
}
both_backends!(thread_isolation_scopes_history_and_sessions, thread_scopes);

async fn recall_removes_text(db: TestDb) {
    let mut app = TestApp::spawn(config(&config_toml(&db, "thread_isolation = false"))).await;
    let secret = "the password is hunter2";
    app.route(&Msg::group("om_secret", secret).in_thread("om_t"))
        .await;
    app.route(&Msg::group("om_keep", "harmless").in_thread("om_t"))
        .await;
    app.route(&Msg::group("om_s1", "/status").at_bot()).await;
    assert!(
        app.last_reply("planner")
            .await
            .contains("pending group messages: 2")
    );

    let signer = Signer::default();
    let a = app.event(&signer.recall("om_secret", "oc_group")).await;
    assert_eq!(a.status, 200);
    assert_eq!(app.settled("ev-recall-om_secret").await, "done");

    for table_column in [
        ("thread_context_events", "text"),
        ("thread_context_items", "text"),
        ("inbox_events", "payload"),
    ] {
        let q = format!(
            "SELECT COUNT(*) FROM {} WHERE {} LIKE '%hunter2%'",
            table_column.0, table_column.1
        );
        assert_eq!(
            db.scalar(&q).await,
            0,
            "{table_column:?} still holds the recalled text"
        );
    }
    let rows = app
        .state
        .store
        .message_events("om_secret")
        .await
        .expect("rows");
    assert!(
        !rows.is_empty() && rows.iter().all(|r| r.recalled && r.text.is_empty()),
        "ids and the fact of the recall stay"
    );
    app.route(&Msg::group("om_s2", "/status").at_bot()).await;
    assert!(
        app.last_reply("planner")
            .await
            .contains("pending group messages: 1"),
        "recalled messages leave pending history"
    );

    // A late delivery of a recalled message is ignored.
    app.route(&Msg::group("om_secret2", secret).in_thread("om_t"))
        .await;
    app.event(&signer.recall("om_late", "oc_group")).await;
    assert_eq!(app.settled("ev-recall-om_late").await, "done");
    app.route(&Msg::group("om_late", secret).in_thread("om_t"))
        .await;
    assert_eq!(
        app.verdict("planner", "om_late").await,
        ("ignored".into(), "recalled".into())
    );
    assert!(app.recorded("planner", "om_late").await.is_empty());
    app.stop().await.expect("clean stop");
}
both_backends!(
    a_recall_removes_the_text_and_excludes_the_message,
    recall_removes_text
);

async fn verdict_for_unknown_message(db: TestDb) {
    let app = TestApp::spawn(config(&config_toml(&db, ""))).await;
    let a = app.get("/explain/message/om_never").await;
    assert_eq!((a.status, a.code()), (404, "not_found"));
    let a = app.get("/explain/message/om_never?profile=nobody").await;
    assert_eq!((a.status, a.code()), (404, "unknown_profile"));
    assert_eq!(
        app.get_anonymous("/explain/message/om_never").await.status,
        401
    );
    app.stop().await.expect("clean stop");
}
both_backends!(
    explain_message_answers_404_for_messages_never_received,
    verdict_for_unknown_message
);

async fn two_profiles(db: TestDb) {
    let extra = crate::support::feishu::CODER_PROFILE;
    let mut app = TestApp::spawn(config(&config_toml(&db, extra))).await;
    let coder = Signer::coder();
    let msg = Msg::group("om_both", "ask the coder")
        .mentioning("ou_bot_coder", "Coder")
        .in_thread("om_t");
    app.route(&msg).await;
    app.route_as("coder", &coder, &msg).await;
    let a = app.get("/explain/message/om_both").await;
    let verdicts: Vec<(String, String)> = a.json["verdicts"]
        .as_array()
        .expect("verdicts")
        .iter()
        .map(|v| {
            (
                v["profile"].as_str().unwrap_or_default().into(),
                v["verdict"].as_str().unwrap_or_default().into(),
            )
        })
        .collect();
    assert_eq!(
        verdicts,
        [
            ("coder".into(), "invoked".into()),
            ("planner".into(), "observed".into())
        ]
    );
    app.stop().await.expect("clean stop");
}
both_backends!(
    each_profile_gets_its_own_verdict_for_the_same_message,
    two_profiles
);

async fn identity_from_the_api(db: TestDb) {
    use std::sync::atomic::Ordering;

    use crate::support::fake_feishu::FakeFeishu;
    let fake = FakeFeishu::start("app-secret-1", BOT_OPEN_ID).await;
    let text = config_toml(
        &db,
        &format!(
            "api_base = \"{}\"\napp_secret = \"app-secret-1\"",
            fake.base
        ),
    )
    .replace(&format!("bot_open_id = \"{BOT_OPEN_ID}\"\n"), "");
    let mut app = TestApp::spawn(config(&text)).await;
    assert_eq!(
        app.state.identities.get("planner").as_deref(),
        Some(BOT_OPEN_ID),
        "resolved at start"
    );
    for i in 0..3 {
        app.route(
            &Msg::group(&format!("om_{i}"), "go")
                .at_bot()
                .in_thread("om_t"),
        )
        .await;
        assert_eq!(
            app.verdict("planner", &format!("om_{i}")).await.0,
            "invoked"
        );
    }
    assert_eq!(fake.state.token_requests.load(Ordering::SeqCst), 1);
    assert_eq!(
        fake.state.bot_info_requests.load(Ordering::SeqCst),
        1,
        "never asked per message"
    );
    app.stop().await.expect("clean stop");

    // A wrong secret: the identity stays unknown and capture fails closed.
    let wrong = text.replace("app_secret = \"app-secret-1\"", "app_secret = \"wrong\"");
    let mut app = TestApp::spawn(config(&wrong)).await;
    assert_eq!(app.state.identities.get("planner"), None);
    app.route(&Msg::group("om_x", "go").at_bot().in_thread("om_t"))
        .await;
    assert_eq!(
        app.verdict("planner", "om_x").await,
        ("ignored".into(), "bot_identity_unknown".into())
    );
    app.stop().await.expect("clean stop");
}
both_backends!(
    the_bot_identity_is_resolved_once_from_the_bot_info_api,
    identity_from_the_api
);
