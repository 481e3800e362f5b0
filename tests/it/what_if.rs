//! What-if explain: `POST /explain/{root}/what-if` and `explain --what-if` re-run a
//! stored decision's selection under other settings, through the same selector, over
//! the candidates the decision looked at as the event log holds them, and call no agent.

use feishu_bridge::{
    config::WorkspaceMode,
    context::selector::{Request, select_thread},
};
use serde_json::{Value, json};

use crate::{
    both_backends,
    support::{
        ADMIN, Answer, Signer, TestApp, TestDb,
        app::answer,
        cli::{bridge, write_config},
        config, config_toml,
        feishu::{APP_ID, Msg, now_ms},
        gated_agent::GatedAgent,
    },
};

/// `POST /explain/om_root/what-if?profile=planner` with these settings.
async fn what_if(app: &TestApp, settings: Value) -> Answer {
    let r = app
        .client
        .post(format!(
            "{}/explain/om_root/what-if?profile=planner",
            app.base
        ))
        .bearer_auth(ADMIN)
        .json(&json!({ "settings": settings }))
        .send()
        .await
        .expect("sent");
    answer(r).await
}

/// `feishu-bridge --config <path> explain om_root <args…>`, run to its end.
fn explain_cli(path: &str, args: &[&str]) -> std::process::Output {
    let mut all = vec!["--config", path, "explain", "om_root"];
    all.extend_from_slice(args);
    bridge(&all).output().expect("runs")
}

fn ids(list: &Value) -> Vec<i64> {
    list.as_array()
        .map(|a| a.iter().filter_map(|i| i["item_id"].as_i64()).collect())
        .unwrap_or_default()
}

