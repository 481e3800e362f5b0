//! The daily digest carried over and posted: the first turn after a digest reset its
//! session gets the summary first in its prompt, explain shows it (also after a
//! restart), a later turn does not get it again, and neither a session whose summary
//! failed nor one with `carry_over = false` gets anything; the summary counts against
//! `context.max_context_chars` (cut, or left out, visibly). `post = "chat"` posts each
//! digest once however many passes run, with a uuid derived from the digest (a lost mark
//! sends the same message again, which Feishu dedups; a refused post is retried by the
//! next pass); `post = "owner"` sends it to the workspace owner; `post = "none"` sends
//! nothing.

use std::sync::{Arc, atomic::Ordering};

use feishu_bridge::{
    digest::post::uuid,
    store::{DigestPostStatus, DigestRow, DigestStatus},
    util::{ManualClock, UnixMs},
};
use serde_json::Value;

use crate::{
    both_backends,
    digest::run_now,
    support::{
        ADMIN, TestApp, TestDb, config_toml,
        fake_feishu::FakeFeishu,
        fake_openai::FakeOpenAi,
        fake_summarizer::{FakeSummarizer, KEY},
        feishu::Msg,
    },
};

const LONG: &str = "let us plan the offsite for next week, somewhere near the lake";
const DATE: &str = "2026-12-02";
const EARLIER: &str = "[Earlier in this chat]";

/// Noon UTC on the test's day: outside the window, so only `POST /digests/run` runs it.
fn noon() -> UnixMs {
    let ts: jiff::Timestamp = "2026-12-02T12:00:00Z".parse().expect("instant");
    UnixMs(ts.as_millisecond())
}

/// The planner (an openai agent) with `keys` in its table (dry run unless they say
/// otherwise), the digest on with `digest` in `[digest]`, and `tail` at the end.
fn config(
    db: &TestDb,
    summarizer: &FakeSummarizer,
    agent: &FakeOpenAi,
    keys: &str,
    digest: &str,
    tail: &str,
) -> feishu_bridge::Config {
    let profile = format!(
        "{keys}[profiles.agent]\nkind = \"openai\"\nbase_url = \"{}\"\nmodel = \"m\"\n",
        agent.base
    );
    let text = format!(
        "{}\n[digest]\nenabled = true\ntimezone = \"UTC\"\n{digest}\n\
         [digest.summarizer]\nbase_url = \"{}\"\nmodel = \"cheap\"\ntimeout_secs = 1\n{tail}",
        config_toml(db, &profile),
        summarizer.base
    );
    feishu_bridge::config::load_from_str(&text, &|k| {
        (k == "FEISHU_BRIDGE_DIGEST_API_KEY").then(|| KEY.to_string())
    })
    .expect("test config is valid")
}

async fn spawn(config: feishu_bridge::Config) -> TestApp {
    spawn_at(config, noon()).await
}

async fn spawn_at(config: feishu_bridge::Config, now: UnixMs) -> TestApp {
    TestApp::spawn_with_clock(config, Arc::new(ManualClock::at(now))).await
}

/// Opens the thread `root` in the test group with an @-request saying `text`, answered.
async fn open(app: &mut TestApp, root: &str, text: &str) {
    assert_eq!(app.ask(&Msg::group(root, text).at_bot()).await, "answered");
}

/// Asks again in the thread `root` (message `id`), answered.
async fn again(app: &mut TestApp, root: &str, id: &str) {
    let msg = Msg::group(id, "what did we settle on?")
        .at_bot()
        .in_thread(root);
    assert_eq!(app.ask(&msg).await, "answered");
}

/// Runs the digest: its digests as the run answered them.
async fn run(app: &TestApp) -> Vec<Value> {
    let (status, body) = run_now(app).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["outcome"], "ran", "{body}");
    body["digests"].as_array().cloned().unwrap_or_default()
}

/// The summary of the thread `root`'s digest, which must have reset its session.
fn summary_of(digests: &[Value], root: &str) -> String {
    let key = format!("thread:oc_group:{root}");
    let d = digests
        .iter()
        .find(|d| d["session_key"] == key.as_str())
        .unwrap_or_else(|| panic!("no digest of {key}: {digests:?}"));
    assert_eq!(d["status"], "reset", "{d}");
    d["summary"].as_str().unwrap_or_default().to_string()
}

