//! The batched feed end to end: un-mentioned group messages gathered per session,
//! packed by count or (on a clock the test moves) by time, newest first under both caps,
//! attached without waking the agent, at most three unread, read by the next turn (which
//! explain shows), kept across a restart, cleared by `/new`, never holding a recalled
//! message or a private chat's, and injected into a webhook agent by a signed call that
//! is no turn.

use std::{sync::Arc, time::Duration};

use feishu_bridge::util::{ManualClock, UnixMs};
use serde_json::Value;

use crate::{
    both_backends,
    support::{
        TestApp, TestDb, config, config_toml,
        feishu::{Msg, Signer},
        gated_agent::GatedAgent,
    },
};

/// The planner (echo, replies recorded) with the feed on and `more` in `[feed]`.
fn feed_config(db: &TestDb, more: &str, agent: &str) -> String {
    let text = config_toml(db, &format!("dry_run = true\n{agent}"));
    format!("{text}\n[feed]\nenabled = true\n{more}\n")
}

/// The session of thread `om_root` in the test group (threads are isolated by default).
const SESSION: &str = "thread:oc_group:om_root";

/// Someone says `text` in the thread, not addressing the bot.
fn chatter(id: &str, text: &str) -> Msg {
    Msg::group(id, text).in_thread("om_root")
}

async fn feed(app: &TestApp) -> Value {
    let path = format!("/feed?profile=planner&session_key={SESSION}");
    let a = app.get(&path).await;
    assert_eq!(a.status, 200, "{}", a.text);
    a.json
}

async fn flush(app: &TestApp) -> Value {
    flush_at(app, &format!("profile=planner&session_key={SESSION}")).await
}

/// `POST /feed/flush?{query}`, answered 200: its body.
async fn flush_at(app: &TestApp, query: &str) -> Value {
    let r = app
        .client
        .post(format!("{}/feed/flush?{query}", app.base))
        .bearer_auth(crate::support::ADMIN)
        .send()
        .await
        .expect("flush answers");
    assert_eq!(r.status(), 200);
    r.json().await.expect("JSON")
}

/// The states of the session's segments, oldest first.
fn states(feed: &Value) -> Vec<String> {
    feed["segments"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|s| s["state"].as_str().unwrap_or_default().to_string())
        .collect()
}