fn reasons(list: &Value) -> Vec<(i64, String)> {
    list.as_array()
        .map(|a| {
            a.iter()
                .map(|i| {
                    let reason = i["reason"].as_str().unwrap_or_default().to_string();
                    (i["item_id"].as_i64().unwrap_or_default(), reason)
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The thread om_root ("We need a login fix") a minute ago, these replies by ou_bob a
/// second apart (om_m1, om_m2, …), then om_q asking the bot in it ten seconds in.
async fn ask_in_thread(app: &mut TestApp, replies: &[String]) {
    let base = now_ms() - 60_000;
    app.route(&Msg::group("om_root", "We need a login fix").at(base))
        .await;
    for (i, text) in (1..).zip(replies) {
        let talk = Msg::group(&format!("om_m{i}"), text)
            .in_thread("om_root")
            .by("ou_bob")
            .at(base + i * 1_000);
        app.route(&talk).await;
    }
    let ask = Msg::group("om_q", "fix it")
        .at_bot()
        .in_thread("om_root")
        .at(base + 10_000);
    app.ask(&ask).await;
}

async fn what_if_explain(db: TestDb) {
    let mut agent = GatedAgent::start().await;
    agent.open();
    let extra = format!(
        "{}\n[context]\nshared_thread_enabled = true\n",
        agent.config()
    );
    let text = config_toml(&db, &extra);
    let mut app = TestApp::spawn(config(&text)).await;
    let replies: Vec<String> = (1..=4).map(|i| format!("message {i}!")).collect();
    ask_in_thread(&mut app, &replies).await;
    agent.next().await;

    // The real decision: the topic root in its block, the four messages selected.
    let real = app.explain("planner", "om_root", None).await;
    assert_eq!(real.status, 200, "{}", real.text);
    let thread: Vec<i64> = ids(&real.json["selected"])
        .into_iter()
        .filter(|id| *id != 0)
        .collect();
    assert_eq!(thread.len(), 4, "{}", real.text);
    let decision_id = real.json["decision_id"].as_i64().expect("id");

    // The same settings: the same selection.
    let same = what_if(&app, json!({})).await;
    assert_eq!(same.status, 200, "{}", same.text);
    assert_eq!(same.json["decision_id"], decision_id);
    assert_eq!(same.json["diff"]["unchanged"], true, "{}", same.text);
    assert_eq!(same.json["settings"], same.json["recorded"]);
    assert_eq!(same.json["settings"]["thread_context_limit"], 20);
    assert_eq!(
        ids(&same.json["selection"]["selected"]),
        ids(&real.json["selected"])
    );

    // A smaller item limit drops the oldest, as the selector does over the same candidates.
    let limited = what_if(&app, json!({"thread_context_limit": 2})).await;
    assert_eq!(limited.status, 200, "{}", limited.text);
    let diff = &limited.json["diff"];
    assert_eq!(diff["unchanged"], false);
    assert_eq!(
        reasons(&diff["dropped"]),
        [(thread[0], "limit".into()), (thread[1], "limit".into())]
    );
    assert!(diff["added"].as_array().is_some_and(Vec::is_empty));
    let candidates = app
        .state
        .store
        .candidates_by_id(&thread)
        .await
        .expect("store answers");
    let direct = select_thread(
        &Request {
            bridge_id: APP_ID,
            profile: "planner",
            mode: WorkspaceMode::Shared,
            message_id: "om_q",
            is_command: false,
            limit: 2,
            max_chars: 24_000,
            max_agent_output_chars: 20_000,
        },
        candidates.clone(),
    );
    let direct_ids: Vec<i64> = direct.selected.iter().map(|s| s.item_id).collect();
    let would_be: Vec<i64> = ids(&limited.json["selection"]["selected"])
        .into_iter()
        .filter(|id| *id != 0)
        .collect();
    assert_eq!(would_be, direct_ids);
    assert_eq!(would_be, thread[2..]);

    // A character budget of two messages ("message n!" is 10 characters).
    let chars = what_if(&app, json!({"max_context_chars": 25})).await;
    assert_eq!(
        reasons(&chars.json["diff"]["dropped"]),
        [(thread[0], "chars".into()), (thread[1], "chars".into())],
        "{}",
        chars.text
    );
    assert_eq!(chars.json["settings"]["max_context_chars"], 25);

    // Thread context off: every thread item dropped.
    let off = what_if(&app, json!({"shared_thread_enabled": false})).await;
    let dropped = reasons(&off.json["diff"]["dropped"]);
    assert_eq!(dropped.len(), 4, "{}", off.text);
    assert!(dropped.iter().all(|(_, r)| r == "thread_context_off"));

    // An owner_only workspace leaves the discussion out.
    let owner = what_if(&app, json!({"workspace_mode": "owner_only"})).await;
    let dropped = reasons(&owner.json["diff"]["dropped"]);
    assert_eq!(dropped.len(), 4, "{}", owner.text);
    assert!(dropped.iter().all(|(_, r)| r == "mode"), "{}", owner.text);

    // Bad settings: 400 with what is wrong.
    let bad = what_if(&app, json!({"thread_limit": 2})).await;
    assert_eq!(bad.status, 400);
    assert_eq!(bad.code(), "bad_request");
    assert!(bad.text.contains("thread_limit"), "{}", bad.text);
    let bad = what_if(&app, json!({"workspace_mode": "everyone"})).await;
    assert_eq!(bad.code(), "bad_request");
    let none = app
        .client
        .post(format!("{}/explain/om_nothing/what-if", app.base))
        .bearer_auth(ADMIN)
        .json(&json!({}))
        .send()
        .await
        .expect("sent");
    assert_eq!(answer(none).await.code(), "not_found");

    // A message recalled after the decision shows as recalled, not silently dropped.
    let recall = app
        .event(&Signer::default().recall("om_m3", "oc_group"))
        .await;
    assert_eq!(recall.status, 200);
    assert_eq!(app.settled("ev-recall-om_m3").await, "done");
    let after = what_if(&app, json!({})).await;
    assert_eq!(
        reasons(&after.json["diff"]["dropped"]),
        [(thread[2], "recalled".into())],
        "{}",
        after.text
    );

    // No agent was called for any of it.
    assert!(agent.turns.try_recv().is_err(), "no turn reached the agent");
    app.stop().await.expect("clean stop");

    // The CLI, reading the database directly.
    let dir = tempfile::tempdir().expect("dir");
    let path = write_config(&dir, &text);
    let out = explain_cli(
        &path,
        &[
            "--what-if",
            "thread_context_limit=1",
            "--what-if",
            "max_agent_output_chars=100",
        ],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("thread_context_limit       20 → 1"),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!("  - #{} human_message (limit)", thread[0])),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!("  - #{} human_message (recalled)", thread[2])),
        "{stdout}"
    );
    let json_out = explain_cli(&path, &["--what-if", "thread_context_limit=1", "--json"]);
    let v: Value = serde_json::from_slice(&json_out.stdout).expect("json");
    assert_eq!(v["settings"]["thread_context_limit"], 1);
    assert_eq!(v["decision_id"], decision_id);
    let bad = explain_cli(&path, &["--what-if", "nope=1"]);
    assert!(!bad.status.success());
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("unknown what-if setting \"nope\""),
        "{}",
        String::from_utf8_lossy(&bad.stderr)
    );
}
both_backends!(what_if_rest_and_cli, what_if_explain);

/// A context part the decision did not use reads the thread as it was then: the items
/// said by the decision's time, not one said after it.
async fn turning_the_thread_on(db: TestDb) {
    let mut app = TestApp::spawn(config(&config_toml(&db, ""))).await;
    ask_in_thread(
        &mut app,
        &["callbacks time out".into(), "callbacks time out".into()],
    )
    .await;
    let late = Msg::group("om_late", "said after the decision")
        .in_thread("om_root")
        .by("ou_bob")
        .at(now_ms() + 60_000);
    app.route(&late).await;

    let thread = feishu_bridge::store::ProfileThread::new("planner", "oc_group", "om_root");
    let events = app.state.store.thread_events(thread).await.expect("store");
    let item = |id: &str| {
        events
            .iter()
            .find(|e| e.message_id == id)
            .and_then(|e| e.item_id)
            .expect("an item")
    };
    let same = what_if(&app, json!({})).await;
    assert_eq!(
        same.json["recorded"]["shared_thread_enabled"], false,
        "{}",
        same.text
    );
    assert_eq!(same.json["diff"]["unchanged"], true, "{}", same.text);
    let on = what_if(&app, json!({"shared_thread_enabled": true})).await;
    assert_eq!(on.status, 200, "{}", on.text);
    assert_eq!(
        ids(&on.json["diff"]["added"]),
        [item("om_m1"), item("om_m2")],
        "the discussion said by then, not om_late: {}",
        on.text
    );
    let history = what_if(&app, json!({"group_chat_history_share": true})).await;
    let added = ids(&history.json["diff"]["added"]);
    assert!(
        added.contains(&item("om_m1")) && added.contains(&item("om_m2")),
        "the scope's messages said by then: {}",
        history.text
    );
    assert!(!added.contains(&item("om_late")), "{}", history.text);
    let excluded = reasons(&on.json["selection"]["excluded"]);
    assert!(
        excluded.contains(&(item("om_root"), "topic_root_block".into())),
        "the root has its own block: {}",
        on.text
    );
    app.stop().await.expect("clean stop");
}
both_backends!(
    a_part_turned_on_reads_the_thread_as_it_was,
    turning_the_thread_on
);
