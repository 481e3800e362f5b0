//! The working reaction: a running turn's request shows the configured emoji, taken off
//! when the turn ends however it ends (answered, failed, stopped, interrupted by a
//! crash and ended by recovery); none when it is off; a missing scope stops the
//! profile trying and shows in `/status`.

use feishu_bridge::turns::Outcome;

use crate::{
    both_backends,
    support::{
        Signer, TestApp, TestDb,
        app::turn_of,
        config, config_toml,
        crash::Crashable,
        fake_feishu::{FakeFeishu, REACTIONS_SCOPE, ReactionOp, is_reaction_endpoint},
        feishu::Msg,
        gated_agent::{GatedAgent, webhook_agent_toml},
        next_matching,
    },
};

type Activity = tokio::sync::broadcast::Receiver<String>;

/// Waits for the fake's next activity starting with `prefix`.
async fn seen(rx: &mut Activity, prefix: &str) -> String {
    next_matching(rx, prefix, |a| a.starts_with(prefix)).await
}

/// Everything the fake did until (and with) its next activity starting with `prefix`,
/// in order.
async fn until_seen(rx: &mut Activity, prefix: &str) -> Vec<String> {
    let mut log = Vec::new();
    next_matching(rx, prefix, |a| {
        log.push(a.clone());
        a.starts_with(prefix)
    })
    .await;
    log
}

fn ask(id: &str, text: &str) -> Msg {
    Msg::group(id, text).at_bot().in_thread("om_root")
}

/// A URL on 127.0.0.1 where nobody listens.
fn nobody_listens() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    drop(listener);
    format!("http://{addr}/turn")
}

async fn answered(db: TestDb) {
    let fake = FakeFeishu::planner().await;
    let agent = "[profiles.agent]\nworking_reaction = \"OnIt\"\n";
    let text = config_toml(&db, &format!("{}{agent}", fake.profile_keys()));
    let mut app = TestApp::spawn(config(&text)).await;
    let mut activity = fake.state.activity.subscribe();
    assert_eq!(app.ask(&ask("om_q", "hello")).await, "answered");
    let order = until_seen(&mut activity, "reaction:delete:").await;

    let ops = fake.state.reactions.ops();
    let [
        ReactionOp::Added(on, emoji, id),
        ReactionOp::Removed(off, gone),
    ] = &ops[..]
    else {
        panic!("one add, then one removal: {ops:?}");
    };
    assert_eq!((on.as_str(), emoji.as_str()), ("om_q", "OnIt"));
    assert_eq!((off.as_str(), gone), ("om_q", id), "the reaction it added");
    assert!(fake.state.reactions.on("om_q").is_empty());
    // In order: added, the answer posted, then taken off.
    let at = |what: &str| order.iter().position(|a| a.starts_with(what));
    let added = at(&format!("reaction:add:om_q:{id}"));
    let (sent, removed) = (at("sent:"), at(&format!("reaction:delete:om_q:{id}")));
    assert!(added.is_some() && added < sent, "{order:?}");
    assert!(sent.is_some() && sent < removed, "{order:?}");

    // Stopping waits for the removals, and the turn no longer records the reaction.
    let store = app.state.store.clone();
    app.stop().await.expect("clean stop");
    let row = turn_of(store.as_ref(), "om_q").await;
    assert_eq!(row.working_reaction_id, None);
}
both_backends!(
    an_answered_turn_shows_the_reaction_until_its_answer_is_posted,
    answered
);

async fn failed_and_stopped(db: TestDb) {
    let fake = FakeFeishu::planner().await;
    // The agent is not there: the turn fails.
    let agent = webhook_agent_toml(&nobody_listens(), 30);
    let text = config_toml(&db, &format!("{}{agent}", fake.profile_keys()));
    let mut app = TestApp::spawn(config(&text)).await;
    let mut activity = fake.state.activity.subscribe();
    assert_eq!(app.ask(&ask("om_f", "fail")).await, "agent_failed");
    seen(&mut activity, "reaction:delete:om_f:").await;
    assert!(fake.state.reactions.on("om_f").is_empty());
    app.stop().await.expect("clean stop");

    // Held by its agent, then stopped by its user.
    let fake = FakeFeishu::planner().await;
    let mut agent = GatedAgent::start().await;
    let text = config_toml(&db, &format!("{}{}", fake.profile_keys(), agent.config()));
    let mut app = TestApp::spawn(config(&text)).await;
    let mut activity = fake.state.activity.subscribe();
    let mut done = app.state.turns_done.subscribe();
    app.route(&ask("om_s", "long task")).await;
    agent.next().await;
    assert_eq!(fake.state.reactions.on("om_s"), ["Typing"], "the default");
    app.route(&ask("om_stop", "/stop")).await;
    let ended = next_matching(&mut done, "the stop", |t| t.message_id == "om_s").await;
    assert_eq!(ended.outcome, Outcome::Stopped);
    seen(&mut activity, "reaction:delete:om_s:").await;
    assert!(fake.state.reactions.on("om_s").is_empty());
    agent.open();
    app.stop().await.expect("clean stop");
}
both_backends!(
    failed_and_stopped_turns_take_the_reaction_off,
    failed_and_stopped
);

