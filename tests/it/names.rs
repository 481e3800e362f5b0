//! Names of senders and chats, looked up through the (fake) Open API in the background:
//! a turn never waits for them (the first one shows ids), later turns show the names in
//! the pending history and the request line, a missing scope leaves ids and shows once
//! in /status without being asked again, and a name older than its time to live is
//! looked up again. Feed segments and digests (transcripts and headings) show them too.

use std::{sync::Arc, sync::atomic::Ordering, time::Duration};

use feishu_bridge::util::{ManualClock, UnixMs};

use crate::{
    both_backends,
    support::{
        TestApp, TestDb, config, config_toml,
        fake_feishu::{CHATS_SCOPE, FakeFeishu, USERS_PER_CALL, USERS_SCOPE},
        fake_summarizer::{FakeSummarizer, KEY},
        feishu::Msg,
        gated_agent::GatedAgent,
    },
};

/// The session of thread `om_root` in the test group.
const SESSION: &str = "thread:oc_group:om_root";

/// A bridge sharing the group's history with its agent, against `fake`.
fn names_config(db: &TestDb, fake: &FakeFeishu, names: &str) -> String {
    config_toml(
        db,
        &format!(
            "{}thread_isolation = false\n[context]\ngroup_chat_history_share = true\n{names}",
            fake.profile_keys()
        ),
    )
}

