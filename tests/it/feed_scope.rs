//! The batched feed follows the chat, with the profile defaults (threads isolated): the
//! main chat's un-mentioned talk is gathered under the chat (`chat:oc_group`), and each
//! session of the chat that is invoked — an @ in the main chat, one in a thread — is
//! given the chat's background once; a message the feed gives is left out of the pending
//! history and the thread context (explain says `in_feed`); `/new` passes the chat's segments by; an openai
//! session keeps the segments it read in its history, and a failed call reads none.

use serde_json::Value;

use crate::{
    both_backends,
    support::{TestApp, TestDb, config, config_toml, fake_openai::FakeOpenAi, feishu::Msg},
};

const CHAT_FEED: &str = "chat:oc_group";

/// The planner (profile defaults) with the feed on, packing every two messages, and the
/// pending group history shared; `agent` in its profile.
fn feed_config(db: &TestDb, agent: &str) -> String {
    let text = config_toml(db, &format!("dry_run = true\n{agent}"));
    format!(
        "{text}\n[feed]\nenabled = true\nbatch_messages = 2\n\
         [context]\ngroup_chat_history_share = true\n"
    )
}

/// The chat's own feed as `GET /feed` shows it.
async fn chat_feed(app: &TestApp) -> Value {
    let a = app
        .get(&format!("/feed?profile=planner&session_key={CHAT_FEED}"))
        .await;
    assert_eq!(a.status, 200, "{}", a.text);
    a.json
}

/// Two un-mentioned main-chat messages, packed into one segment of the chat: its id.
async fn chatter(app: &mut TestApp, ids: [&str; 2], texts: [&str; 2]) -> i64 {
    for (id, text) in ids.iter().zip(texts) {
        app.route(&Msg::group(id, text)).await;
    }
    app.state.feed.tick().await.expect("tick");
    let f = chat_feed(app).await;
    let last = f["segments"].as_array().and_then(|s| s.last()).cloned();
    let last = last.unwrap_or_else(|| panic!("a segment was packed: {f}"));
    assert_eq!(last["items"], 2, "{f}");
    last["id"].as_i64().unwrap_or_default()
}

/// What the echo agent said about the feed segments of `message_id`'s turn.
async fn fed(app: &mut TestApp, msg: &Msg) -> String {
    assert_eq!(app.ask(msg).await, "answered");
    let answer = app.last_reply("planner").await;
    answer
        .split("; ")
        .find_map(|part| part.strip_prefix("feed: "))
        .unwrap_or_else(|| panic!("the echo names its feed: {answer}"))
        .to_string()
}

async fn each_session_once(db: TestDb) {
    let mut app = TestApp::spawn(config(&feed_config(&db, ""))).await;
    let first = chatter(
        &mut app,
        ["om_c1", "om_c2"],
        ["standup moves to nine", "bring the slides"],
    )
    .await;
    // Nothing went to one-message sessions of their own.
    let counts = app.state.store.feed_counts().await.expect("store answers");
    assert_eq!(counts[0].waiting, 1, "{counts:?}");
    assert_eq!(chat_feed(&app).await["segments"][0]["state"], "waiting");

    // An @ in the main chat (a session of its own) is given the chat's background…
    let main = Msg::group("om_q1", "what time is standup?").at_bot();
    assert_eq!(
        fed(&mut app, &main).await,
        format!("1 segment(s) (#{first}: 2 messages)")
    );
    // …and the pending history leaves out what the feed carried, as explain says.
    let e = app.explain("planner", "om_q1", Some("om_q1")).await;
    assert_eq!(e.status, 200, "{}", e.text);
    let in_feed = e.json["excluded"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|x| x["reason"] == "in_feed")
        .count();
    assert_eq!(in_feed, 2, "{}", e.json["excluded"]);
    let prompt = e.json["prompt_preview"].as_str().unwrap_or_default();
    assert!(!prompt.contains("standup moves"), "{prompt}");
    assert_eq!(e.json["turn"]["feed_segments"][0]["segment_id"], first);

    // An @ in a thread is another session of the chat: it gets the background once.
    let in_thread = |id: &str| Msg::group(id, "and then?").at_bot().in_thread("om_root");
    assert_eq!(
        fed(&mut app, &in_thread("om_q2")).await,
        format!("1 segment(s) (#{first}: 2 messages)")
    );
    assert_eq!(fed(&mut app, &in_thread("om_q3")).await, "none");

    // `/new` in the thread passes by what the chat said before it.
    let second = chatter(&mut app, ["om_c3", "om_c4"], ["lunch at one", "room 4"]).await;
    let reset = Msg::group("om_n", "/new").at_bot().in_thread("om_root");
    app.route(&reset).await;
    assert_eq!(fed(&mut app, &in_thread("om_q4")).await, "none");
    // A new main-chat session reads both segments, oldest first.
    let again = Msg::group("om_q5", "anything else?").at_bot();
    assert_eq!(
        fed(&mut app, &again).await,
        format!("2 segment(s) (#{first}: 2 messages, #{second}: 2 messages)")
    );
    app.stop().await.expect("clean stop");
}
both_backends!(
    the_chat_s_background_reaches_each_invoked_session_once,
    each_session_once
);