async fn off(db: TestDb) {
    let fake = FakeFeishu::planner().await;
    let agent = "[profiles.agent]\nworking_reaction = \"\"\n";
    let text = config_toml(&db, &format!("{}{agent}", fake.profile_keys()));
    let mut app = TestApp::spawn(config(&text)).await;
    assert_eq!(app.ask(&ask("om_q", "hello")).await, "answered");
    let status = app.get("/status").await;
    let shown = &status.json["profiles"][0]["working_reaction"];
    assert_eq!(shown["state"], "off", "{}", status.text);
    app.stop().await.expect("clean stop");
    assert!(fake.state.reactions.ops().is_empty(), "no call");
    let refused = fake.state.refusals.lock().expect("lock").clone();
    assert!(refused.iter().all(|(e, _)| !is_reaction_endpoint(e)));

    // A dry run never reacts either (it sends nothing).
    let text = config_toml(&db, "");
    let mut app = TestApp::spawn(config(&text)).await;
    assert_eq!(app.ask(&ask("om_dry", "hello")).await, "answered");
    let status = app.get("/status").await;
    assert_eq!(
        status.json["profiles"][0]["working_reaction"]["state"],
        "off"
    );
    app.stop().await.expect("clean stop");
}
both_backends!(an_empty_working_reaction_or_a_dry_run_makes_no_call, off);

async fn missing_scope(db: TestDb) {
    let fake = FakeFeishu::planner().await;
    fake.state.reactions.withhold_scope();
    let text = config_toml(&db, &fake.profile_keys());
    let mut app = TestApp::spawn(config(&text)).await;
    let status = app.get("/status").await;
    let shown = &status.json["profiles"][0]["working_reaction"];
    assert_eq!(
        (shown["state"].as_str(), shown["emoji"].as_str()),
        (Some("on"), Some("Typing")),
        "{}",
        status.text
    );

    assert_eq!(app.ask(&ask("om_1", "first")).await, "answered");
    assert_eq!(app.ask(&ask("om_2", "second")).await, "answered");
    let refused: Vec<(String, i64)> = fake
        .state
        .refusals
        .lock()
        .expect("lock")
        .iter()
        .filter(|(e, _)| is_reaction_endpoint(e))
        .cloned()
        .collect();
    assert_eq!(
        refused,
        [(
            "POST /open-apis/im/v1/messages/{message_id}/reactions".to_string(),
            99991672
        )],
        "tried once, not again on the next turn"
    );
    assert_eq!(
        fake.state.sent.lock().expect("lock").len(),
        2,
        "both answered"
    );

    let status = app.get("/status").await;
    let profiles = status.json["profiles"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let shown: Vec<_> = profiles
        .iter()
        .filter(|p| p["working_reaction"]["state"] == "missing_scope")
        .collect();
    assert_eq!(shown.len(), 1, "once per profile: {}", status.text);
    let reaction = &shown[0]["working_reaction"];
    assert_eq!(shown[0]["name"], "planner");
    assert_eq!(reaction["scope"], REACTIONS_SCOPE);
    assert!(
        reaction["since"].as_i64().is_some_and(|t| t > 0),
        "{}",
        status.text
    );
    app.stop().await.expect("clean stop");
}
both_backends!(
    a_missing_scope_stops_the_reaction_and_shows_in_status,
    missing_scope
);

async fn recovered(db: TestDb) {
    let fake = FakeFeishu::planner().await;
    let mut agent = GatedAgent::start().await;
    let text = config_toml(&db, &format!("{}{}", fake.profile_keys(), agent.config()));
    let bridge = Crashable::start(config(&text)).await;
    assert_eq!(
        bridge
            .event(&Signer::default().deliver(&ask("om_1", "first")))
            .await,
        200
    );
    agent.next().await;
    // The turn waits for its reaction to be recorded before the agent is asked.
    let store = feishu_bridge::store::open(&config(&text).database)
        .await
        .expect("store");
    let row = turn_of(store.as_ref(), "om_1").await;
    let Some(recorded) = row.working_reaction_id.clone() else {
        panic!("the reaction is recorded on the running turn: {row:?}");
    };
    assert_eq!(fake.state.reactions.on("om_1"), ["Typing"]);
    bridge.crash().await;
    assert_eq!(turn_of(store.as_ref(), "om_1").await.state, "running");
    drop(store);

    // The next start fails the interrupted turn and takes its reaction off.
    let mut activity = fake.state.activity.subscribe();
    agent.open();
    let app = TestApp::spawn(config(&text)).await;
    let row = app.turn_ended("om_1").await;
    assert_eq!(
        row.error.as_deref(),
        Some("interrupted: the bridge restarted")
    );
    let removed = seen(&mut activity, "reaction:delete:").await;
    assert_eq!(removed, format!("reaction:delete:om_1:{recorded}"));
    assert!(fake.state.reactions.on("om_1").is_empty());
    let store = app.state.store.clone();
    app.stop().await.expect("clean stop");
    assert_eq!(
        turn_of(store.as_ref(), "om_1").await.working_reaction_id,
        None
    );
}
both_backends!(
    recovery_after_a_crash_takes_the_interrupted_turns_reaction_off,
    recovered
);
