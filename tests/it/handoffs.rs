//! Bots hand work to each other inside the hub: a profile's answer that mentions another
//! profile's bot (or carries a structured `handoff`) queues that profile's turn in the
//! same thread, on behalf of the person who asked; permission follows that person; the
//! loop guard (hops, ping-pong, the thread's hourly budget) cuts a chain with one note;
//! `/stop` stops a chain; a queued hop survives a replica's death and runs once.

use feishu_bridge::{store::TurnRow, turns::TurnDone};
use serde_json::{Value, json};
use tokio::sync::broadcast;

use crate::{
    both_backends,
    support::{
        Signer, TestApp, TestDb, config, config_toml,
        fake_feishu::{FakeFeishu, mention_tags},
        feishu::{CODER_PROFILE, Msg},
        gated_agent::GatedAgent,
        next_matching,
    },
};

/// A third bot, `tester` (its replies recorded, not sent).
const TESTER_PROFILE: &str = r#"
[[profiles]]
name = "tester"
app_id = "cli_test_tester"
encrypt_key = "tester-key"
verification_token = "tester-token"
bot_open_id = "ou_bot_tester"
dry_run = true
"#;

/// `text` mentioning the bot of `profile`, as an agent writes it.
fn at(profile: &str, text: &str) -> String {
    format!(r#"<at user_id="ou_bot_{profile}">{profile}</at> {text}"#)
}

/// An agent that answers every turn with `output`, released at once.
async fn saying(output: impl Fn(&Value) -> String + Send + Sync + 'static) -> GatedAgent {
    let agent = GatedAgent::answering(move |turn| json!({ "output": output(turn) })).await;
    agent.open();
    agent
}

/// The request text of a turn as its agent got it.
fn request(turn: &Value) -> &str {
    turn["request_text"].as_str().unwrap_or_default()
}

/// A hub in one chat, the shared thread on: the planner (its `keys` and `agent`), then
/// `bots` (`(profile table, its agent)`), then `more` config.
fn hub(
    db: &TestDb,
    (keys, agent): (&str, &GatedAgent),
    bots: &[(&str, &GatedAgent)],
    more: &str,
) -> String {
    let mut extra = format!("{keys}{}", agent.config());
    for (table, agent) in bots {
        extra.push_str(table);
        extra.push_str(&agent.config());
    }
    extra.push_str("\n[context]\nshared_thread_enabled = true\n");
    extra.push_str(more);
    config_toml(db, &extra)
}

/// Alice asks the planner in the `om_root` thread, after Bob mentioned her there (so
/// her name is known).
async fn alice_asks_planner(app: &mut TestApp, id: &str, text: &str) {
    let intro = Msg::group(&format!("{id}_intro"), "welcome")
        .mentioning("ou_alice", "Alice")
        .by("ou_bob")
        .in_thread("om_root");
    app.route(&intro).await;
    let ask = Msg::group(id, text).at_bot().in_thread("om_root");
    app.route(&ask).await;
}

/// Waits for the next turn of `profile` to end; its row.
async fn next_ended(
    app: &TestApp,
    done: &mut broadcast::Receiver<TurnDone>,
    profile: &str,
) -> TurnRow {
    let what = format!("a turn of {profile}");
    let t = next_matching(done, &what, |t| t.profile == profile).await;
    app.state
        .store
        .turn(&t.turn_id)
        .await
        .expect("store answers")
        .expect("the turn")
}

/// The notices the planner posted (recorded), newest last.
async fn planner_notices(app: &TestApp) -> Vec<String> {
    app.state
        .store
        .outbound("planner", 100)
        .await
        .expect("store answers")
        .into_iter()
        .filter(|r| r.kind.as_str() == "notice")
        .map(|r| r.text)
        .collect()
}

/// `feishu_bridge_handoffs_total{outcome}` as `/metrics` shows it.
async fn handoffs_counted(app: &TestApp, outcome: &str) -> String {
    let metrics = app.get("/metrics").await.text;
    let series = format!("feishu_bridge_handoffs_total{{outcome=\"{outcome}\"}} ");
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(series.as_str()))
        .unwrap_or("0")
        .to_string()
}

