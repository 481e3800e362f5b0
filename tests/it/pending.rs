//! Pending group history (`group_chat_history_share`): observe vs invoke, consume once,
//! /status keeps, /new clears, isolation, recall, permissions, formats, restarts.

use crate::{
    both_backends,
    support::{Signer, TestApp, TestDb, config, config_toml, feishu::Msg},
};

fn history(db: &TestDb, more: &str) -> String {
    config_toml(
        db,
        &format!("thread_isolation = false\n{more}\n[context]\ngroup_chat_history_share = true\n"),
    )
}

/// The group-history lines of the latest decision for `message_id`.
async fn injected(app: &TestApp, root: &str, message_id: &str) -> Vec<String> {
    let e = app.explain("planner", root, Some(message_id)).await;
    assert_eq!(e.status, 200, "{}", e.text);
    let prompt = e.json["prompt_preview"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    match prompt.split_once("[Group messages]\n") {
        Some((_, rest)) => rest
            .split("\n[User request]")
            .next()
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect(),
        None => Vec::new(),
    }
}

async fn default_off(db: TestDb) {
    let mut app = TestApp::spawn(config(&config_toml(&db, "thread_isolation = false"))).await;
    app.route(&Msg::group("om_a", "A")).await;
    let q = Msg::group("om_q", "Q").at_bot();
    app.ask(&q).await;
    assert!(injected(&app, "om_q", "om_q").await.is_empty());
    assert_eq!(
        app.explain("planner", "om_q", Some("om_q")).await.json["mode"],
        "none"
    );
    app.stop().await.expect("clean stop");
}
both_backends!(pending_history_is_off_by_default, default_off);

async fn order_senders_consume_once(db: TestDb) {
    let mut app = TestApp::spawn(config(&history(&db, ""))).await;
    app.route(&Msg::group("om_a", "API returns 502")).await;
    app.route(&Msg::group("om_b", "staging too").by("ou_bob"))
        .await;
    app.route(&Msg::group("om_c", "about once a minute in prod"))
        .await;
    let q1 = Msg::group("om_q1", "what is going on").at_bot();
    assert_eq!(app.ask(&q1).await, "answered");
    assert_eq!(
        injected(&app, "om_q1", "om_q1").await,
        [
            "ou_alice: API returns 502",
            "ou_bob: staging too",
            "ou_alice: about once a minute in prod"
        ],
        "arrival order, senders kept"
    );
    app.route(&Msg::group("om_d", "D")).await;
    app.route(&Msg::group("om_e", "E")).await;
    let q2 = Msg::group("om_q2", "and now").at_bot();
    app.ask(&q2).await;
    assert_eq!(
        injected(&app, "om_q2", "om_q2").await,
        ["ou_alice: D", "ou_alice: E"],
        "consumed once"
    );
    app.stop().await.expect("clean stop");
}
both_backends!(
    history_is_injected_in_order_with_senders_and_consumed_once,
    order_senders_consume_once
);

async fn status_and_new(db: TestDb) {
    let mut app = TestApp::spawn(config(&history(&db, ""))).await;
    for id in ["om_a", "om_b", "om_c"] {
        app.route(&Msg::group(id, &id[3..].to_uppercase())).await;
    }
    app.route(&Msg::group("om_status", "/status").at_bot())
        .await;
    let q = Msg::group("om_q", "Q").at_bot();
    app.ask(&q).await;
    assert_eq!(
        injected(&app, "om_q", "om_q").await.len(),
        3,
        "/status kept the history"
    );

    for id in ["om_d", "om_e"] {
        app.route(&Msg::group(id, &id[3..].to_uppercase())).await;
    }
    app.route(&Msg::group("om_new", "/new").at_bot()).await;
    app.route(&Msg::group("om_f", "F")).await;
    let q2 = Msg::group("om_q2", "Q2").at_bot();
    app.ask(&q2).await;
    assert_eq!(
        injected(&app, "om_q2", "om_q2").await,
        ["ou_alice: F"],
        "/new cleared D and E"
    );
    app.stop().await.expect("clean stop");
}
both_backends!(
    status_keeps_and_new_clears_the_pending_history,
    status_and_new
);

async fn isolation(db: TestDb) {
    let text = config_toml(&db, "[context]\ngroup_chat_history_share = true\n");
    let mut app = TestApp::spawn(config(&text)).await;
    app.route(&Msg::group("om_main_a", "main A")).await;
    app.route(&Msg::group("om_t", "thread root")).await;
    app.route(&Msg::group("om_t_c", "C").in_thread("om_t"))
        .await;
    app.route(&Msg::group("om_t_d", "D").in_thread("om_t"))
        .await;
    let q = Msg::group("om_t_q", "Q").at_bot().in_thread("om_t");
    app.ask(&q).await;
    assert_eq!(
        injected(&app, "om_t", "om_t_q").await,
        ["ou_alice: C", "ou_alice: D"],
        "the thread sees only its scope"
    );
    app.stop().await.expect("clean stop");
}
both_backends!(
    thread_isolation_keeps_main_chat_history_out_of_threads,
    isolation
);

async fn recall_and_permissions(db: TestDb) {
    let mut app = TestApp::spawn(config(&history(&db, "allow_users = [\"ou_boss\"]"))).await;
    app.route(&Msg::group("om_a", "password is hunter2")).await;
    app.route(&Msg::group("om_b", "observed from alice")).await;
    let a = app
        .event(&Signer::default().recall("om_a", "oc_group"))
        .await;
    assert_eq!(a.status, 200);
    assert_eq!(app.settled("ev-recall-om_a").await, "done");
    // Alice may be observed but not invoke.
    app.route(&Msg::group("om_alice_q", "do it").at_bot()).await;
    assert_eq!(
        app.verdict("planner", "om_alice_q").await.1,
        "user_not_allowed"
    );
    let q = Msg::group("om_q", "summarize").at_bot().by("ou_boss");
    app.ask(&q).await;
    let lines = injected(&app, "om_q", "om_q").await;
    assert_eq!(
        lines,
        ["ou_alice: observed from alice", "ou_alice: do it"],
        "recalled skipped; unauthorized discussion shared"
    );
    app.stop().await.expect("clean stop");
}
both_backends!(
    recalled_messages_leave_history_and_observation_never_grants_invocation,
    recall_and_permissions
);

async fn formats_and_restart(db: TestDb) {
    let text = history(&db, "");
    let mut app = TestApp::spawn(config(&text)).await;
    let post = serde_json::json!({"title": "", "content": [[{"tag": "text", "text": "post "}, {"tag": "a", "text": "link", "href": "https://e.x"}]]});
    app.route(&Msg::group("om_post", "").typed("post", post))
        .await;
    app.route(&Msg::group("om_text", "plain text")).await;
    app.stop().await.expect("clean stop");

    let mut app = TestApp::spawn(config(&text)).await;
    let q = Msg::group("om_q", "Q").at_bot();
    app.ask(&q).await;
    assert_eq!(
        injected(&app, "om_q", "om_q").await,
        ["ou_alice: post [link](https://e.x)", "ou_alice: plain text"],
        "text and post stay readable, and the history survived the restart"
    );
    app.stop().await.expect("clean stop");
}
both_backends!(
    text_and_post_history_survives_a_restart,
    formats_and_restart
);

async fn reply_all(db: TestDb) {
    let mut app = TestApp::spawn(config(&history(&db, "group_reply_all = true"))).await;
    let m = Msg::group("om_plain", "no mention here");
    assert_eq!(
        app.ask(&m).await,
        "answered",
        "with group_reply_all a plain message is dispatched at once"
    );
    assert_eq!(
        app.verdict("planner", "om_plain").await,
        ("invoked".into(), "reply_all".into())
    );
    app.stop().await.expect("clean stop");
}
both_backends!(group_reply_all_still_dispatches_plain_messages, reply_all);
