//! Which sessions the daily digest takes: none of a profile or workspace with
//! `digest = false` (a workspace's `digest` overriding its profile's in that chat), and
//! no direct-message session when `[digest] include_dms = false`. A session left out
//! is neither summarized nor reset.

use std::sync::Arc;

use feishu_bridge::util::{ManualClock, UnixMs};

use crate::{
    both_backends,
    digest::{run_now, session_id_of},
    support::{
        TestApp, TestDb, config_toml,
        fake_openai::FakeOpenAi,
        fake_summarizer::{FakeSummarizer, KEY},
        feishu::Msg,
    },
};

const LONG: &str = "let us plan the offsite for next week, somewhere near the lake";

/// Noon UTC on 2026-12-02: outside the window, so only `POST /digests/run` runs it.
fn noon() -> UnixMs {
    let ts: jiff::Timestamp = "2026-12-02T12:00:00Z".parse().expect("instant");
    UnixMs(ts.as_millisecond())
}

/// The planner (an openai agent, replies recorded) with `profile` in its table, the
/// digest on with `digest` in `[digest]`, and `tail` (e.g. workspaces) at the end.
async fn app(
    db: &TestDb,
    summarizer: &FakeSummarizer,
    agent: &FakeOpenAi,
    profile: &str,
    digest: &str,
    tail: &str,
) -> TestApp {
    let profile = format!(
        "dry_run = true\n{profile}[profiles.agent]\nkind = \"openai\"\nbase_url = \"{}\"\n\
         model = \"m\"\n",
        agent.base
    );
    let text = format!(
        "{}\n[digest]\nenabled = true\ntimezone = \"UTC\"\n{digest}\n\
         [digest.summarizer]\nbase_url = \"{}\"\nmodel = \"cheap\"\ntimeout_secs = 1\n{tail}",
        config_toml(db, &profile),
        summarizer.base
    );
    let config = feishu_bridge::config::load_from_str(&text, &|k| {
        (k == "FEISHU_BRIDGE_DIGEST_API_KEY").then(|| KEY.to_string())
    })
    .expect("test config is valid");
    TestApp::spawn_with_clock(config, Arc::new(ManualClock::at(noon()))).await
}

/// Opens a thread in `chat` with an @-request (its turn answered): its session key.
async fn thread(app: &mut TestApp, chat: &str, root: &str) -> String {
    let ask = Msg::group(root, LONG).in_chat(chat).at_bot();
    assert_eq!(app.ask(&ask).await, "answered");
    format!("thread:{chat}:{root}")
}

/// Alice's private chat with the bot, answered: its session key.
async fn dm(app: &mut TestApp) -> String {
    assert_eq!(app.ask(&Msg::dm("om_dm", LONG)).await, "answered");
    "dm:ou_alice".into()
}

/// Runs the digest now: the session keys it digested, with their status.
async fn run(app: &TestApp) -> Vec<(String, String)> {
    let (status, body) = run_now(app).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["outcome"], "ran", "{body}");
    body["digests"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|d| {
            let s = |k: &str| d[k].as_str().unwrap_or_default().to_string();
            (s("session_key"), s("status"))
        })
        .collect()
}

async fn a_workspace_off_and_dms_left_out(db: TestDb) {
    let summarizer = FakeSummarizer::start().await;
    let agent = FakeOpenAi::start(vec!["Noted.".into()]).await;
    let quiet = "[[workspaces]]\nchat_id = \"oc_quiet\"\ndigest = false\n";
    let mut app = app(&db, &summarizer, &agent, "", "include_dms = false", quiet).await;
    let taken = thread(&mut app, "oc_group", "om_plan").await;
    let off = thread(&mut app, "oc_quiet", "om_quiet").await;
    let private = dm(&mut app).await;
    let before = [
        session_id_of(&app, &off).await,
        session_id_of(&app, &private).await,
    ];

    let digest = app.get("/status").await.json["digest"].clone();
    assert_eq!(
        (
            &digest["timezone"],
            &digest["timezone_set"],
            &digest["include_dms"]
        ),
        (&"UTC".into(), &true.into(), &false.into()),
        "{digest}"
    );

    assert_eq!(run(&app).await, [(taken, "reset".to_string())]);
    assert_eq!(summarizer.transcripts().len(), 1, "one summary paid for");
    let after = [
        session_id_of(&app, &off).await,
        session_id_of(&app, &private).await,
    ];
    assert_eq!(after, before, "the sessions left out are untouched");
    app.stop().await.expect("stops");
}
both_backends!(
    a_workspace_with_digest_false_and_dms_without_include_dms_are_left_alone,
    a_workspace_off_and_dms_left_out
);

async fn a_profile_off_but_a_workspace_on(db: TestDb) {
    let summarizer = FakeSummarizer::start().await;
    let agent = FakeOpenAi::start(vec!["Noted.".into()]).await;
    let on = "[[workspaces]]\nchat_id = \"oc_on\"\ndigest = true\n";
    let mut app = app(&db, &summarizer, &agent, "digest = false\n", "", on).await;
    let off = thread(&mut app, "oc_group", "om_plan").await;
    let private = dm(&mut app).await;
    let taken = thread(&mut app, "oc_on", "om_on").await;
    let before = [
        session_id_of(&app, &off).await,
        session_id_of(&app, &private).await,
    ];

    assert_eq!(run(&app).await, [(taken, "reset".to_string())]);
    let after = [
        session_id_of(&app, &off).await,
        session_id_of(&app, &private).await,
    ];
    assert_eq!(after, before, "the profile's other sessions are untouched");
    app.stop().await.expect("stops");
}
both_backends!(
    a_profile_with_digest_false_is_left_alone_but_where_a_workspace_says_true,
    a_profile_off_but_a_workspace_on
);