async fn by_mention(db: TestDb) {
    let fake = FakeFeishu::planner().await;
    let planner = saying(|t| at("coder", &format!("please build: {}", request(t)))).await;
    let mut coder = saying(|t| format!("built {}", request(t))).await;
    let keys = fake.profile_keys();
    let text = hub(&db, (&keys, &planner), &[(CODER_PROFILE, &coder)], "");
    let mut app = TestApp::spawn(config(&text)).await;
    let mut done = app.state.turns_done.subscribe();
    alice_asks_planner(&mut app, "om_q", "the login page").await;
    let planned = next_ended(&app, &mut done, "planner").await;
    assert_eq!(planned.state, "succeeded", "{:?}", planned.error);
    let answer_id = planned.reply_message_id.clone().expect("posted");

    // The coder got a turn of its own, on Alice's behalf, asked what the planner wrote.
    let turn = coder.next().await;
    assert_eq!(request(&turn), "@coder please build: the login page");
    assert_eq!(turn["sender"]["open_id"], "ou_alice");
    assert_eq!(turn["sender"]["name"], "Alice");
    assert_eq!(turn["message_id"], answer_id.as_str());
    assert_eq!(
        turn["handoff_peers"],
        json!([{"profile": "planner", "open_id": "ou_bot_planner"}]),
        "who it may hand to"
    );
    let hop = next_ended(&app, &mut done, "coder").await;
    assert_eq!(hop.state, "succeeded", "{:?}", hop.error);
    assert_eq!(hop.hop, Some(1));
    let chain = hop.chain_id.clone().expect("a chain");
    assert!(
        app.last_reply("coder")
            .await
            .contains("built @coder please build")
    );

    // The posted answer reads the coder's name and pings nobody.
    let sent = fake.state.sent.lock().expect("lock").clone();
    let posted: Vec<&Value> = sent
        .iter()
        .filter(|(to, _)| to == "om_q")
        .map(|(_, b)| b)
        .collect();
    assert_eq!(posted.len(), 1, "{sent:?}");
    assert!(posted[0].to_string().contains("coder"), "{}", posted[0]);
    assert!(
        mention_tags(&posted[0].to_string()).is_empty(),
        "{}",
        posted[0]
    );

    // Explained: the verdict names the chain; explain says who and on whose behalf.
    let verdicts = app
        .get(&format!("/explain/message/{answer_id}?profile=coder"))
        .await
        .json;
    let v = &verdicts["verdicts"][0];
    assert_eq!(
        (v["verdict"].as_str(), v["reason"].as_str()),
        (Some("invoked"), Some("handoff"))
    );
    assert_eq!(v["chain_id"], chain.as_str());
    let e = app.explain("coder", "om_root", Some(&answer_id)).await.json;
    assert_eq!(
        e["handoff"]["summary"],
        format!(
            "invoked by planner's turn {}, requested by Alice",
            planned.turn_id
        )
    );
    assert_eq!(e["handoff"]["path"], json!(["planner", "coder"]));
    let turns = app.get("/turns?profile=coder").await.json;
    assert_eq!(turns["turns"][0]["chain_id"], chain.as_str());
    assert_eq!(turns["turns"][0]["hop"], 1);
    assert_eq!(handoffs_counted(&app, "started").await, "1");
    assert_eq!(db.count("handoffs").await, 1);
    app.stop().await.expect("clean stop");
}
both_backends!(a_mention_of_another_profiles_bot_hands_over, by_mention);

