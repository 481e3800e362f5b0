//! Persisted turns: states, crash recovery (a crash between the agent's answer and the
//! Feishu reply, and one while the agent was working), and the tenant token's life.

use std::sync::atomic::Ordering;

use feishu_bridge::util::{ManualClock, UnixMs};
use serde_json::json;

use crate::{
    both_backends,
    support::{
        Signer, TestApp, TestDb, app::turn_of, cards::until, config, config_toml, crash::Crashable,
        fake_feishu::FakeFeishu, feishu::Msg, gated_agent::GatedAgent, next_matching,
    },
};

fn with_feishu(db: &TestDb, fake: &FakeFeishu, more: &str) -> String {
    config_toml(db, &format!("{}{more}", fake.profile_keys()))
}

/// Waits until the fake has seen an event starting with `prefix`; returns it.
async fn activity(rx: &mut tokio::sync::broadcast::Receiver<String>, prefix: &str) -> String {
    next_matching(rx, prefix, |a| a.starts_with(prefix)).await
}

async fn crash_before_reply(db: TestDb) {
    let fake = FakeFeishu::planner().await;
    let mut agent = GatedAgent::start().await;
    agent.open();
    let text = with_feishu(&db, &fake, &agent.config());
    let mut seen = fake.state.activity.subscribe();

    // Feishu stops answering: the reply hangs after the agent has answered.
    fake.state.hang.store(true, Ordering::SeqCst);
    let bridge = Crashable::start(config(&text)).await;
    let ask = Msg::group("om_q", "draft a plan")
        .at_bot()
        .in_thread("om_root");
    assert_eq!(bridge.event(&Signer::default().deliver(&ask)).await, 200);
    agent.next().await;
    let first = activity(&mut seen, "attempt:").await;
    bridge.crash().await;

    let store = feishu_bridge::store::open(&config(&text).database)
        .await
        .expect("store");
    let row = turn_of(store.as_ref(), "om_q").await;
    assert_eq!(row.state, "running");
    assert_eq!(
        row.output.as_deref(),
        Some("answer: draft a plan"),
        "answer stored before the reply"
    );
    assert!(row.decision_id.is_some());
    drop(store);

    // Restart with Feishu answering again: the stored answer is delivered, once.
    fake.state.hang.store(false, Ordering::SeqCst);
    let app = TestApp::spawn(config(&text)).await;
    let row = app.turn_ended("om_q").await;
    assert_eq!(row.state, "succeeded", "{:?}", row.error);
    let uuids = fake.state.attempt_uuids.lock().expect("lock").clone();
    assert_eq!(
        uuids.len(),
        2,
        "the hung attempt and the one after the restart"
    );
    assert_eq!(
        format!("attempt:{}", uuids[1]),
        first,
        "same uuid after the restart"
    );
    let sent = fake.state.sent.lock().expect("lock").clone();
    assert_eq!(sent.len(), 1, "exactly one reply posted");
    assert_eq!(sent[0].0, "om_q");
    assert_eq!(sent[0].1["reply_in_thread"], true);
    assert_eq!(row.reply_message_id.as_deref(), Some("om_bot_reply_1"));
    assert!(
        agent.turns.try_recv().is_err(),
        "the agent was not asked again"
    );
    assert_eq!(app.planner_outputs().await.len(), 1);
    app.stop().await.expect("clean stop");
}
both_backends!(
    a_crash_between_the_answer_and_the_reply_posts_it_once_after_restart,
    crash_before_reply
);

