//! Turn events: a webhook agent reports what it does while its turn runs, through
//! signed `POST /agent/{profile}/turns/{turn_id}/events` — stored per turn, repeats
//! accepted once, old seqs kept but not displayed, each kind checked, bounded, refused
//! for unknown or ended turns, shown by `GET /turns/{id}`, kept across a restart.

use feishu_bridge::store::{AppendOutcome, NewTurnEvent, TurnEventLimits};

use crate::support::gated_agent::post_event;
use crate::{
    both_backends,
    support::{
        Answer, TestApp, TestDb, config, config_toml,
        feishu::Msg,
        gated_agent::{GatedAgent, webhook_agent_toml},
        next_matching,
    },
};

/// The planner with the gated agent, and a second profile `coder` whose agent signs
/// with the same secret.
fn two_profiles(db: &TestDb, agent: &GatedAgent) -> String {
    let coder = format!(
        "\n[[profiles]]\nname = \"coder\"\napp_id = \"cli_test_coder\"\n\
         verification_token = \"coder-token\"\ndry_run = true\n{}",
        webhook_agent_toml(&agent.url, 60)
    );
    config_toml(db, &format!("{}{coder}", agent.config()))
}

/// POSTs one event, signed unless `signature` says otherwise.
async fn post(app: &TestApp, path: (&str, &str), body: &str, signature: Option<&str>) -> Answer {
    post_event(app, path, body, signature).await
}

/// Asks the planner; returns the turn id once the agent holds the turn (running).
async fn running_turn(app: &mut TestApp, agent: &mut GatedAgent, message_id: &str) -> String {
    app.route(&Msg::group(message_id, "work on it").at_bot())
        .await;
    let turn = agent.next().await;
    turn["turn_id"].as_str().expect("turn id").to_string()
}

async fn stored(app: &TestApp, turn_id: &str) -> usize {
    let rows = app.state.store.turn_events(turn_id).await.expect("store");
    rows.len()
}

const TOOL_START: &str = r#"{"seq":3,"kind":"tool","id":"c1","phase":"start","name":"grep","input_summary":"TODO in src","status":"running"}"#;
const TOOL_END: &str = r#"{"seq":4,"kind":"tool","id":"c1","phase":"end","name":"grep","status":"ok","duration_ms":42}"#;
const STATUS: &str = r#"{"seq":5,"kind":"status","text":"reading the files"}"#;
const ASK: &str = r#"{"seq":6,"kind":"ask","id":"q1","prompt":"Deploy?","style":"select","options":["now","later"],"timeout_secs":60,"default":"later"}"#;
const ERROR: &str = r#"{"seq":7,"kind":"error","message":"one file could not be read"}"#;

/// Order, repeats and conflicts; the answers and the stored stale flag.
async fn order_and_repeats(app: &TestApp, t: (&str, &str)) {
    let second = r#"{"seq":2,"kind":"text","text":"lo","mode":"delta"}"#;
    let a = post(app, t, second, None).await;
    assert_eq!(a.status, 200, "{}", a.text);
    assert_eq!(
        (a.json["duplicate"].as_bool(), a.json["stale"].as_bool()),
        (Some(false), Some(false))
    );
    let first = r#"{"seq":1,"kind":"text","text":"Hel","mode":"delta"}"#;
    let a = post(app, t, first, None).await;
    assert_eq!(
        (a.status, a.json["stale"].as_bool()),
        (200, Some(true)),
        "{}",
        a.text
    );
    let again = post(app, t, second, None).await;
    assert_eq!(
        (again.status, again.json["duplicate"].as_bool()),
        (200, Some(true))
    );
    let changed = r#"{"seq":2,"kind":"text","text":"LO","mode":"delta"}"#;
    let c = post(app, t, changed, None).await;
    assert_eq!((c.status, c.code()), (409, "seq_conflict"), "{}", c.text);
    assert_eq!(
        stored(app, t.1).await,
        2,
        "a repeat or a conflict stores nothing"
    );
}