/// The `messages` of the openai fake's `n`th request (1-based), as (role, content).
async fn messages(llm: &FakeOpenAi, n: usize) -> Vec<(String, String)> {
    let seen = llm.requests(n).await;
    seen[n - 1].body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|m| {
            let text = |k: &str| m[k].as_str().unwrap_or_default().to_string();
            (text("role"), text("content"))
        })
        .collect()
}

async fn openai_keeps_segments(db: TestDb) {
    let llm = FakeOpenAi::start(vec!["Noted.".into()]).await;
    let agent = format!(
        "[profiles.agent]\nkind = \"openai\"\nbase_url = \"{}\"\nmodel = \"m\"\nstream = false\n",
        llm.base
    );
    let mut app = TestApp::spawn(config(&feed_config(&db, &agent))).await;
    let id = chatter(
        &mut app,
        ["om_c1", "om_c2"],
        ["the release is friday", "QA signs off thursday"],
    )
    .await;
    let ask = |id: &str, text: &str| Msg::group(id, text).at_bot().in_thread("om_root");

    // A call that fails reads nothing: the segment waits for the next turn.
    llm.fail_with(400, r#"{"error":{"message":"bad request"}}"#);
    assert_eq!(
        app.ask(&ask("om_q1", "when is the release?")).await,
        "agent_failed"
    );
    assert_eq!(chat_feed(&app).await["segments"][0]["state"], "waiting");
    *llm.state.fail_with.lock().expect("lock") = None;

    assert_eq!(
        app.ask(&ask("om_q2", "when is the release?")).await,
        "answered"
    );
    let second = messages(&llm, 2).await;
    let background: Vec<&(String, String)> = second
        .iter()
        .filter(|(_, c)| c.contains("the release is friday"))
        .collect();
    assert_eq!(background.len(), 1, "{second:?}");
    assert_eq!(background[0].0, "user");
    assert!(
        second
            .last()
            .is_some_and(|(_, c)| c.contains("when is the release?")),
        "{second:?}"
    );
    assert_eq!(chat_feed(&app).await["segments"][0]["state"], "read");
    let turn = app.turn_of("om_q2").await;
    let e = app.explain("planner", "om_root", Some("om_q2")).await;
    assert_eq!(
        e.json["turn"]["feed_segments"][0]["segment_id"], id,
        "{}",
        e.text
    );

    // The next turn keeps it in the session's history, before the turn that read it.
    assert_eq!(app.ask(&ask("om_q3", "and QA?")).await, "answered");
    let third = messages(&llm, 3).await;
    let at = |needle: &str| third.iter().position(|(_, c)| c.contains(needle));
    let (Some(bg), Some(q2)) = (at("the release is friday"), at("when is the release?")) else {
        panic!("the history holds the segment and the turn: {third:?}");
    };
    assert!(bg < q2, "{third:?}");
    assert_eq!(
        third
            .iter()
            .filter(|(_, c)| c.contains("QA signs off"))
            .count(),
        1,
        "{third:?}"
    );
    assert!(!turn.turn_id.is_empty());
    app.stop().await.expect("clean stop");
}
both_backends!(
    an_openai_session_keeps_its_segments_and_a_failed_call_reads_none,
    openai_keeps_segments
);

async fn thread_context_leaves_the_feed_out(db: TestDb) {
    let text = config_toml(&db, "dry_run = true\n");
    let text = format!(
        "{text}\n[feed]\nenabled = true\nbatch_messages = 2\n\
         [context]\nshared_thread_enabled = true\n"
    );
    let mut app = TestApp::spawn(config(&text)).await;
    // The thread's first turn opens its session; the talk in it is that session's feed.
    assert_eq!(
        app.ask(&Msg::group("om_root", "a topic").at_bot()).await,
        "answered"
    );
    for (id, said) in [("om_c1", "eight o'clock"), ("om_c2", "the usual place")] {
        app.route(&Msg::group(id, said).in_thread("om_root")).await;
    }
    app.state.feed.tick().await.expect("tick");
    let ask = Msg::group("om_q", "when and where?")
        .at_bot()
        .in_thread("om_root");
    assert_eq!(fed(&mut app, &ask).await.split(' ').next(), Some("1"));
    let e = app.explain("planner", "om_root", Some("om_q")).await;
    assert_eq!(e.status, 200, "{}", e.text);
    let reasons: Vec<&str> = e.json["excluded"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|x| x["reason"].as_str())
        .collect();
    assert_eq!(
        reasons.iter().filter(|r| **r == "in_feed").count(),
        2,
        "{reasons:?}"
    );
    let prompt = e.json["prompt_preview"].as_str().unwrap_or_default();
    assert!(!prompt.contains("eight o'clock"), "{prompt}");
    app.stop().await.expect("clean stop");
}
both_backends!(
    a_message_in_the_feed_is_left_out_of_the_thread_context,
    thread_context_leaves_the_feed_out
);