async fn by_field(db: TestDb) {
    let planner = GatedAgent::answering(|t| {
        json!({
            "output": format!("Plan for {}: one step.", request(t)),
            "handoff": {"profile": "coder", "text": "implement step 1"},
        })
    })
    .await;
    planner.open();
    let mut coder = saying(|t| format!("done: {}", request(t))).await;
    let text = hub(&db, ("", &planner), &[(CODER_PROFILE, &coder)], "");
    let mut app = TestApp::spawn(config(&text)).await;
    let mut done = app.state.turns_done.subscribe();
    alice_asks_planner(&mut app, "om_q", "the export").await;
    let planned = next_ended(&app, &mut done, "planner").await;
    assert_eq!(planned.state, "succeeded", "{:?}", planned.error);

    // The coder is asked the field's text, and sees the planner's answer in its context.
    let turn = coder.next().await;
    assert_eq!(request(&turn), "implement step 1");
    let context: Vec<(&str, &str)> = turn["context_items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|i| {
            (
                i["item_type"].as_str().unwrap_or_default(),
                i["text"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    assert!(
        context.contains(&("agent_output", "Plan for the export: one step.")),
        "{context:?}"
    );
    let hop = next_ended(&app, &mut done, "coder").await;
    assert_eq!(hop.state, "succeeded", "{:?}", hop.error);
    let e = app
        .explain("coder", "om_root", planned.reply_message_id.as_deref())
        .await
        .json;
    assert_eq!(e["handoff"]["via"], "field", "{e}");
    app.stop().await.expect("clean stop");
}
both_backends!(
    a_structured_handoff_field_hands_over_with_the_answer_in_context,
    by_field
);

async fn refused(db: TestDb) {
    let planner = saying(|_| at("coder", "please review")).await;
    let mut coder = saying(|_| "reviewed".into()).await;
    let coder_table = format!("{CODER_PROFILE}allow_users = [\"ou_bob\"]\n");
    let text = hub(&db, ("", &planner), &[(&coder_table, &coder)], "");
    let mut app = TestApp::spawn(config(&text)).await;
    let mut done = app.state.turns_done.subscribe();
    alice_asks_planner(&mut app, "om_q", "my change").await;
    let planned = next_ended(&app, &mut done, "planner").await;
    let answer_id = planned.reply_message_id.clone().expect("posted");
    // Alice may not ask the coder, so neither may the planner on her behalf.
    assert_eq!(
        app.verdict("coder", &answer_id).await,
        ("ignored".into(), "user_not_allowed".into())
    );
    let notes = planner_notices(&app).await;
    assert_eq!(
        notes,
        ["Not handed to coder: Alice may not ask coder in this chat."]
    );
    assert_eq!(db.count("turns").await, 1, "no turn for the coder");
    assert!(coder.turns.try_recv().is_err());
    assert_eq!(handoffs_counted(&app, "refused").await, "1");
    app.stop().await.expect("clean stop");
}
both_backends!(
    a_person_who_may_not_invoke_the_target_is_refused_with_one_note,
    refused
);

/// Three bots passing on round the table: planner → coder → tester → planner → …
async fn round_robin_hub(db: &TestDb, more: &str) -> (TestApp, [GatedAgent; 3]) {
    let planner = saying(|_| at("coder", "your turn")).await;
    let coder = saying(|_| at("tester", "your turn")).await;
    let tester = saying(|_| at("planner", "your turn")).await;
    let text = hub(
        db,
        ("", &planner),
        &[(CODER_PROFILE, &coder), (TESTER_PROFILE, &tester)],
        more,
    );
    (
        TestApp::spawn(config(&text)).await,
        [planner, coder, tester],
    )
}

async fn hop_limit(db: TestDb) {
    let (mut app, _agents) = round_robin_hub(&db, "[handoff]\nmax_hops = 2\n").await;
    let mut done = app.state.turns_done.subscribe();
    alice_asks_planner(&mut app, "om_q", "go").await;
    for profile in ["planner", "coder", "tester"] {
        let row = next_ended(&app, &mut done, profile).await;
        assert_eq!(row.state, "succeeded", "{profile}: {:?}", row.error);
    }
    // The tester's answer would be hop 3: cut, said once (by the tester, in the thread).
    let cut = app
        .state
        .store
        .outbound("tester", 100)
        .await
        .expect("store answers")
        .into_iter()
        .filter(|r| r.kind.as_str() == "notice")
        .map(|r| r.text)
        .collect::<Vec<_>>();
    assert_eq!(
        cut,
        ["Handoff from tester to planner stopped: this chain reached its limit of 2 handoffs."]
    );
    assert_eq!(db.count("turns").await, 3);
    assert_eq!(handoffs_counted(&app, "cut_hops").await, "1");
    assert_eq!(handoffs_counted(&app, "started").await, "2");
    app.stop().await.expect("clean stop");
}
both_backends!(the_hop_limit_cuts_a_chain_with_one_note, hop_limit);

async fn ping_pong(db: TestDb) {
    let planner = saying(|_| at("coder", "over to you")).await;
    let coder = saying(|_| at("planner", "back to you")).await;
    let text = hub(&db, ("", &planner), &[(CODER_PROFILE, &coder)], "");
    let mut app = TestApp::spawn(config(&text)).await;
    let mut done = app.state.turns_done.subscribe();
    alice_asks_planner(&mut app, "om_q", "go").await;
    // planner → coder → planner (one round trip), then planner → coder is cut.
    for profile in ["planner", "coder", "planner"] {
        let row = next_ended(&app, &mut done, profile).await;
        assert_eq!(row.state, "succeeded", "{profile}: {:?}", row.error);
    }
    let notes = planner_notices(&app).await;
    assert_eq!(
        notes,
        ["Handoff from planner to coder stopped: the two bots already went back and forth once."]
    );
    assert_eq!(db.count("turns").await, 3);
    assert_eq!(handoffs_counted(&app, "cut_pingpong").await, "1");
    app.stop().await.expect("clean stop");
}
both_backends!(
    ping_pong_beyond_one_round_trip_is_cut_with_one_note,
    ping_pong
);

async fn budget(db: TestDb) {
    let planner = saying(|_| at("coder", "please")).await;
    let coder = saying(|_| "ok".into()).await;
    let more = "[handoff]\nthread_budget_per_hour = 1\n";
    let text = hub(&db, ("", &planner), &[(CODER_PROFILE, &coder)], more);
    let mut app = TestApp::spawn(config(&text)).await;
    let mut done = app.state.turns_done.subscribe();
    alice_asks_planner(&mut app, "om_q1", "first").await;
    next_ended(&app, &mut done, "planner").await;
    next_ended(&app, &mut done, "coder").await;
    // A second chain in the same thread within the hour: over the budget.
    let again = Msg::group("om_q2", "second").at_bot().in_thread("om_root");
    assert_eq!(app.ask(&again).await, "answered");
    let notes = planner_notices(&app).await;
    assert_eq!(
        notes,
        ["Handoff from planner to coder stopped: this thread used its handoffs for the hour."]
    );
    assert_eq!(db.count("turns").await, 3);
    assert_eq!(handoffs_counted(&app, "cut_budget").await, "1");
    app.stop().await.expect("clean stop");
}
both_backends!(the_threads_hourly_budget_cuts_a_chain_with_one_note, budget);

async fn not_a_profile(db: TestDb) {
    let planner =
        saying(|_| r#"<at user_id="ou_some_other_bot">helper</at> over to you"#.into()).await;
    let coder = saying(|_| "never asked".into()).await;
    let text = hub(&db, ("", &planner), &[(CODER_PROFILE, &coder)], "");
    let mut app = TestApp::spawn(config(&text)).await;
    let ask = Msg::group("om_q", "go").at_bot().in_thread("om_root");
    assert_eq!(app.ask(&ask).await, "answered");
    assert_eq!(db.count("handoffs").await, 0);
    assert_eq!(db.count("turns").await, 1);
    assert!(planner_notices(&app).await.is_empty());
    app.stop().await.expect("clean stop");
}
both_backends!(
    a_mentioned_bot_that_is_no_profile_of_the_hub_does_nothing,
    not_a_profile
);

/// The coder keyed per person in the chat, so its turns queue apart from the planner's
/// threads: a hop waits behind the coder's own turn there.
fn per_person_coder() -> String {
    format!("{CODER_PROFILE}thread_isolation = false\ngroup_scope = \"per-user\"\n")
}

/// The coder's turn of `answer_id` (the answer that handed over).
async fn hop_of(app: &TestApp, answer_id: &str) -> TurnRow {
    crate::support::app::turn_of(app.state.store.as_ref(), answer_id).await
}

async fn stop_mid_chain(db: TestDb) {
    let planner = saying(|_| at("coder", "build it")).await;
    // The coder answers only once the test lets it.
    let mut coder = GatedAgent::start().await;
    let coder_table = per_person_coder();
    let text = hub(&db, ("", &planner), &[(&coder_table, &coder)], "");
    let mut app = TestApp::spawn(config(&text)).await;
    let mut done = app.state.turns_done.subscribe();

    // A running hop: /stop in its thread stops it.
    alice_asks_planner(&mut app, "om_q1", "first").await;
    let first = next_ended(&app, &mut done, "planner").await;
    let first_answer = first.reply_message_id.clone().expect("posted");
    assert_eq!(request(&coder.next().await), "@coder build it");
    let stop = Msg::group("om_stop1", "/stop")
        .at_bot()
        .in_thread("om_root");
    app.route(&stop).await;
    let stopped = next_ended(&app, &mut done, "coder").await;
    assert_eq!(stopped.turn_id, hop_of(&app, &first_answer).await.turn_id);
    assert_eq!(stopped.state, "cancelled", "{:?}", stopped.error);

    // A queued hop: the coder is busy with Alice's own request in the main chat, so the
    // next hop waits; /stop in the thread cancels it before it starts.
    let direct = Msg::group("om_direct", "direct").mentioning("ou_bot_coder", "Coder");
    app.route_as("coder", &Signer::coder(), &direct).await;
    assert_eq!(request(&coder.next().await), "direct");
    let again = Msg::group("om_q2", "second").at_bot().in_thread("om_root");
    assert_eq!(app.ask(&again).await, "answered");
    let second = app.turn_of("om_q2").await;
    let queued = hop_of(&app, second.reply_message_id.as_deref().expect("posted")).await;
    assert_eq!(queued.state, "queued");
    let stop = Msg::group("om_stop2", "/stop")
        .at_bot()
        .in_thread("om_root");
    app.route(&stop).await;
    assert!(
        app.last_reply("planner")
            .await
            .contains("Cancelled 1 queued handoff(s)."),
        "{}",
        app.last_reply("planner").await
    );
    coder.open();
    let direct_turn = next_ended(&app, &mut done, "coder").await;
    assert_eq!(direct_turn.message_id, "om_direct");
    assert_eq!(direct_turn.state, "succeeded", "{:?}", direct_turn.error);
    let skipped = next_matching(&mut done, "the cancelled hop", |t| {
        t.turn_id == queued.turn_id
    })
    .await;
    assert_eq!(skipped.outcome.as_str(), "skipped");
    assert_eq!(hop_of(&app, &queued.message_id).await.state, "cancelled");
    assert!(
        coder.turns.try_recv().is_err(),
        "the cancelled hop never reached the coder"
    );
    assert_eq!(handoffs_counted(&app, "cancelled").await, "1");
    app.stop().await.expect("clean stop");
}
both_backends!(
    stop_in_the_thread_stops_the_running_hop_and_cancels_queued_ones,
    stop_mid_chain
);

/// Waits until a turn of `profile` has ended on `app`, whenever it did; its row.
async fn ended_on(app: &TestApp, profile: &str) -> TurnRow {
    let mut done = app.state.turns_done.subscribe();
    loop {
        let rows = app
            .state
            .store
            .turns(&feishu_bridge::store::TurnFilter {
                profile: Some(profile.into()),
                limit: 10,
                ..Default::default()
            })
            .await
            .expect("store answers");
        if let Some(row) = rows
            .into_iter()
            .find(|r| !matches!(r.state.as_str(), "queued" | "running"))
        {
            return row;
        }
        next_matching(&mut done, "a turn's end", |_| true).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    pg_unreachable,
    ignore = "Postgres was unreachable when the tests were built"
)]
async fn a_replica_killed_between_hops_leaves_each_hop_to_run_once() {
    use std::sync::atomic::Ordering;

    use crate::support::{crash::Crashable, fake_feishu::Storm};

    let db = TestDb::postgres().await;
    let fake = FakeFeishu::planner().await;
    let planner = saying(|_| at("coder", "build it")).await;
    let mut coder = saying(|t| format!("built: {}", request(t))).await;
    let keys = fake.profile_keys();
    let replica = |name: &str| {
        hub(&db, (&keys, &planner), &[(CODER_PROFILE, &coder)], "").replace(
            "[worker]\npoll_interval_ms = 50\n",
            &format!(
                "[worker]\npoll_interval_ms = 3600000\nreplica_poll_ms = 10\nlease_ms = 600\n\
                 replica_id = \"{name}\"\n"
            ),
        )
    };
    // The planner's answer is stored, then refused (rate limited) while replica a tries
    // to post it: a dies between the planner's answer and the coder's hop.
    *fake.state.storm.lock().expect("lock") = Some(Storm {
        path_contains: "/reply".into(),
        reset_secs: 1,
    });
    let dead = Crashable::start(config(&replica("replica-a"))).await;
    let survivor = TestApp::spawn(config(&replica("replica-b"))).await;
    let ask = Msg::group("om_q", "plan it").at_bot().in_thread("om_root");
    assert_eq!(dead.event(&Signer::default().deliver(&ask)).await, 200);
    let mut activity = fake.state.activity.subscribe();
    if fake.state.storm_refusals.load(Ordering::SeqCst) == 0 {
        next_matching(&mut activity, "a refused reply", |_| {
            fake.state.storm_refusals.load(Ordering::SeqCst) > 0
        })
        .await;
    }
    dead.crash().await;
    *fake.state.storm.lock().expect("lock") = None;

    // b takes the planner's turn over, posts its stored answer, hands over and runs the
    // hop: each once.
    let hop = ended_on(&survivor, "coder").await;
    assert_eq!(hop.state, "succeeded", "{:?}", hop.error);
    assert_eq!(hop.lease_owner.as_deref(), Some("replica-b"));
    assert_eq!(hop.hop, Some(1));
    assert_eq!(request(&coder.next().await), "@coder build it");
    assert!(coder.turns.try_recv().is_err(), "the hop ran once");
    let planned = survivor.turn_of("om_q").await;
    assert_eq!(planned.state, "succeeded", "{:?}", planned.error);
    assert_eq!(
        fake.state.replies_to("om_q").len(),
        1,
        "the answer posted once"
    );
    assert_eq!(db.count("handoffs").await, 1);
    assert_eq!(db.count("turns").await, 2);
    survivor.stop().await.expect("clean stop");
}