/// Bad events of each kind, bad signatures, unknown turns, an oversized body: refused,
/// nothing stored.
async fn refusals(app: &TestApp, t: (&str, &str)) {
    let before = stored(app, t.1).await;
    for bad in [
        r#"{"seq":9,"kind":"video","url":"x"}"#,
        r#"{"kind":"status","text":"no seq"}"#,
        r#"{"seq":9,"kind":"text","text":"x"}"#,
        r#"{"seq":9,"kind":"text","text":"x","mode":"append"}"#,
        r#"{"seq":9,"kind":"tool","id":"c","phase":"start","name":"n","status":"ok"}"#,
        r#"{"seq":9,"kind":"tool","phase":"start","name":"n","status":"running"}"#,
        r#"{"seq":9,"kind":"status","text":"one\ntwo"}"#,
        r#"{"seq":9,"kind":"status","text":"hi","colour":"red"}"#,
        r#"{"seq":9,"kind":"ask","id":"q","prompt":"p","style":"select","options":["a"],"timeout_secs":5}"#,
        r#"{"seq":9,"kind":"ask","id":"q","prompt":"p","style":"confirm","timeout_secs":0}"#,
        r#"{"seq":9,"kind":"error","message":""}"#,
    ] {
        let a = post(app, t, bad, None).await;
        assert_eq!(
            (a.status, a.code()),
            (422, "invalid_turn_event"),
            "{bad}: {}",
            a.text
        );
    }
    let long = format!(
        r#"{{"seq":9,"kind":"status","text":"{}"}}"#,
        "s".repeat(600)
    );
    assert_eq!(
        post(app, t, &long, None).await.status,
        422,
        "an over-long status line"
    );
    let a = post(app, t, "not json", None).await;
    assert_eq!((a.status, a.code()), (400, "malformed_json"));
    let ok = r#"{"seq":9,"kind":"status","text":"fine"}"#;
    let a = post(app, t, ok, Some("v1,AAAA")).await;
    assert_eq!((a.status, a.code()), (401, "bad_signature"));
    let a = post(app, (t.0, "turn_nope"), ok, None).await;
    assert_eq!((a.status, a.code()), (404, "unknown_turn"));
    let a = post(app, ("coder", t.1), ok, None).await;
    assert_eq!(
        (a.status, a.code()),
        (404, "unknown_turn"),
        "another profile's turn"
    );
    let big = format!(
        r#"{{"seq":9,"kind":"text","text":"{}","mode":"delta"}}"#,
        "x".repeat(17_000)
    );
    let a = post(app, t, &big, None).await;
    assert_eq!((a.status, a.code()), (413, "payload_too_large"));
    assert_eq!(stored(app, t.1).await, before, "nothing refused was stored");
}

/// `GET /turns/{id}`: the log in seq order and what it adds up to.
async fn shows_log(app: &TestApp, turn_id: &str) {
    let g = app.get(&format!("/turns/{turn_id}")).await;
    assert_eq!(g.status, 200, "{}", g.text);
    let events = g.json["events"].as_array().cloned().unwrap_or_default();
    let seqs: Vec<i64> = events.iter().filter_map(|e| e["seq"].as_i64()).collect();
    assert_eq!(seqs, [1, 2, 3, 4, 5, 6, 7]);
    assert_eq!(
        (events[0]["stale"].as_bool(), events[1]["stale"].as_bool()),
        (Some(true), Some(false))
    );
    assert_eq!(events[2]["kind"], "tool");
    assert_eq!(events[2]["event"]["input_summary"], "TODO in src");
    assert!(events[0]["received_at"].as_i64().is_some_and(|t| t > 0));
    let s = &g.json["event_summary"];
    assert_eq!(s["text"], "lo", "the stale delta is not displayed");
    assert_eq!(
        (
            s["tools"][0]["status"].as_str(),
            s["tools"][0]["duration_ms"].as_i64()
        ),
        (Some("ok"), Some(42))
    );
    assert_eq!(s["status"], "reading the files");
    assert_eq!(s["asks"][0]["options"][1], "later");
    assert_eq!(s["errors"][0], "one file could not be read");
}