async fn by_count_then_read(db: TestDb) {
    let mut app = TestApp::spawn(config(&feed_config(&db, "batch_messages = 3", ""))).await;
    // The thread's first turn creates the session.
    let first = Msg::group("om_root", "a topic").at_bot();
    assert_eq!(app.ask(&first).await, "answered");
    for (i, text) in ["eight o'clock", "the usual place", "bring the slides"]
        .iter()
        .enumerate()
    {
        app.route(&chatter(&format!("om_c{i}"), text)).await;
    }
    // A DM is never gathered.
    app.route(&Msg::dm("om_dm", "private")).await;
    app.state.feed.tick().await.expect("tick");
    let f = feed(&app).await;
    assert_eq!(states(&f), ["attached"], "{f}");
    let text = f["segments"][0]["text"].as_str().unwrap_or_default();
    let lines: Vec<&str> = text.lines().skip(1).collect();
    // Each with its sender as the bridge knows them (by open_id: no name learned here).
    assert_eq!(
        lines,
        [
            "ou_alice: eight o'clock",
            "ou_alice: the usual place",
            "ou_alice: bring the slides"
        ]
    );
    assert!(!text.contains("private"));

    // The next turn gets it (echo says so), and it is read.
    let ask = Msg::group("om_q", "when?").at_bot().in_thread("om_root");
    assert_eq!(app.ask(&ask).await, "answered");
    let answer = app.last_reply("planner").await;
    let id = f["segments"][0]["id"].as_i64().unwrap_or_default();
    assert!(
        answer.contains(&format!("feed: 1 segment(s) (#{id}: 3 messages)")),
        "{answer}"
    );
    let f = feed(&app).await;
    assert_eq!(states(&f), ["read"]);
    let turn = app.turn_of("om_q").await;
    assert_eq!(f["segments"][0]["read_by_turn"], turn.turn_id.as_str());
    let e = app.explain("planner", "om_root", Some("om_q")).await;
    assert_eq!(
        e.json["turn"]["feed_segments"][0]["segment_id"], id,
        "{}",
        e.text
    );
    let metrics = app.get_anonymous("/metrics").await.text;
    assert!(
        metrics.contains(r#"feishu_bridge_feed_segments_read_total{profile="planner"} 1"#),
        "{metrics}"
    );
    app.stop().await.expect("clean stop");
}
both_backends!(
    a_segment_packed_at_the_batch_size_is_used_and_read_by_the_next_turn,
    by_count_then_read
);

async fn by_time(db: TestDb) {
    let clock = Arc::new(ManualClock::at(UnixMs::now()));
    let text = feed_config(&db, "max_wait_secs = 2400\nsegment_items = 2", "");
    let mut app = TestApp::spawn_with_clock(config(&text), clock.clone()).await;
    for (i, text) in ["one", "two", "three"].iter().enumerate() {
        app.route(&chatter(&format!("om_t{i}"), text)).await;
    }
    assert_eq!(app.state.feed.tick().await.expect("tick"), 0, "not due yet");
    clock.advance(Duration::from_secs(2399));
    assert_eq!(app.state.feed.tick().await.expect("tick"), 0, "not due yet");
    clock.advance(Duration::from_secs(1));
    assert_eq!(
        app.state.feed.tick().await.expect("tick"),
        1,
        "40 minutes after the first"
    );
    let f = feed(&app).await;
    // Newest first under the item cap: the oldest was passed over. No session yet, so it
    // waits for the session's first turn.
    assert_eq!(states(&f), ["waiting"], "{f}");
    let text = f["segments"][0]["text"].as_str().unwrap_or_default();
    assert!(text.ends_with("ou_alice: two\nou_alice: three"), "{text}");
    assert!(f["gathered"].as_array().is_some_and(|g| g.is_empty()));

    // The session's first turn attaches it and uses it.
    let ask = Msg::group("om_q", "summary?").at_bot().in_thread("om_root");
    assert_eq!(app.ask(&ask).await, "answered");
    assert!(
        app.last_reply("planner")
            .await
            .contains("feed: 1 segment(s)")
    );
    app.stop().await.expect("clean stop");
}
both_backends!(
    a_quiet_session_is_packed_once_its_first_message_waited_max_wait,
    by_time
);

async fn gate_restart_new(db: TestDb) {
    let text = feed_config(&db, "segment_chars = 100", "");
    let mut app = TestApp::spawn(config(&text)).await;
    assert_eq!(
        app.ask(&Msg::group("om_root", "topic").at_bot()).await,
        "answered"
    );
    for seg in 0..4 {
        app.route(&chatter(&format!("om_g{seg}"), &"long ".repeat(30)))
            .await;
        let flushed = flush(&app).await;
        assert!(flushed["packed"].is_i64(), "{flushed}");
    }
    let f = feed(&app).await;
    assert_eq!(
        states(&f),
        ["attached", "attached", "attached", "waiting"],
        "{f}"
    );
    // A segment stays within its characters (the label aside).
    let body: usize = f["segments"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .lines()
        .skip(1)
        .map(|l| l.chars().count())
        .sum();
    assert!(body <= 100, "{body}");

    // A restart keeps what was gathered and packed.
    app.route(&chatter("om_kept", "still here")).await;
    app.stop().await.expect("clean stop");
    let mut app = TestApp::spawn(config(&text)).await;
    let f = feed(&app).await;
    assert_eq!(states(&f), ["attached", "attached", "attached", "waiting"]);
    assert_eq!(f["gathered"][0]["text"], "still here");

    // A turn reads the three; the waiting one is attached right away.
    let ask = Msg::group("om_q", "go").at_bot().in_thread("om_root");
    assert_eq!(app.ask(&ask).await, "answered");
    let f = feed(&app).await;
    assert_eq!(states(&f), ["read", "read", "read", "attached"], "{f}");

    // /new clears the unsent batch and the unread segment.
    let reset = Msg::group("om_new", "/new").at_bot().in_thread("om_root");
    app.route(&reset).await;
    let f = feed(&app).await;
    assert_eq!(states(&f), ["read", "read", "read", "cleared"], "{f}");
    assert!(
        f["gathered"].as_array().is_some_and(|g| g.is_empty()),
        "{f}"
    );
    app.stop().await.expect("clean stop");
}
both_backends!(
    three_unread_at_most_kept_across_a_restart_and_cleared_by_new,
    gate_restart_new
);

async fn recalled(db: TestDb) {
    let mut app = TestApp::spawn(config(&feed_config(&db, "", ""))).await;
    app.route(&chatter("om_keep", "kept")).await;
    app.route(&chatter("om_gone", "regret this")).await;
    let recall = Signer::default().recall("om_gone", "oc_group");
    assert_eq!(app.event(&recall).await.status, 200);
    app.processed("ev-recall-om_gone").await;
    flush(&app).await;
    let f = feed(&app).await;
    let text = f["segments"][0]["text"].as_str().unwrap_or_default();
    assert!(text.contains("kept") && !text.contains("regret"), "{text}");
    app.stop().await.expect("clean stop");
}
both_backends!(a_recalled_message_never_enters_a_segment, recalled);

async fn webhook_inject(db: TestDb) {
    let mut agent = GatedAgent::start().await;
    agent.open();
    let text = feed_config(&db, "", &agent.config());
    let mut app = TestApp::spawn(config(&text)).await;
    assert_eq!(
        app.ask(&Msg::group("om_root", "topic").at_bot()).await,
        "answered"
    );
    let turn = agent.next().await;
    assert_eq!(turn["kind"], "turn");
    let turns_before = app.state.store.turn_counts().await.expect("counts");
    app.route(&chatter("om_w", "background for the agent"))
        .await;
    flush(&app).await;
    let inject = agent.next().await;
    assert_eq!(inject["kind"], "inject", "{inject}");
    assert!(inject["turn_id"].is_null());
    assert_eq!(inject["session_key"], SESSION);
    assert_eq!(inject["session_id"], turn["session_id"]);
    assert!(
        inject["text"]
            .as_str()
            .unwrap_or_default()
            .contains("background for the agent")
    );
    assert_eq!(states(&feed(&app).await), ["attached"]);
    // No turn came of it, and nothing was said in the chat.
    assert_eq!(
        app.state.store.turn_counts().await.expect("counts"),
        turns_before
    );
    let replies = app
        .state
        .store
        .outbound("planner", 10)
        .await
        .expect("replies");
    assert_eq!(replies.len(), 1, "only the first turn's answer");
    app.stop().await.expect("clean stop");
}
both_backends!(
    a_webhook_agent_gets_a_signed_inject_call_that_is_no_turn,
    webhook_inject
);

/// `/status`'s feed counts of the planner: (gathered, waiting, attached).
async fn status_counts(app: &TestApp) -> (i64, i64, i64) {
    let a = app.get("/status").await;
    let p = &a.json["feed"]["profiles"][0];
    assert_eq!(p["profile"], "planner", "{}", a.text);
    let n = |k: &str| p[k].as_i64().unwrap_or(-1);
    (n("gathered"), n("waiting"), n("attached"))
}

async fn flush_profile(db: TestDb) {
    let mut app = TestApp::spawn(config(&feed_config(&db, "", ""))).await;
    // Two threads with a session, one without (its segment waits for a first turn).
    for root in ["om_root", "om_two"] {
        let ask = Msg::group(root, "topic").at_bot();
        assert_eq!(app.ask(&ask).await, "answered");
        app.route(&Msg::group(&format!("{root}_c"), "aside").in_thread(root))
            .await;
    }
    app.route(&Msg::group("om_new_c", "aside").in_thread("om_new"))
        .await;
    assert_eq!(status_counts(&app).await, (3, 0, 0));

    let body = flush_at(&app, "profile=planner").await;
    assert!(body["packed"].is_null(), "{body}");
    assert_eq!(body["attached"].as_array().map(Vec::len), Some(2), "{body}");
    let sessions: Vec<(&str, bool, usize)> = body["sessions"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|s| {
            (
                s["session_key"].as_str().unwrap_or_default(),
                s["packed"].is_i64(),
                s["attached"].as_array().map_or(0, Vec::len),
            )
        })
        .collect();
    assert_eq!(
        sessions,
        [
            ("thread:oc_group:om_new", true, 0),
            ("thread:oc_group:om_root", true, 1),
            ("thread:oc_group:om_two", true, 1),
        ],
        "{body}"
    );
    assert_eq!(status_counts(&app).await, (0, 1, 2));

    // Again: only the session whose segment still waits is looked at.
    let again = flush_at(&app, "profile=planner").await;
    assert_eq!(
        again["sessions"][0]["session_key"],
        "thread:oc_group:om_new"
    );
    assert_eq!(again["sessions"].as_array().map(Vec::len), Some(1));
    app.stop().await.expect("clean stop");
}
both_backends!(
    a_flush_without_session_key_flushes_every_session_and_status_counts_them,
    flush_profile
);