/// The prompt of the turn of `message_id`.
async fn prompt(app: &TestApp, message_id: &str) -> String {
    let e = app.explain("planner", message_id, Some(message_id)).await;
    assert_eq!(e.status, 200, "{}", e.text);
    e.json["prompt_preview"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

async fn fake_with_people() -> FakeFeishu {
    let fake = FakeFeishu::planner().await;
    fake.state.directory.user("ou_alice", "Alice Chen");
    fake.state.directory.user("ou_bob", "Bob Li");
    fake
}

async fn names_in_turns(db: TestDb) {
    let fake = fake_with_people().await;
    let mut app = TestApp::spawn(config(&names_config(&db, &fake, ""))).await;
    app.route(&Msg::group("om_a", "API returns 502")).await;
    app.route(&Msg::group("om_b", "staging too").by("ou_bob"))
        .await;
    // Nothing cached yet: the turn runs at once, with ids.
    assert_eq!(
        app.ask(&Msg::group("om_q1", "what broke").at_bot()).await,
        "answered"
    );
    let first = prompt(&app, "om_q1").await;
    assert!(first.contains("ou_alice: API returns 502"), "{first}");
    assert!(first.contains("ou_bob: staging too"), "{first}");
    // The lookup the turn queued, done.
    app.state.names.flush().await;
    assert_eq!(app.state.names.pending(), 0);
    app.route(&Msg::group("om_c", "rollback is done").by("ou_bob"))
        .await;
    assert_eq!(
        app.ask(&Msg::group("om_q2", "and now").at_bot()).await,
        "answered"
    );
    let second = prompt(&app, "om_q2").await;
    assert!(second.contains("Bob Li: rollback is done"), "{second}");
    assert!(!second.contains("ou_bob"), "{second}");
    let request = second.split("[User request]\n").nth(1).unwrap_or_default();
    assert_eq!(request, "Alice Chen: and now", "{second}");
    let status = app.get("/status").await;
    assert_eq!(
        status.json["names"]["profiles"][0]["cached"], 2,
        "{}",
        status.text
    );
    assert_eq!(
        status.json["names"]["profiles"][0]["missing_scopes"],
        serde_json::json!([])
    );
    app.stop().await.expect("clean stop");
}
both_backends!(
    looked_up_names_label_the_history_and_the_request_line,
    names_in_turns
);

async fn missing_scope(db: TestDb) {
    let fake = fake_with_people().await;
    fake.state.directory.withhold(USERS_SCOPE);
    let mut app = TestApp::spawn(config(&names_config(&db, &fake, ""))).await;
    app.route(&Msg::group("om_a", "hello").by("ou_bob")).await;
    app.ask(&Msg::group("om_q1", "first").at_bot()).await;
    app.state.names.flush().await;
    app.route(&Msg::group("om_b", "again").by("ou_bob")).await;
    app.ask(&Msg::group("om_q2", "second").at_bot()).await;
    app.state.names.flush().await;
    let second = prompt(&app, "om_q2").await;
    assert!(second.contains("ou_bob: again"), "ids stay: {second}");
    let calls = fake.state.directory.user_calls.load(Ordering::SeqCst);
    assert_eq!(
        calls, 1,
        "a refused scope is not asked again before its time to live"
    );
    let refused = fake.state.refusals.lock().expect("lock").clone();
    assert!(
        refused.iter().any(|(_, code)| *code == 99991672),
        "{refused:?}"
    );
    let status = app.get("/status").await;
    let profile = &status.json["names"]["profiles"][0];
    assert_eq!(
        profile["missing_scopes"],
        serde_json::json!([USERS_SCOPE]),
        "{}",
        status.text
    );
    let hints = profile["hints"].as_array().cloned().unwrap_or_default();
    assert_eq!(hints.len(), 1, "{}", status.text);
    assert!(hints[0].as_str().unwrap_or_default().contains(USERS_SCOPE));
    app.stop().await.expect("clean stop");
}
both_backends!(
    a_missing_scope_leaves_ids_and_shows_once_in_status,
    missing_scope
);

async fn ttl(db: TestDb) {
    let fake = fake_with_people().await;
    let clock = Arc::new(ManualClock::at(UnixMs(1_700_000_000_000)));
    let text = names_config(&db, &fake, "[names]\nttl_secs = 60\n");
    let mut app = TestApp::spawn_with_clock(config(&text), clock.clone()).await;
    let names = app.state.names.clone();
    assert!(
        names.users("planner", &["ou_bob"]).await.is_empty(),
        "nothing cached yet"
    );
    names.flush().await;
    assert_eq!(
        names.users("planner", &["ou_bob"]).await["ou_bob"],
        "Bob Li"
    );
    names.flush().await;
    assert_eq!(
        fake.state.directory.user_calls.load(Ordering::SeqCst),
        1,
        "fresh: not asked again"
    );
    fake.state.directory.user("ou_bob", "Bob Lee");
    clock.advance(Duration::from_secs(61));
    // Stale: still shown while it is looked up again.
    assert_eq!(
        names.users("planner", &["ou_bob"]).await["ou_bob"],
        "Bob Li"
    );
    names.flush().await;
    assert_eq!(fake.state.directory.user_calls.load(Ordering::SeqCst), 2);
    assert_eq!(
        names.users("planner", &["ou_bob"]).await["ou_bob"],
        "Bob Lee"
    );
    app.route(&Msg::group("om_a", "renamed").by("ou_bob")).await;
    app.ask(&Msg::group("om_q", "who").at_bot()).await;
    assert!(prompt(&app, "om_q").await.contains("Bob Lee: renamed"));
    app.stop().await.expect("clean stop");
}
both_backends!(a_name_older_than_its_time_to_live_is_looked_up_again, ttl);

async fn batches(db: TestDb) {
    let fake = FakeFeishu::planner().await;
    let ids: Vec<String> = (0..=USERS_PER_CALL).map(|i| format!("ou_{i:03}")).collect();
    for id in &ids {
        fake.state.directory.user(id, &format!("Person {id}"));
    }
    let app = TestApp::spawn(config(&names_config(&db, &fake, ""))).await;
    let asked: Vec<&str> = ids.iter().map(String::as_str).collect();
    app.state.names.users("planner", &asked).await;
    app.state.names.flush().await;
    let known = app.state.names.users("planner", &asked).await;
    assert_eq!(
        known.len(),
        ids.len(),
        "all found, in calls within Feishu's limit"
    );
    assert_eq!(fake.state.directory.user_calls.load(Ordering::SeqCst), 2);
    let refused = fake.state.refusals.lock().expect("lock").clone();
    assert!(refused.is_empty(), "{refused:?}");
    app.stop().await.expect("clean stop");
}
both_backends!(
    more_users_than_one_call_takes_are_looked_up_in_batches,
    batches
);

async fn feed_segments(db: TestDb) {
    let fake = fake_with_people().await;
    let mut agent = GatedAgent::start().await;
    agent.open();
    let profile = format!("{}{}", fake.profile_keys(), agent.config());
    let text = format!("{}\n[feed]\nenabled = true\n", config_toml(&db, &profile));
    let mut app = TestApp::spawn(config(&text)).await;
    let root = Msg::group("om_root", "a topic").at_bot();
    assert_eq!(app.ask(&root).await, "answered");
    assert_eq!(agent.next().await["kind"], "turn");
    let said = Msg::group("om_w", "the demo moved to Friday").in_thread("om_root");
    app.route(&said.by("ou_bob")).await;
    app.state
        .feed
        .flush("planner", SESSION)
        .await
        .expect("flush");
    // Attached before the name was known: the agent got the id.
    let inject = agent.next().await;
    assert_eq!(inject["kind"], "inject", "{inject}");
    let injected = inject["text"].as_str().unwrap_or_default();
    assert!(
        injected.contains("ou_bob: the demo moved to Friday"),
        "{injected}"
    );
    app.state.names.flush().await;
    // Named from then on: the next segment the agent gets, and the earlier one as the
    // feed shows it.
    let more = Msg::group("om_x", "and the venue too").in_thread("om_root");
    app.route(&more.by("ou_bob")).await;
    app.state
        .feed
        .flush("planner", SESSION)
        .await
        .expect("flush");
    let inject = agent.next().await;
    let injected = inject["text"].as_str().unwrap_or_default();
    assert!(injected.contains("Bob Li: and the venue too"), "{injected}");
    assert!(!injected.contains("ou_bob"), "{injected}");
    let path = format!("/feed?profile=planner&session_key={SESSION}");
    let f = app.get(&path).await;
    let first = f.json["segments"][0]["text"].as_str().unwrap_or_default();
    assert!(
        first.contains("Bob Li: the demo moved to Friday"),
        "{}",
        f.text
    );
    app.stop().await.expect("clean stop");
}
both_backends!(feed_segments_show_senders_by_name, feed_segments);

/// Noon on 2026-12-02 UTC.
fn noon() -> UnixMs {
    let ts: jiff::Timestamp = "2026-12-02T12:00:00Z".parse().expect("instant");
    UnixMs(ts.as_millisecond())
}

async fn digest(db: TestDb) {
    let fake = fake_with_people().await;
    fake.state.directory.chat("oc_group", "Launch crew");
    let summarizer = FakeSummarizer::start().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let profile = format!("{}thread_isolation = false\n", fake.profile_keys());
    let text = format!(
        "{}\n[digest]\nenabled = true\ntimezone = \"UTC\"\ndir = \"{}\"\n\
         [digest.summarizer]\nbase_url = \"{}\"\nmodel = \"cheap\"\ntimeout_secs = 1\n",
        config_toml(&db, &profile),
        dir.path().display(),
        summarizer.base
    );
    let config = feishu_bridge::config::load_from_str(&text, &|k| {
        (k == "FEISHU_BRIDGE_DIGEST_API_KEY").then(|| KEY.to_string())
    })
    .expect("valid");
    let clock = Arc::new(ManualClock::at(noon()));
    let mut app = TestApp::spawn_with_clock(config, clock).await;
    let ask = Msg::group("om_a", "who takes the release notes this time?").at_bot();
    assert_eq!(app.ask(&ask).await, "answered");
    let answer = Msg::group("om_b", "I will write them by Thursday").by("ou_bob");
    app.route(&answer).await;
    // Nothing was looked up before: the digest looks the names up itself.
    let (status, body) = crate::digest::run_now(&app).await;
    assert_eq!(status, 200, "{body}");
    let transcripts = summarizer.transcripts();
    assert_eq!(transcripts.len(), 1, "{body}");
    let t = &transcripts[0];
    assert!(t.contains("Bob Li: I will write them by Thursday"), "{t}");
    assert!(t.contains("Alice Chen: who takes the release notes"), "{t}");
    assert!(!t.contains("ou_"), "{t}");
    let file = std::fs::read_to_string(dir.path().join("digest/2026-12-02.md")).expect("file");
    assert!(file.contains("## planner · group:Launch crew\n"), "{file}");
    assert!(!file.contains("## planner · group:oc_group"), "{file}");
    app.stop().await.expect("clean stop");
}
both_backends!(digests_name_senders_and_chats, digest);

async fn thread_context(db: TestDb) {
    let fake = fake_with_people().await;
    let mut agent = GatedAgent::start().await;
    agent.open();
    let profile = format!("{}{}", fake.profile_keys(), agent.config());
    let text = format!(
        "{}\n[context]\nshared_thread_enabled = true\n",
        config_toml(&db, &profile)
    );
    let mut app = TestApp::spawn(config(&text)).await;
    assert_eq!(
        app.ask(&Msg::group("om_root", "the plan").at_bot()).await,
        "answered"
    );
    agent.next().await;
    let said = Msg::group("om_t1", "I disagree with step two").in_thread("om_root");
    app.route(&said.by("ou_bob")).await;
    let ask = Msg::group("om_q1", "summarize")
        .in_thread("om_root")
        .at_bot();
    assert_eq!(app.ask(&ask).await, "answered");
    let first = agent.next().await;
    let labels = |turn: &serde_json::Value| -> Vec<String> {
        turn["context_items"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|i| i["author_label"].as_str().unwrap_or_default().to_string())
            .collect()
    };
    assert!(labels(&first).contains(&"ou_bob".to_string()), "{first}");
    app.state.names.flush().await;
    let again = Msg::group("om_q2", "and now").in_thread("om_root").at_bot();
    assert_eq!(app.ask(&again).await, "answered");
    let second = agent.next().await;
    assert!(labels(&second).contains(&"Bob Li".to_string()), "{second}");
    assert!(!labels(&second).contains(&"ou_bob".to_string()), "{second}");
    assert_eq!(second["sender"]["name"], "Alice Chen");
    let prompt = second["prompt"].as_str().unwrap_or_default();
    assert!(
        prompt.contains("Bob Li: I disagree with step two"),
        "{prompt}"
    );
    assert!(
        prompt.ends_with("[User request]\nAlice Chen: and now"),
        "{prompt}"
    );
    app.stop().await.expect("clean stop");
}
both_backends!(
    the_agent_gets_thread_context_labelled_by_name,
    thread_context
);

async fn disabled(db: TestDb) {
    let fake = fake_with_people().await;
    let mut app = TestApp::spawn(config(&names_config(
        &db,
        &fake,
        "[names]\nenabled = false\n",
    )))
    .await;
    app.route(&Msg::group("om_a", "hello").by("ou_bob")).await;
    assert_eq!(
        app.ask(&Msg::group("om_q", "hi").at_bot()).await,
        "answered"
    );
    app.state.names.flush().await;
    assert!(
        app.state
            .names
            .users("planner", &["ou_bob"])
            .await
            .is_empty()
    );
    assert!(prompt(&app, "om_q").await.contains("ou_bob: hello"));
    assert_eq!(fake.state.directory.user_calls.load(Ordering::SeqCst), 0);
    assert_eq!(app.get("/status").await.json["names"]["enabled"], false);
    app.stop().await.expect("clean stop");
}
both_backends!(
    with_names_disabled_ids_are_shown_and_nothing_is_asked,
    disabled
);

async fn granted_later(db: TestDb) {
    let fake = fake_with_people().await;
    fake.state.directory.withhold(USERS_SCOPE);
    let clock = Arc::new(ManualClock::at(UnixMs(1_700_000_000_000)));
    let text = names_config(&db, &fake, "[names]\nttl_secs = 60\n");
    let app = TestApp::spawn_with_clock(config(&text), clock.clone()).await;
    let names = app.state.names.clone();
    names.users("planner", &["ou_bob"]).await;
    names.flush().await;
    let missing = |s: &serde_json::Value| s["names"]["profiles"][0]["missing_scopes"].clone();
    assert_eq!(
        missing(&app.get("/status").await.json),
        serde_json::json!([USERS_SCOPE])
    );
    fake.state.directory.withheld.lock().expect("lock").clear();
    clock.advance(Duration::from_secs(61));
    names.users("planner", &["ou_bob"]).await;
    names.flush().await;
    assert_eq!(
        names.users("planner", &["ou_bob"]).await["ou_bob"],
        "Bob Li"
    );
    assert_eq!(
        missing(&app.get("/status").await.json),
        serde_json::json!([])
    );
    app.stop().await.expect("clean stop");
}
both_backends!(
    a_scope_granted_later_is_used_once_the_refusal_has_aged,
    granted_later
);

/// The code of the fake's answer to `request`.
async fn code_of(request: reqwest::RequestBuilder) -> i64 {
    let answer: serde_json::Value = request
        .send()
        .await
        .expect("answered")
        .json()
        .await
        .expect("JSON");
    answer["code"].as_i64().unwrap_or(-1)
}

#[tokio::test]
async fn the_fake_directory_refuses_what_feishu_refuses() {
    let api = crate::fake_openapi::Api::new().await;
    let users = |n: usize| {
        let ids: Vec<(&str, String)> = (0..n).map(|i| ("user_ids", format!("ou_{i}"))).collect();
        api.request(reqwest::Method::GET, "/open-apis/contact/v3/users/batch")
            .query(&[("user_id_type", "open_id")])
            .query(&ids)
    };
    assert_eq!(code_of(users(USERS_PER_CALL)).await, 0);
    assert_eq!(
        code_of(users(USERS_PER_CALL + 1)).await,
        99992402,
        "over the limit"
    );
    let chat = || api.request(reqwest::Method::GET, "/open-apis/im/v1/chats/oc_1");
    assert_eq!(code_of(chat()).await, 232011, "a chat the bot is not in");
    api.fake.state.directory.chat("oc_1", "Launch crew");
    assert_eq!(code_of(chat()).await, 0);
    api.fake.state.directory.withhold(CHATS_SCOPE);
    api.fake.state.directory.withhold(USERS_SCOPE);
    assert_eq!(code_of(chat()).await, 99991672);
    assert_eq!(code_of(users(1)).await, 99991672);
}
