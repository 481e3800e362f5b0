//! Commands and sessions: what /status keeps, what /new clears, rotation, REST.

use crate::{
    both_backends,
    support::{TestApp, TestDb, config, config_toml, feishu::Msg},
};

async fn status_keeps_new_clears(db: TestDb) {
    let mut app = TestApp::spawn(config(&config_toml(&db, "thread_isolation = false"))).await;
    app.route(&Msg::group("om_a", "A")).await;
    app.route(&Msg::group("om_b", "B").by("ou_bob")).await;
    app.route(&Msg::group("om_c", "C")).await;

    app.route(&Msg::group("om_s1", "/status").at_bot()).await;
    let status = app.last_reply("planner").await;
    assert!(status.contains("pending group messages: 3"), "{status}");
    app.route(&Msg::group("om_s2", "/status").at_bot()).await;
    assert!(
        app.last_reply("planner")
            .await
            .contains("pending group messages: 3"),
        "/status does not consume"
    );

    let before = app.get("/sessions/group:oc_group").await.json["session_id"].clone();
    app.route(&Msg::group("om_new", "/new").at_bot()).await;
    assert!(
        app.last_reply("planner")
            .await
            .starts_with("New session started")
    );
    let after = app.get("/sessions/group:oc_group").await;
    assert_ne!(
        after.json["session_id"], before,
        "/new rotates the session id"
    );
    assert_eq!(after.json["topic_root_prompt_delivered"], false);

    app.route(&Msg::group("om_d", "D")).await;
    app.route(&Msg::group("om_s3", "/status").at_bot()).await;
    assert!(
        app.last_reply("planner")
            .await
            .contains("pending group messages: 1"),
        "/new cleared A, B, C but not D"
    );

    // Commands carry no context and are never forwarded as requests.
    for id in ["om_s1", "om_new"] {
        assert_eq!(app.recorded("planner", id).await, ["command"]);
    }
    app.stop().await.expect("clean stop");
}
both_backends!(
    status_keeps_pending_history_and_new_clears_it,
    status_keeps_new_clears
);

async fn help_and_unknown(db: TestDb) {
    let mut app = TestApp::spawn(config(&config_toml(&db, ""))).await;
    app.route(&Msg::group("om_help", "/help").at_bot()).await;
    assert!(app.last_reply("planner").await.contains("/status"));
    app.route(&Msg::group("om_deploy", "/deploy prod").at_bot())
        .await;
    let reply = app.last_reply("planner").await;
    assert!(
        reply.starts_with("Unknown command /deploy.") && reply.contains("/help"),
        "{reply}"
    );
    assert_eq!(
        app.recorded("planner", "om_deploy").await,
        ["command"],
        "not forwarded as a request"
    );
    app.route(&Msg::group("om_stop", "/stop").at_bot()).await;
    assert_eq!(
        app.last_reply("planner").await,
        "Nothing is running in this session."
    );
    app.route(&Msg::dm("om_sessions", "/sessions")).await;
    assert!(app.last_reply("planner").await.contains("dm:ou_alice → s_"));
    let replies = app
        .state
        .store
        .outbound("planner", 10)
        .await
        .expect("replies");
    assert!(
        replies
            .iter()
            .all(|r| r.kind == "command_reply" && r.reply_to.is_some())
    );
    app.stop().await.expect("clean stop");
}
both_backends!(
    help_unknown_commands_stop_and_sessions_are_answered,
    help_and_unknown
);

async fn sessions_rest(db: TestDb) {
    let mut app = TestApp::spawn(config(&config_toml(&db, ""))).await;
    app.route(&Msg::group("om_1", "first").at_bot()).await;
    app.route(&Msg::dm("om_2", "second")).await;
    let all = app.get("/sessions").await;
    assert_eq!(
        all.json["sessions"].as_array().map(Vec::len),
        Some(2),
        "{}",
        all.text
    );
    let group = app.get("/sessions?profile=planner&chat_id=oc_group").await;
    let s = &group.json["sessions"][0];
    assert_eq!(
        (s["session_key"].as_str(), s["root_msg_id"].as_str()),
        (Some("thread:oc_group:om_1"), Some("om_1"))
    );

    let key = "thread:oc_group:om_1";
    let before = app.get(&format!("/sessions/{key}")).await.json["session_id"].clone();
    let reset = app
        .client
        .delete(format!("{}/sessions/{key}", app.base))
        .bearer_auth(crate::support::ADMIN)
        .send()
        .await
        .expect("sent");
    assert_eq!(reset.status(), 200);
    let after = app.get(&format!("/sessions/{key}?profile=planner")).await;
    assert_ne!(after.json["session_id"], before);
    assert_eq!(app.get("/sessions/dm:nobody").await.code(), "not_found");
    assert_eq!(
        app.get("/sessions/x?profile=ghost").await.code(),
        "unknown_profile"
    );
    assert_eq!(app.get_anonymous("/sessions").await.status, 401);
    app.stop().await.expect("clean stop");
}
both_backends!(sessions_are_listed_read_and_reset_over_rest, sessions_rest);