async fn protocol(db: TestDb) {
    let mut agent = GatedAgent::start().await;
    let text = two_profiles(&db, &agent);
    let mut app = TestApp::spawn(config(&text)).await;
    let turn_id = running_turn(&mut app, &mut agent, "om_q").await;
    let t = ("planner", turn_id.as_str());
    order_and_repeats(&app, t).await;
    let mut notes = app.state.turn_events.subscribe();
    for body in [TOOL_START, TOOL_END, STATUS, ASK, ERROR] {
        let a = post(&app, t, body, None).await;
        assert_eq!(
            (a.status, a.json["stale"].as_bool()),
            (200, Some(false)),
            "{body}: {}",
            a.text
        );
    }
    let note = next_matching(&mut notes, "the note of seq 3", |_| true).await;
    assert_eq!((note.turn_id.as_str(), note.seq), (turn_id.as_str(), 3));
    refusals(&app, t).await;
    shows_log(&app, &turn_id).await;

    agent.open();
    assert_eq!(app.turn_ended("om_q").await.state, "succeeded");
    let late = r#"{"seq":8,"kind":"status","text":"too late"}"#;
    let a = post(&app, t, late, None).await;
    assert_eq!((a.status, a.code()), (409, "turn_ended"));
    assert_eq!(stored(&app, &turn_id).await, 7);
    app.stop().await.expect("clean stop");

    let app = TestApp::spawn(config(&text)).await;
    shows_log(&app, &turn_id).await;
    app.stop().await.expect("clean stop");
}
both_backends!(a_webhook_agent_reports_its_turn_as_signed_events, protocol);

async fn bounds(db: TestDb) {
    let mut agent = GatedAgent::start().await;
    let mut app = TestApp::spawn(config(&two_profiles(&db, &agent))).await;
    let turn_id = running_turn(&mut app, &mut agent, "om_b").await;
    let store = app.state.store.clone();
    let event = |seq: i64, profile: &'static str| NewTurnEvent {
        turn_id: &turn_id,
        profile,
        seq,
        kind: "status",
        body: r#"{"kind":"status","text":"x"}"#,
        now: feishu_bridge::util::UnixMs(1),
        ask: None,
    };
    let two = TurnEventLimits {
        max_events: 2,
        max_bytes: 1 << 20,
    };
    let stored_ = AppendOutcome::Stored { stale: false };
    for (seq, profile, want) in [
        (1, "coder", AppendOutcome::UnknownTurn),
        (1, "planner", stored_),
        (2, "planner", stored_),
        (3, "planner", AppendOutcome::Full),
    ] {
        let got = store.append_turn_event(&event(seq, profile), two).await;
        assert_eq!(got.expect("store"), want, "seq {seq} of {profile}");
    }
    assert_eq!(
        stored(&app, &turn_id).await,
        2,
        "the count bound stores nothing more"
    );

    // The byte bound through the endpoint: texts just under the body limit until the
    // turn's 1 MiB is spent.
    let t = ("planner", turn_id.as_str());
    let chunk = "y".repeat(16_000);
    let mut seq = 3;
    let refused = loop {
        let body = format!(r#"{{"seq":{seq},"kind":"text","text":"{chunk}","mode":"delta"}}"#);
        let a = post(&app, t, &body, None).await;
        if a.status != 200 {
            break a;
        }
        seq += 1;
        assert!(seq < 100, "the byte bound never came");
    };
    assert_eq!(
        (refused.status, refused.code()),
        (409, "turn_events_full"),
        "{}",
        refused.text
    );
    let rows = app.state.store.turn_events(&turn_id).await.expect("store");
    let bytes: usize = rows.iter().map(|r| r.body.len()).sum();
    assert!(bytes <= 1 << 20 && bytes + 16_000 > 1 << 20, "{bytes}");
    assert!(
        rows.iter().all(|r| r.seq < seq),
        "the refused event is not stored"
    );

    agent.open();
    assert_eq!(app.turn_ended("om_b").await.state, "succeeded");
    app.stop().await.expect("clean stop");
}
both_backends!(a_turns_events_are_bounded_in_count_and_bytes, bounds);