async fn crash_while_agent_works(db: TestDb) {
    let fake = FakeFeishu::planner().await;
    let mut agent = GatedAgent::start().await;
    let text = with_feishu(&db, &fake, &agent.config());
    let mut bridge = Crashable::start(config(&text)).await;
    let signer = Signer::default();
    let first = Msg::group("om_1", "first").at_bot().in_thread("om_root");
    let second = Msg::group("om_2", "second").at_bot().in_thread("om_root");
    assert_eq!(bridge.event(&signer.deliver(&first)).await, 200);
    assert_eq!(agent.next().await["request_text"], "first");
    assert_eq!(bridge.event(&signer.deliver(&second)).await, 200);
    // The second waits behind the first in the same session; wait until it is queued.
    assert_eq!(bridge.processed("ev-om_2").await.outcome, "done");
    let store = feishu_bridge::store::open(&config(&text).database)
        .await
        .expect("store");
    assert_eq!(turn_of(store.as_ref(), "om_2").await.state, "queued");
    bridge.crash().await;
    assert_eq!(turn_of(store.as_ref(), "om_1").await.state, "running");
    drop(store);

    agent.open();
    let app = TestApp::spawn(config(&text)).await;
    let one = app.turn_ended("om_1").await;
    assert_eq!(one.state, "failed");
    assert_eq!(
        one.error.as_deref(),
        Some("interrupted: the bridge restarted")
    );
    let two = app.turn_ended("om_2").await;
    assert_eq!(two.state, "succeeded", "{:?}", two.error);
    assert_eq!(agent.next().await["request_text"], "second");
    let sent = fake.state.sent.lock().expect("lock").clone();
    let to = |m: &str| {
        sent.iter()
            .filter(|(t, _)| t == m)
            .map(|(_, b)| b["content"].as_str().unwrap_or_default().to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        to("om_1").len(),
        1,
        "the interrupted request's user is told once"
    );
    assert!(to("om_1")[0].contains("restarted"), "{:?}", to("om_1"));
    assert!(to("om_2")[0].contains("answer: second"));
    app.stop().await.expect("clean stop");
}
both_backends!(
    after_a_crash_queued_turns_run_and_interrupted_ones_fail_with_a_notice,
    crash_while_agent_works
);

async fn token_life(db: TestDb) {
    let fake = FakeFeishu::planner().await;
    let text = with_feishu(&db, &fake, "");
    let clock = std::sync::Arc::new(ManualClock::at(UnixMs::now()));
    let mut app = TestApp::spawn_with_clock(config(&text), clock.clone()).await;
    let tokens = || fake.state.token_requests.load(Ordering::SeqCst);
    let attempts = || fake.state.send_attempts.load(Ordering::SeqCst);
    let ask = |id: &str| Msg::group(id, "hello").at_bot().in_thread("om_root");

    // Cached: one token for several replies.
    assert_eq!(app.ask(&ask("om_1")).await, "answered");
    assert_eq!(app.ask(&ask("om_2")).await, "answered");
    assert_eq!(tokens(), 1);

    // Invalidated early (99991663): the first call that meets the revoked token (the
    // read of the thread's root) replaces it once, and the reply goes out with the new
    // one at the first attempt. (Once the earlier turns' working reactions are off: their
    // removal goes on after the turn ended, and would meet the revoked token first.)
    until(&fake, || {
        fake.state.reactions.live.lock().expect("lock").is_empty()
    })
    .await;
    fake.state.revoke_token();
    let before = attempts();
    let reads = fake.state.get_requests.load(Ordering::SeqCst);
    assert_eq!(app.ask(&ask("om_3")).await, "answered");
    assert_eq!((tokens(), attempts() - before), (2, 1));
    assert!(
        fake.state.get_requests.load(Ordering::SeqCst) - reads >= 2,
        "refused, then again"
    );

    // Two hours later (on both clocks) the token has expired: it is replaced before it
    // is used, not after a refusal.
    let later = std::time::Duration::from_secs(7_300);
    until(&fake, || {
        fake.state.reactions.live.lock().expect("lock").is_empty()
    })
    .await;
    clock.advance(later);
    fake.state.tokens.advance(later);
    let expired_refusals = || {
        let refusals = fake.state.refusals.lock().expect("lock");
        refusals
            .iter()
            .filter(|(_, code)| *code == 99991663)
            .count()
    };
    let (t0, a0, r0) = (tokens(), attempts(), expired_refusals());
    assert_eq!(app.ask(&ask("om_4")).await, "answered");
    assert_eq!(
        expired_refusals(),
        r0,
        "no call went out with the expired token"
    );
    assert_eq!(attempts() - a0, 1, "no refusal: refreshed before sending");
    assert_eq!(tokens() - t0, 1, "one fresh token, cached again");
    assert_eq!(app.turn_of("om_4").await.state, "succeeded");
    app.stop().await.expect("clean stop");
}
both_backends!(
    the_tenant_token_is_cached_refreshed_when_invalid_and_before_expiry,
    token_life
);

async fn turns_over_rest(db: TestDb) {
    let mut agent = GatedAgent::start().await;
    let text = config_toml(&db, &agent.config());
    let mut app = TestApp::spawn(config(&text)).await;
    let first = Msg::group("om_1", "first").at_bot().in_thread("om_root");
    let second = Msg::group("om_2", "second").at_bot().in_thread("om_root");
    app.route(&first).await;
    agent.next().await;
    app.route(&second).await;

    let status = app.get("/status").await;
    assert_eq!(
        (
            &status.json["turns"]["queued"],
            &status.json["turns"]["running"]
        ),
        (&json!(1), &json!(1)),
        "{}",
        status.text
    );
    let queued = app.get("/turns?profile=planner&state=queued").await;
    assert_eq!(queued.status, 200, "{}", queued.text);
    assert_eq!(queued.json["turns"][0]["message_id"], "om_2");
    assert!(
        queued.json["turns"][0].get("request_text").is_none(),
        "texts only with verbose"
    );
    let bad = app.get("/turns?state=sleeping").await;
    assert_eq!((bad.status, bad.code()), (400, "bad_request"));

    agent.open();
    let done = app.turn_ended("om_2").await;
    assert_eq!(done.state, "succeeded");
    let one = app
        .get(&format!("/turns/{}?verbose=true", done.turn_id))
        .await;
    assert_eq!(one.status, 200, "{}", one.text);
    assert_eq!(one.json["state"], "succeeded");
    assert_eq!(one.json["output"], "answer: second");
    assert_eq!(one.json["output_chars"], 14);
    assert_eq!(one.json["request_text"], "second");
    assert!(one.json["decision_id"].is_i64());
    let all = app.get("/turns?session_key=thread:oc_group:om_root").await;
    let states: Vec<_> = all.json["turns"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| (t["message_id"].clone(), t["state"].clone()))
        .collect();
    assert_eq!(
        states,
        [
            (json!("om_2"), json!("succeeded")),
            (json!("om_1"), json!("succeeded"))
        ],
        "newest first"
    );
    let metrics = app.get("/metrics").await;
    assert!(
        metrics.text.contains(
            "feishu_bridge_turns_finished_total{outcome=\"answered\",profile=\"planner\"} 2"
        ),
        "{}",
        metrics.text
    );
    let missing = app.get("/turns/turn_nope").await;
    assert_eq!((missing.status, missing.code()), (404, "not_found"));
    let anonymous = app.get_anonymous("/turns").await;
    assert_eq!(anonymous.status, 401);
    app.stop().await.expect("clean stop");
}
both_backends!(turns_are_listed_and_counted_over_rest, turns_over_rest);

async fn graceful_stop(db: TestDb) {
    let fake = FakeFeishu::planner().await;
    let mut agent = GatedAgent::start().await;
    let text = with_feishu(&db, &fake, &agent.config());
    let mut app = TestApp::spawn(config(&text)).await;
    let first = Msg::group("om_1", "first").at_bot().in_thread("om_root");
    let second = Msg::group("om_2", "second").at_bot().in_thread("om_root");
    app.route(&first).await;
    agent.next().await;
    app.route(&second).await;
    let store = app.state.store.clone();
    app.stop().await.expect("clean stop");

    // The running turn was interrupted and its user told; the queued one waits.
    let one = turn_of(store.as_ref(), "om_1").await;
    assert_eq!(
        (one.state.as_str(), one.error.as_deref()),
        ("failed", Some("interrupted: the bridge shut down"))
    );
    assert_eq!(turn_of(store.as_ref(), "om_2").await.state, "queued");
    let told = fake.state.sent.lock().expect("lock").clone();
    assert_eq!(told.len(), 1);
    assert_eq!(told[0].0, "om_1");

    // The next start runs it.
    agent.open();
    let app = TestApp::spawn(config(&text)).await;
    let two = app.turn_ended("om_2").await;
    assert_eq!(two.state, "succeeded", "{:?}", two.error);
    assert_eq!(agent.next().await["request_text"], "second");
    app.stop().await.expect("clean stop");
}
both_backends!(
    a_graceful_stop_interrupts_the_running_turn_and_keeps_queued_ones,
    graceful_stop
);
