//! Thread context: what each bot sees, end to end — signed events in, decisions out.

use serde_json::Value;

use crate::{
    both_backends,
    support::{Signer, TestApp, TestDb, config, config_toml, feishu::Msg},
};

const CODER: &str = crate::support::feishu::CODER_PROFILE;

fn coder() -> Signer {
    Signer::coder()
}

/// Two bots in one shared group with thread context on.
fn two_bots(db: &TestDb, more: &str) -> String {
    config_toml(
        db,
        &format!("{CODER}\n[context]\nshared_thread_enabled = true\n{more}"),
    )
}

/// Delivers a group message to both bots, as Feishu does for every bot in the chat.
async fn both(app: &mut TestApp, msg: &Msg) {
    app.route(msg).await;
    app.route_as("coder", &coder(), msg).await;
}

fn at_coder(id: &str, text: &str) -> Msg {
    Msg::group(id, text).mentioning("ou_bot_coder", "Coder")
}

fn selected(e: &Value) -> Vec<(String, String)> {
    e["selected"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|s| {
            (
                s["item_type"].as_str().unwrap_or_default().into(),
                s["author_label"].as_str().unwrap_or_default().into(),
            )
        })
        .collect()
}

fn excluded_reasons(e: &Value) -> Vec<String> {
    e["excluded"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|x| x["reason"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// The planner answers in the thread, then the coder is asked.
async fn planner_then_coder(app: &mut TestApp) {
    both(app, &Msg::group("om_root", "We need an H5 snake game")).await;
    both(
        app,
        &Msg::group("om_talk", "keep it small")
            .in_thread("om_root")
            .by("ou_bob"),
    )
    .await;
    let ask = Msg::group("om_plan", "draft a plan")
        .at_bot()
        .in_thread("om_root");
    app.route_as("coder", &coder(), &ask).await;
    assert_eq!(app.ask(&ask).await, "answered");
    let build = at_coder("om_build", "build it from the plan").in_thread("om_root");
    app.route(&build).await;
    assert_eq!(app.ask_as("coder", &coder(), &build).await, "answered");
}

async fn planner_output_reaches_coder(db: TestDb) {
    let mut app = TestApp::spawn(config(&two_bots(&db, ""))).await;
    planner_then_coder(&mut app).await;

    let e = app.explain("coder", "om_root", Some("om_build")).await;
    assert_eq!(e.status, 200, "{}", e.text);
    let sel = selected(&e.json);
    assert!(
        sel.contains(&("agent_output".into(), "planner (agent)".into())),
        "{sel:?}"
    );
    assert!(sel.contains(&("human_message".into(), "ou_bob".into())));
    assert_eq!(e.json["mode"], "thread_context");
    let prompt = e.json["prompt_preview"].as_str().unwrap_or_default();
    assert!(
        prompt.contains("planner (agent): (echo) planner received"),
        "{prompt}"
    );
    assert!(prompt.ends_with("[User request]\nbuild it from the plan"));
    // The coder's own request is never context of its own turn.
    assert!(
        !e.json["thread_context"]
            .as_str()
            .unwrap_or_default()
            .contains("build it from the plan")
    );

    // The planner never sees its own output fed back.
    let again = Msg::group("om_plan2", "refine it")
        .at_bot()
        .in_thread("om_root");
    app.route_as("coder", &coder(), &again).await;
    assert_eq!(app.ask(&again).await, "answered");
    let e = app.explain("planner", "om_root", Some("om_plan2")).await;
    let sel = selected(&e.json);
    assert!(
        !sel.iter()
            .any(|(t, l)| t == "agent_output" && l.starts_with("planner")),
        "{sel:?}"
    );
    assert!(sel.contains(&("agent_output".into(), "coder (agent)".into())));
    assert!(excluded_reasons(&e.json).contains(&"own_output".to_string()));
    app.stop().await.expect("clean stop");
}
both_backends!(
    planners_output_reaches_the_coder_in_the_same_thread,
    planner_output_reaches_coder
);

async fn multi_turn_outputs_trimmed(db: TestDb) {
    let mut app = TestApp::spawn(config(&two_bots(&db, "thread_context_limit = 3"))).await;
    both(&mut app, &Msg::group("om_root", "topic")).await;
    for i in 0..4 {
        let ask = Msg::group(&format!("om_p{i}"), &format!("round {i}"))
            .at_bot()
            .in_thread("om_root");
        app.route_as("coder", &coder(), &ask).await;
        assert_eq!(app.ask(&ask).await, "answered");
    }
    let build = at_coder("om_build", "go").in_thread("om_root");
    app.route(&build).await;
    app.ask_as("coder", &coder(), &build).await;
    let e = app.explain("coder", "om_root", Some("om_build")).await;
    let sel = selected(&e.json);
    // Four planner outputs and four requests were candidates; the limit keeps the newest 3.
    let outputs = sel.iter().filter(|(t, _)| t == "agent_output").count();
    assert!(
        outputs >= 1 && sel.iter().filter(|(t, _)| t != "topic_root_block").count() == 3,
        "{sel:?}"
    );
    assert_eq!(e.json["diagnostics"]["thread"]["cut_by"], "limit");
    assert!(
        excluded_reasons(&e.json)
            .iter()
            .filter(|r| *r == "limit")
            .count()
            >= 4
    );
    // Trimming is stable: explaining the same decision again gives the same answer.
    let again = app.explain("coder", "om_root", Some("om_build")).await;
    assert_eq!(again.json["selected"], e.json["selected"]);
    app.stop().await.expect("clean stop");
}
both_backends!(
    multi_turn_outputs_reach_the_coder_minus_the_trimmed_part,
    multi_turn_outputs_trimmed
);

async fn owner_only_owner_sees_planner(db: TestDb) {
    let more =
        "[[workspaces]]\nchat_id = \"oc_owned\"\nmode = \"owner_only\"\nowner = \"ou_boss\"\n";
    let mut app = TestApp::spawn(config(&two_bots(&db, more))).await;
    let owned = |m: Msg| m.in_chat("oc_owned");
    both(
        &mut app,
        &owned(Msg::group("om_root", "ship it").by("ou_boss")),
    )
    .await;
    both(
        &mut app,
        &owned(Msg::group("om_noise", "unauthorized idea: drop the tests").in_thread("om_root")),
    )
    .await;
    let plan = owned(
        Msg::group("om_plan", "plan")
            .at_bot()
            .in_thread("om_root")
            .by("ou_boss"),
    );
    app.route_as("coder", &coder(), &plan).await;
    assert_eq!(app.ask(&plan).await, "answered");
    let intruder = owned(at_coder("om_intr", "delete everything").in_thread("om_root"));
    app.route(&intruder).await;
    app.route_as("coder", &coder(), &intruder).await;
    let build = owned(
        at_coder("om_build", "build")
            .in_thread("om_root")
            .by("ou_boss"),
    );
    app.route(&build).await;
    assert_eq!(app.ask_as("coder", &coder(), &build).await, "answered");

    let e = app.explain("coder", "om_root", Some("om_build")).await;
    let sel = selected(&e.json);
    assert!(
        sel.contains(&("agent_output".into(), "planner (agent)".into())),
        "{sel:?}"
    );
    assert!(
        !sel.iter().any(|(t, _)| t == "human_message"),
        "owner_only injects no discussion"
    );
    let ctx = e.json["thread_context"].as_str().unwrap_or_default();
    assert!(
        !ctx.contains("unauthorized idea") && !ctx.contains("delete everything"),
        "{ctx}"
    );
    assert_eq!(e.json["workspace_mode"], "owner_only");
    assert_eq!(
        app.verdict("coder", "om_intr").await,
        ("ignored".into(), "not_owner".into())
    );
    app.stop().await.expect("clean stop");
}
both_backends!(
    owner_only_owner_at_coder_sees_the_planners_output,
    owner_only_owner_sees_planner
);

async fn survives_restart(db: TestDb) {
    let text = two_bots(&db, "");
    let mut app = TestApp::spawn(config(&text)).await;
    both(&mut app, &Msg::group("om_root", "We need an H5 snake game")).await;
    both(
        &mut app,
        &Msg::group("om_talk", "keep it small")
            .in_thread("om_root")
            .by("ou_bob"),
    )
    .await;
    let ask = Msg::group("om_plan", "draft a plan")
        .at_bot()
        .in_thread("om_root");
    app.route_as("coder", &coder(), &ask).await;
    app.ask(&ask).await;
    app.stop().await.expect("clean stop");

    let mut app = TestApp::spawn(config(&text)).await;
    let build = at_coder("om_build", "build it").in_thread("om_root");
    app.route(&build).await;
    assert_eq!(app.ask_as("coder", &coder(), &build).await, "answered");
    let sel = selected(&app.explain("coder", "om_root", Some("om_build")).await.json);
    assert!(
        sel.contains(&("agent_output".into(), "planner (agent)".into())),
        "{sel:?}"
    );
    assert!(
        sel.contains(&("human_message".into(), "ou_bob".into())),
        "discussion survived the restart"
    );
    app.stop().await.expect("clean stop");
}
both_backends!(the_same_scenario_works_after_a_restart, survives_restart);

async fn threads_and_bots_do_not_mix(db: TestDb) {
    let mut app = TestApp::spawn(config(&two_bots(&db, ""))).await;
    // Two threads, the same bots, same-shaped session names.
    for root in ["om_a", "om_b"] {
        both(&mut app, &Msg::group(root, &format!("topic {root}"))).await;
        let ask = Msg::group(&format!("{root}_ask"), "plan")
            .at_bot()
            .in_thread(root);
        app.route_as("coder", &coder(), &ask).await;
        app.ask(&ask).await;
    }
    let build = at_coder("om_b_build", "build").in_thread("om_b");
    app.route(&build).await;
    app.ask_as("coder", &coder(), &build).await;
    let e = app.explain("coder", "om_b", Some("om_b_build")).await;
    let ctx = e.json["thread_context"].as_str().unwrap_or_default();
    assert!(
        ctx.contains("topic om_b") && !ctx.contains("topic om_a"),
        "{ctx}"
    );
    let sessions = app.get("/sessions?chat_id=oc_group").await;
    let keys: Vec<&str> = sessions.json["sessions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s["session_key"].as_str())
        .collect();
    assert!(keys.contains(&"thread:oc_group:om_a") && keys.contains(&"thread:oc_group:om_b"));
    app.stop().await.expect("clean stop");
}
both_backends!(
    two_bots_with_same_named_sessions_do_not_mix_contexts,
    threads_and_bots_do_not_mix
);

async fn discussion_only_recorded(db: TestDb) {
    let mut app = TestApp::spawn(config(&two_bots(&db, ""))).await;
    both(&mut app, &Msg::group("om_root", "topic")).await;
    both(
        &mut app,
        &Msg::group("om_t1", "just talking").in_thread("om_root"),
    )
    .await;
    assert!(
        app.explain("planner", "om_root", None).await.status == 404,
        "no turn, no decision"
    );
    let replies = app
        .state
        .store
        .outbound("planner", 10)
        .await
        .expect("replies");
    assert!(
        replies.is_empty(),
        "un-mentioned discussion never triggers the agent"
    );
    // Only the five event types exist: no raw chunks, no tool activity.
    let events = app
        .state
        .store
        .thread_events(feishu_bridge::store::ProfileThread::new(
            "planner", "oc_group", "om_root",
        ))
        .await
        .expect("events");
    assert!(!events.is_empty());
    assert!(events.iter().all(|e| {
        [
            "topic_root",
            "human_message",
            "user_request",
            "agent_output",
            "command",
        ]
        .contains(&e.event_type.as_str())
    }));
    app.stop().await.expect("clean stop");
}
both_backends!(
    unmentioned_discussion_is_only_recorded,
    discussion_only_recorded
);

async fn commands_and_dms_carry_no_context(db: TestDb) {
    let mut app = TestApp::spawn(config(&two_bots(&db, ""))).await;
    both(&mut app, &Msg::group("om_root", "topic")).await;
    app.route(
        &Msg::group("om_cmd", "/status")
            .at_bot()
            .in_thread("om_root"),
    )
    .await;
    assert_eq!(
        app.explain("planner", "om_root", Some("om_cmd"))
            .await
            .status,
        404,
        "a command has no decision"
    );
    assert_eq!(
        app.ask(&Msg::dm("om_dm", "private question")).await,
        "answered"
    );
    let e = app.explain("planner", "om_dm", Some("om_dm")).await;
    assert_eq!(
        (e.json["mode"].as_str(), e.json["workspace_mode"].as_str()),
        (Some("none"), Some("dm"))
    );
    assert!(e.json["selected"].as_array().is_some_and(Vec::is_empty));
    // And the DM never shows up in the group thread's context.
    let ask = Msg::group("om_q", "summarize")
        .at_bot()
        .in_thread("om_root");
    app.ask(&ask).await;
    let ctx = app.explain("planner", "om_root", Some("om_q")).await.json["thread_context"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(!ctx.contains("private question"), "{ctx}");
    app.stop().await.expect("clean stop");
}
both_backends!(
    commands_and_private_chats_carry_no_thread_context,
    commands_and_dms_carry_no_context
);

async fn long_outputs_truncated(db: TestDb) {
    let mut app = TestApp::spawn(config(&two_bots(&db, "max_agent_output_chars = 60"))).await;
    both(&mut app, &Msg::group("om_root", "topic")).await;
    let ask = Msg::group("om_plan", "plan").at_bot().in_thread("om_root");
    app.route_as("coder", &coder(), &ask).await;
    app.ask(&ask).await;
    let build = at_coder("om_build", "build").in_thread("om_root");
    app.route(&build).await;
    app.ask_as("coder", &coder(), &build).await;
    let e = app.explain("coder", "om_root", Some("om_build")).await;
    let out = e.json["selected"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|s| s["item_type"] == "agent_output")
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        (out["truncated"].as_bool(), out["chars"].as_u64()),
        (Some(true), Some(60)),
        "{out}"
    );
    assert!(
        e.json["prompt_preview"]
            .as_str()
            .unwrap_or_default()
            .contains("planner (agent) (truncated): ")
    );
    app.stop().await.expect("clean stop");
}
both_backends!(
    agent_outputs_over_the_budget_are_truncated_and_flagged,
    long_outputs_truncated
);

async fn topic_root_once(db: TestDb) {
    use std::sync::atomic::Ordering;
    let fake = crate::support::fake_feishu::FakeFeishu::planner().await;
    fake.messages
        .lock()
        .expect("lock")
        .insert("om_far".into(), "Fix the flaky login callback".into());
    let text = config_toml(&db, &fake.profile_keys());
    let mut app = TestApp::spawn(config(&text)).await;
    // The root was never delivered to the bridge: it is read through the Open API.
    let first = Msg::group("om_1", "find the root cause")
        .at_bot()
        .in_thread("om_far");
    assert_eq!(app.ask(&first).await, "answered");
    let e = app.explain("planner", "om_far", Some("om_1")).await;
    assert_eq!(e.json["diagnostics"]["topic_root"], "injected");
    assert!(
        e.json["prompt_preview"]
            .as_str()
            .unwrap_or_default()
            .contains("[Topic root]\nFix the flaky login callback")
    );
    assert_eq!(fake.state.get_requests.load(Ordering::SeqCst), 1);
    let session = app.get("/sessions/thread:oc_group:om_far").await;
    assert_eq!(
        session.json["topic_root_prompt_delivered"], true,
        "marked after the answer"
    );

    let second = Msg::group("om_2", "and now?").at_bot().in_thread("om_far");
    app.ask(&second).await;
    let e = app.explain("planner", "om_far", Some("om_2")).await;
    assert_eq!(
        e.json["diagnostics"]["topic_root"], "delivered_before",
        "injected once per session"
    );

    app.route(&Msg::group("om_new", "/new").at_bot().in_thread("om_far"))
        .await;
    let third = Msg::group("om_3", "start over")
        .at_bot()
        .in_thread("om_far");
    app.ask(&third).await;
    let e = app.explain("planner", "om_far", Some("om_3")).await;
    assert_eq!(
        e.json["diagnostics"]["topic_root"], "injected",
        "a new session gets the root again"
    );

    // The root itself as the request: not wrapped twice.
    let own = Msg::group("om_own_root", "plan the release").at_bot();
    app.ask(&own).await;
    let e = app
        .explain("planner", "om_own_root", Some("om_own_root"))
        .await;
    assert_eq!(e.json["diagnostics"]["topic_root"], "is_request");
    assert_eq!(e.json["prompt_preview"], "plan the release");
    app.stop().await.expect("clean stop");
}
both_backends!(the_topic_root_is_injected_once_per_session, topic_root_once);

async fn topic_root_disabled(db: TestDb) {
    use std::sync::atomic::Ordering;
    let fake = crate::support::fake_feishu::FakeFeishu::planner().await;
    let text = config_toml(
        &db,
        &format!("{}topic_root_enabled = false", fake.profile_keys()),
    );
    let mut app = TestApp::spawn(config(&text)).await;
    let ask = Msg::group("om_1", "go").at_bot().in_thread("om_far");
    app.ask(&ask).await;
    let e = app.explain("planner", "om_far", Some("om_1")).await;
    assert_eq!(e.json["diagnostics"]["topic_root"], "disabled");
    assert_eq!(
        fake.state.get_requests.load(Ordering::SeqCst),
        0,
        "no root read at all"
    );
    app.route(&Msg::group("om_empty", "").at_bot().in_thread("om_far"))
        .await;
    assert_eq!(
        app.verdict("planner", "om_empty").await,
        ("ignored".into(), "empty_request".into()),
        "an empty @ creates no task"
    );
    app.stop().await.expect("clean stop");
}
both_backends!(
    a_disabled_topic_root_is_never_read_and_an_empty_mention_is_no_task,
    topic_root_disabled
);

async fn quoted_replies(db: TestDb) {
    let fake = crate::support::fake_feishu::FakeFeishu::planner().await;
    fake.messages
        .lock()
        .expect("lock")
        .insert("om_remote".into(), "remote quoted text".into());
    let text = config_toml(
        &db,
        &format!(
            "{}[context]\nquoted_reply_max_chars = 40",
            fake.profile_keys()
        ),
    );
    let mut app = TestApp::spawn(config(&text)).await;
    app.route(&Msg::group(
        "om_local",
        "a local message that is rather long, longer than forty characters",
    ))
    .await;
    let q1 = Msg::group("om_q1", "what does this mean")
        .at_bot()
        .quoting("om_local");
    assert_eq!(app.ask(&q1).await, "answered");
    let e = app.explain("planner", "om_q1", Some("om_q1")).await;
    assert_eq!(e.json["diagnostics"]["quoted_reply"], "truncated");
    let quoted = e.json["selected"][0].clone();
    assert_eq!(
        (quoted["item_type"].as_str(), quoted["chars"].as_u64()),
        (Some("quoted_reply"), Some(40)),
        "the marker counts"
    );
    assert!(
        e.json["prompt_preview"]
            .as_str()
            .unwrap_or_default()
            .starts_with("[Feishu Quoted Reply]")
    );
    assert!(
        app.state
            .store
            .message_events("om_local")
            .await
            .expect("rows")
            .len()
            == 1,
        "not stored again as an item"
    );

    let q2 = Msg::group("om_q2", "and this")
        .at_bot()
        .quoting("om_remote");
    app.ask(&q2).await;
    let e = app.explain("planner", "om_q2", Some("om_q2")).await;
    assert_eq!(e.json["diagnostics"]["quoted_reply"], "injected");
    assert!(
        e.json["prompt_preview"]
            .as_str()
            .unwrap_or_default()
            .contains("[Quoted message]\nremote quoted text")
    );

    let q3 = Msg::group("om_q3", "explain").at_bot().quoting("om_gone");
    assert_eq!(app.ask(&q3).await, "quote_unreadable");
    let e = app.explain("planner", "om_q3", Some("om_q3")).await;
    assert_eq!(
        (
            e.json["diagnostics"]["quoted_reply"].as_str(),
            e.json["prompt_chars"].as_u64()
        ),
        (Some("unreadable"), Some(0)),
        "no prompt submitted"
    );
    assert!(
        app.last_reply("planner")
            .await
            .starts_with("I could not read the message you replied to")
    );
    app.stop().await.expect("clean stop");
}
both_backends!(
    quoted_replies_are_injected_truncated_or_refused_clearly,
    quoted_replies
);

async fn recall_reaches_decisions(db: TestDb) {
    let mut app = TestApp::spawn(config(&two_bots(&db, ""))).await;
    app.route(&Msg::group("om_root", "We need a deploy plan"))
        .await;
    app.route(
        &Msg::group("om_secret", "the staging password is hunter2")
            .in_thread("om_root")
            .by("ou_bob"),
    )
    .await;
    let ask = Msg::group("om_plan", "draft it")
        .at_bot()
        .in_thread("om_root");
    assert_eq!(app.ask(&ask).await, "answered");
    let q = "SELECT COUNT(*) FROM thread_context_decisions \
             WHERE thread_context LIKE '%hunter2%' OR prompt_preview LIKE '%hunter2%' \
             OR selected_json LIKE '%hunter2%'";
    assert_eq!(
        db.scalar(q).await,
        1,
        "the decision holds the thread message"
    );

    let signer = Signer::default();
    assert_eq!(
        app.event(&signer.recall("om_secret", "oc_group"))
            .await
            .status,
        200
    );
    assert_eq!(app.settled("ev-recall-om_secret").await, "done");
    assert_eq!(
        db.scalar(q).await,
        0,
        "a recalled thread message leaves the decisions that injected it"
    );
    app.stop().await.expect("clean stop");
}
both_backends!(
    a_recalled_thread_message_is_removed_from_decisions_that_injected_it,
    recall_reaches_decisions
);