/// The prompt of the agent's `n`th request (1-based): its last message.
async fn prompt(agent: &FakeOpenAi, n: usize) -> String {
    let requests = agent.requests(n).await;
    let messages = requests[n - 1].body["messages"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let last = messages.last().cloned().unwrap_or(Value::Null);
    last["content"].as_str().unwrap_or_default().to_string()
}

/// The user messages of the agent's `n`th request (1-based), in order.
async fn user_messages(agent: &FakeOpenAi, n: usize) -> Vec<String> {
    let requests = agent.requests(n).await;
    let messages = requests[n - 1].body["messages"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    messages
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| m["content"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// The explanation of the decision of message `id` in the thread `root`.
async fn explain(app: &TestApp, root: &str, id: &str) -> Value {
    let e = app.explain("planner", root, Some(id)).await;
    assert_eq!(e.status, 200, "{}", e.text);
    e.json
}

/// The readable explain report of message `id` in the thread `root`.
async fn report(app: &TestApp, root: &str, id: &str) -> String {
    let url = format!(
        "{}/explain/{root}?profile=planner&message_id={id}",
        app.base
    );
    let r = app
        .client
        .get(url)
        .bearer_auth(ADMIN)
        .header("accept", "text/plain");
    r.send().await.expect("sent").text().await.expect("text")
}

/// The explained item of the carried summary, if any.
fn carried_item(e: &Value) -> Option<Value> {
    e["selected"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|i| i["item_type"] == "carried_summary")
        .cloned()
}

async fn the_first_turn_after_the_reset_gets_the_summary_once(db: TestDb) {
    let (summarizer, agent) = (
        FakeSummarizer::start().await,
        FakeOpenAi::start(vec!["Noted.".into()]).await,
    );
    let config = config(&db, &summarizer, &agent, "", "", "");
    let mut app = spawn(config.clone()).await;
    open(&mut app, "om_plan", LONG).await;
    assert!(!prompt(&agent, 1).await.contains(EARLIER));
    let summary = summary_of(&run(&app).await, "om_plan");
    assert!(!summary.is_empty());

    // The first turn of the new session: the summary comes first, before anything else.
    again(&mut app, "om_plan", "om_plan_2").await;
    let p = prompt(&agent, 2).await;
    assert!(p.starts_with(EARLIER), "{p}");
    let at = p.find(&summary).expect("the summary is in the prompt");
    for later in ["[Feishu Topic]", "[Feishu Thread]", "[User request]"] {
        assert!(
            p.find(later).is_none_or(|i| i > at),
            "{later} before the summary: {p}"
        );
    }
    let e = explain(&app, "om_plan", "om_plan_2").await;
    let first = &e["selected"][0];
    assert_eq!(first["item_type"], "carried_summary", "{e}");
    assert_eq!(first["truncated"], false);
    assert_eq!(first["chars"], summary.chars().count());
    assert_eq!(e["diagnostics"]["carried_summary"]["status"], "injected");
    assert!(e["context_chars"].as_u64().unwrap_or_default() >= summary.chars().count() as u64);
    let text = report(&app, "om_plan", "om_plan_2").await;
    assert!(
        text.contains("carried_summary") && text.contains("carried      injected"),
        "{text}"
    );

    // A second turn does not get it again: the session's history has it, in the replay
    // of the first turn (the openai backend is handed the earlier turns).
    again(&mut app, "om_plan", "om_plan_3").await;
    let p = prompt(&agent, 3).await;
    assert!(!p.contains(EARLIER), "{p}");
    let replayed = user_messages(&agent, 3).await;
    // The first turn of the new session, then this one (the old session is not replayed).
    assert_eq!(replayed.len(), 2, "{replayed:?}");
    assert!(
        replayed[0].starts_with(EARLIER) && replayed[0].contains(&summary),
        "{replayed:?}"
    );
    assert!(!replayed[1].contains(EARLIER), "{replayed:?}");
    let e = explain(&app, "om_plan", "om_plan_3").await;
    assert_eq!(carried_item(&e), None, "{e}");
    assert_eq!(e["diagnostics"]["carried_summary"]["status"], "in_history");

    // The decision keeps it: explain shows it after a restart.
    app.stop().await.expect("stops");
    let app = spawn(config).await;
    let e = explain(&app, "om_plan", "om_plan_2").await;
    assert!(carried_item(&e).is_some(), "{e}");
    app.stop().await.expect("stops");
}
both_backends!(
    the_first_turn_after_the_reset_gets_the_summary_once,
    the_first_turn_after_the_reset_gets_the_summary_once
);

async fn a_failed_summary_or_carry_over_off_carries_nothing(db: TestDb) {
    let (summarizer, agent) = (
        FakeSummarizer::start().await,
        FakeOpenAi::start(vec!["Noted.".into()]).await,
    );
    let on = config(&db, &summarizer, &agent, "", "", "");
    let mut app = spawn(on).await;
    open(
        &mut app,
        "om_fail",
        "FAIL: this one is long enough to be summarized",
    )
    .await;
    open(&mut app, "om_plan", LONG).await;
    let digests = run(&app).await;
    let failed = digests
        .iter()
        .find(|d| d["session_key"] == "thread:oc_group:om_fail")
        .expect("the failed one's digest");
    assert_eq!(failed["status"], "kept", "{failed}");
    again(&mut app, "om_fail", "om_fail_2").await;
    assert!(!prompt(&agent, 3).await.contains(EARLIER));
    let e = explain(&app, "om_fail", "om_fail_2").await;
    assert_eq!(carried_item(&e), None, "{e}");
    assert_eq!(e["diagnostics"]["carried_summary"]["status"], "none");
    app.stop().await.expect("stops");

    // Off: the session the digest reset gets nothing either.
    let off = config(&db, &summarizer, &agent, "", "carry_over = false", "");
    let mut app = spawn(off).await;
    again(&mut app, "om_plan", "om_plan_2").await;
    assert!(!prompt(&agent, 4).await.contains(EARLIER));
    let e = explain(&app, "om_plan", "om_plan_2").await;
    assert_eq!(carried_item(&e), None, "{e}");
    assert_eq!(e["diagnostics"]["carried_summary"]["status"], "off");
    app.stop().await.expect("stops");
}
both_backends!(
    a_failed_summary_or_carry_over_off_carries_nothing,
    a_failed_summary_or_carry_over_off_carries_nothing
);

async fn the_budget_counts_the_summary(db: TestDb) {
    let (summarizer, agent) = (
        FakeSummarizer::start().await,
        FakeOpenAi::start(vec!["Noted.".into()]).await,
    );
    // A quarter of 200 is 50 characters: the summary (longer) is cut to them.
    let small = config(
        &db,
        &summarizer,
        &agent,
        "",
        "",
        "[context]\nshared_thread_enabled = true\nmax_context_chars = 200\n",
    );
    let mut app = spawn(small).await;
    open(&mut app, "om_plan", LONG).await;
    open(
        &mut app,
        "om_trip",
        "and the trip after it, by train or by car, we will see",
    )
    .await;
    let digests = run(&app).await;
    let summary = summary_of(&digests, "om_plan");
    assert!(summary.chars().count() > 50, "{summary}");
    again(&mut app, "om_plan", "om_plan_2").await;
    let p = prompt(&agent, 3).await;
    assert!(p.starts_with(EARLIER) && p.contains("…[truncated]"), "{p}");
    assert!(!p.contains(&summary), "{p}");
    let e = explain(&app, "om_plan", "om_plan_2").await;
    let item = carried_item(&e).expect("the cut summary");
    assert_eq!(
        (item["truncated"].as_bool(), item["chars"].as_u64()),
        (Some(true), Some(50))
    );
    let d = &e["diagnostics"];
    assert_eq!(d["carried_summary"]["status"], "truncated", "{d}");
    assert_eq!(
        d["carried_summary"]["chars_before"],
        summary.chars().count()
    );
    // What is left of the budget is the thread's.
    assert_eq!(d["thread"]["max_chars"], 150, "{d}");
    app.stop().await.expect("stops");

    // A quarter of 100 is too little: left out, and explain says so.
    let tiny = config(
        &db,
        &summarizer,
        &agent,
        "",
        "",
        "[context]\nshared_thread_enabled = true\nmax_context_chars = 100\n",
    );
    let mut app = spawn(tiny).await;
    again(&mut app, "om_trip", "om_trip_2").await;
    assert!(!prompt(&agent, 4).await.contains(EARLIER));
    let e = explain(&app, "om_trip", "om_trip_2").await;
    assert_eq!(carried_item(&e), None, "{e}");
    let c = &e["diagnostics"]["carried_summary"];
    assert_eq!(
        (c["status"].as_str(), c["max_chars"].as_u64()),
        (Some("over_budget"), Some(25)),
        "{c}"
    );
    assert!(c["digest_id"].as_i64().is_some(), "{c}");
    assert_eq!(
        e["diagnostics"]["thread"]["max_chars"], 100,
        "nothing carried, nothing taken"
    );
    app.stop().await.expect("stops");
}
both_backends!(the_budget_counts_the_summary, the_budget_counts_the_summary);

/// Everything a posting test starts with: the fakes and the digest's rows.
struct Posting {
    fake: FakeFeishu,
    summarizer: FakeSummarizer,
    agent: FakeOpenAi,
}

impl Posting {
    async fn new() -> Self {
        Self {
            fake: FakeFeishu::planner().await,
            summarizer: FakeSummarizer::start().await,
            agent: FakeOpenAi::start(vec!["Noted.".into()]).await,
        }
    }

    /// The planner sending through the fake, `post` set, `tail` at the end, at `now`.
    async fn app_at(&self, db: &TestDb, post: &str, tail: &str, now: UnixMs) -> TestApp {
        let digest = format!("post = \"{post}\"");
        let keys = self.fake.profile_keys();
        let config = config(db, &self.summarizer, &self.agent, &keys, &digest, tail);
        spawn_at(config, now).await
    }

    /// [`Self::app_at`] on the test's day.
    async fn app(&self, db: &TestDb, post: &str, tail: &str) -> TestApp {
        self.app_at(db, post, tail, noon()).await
    }

    /// The digest messages the fake created for `to`.
    fn digests_to(&self, to: &str) -> Vec<Value> {
        self.fake
            .state
            .sent_to(to)
            .into_iter()
            .filter(|b| {
                b["content"]
                    .as_str()
                    .is_some_and(|c| c.contains("Daily digest"))
            })
            .collect()
    }
}

/// The summarized digests of the day, as stored.
async fn summarized(app: &TestApp) -> Vec<DigestRow> {
    let rows = app.state.store.digests_of(DATE).await.expect("digests");
    rows.into_iter()
        .filter(|r| r.summary.is_some() && r.status == DigestStatus::Reset)
        .collect()
}

/// Where posting the day's digests stands: (id, status, attempts).
async fn posts(app: &TestApp) -> Vec<(i64, Option<DigestPostStatus>, i64)> {
    let rows = app.state.store.digest_posts(DATE).await.expect("posts");
    rows.into_iter()
        .map(|p| (p.id, p.post_status.0, p.post_attempts))
        .collect()
}

async fn posted_to_the_chat_once(db: TestDb) {
    let t = Posting::new().await;
    let mut app = t.app(&db, "chat", "").await;
    open(&mut app, "om_plan", LONG).await;
    open(
        &mut app,
        "om_trip",
        "and the trip after it, by train or by car, we will see",
    )
    .await;
    open(&mut app, "om_hi", "hi").await;
    // The first post is refused (the bot is not in the chat): the resets go on.
    t.fake
        .state
        .failures
        .lock()
        .expect("lock")
        .push((400, 230002));
    run(&app).await;
    let rows = summarized(&app).await;
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert_eq!(t.digests_to("oc_group").len(), 1, "one post refused");
    let failed: Vec<_> = posts(&app)
        .await
        .into_iter()
        .filter(|p| p.1 == Some(DigestPostStatus::Failed))
        .collect();
    assert_eq!(failed.len(), 1, "{failed:?}");

    // The next pass retries it; a pass after that posts nothing more.
    let counts = app.state.digest.post_pending().await.expect("a pass");
    assert_eq!((counts.posted, counts.failed), (1, 0));
    let again = app.state.digest.post_pending().await.expect("a pass");
    assert_eq!(again, Default::default());
    let sent = t.digests_to("oc_group");
    assert_eq!(sent.len(), 2, "one message per digest: {sent:?}");
    let mut uuids: Vec<String> = sent
        .iter()
        .map(|b| b["uuid"].as_str().unwrap_or_default().to_string())
        .collect();
    let mut expected: Vec<String> = rows.iter().map(uuid).collect();
    uuids.sort();
    expected.sort();
    assert_eq!(uuids, expected);
    for row in &rows {
        let summary = row.summary.as_deref().unwrap_or_default();
        assert!(
            sent.iter()
                .any(|b| b["content"].as_str().is_some_and(|c| c.contains(summary)))
        );
    }
    let posted: Vec<_> = posts(&app)
        .await
        .into_iter()
        .filter(|p| p.1 == Some(DigestPostStatus::Posted))
        .collect();
    assert_eq!(posted.len(), 2, "{posted:?}");

    // A mark lost after the send (a crash): the next pass sends the same uuid, and
    // Feishu answers with the message it created; still one message per digest.
    forget_marks(&app).await;
    let attempts = t.fake.state.send_attempts.load(Ordering::SeqCst);
    let counts = app.state.digest.post_pending().await.expect("a pass");
    assert_eq!(counts.posted, 2);
    assert_eq!(
        t.fake.state.send_attempts.load(Ordering::SeqCst),
        attempts + 2
    );
    assert_eq!(t.digests_to("oc_group").len(), 2);
    let types = t.fake.state.receive_id_types.lock().expect("lock").clone();
    assert!(types.iter().all(|(_, k)| k == "chat_id"), "{types:?}");
    app.stop().await.expect("stops");
}
both_backends!(posted_to_the_chat_once, posted_to_the_chat_once);

/// Forgets every post mark of the day, as a crash between the send and the mark would.
async fn forget_marks(app: &TestApp) {
    for p in posts(app).await {
        let mark = feishu_bridge::store::DigestPostMark {
            id: p.0,
            status: DigestPostStatus::Failed,
            message_id: None,
            detail: Some("lost"),
            now: noon(),
        };
        app.state
            .store
            .mark_digest_post(&mark)
            .await
            .expect("marked");
    }
}

async fn posted_to_the_owner_or_nowhere(db: TestDb) {
    let t = Posting::new().await;
    let owner = "[[workspaces]]\nchat_id = \"oc_group\"\nowner = \"ou_owner\"\n";
    let mut app = t.app(&db, "owner", owner).await;
    open(&mut app, "om_plan", LONG).await;
    let other = Msg::group("om_other", LONG).in_chat("oc_other").at_bot();
    assert_eq!(app.ask(&other).await, "answered");
    run(&app).await;
    let sent = t.digests_to("ou_owner");
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert!(
        sent[0]["content"]
            .as_str()
            .is_some_and(|c| c.contains("oc_group"))
    );
    assert!(t.digests_to("oc_group").is_empty() && t.digests_to("oc_other").is_empty());
    let types = t.fake.state.receive_id_types.lock().expect("lock").clone();
    assert!(
        types.contains(&("ou_owner".into(), "open_id".into())),
        "{types:?}"
    );
    // The chat without a workspace owner: skipped, and the record says why.
    let rows = app.state.store.digest_posts(DATE).await.expect("posts");
    let skipped: Vec<_> = rows
        .iter()
        .filter(|p| p.post_status.0 == Some(DigestPostStatus::Skipped))
        .collect();
    assert_eq!(skipped.len(), 1, "{rows:?}");
    assert_eq!(
        skipped[0].post_detail.as_deref(),
        Some("the chat has no workspace owner")
    );
    assert_eq!(
        app.state.digest.post_pending().await.expect("a pass"),
        Default::default()
    );
    // `GET /digests` says it too.
    let listed = app.get(&format!("/digests?date={DATE}")).await.json;
    let post_of = |chat: &str| {
        let all = listed["digests"].as_array().cloned().unwrap_or_default();
        let d = all.into_iter().find(|d| d["chat_id"] == chat);
        d.map(|d| d["post"].clone()).unwrap_or_default()
    };
    let skipped = post_of("oc_other");
    assert_eq!(skipped["status"], "skipped", "{listed}");
    assert_eq!(skipped["detail"], "the chat has no workspace owner");
    let posted = post_of("oc_group");
    assert_eq!(
        (posted["status"].as_str(), posted["attempts"].as_i64()),
        (Some("posted"), Some(1))
    );
    assert!(
        posted["message_id"]
            .as_str()
            .is_some_and(|m| m.starts_with("om_")),
        "{posted}"
    );
    app.stop().await.expect("stops");

    // `none`: the next day's digest is posted nowhere.
    let next_day = UnixMs(noon().millis() + 24 * 3600 * 1000);
    let mut app = t.app_at(&db, "none", owner, next_day).await;
    let more = Msg::group("om_plan_2", LONG).at_bot().in_thread("om_plan");
    assert_eq!(app.ask(&more).await, "answered");
    let before = t.fake.state.receive_id_types.lock().expect("lock").len();
    let digests = run(&app).await;
    assert!(!summary_of(&digests, "om_plan").is_empty());
    app.state.digest.post_pending().await.expect("a pass");
    assert_eq!(
        t.fake.state.receive_id_types.lock().expect("lock").len(),
        before,
        "nothing sent"
    );
    let rows = app
        .state
        .store
        .digest_posts("2026-12-03")
        .await
        .expect("posts");
    assert!(
        !rows.is_empty() && rows.iter().all(|p| p.post_status.0.is_none()),
        "{rows:?}"
    );
    app.stop().await.expect("stops");
}
both_backends!(
    posted_to_the_owner_or_nowhere,
    posted_to_the_owner_or_nowhere
);
