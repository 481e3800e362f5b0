//! An `owner_only` workspace end to end: main-chat chatter that the owner did not
//! address to the bot reaches no agent, neither as pending history nor through the
//! batched feed, with every context mode switched on.

use serde_json::Value;

use crate::{
    both_backends,
    support::{TestApp, TestDb, config, config_toml, feishu::Msg, gated_agent::GatedAgent},
};

const OWNER: &str = "ou_boss";

/// The planner on a webhook agent, every context mode on, the test group `owner_only`.
fn owned_group(db: &TestDb, agent: &GatedAgent) -> String {
    let profile = format!("thread_isolation = false\n{}", agent.config());
    format!(
        "{}\n[context]\ngroup_chat_history_share = true\nshared_thread_enabled = true\n\
         [feed]\nenabled = true\nbatch_messages = 2\n\
         [[workspaces]]\nchat_id = \"oc_group\"\nmode = \"owner_only\"\nowner = \"{OWNER}\"\n",
        config_toml(db, &profile)
    )
}

/// What reaches the agent up to and including the next turn: injections, then the turn.
async fn up_to_turn(agent: &mut GatedAgent) -> Vec<Value> {
    let mut got = Vec::new();
    loop {
        let body = agent.next().await;
        let turn = body["kind"] == "turn";
        got.push(body);
        if turn {
            return got;
        }
    }
}

async fn chatter_stays_out(db: TestDb) {
    let mut agent = GatedAgent::start().await;
    agent.open();
    let mut app = TestApp::spawn(config(&owned_group(&db, &agent))).await;
    // The owner's first @ opens the session the feed would attach to.
    let hello = Msg::group("om_hello", "hello").at_bot().by(OWNER);
    assert_eq!(app.ask(&hello).await, "answered");
    up_to_turn(&mut agent).await;

    // Un-mentioned main-chat messages: from someone else, then from the owner.
    app.route(&Msg::group("om_c1", "the launch code is 4711"))
        .await;
    app.route(&Msg::group("om_c2", "meet behind the server room"))
        .await;
    app.route(&Msg::group("om_c3", "owner musing aloud").by(OWNER))
        .await;
    let ask = Msg::group("om_q", "what did I miss").at_bot().by(OWNER);
    assert_eq!(app.ask(&ask).await, "answered");

    let seen = up_to_turn(&mut agent).await;
    assert_eq!(seen.len(), 1, "nothing injected before the turn: {seen:?}");
    let prompt = seen[0]["prompt"].as_str().unwrap_or_default();
    assert!(prompt.contains("what did I miss"), "{prompt}");
    for said in ["4711", "server room", "musing"] {
        assert!(!prompt.contains(said), "{said} reached the agent: {prompt}");
    }
    let e = app.explain("planner", "om_q", Some("om_q")).await;
    assert_eq!(e.status, 200, "{}", e.text);
    assert_eq!(e.json["workspace_mode"], "owner_only");
    let preview = e.json["prompt_preview"].as_str().unwrap_or_default();
    assert!(!preview.contains("4711"), "{preview}");
    // The chatter is kept as roots of threads to come, so explain says why it stayed out.
    let by_mode = e.json["excluded"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|x| x["reason"] == "mode")
        .count();
    assert!(by_mode >= 3, "{}", e.json["excluded"]);

    // Nothing was gathered into the feed, in any session.
    let counts = app.state.store.feed_counts().await.expect("store answers");
    assert!(
        counts
            .iter()
            .all(|c| c.gathered + c.waiting + c.attached + c.read == 0),
        "{counts:?}"
    );
    for who in ["ou_alice", OWNER] {
        let key = format!("group:oc_group:{who}");
        for session in ["group:oc_group", key.as_str()] {
            let feed = app
                .state
                .store
                .session_feed("planner", session)
                .await
                .expect("store answers");
            assert!(feed.gathered.is_empty() && feed.segments.is_empty());
        }
    }
    app.stop().await.expect("clean stop");
}
both_backends!(
    owner_only_chatter_reaches_neither_history_nor_feed,
    chatter_stays_out
);
