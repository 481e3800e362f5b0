//! The whole loop, once per agent backend: a signed event in, the prompt at the (fake)
//! agent, the answer replied in the thread at the fake Open API with the request's
//! message id, the thread flag and a uuid, the turn persisted, the answer recorded as
//! `agent_output`, and the next bot in the thread seeing it.

use serde_json::Value;

use crate::{
    both_backends,
    support::{
        Signer, TestApp, TestDb, config, config_toml, fake_feishu::FakeFeishu,
        fake_openai::FakeOpenAi, feishu::Msg, gated_agent::GatedAgent,
    },
};

const CODER: &str = crate::support::feishu::CODER_PROFILE;

fn coder() -> Signer {
    Signer::coder()
}

/// Where the planner's turns go.
enum Backend {
    Echo,
    Webhook(GatedAgent),
    OpenAi(FakeOpenAi),
}

impl Backend {
    fn config(&self) -> String {
        match self {
            Self::Echo => "[profiles.agent]\nkind = \"echo\"\n".into(),
            Self::Webhook(agent) => agent.config(),
            Self::OpenAi(llm) => format!(
                "[profiles.agent]\nkind = \"openai\"\nbase_url = \"{}\"\nmodel = \"m\"\nstream = false\n",
                llm.base
            ),
        }
    }

    /// The prompt the agent received (echo: the one the decision recorded).
    async fn prompt(&mut self, app: &TestApp) -> String {
        match self {
            Self::Echo => app
                .explain("planner", "om_root", Some("om_plan"))
                .await
                .json["prompt_preview"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            Self::Webhook(agent) => agent.next().await["prompt"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            Self::OpenAi(llm) => {
                let requests = llm.requests(1).await;
                let messages = requests[0].body["messages"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
                messages
                    .last()
                    .and_then(|m| m["content"].as_str())
                    .unwrap_or_default()
                    .to_string()
            }
        }
    }
}

async fn full_loop(db: TestDb, mut backend: Backend, answer: &str) {
    let fake = FakeFeishu::planner().await;
    let text = config_toml(
        &db,
        &format!(
            "{}{}\n{CODER}\n[context]\nshared_thread_enabled = true\n",
            fake.profile_keys(),
            backend.config()
        ),
    );
    let mut app = TestApp::spawn(config(&text)).await;
    let root = Msg::group("om_root", "H5 snake game");
    app.route(&root).await;
    app.route_as("coder", &coder(), &root).await;
    let ask = Msg::group("om_plan", "draft a plan")
        .at_bot()
        .in_thread("om_root");
    app.route_as("coder", &coder(), &ask).await;
    assert_eq!(app.ask(&ask).await, "answered");

    let prompt = backend.prompt(&app).await;
    assert!(prompt.contains("[Topic root]\nH5 snake game"), "{prompt}");
    assert!(prompt.ends_with("[User request]\ndraft a plan"), "{prompt}");

    let sent = fake.state.sent.lock().expect("lock").clone();
    assert_eq!(sent.len(), 1, "{sent:?}");
    let (target, body) = &sent[0];
    assert_eq!(target, "om_plan", "a reply to the request");
    assert_eq!(body["reply_in_thread"], true);
    assert_eq!(body["uuid"].as_str().map(str::len), Some(32));
    // An answer goes out as markdown: a schema 2.0 card with one markdown element.
    assert_eq!(body["msg_type"], "interactive", "{body}");
    let content: Value =
        serde_json::from_str(body["content"].as_str().unwrap_or_default()).expect("card content");
    assert_eq!(content["schema"], "2.0", "{content}");
    let replied = content["body"]["elements"][0]["content"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(replied.starts_with(answer), "{replied}");

    let turn = app.turn_of("om_plan").await;
    assert_eq!(turn.state, "succeeded");
    assert_eq!(turn.reply_message_id.as_deref(), Some("om_bot_reply_1"));
    assert_eq!(turn.output.as_deref(), Some(replied.as_str()));
    assert_eq!(turn.session_key, "thread:oc_group:om_root");
    assert!(turn.session_id.is_some() && turn.started_at.is_some() && turn.finished_at.is_some());
    let explained = app.explain("planner", "om_root", Some("om_plan")).await;
    assert_eq!(explained.json["decision_id"].as_i64(), turn.decision_id);
    assert_eq!(
        explained.json["turn"]["turn_id"].as_str(),
        Some(turn.turn_id.as_str())
    );
    assert_eq!(explained.json["turn"]["state"], "succeeded");
    assert_eq!(explained.json["turn"]["reply_message_id"], "om_bot_reply_1");

    let outputs = app.planner_outputs().await;
    assert_eq!(outputs.len(), 1);
    assert_eq!(outputs[0].message_id, "om_bot_reply_1");

    let next = Msg::group("om_build", "build it")
        .mentioning("ou_bot_coder", "Coder")
        .in_thread("om_root");
    app.route(&next).await;
    assert_eq!(app.ask_as("coder", &coder(), &next).await, "answered");
    let seen = app.explain("coder", "om_root", Some("om_build")).await;
    let coder_prompt = seen.json["prompt_preview"].as_str().unwrap_or_default();
    assert!(
        coder_prompt.contains(&format!("planner (agent): {answer}")),
        "{coder_prompt}"
    );
    app.stop().await.expect("clean stop");
}

async fn echo(db: TestDb) {
    full_loop(db, Backend::Echo, "(echo) planner received").await;
}
both_backends!(the_full_loop_with_the_echo_agent, echo);

async fn webhook(db: TestDb) {
    let agent = GatedAgent::start().await;
    agent.open();
    full_loop(db, Backend::Webhook(agent), "answer: draft a plan").await;
}
both_backends!(the_full_loop_with_a_webhook_agent, webhook);

async fn openai(db: TestDb) {
    let llm = FakeOpenAi::start(vec!["Plan".into(), ": ship it".into()]).await;
    full_loop(db, Backend::OpenAi(llm), "Plan: ship it").await;
}
both_backends!(the_full_loop_with_an_openai_compatible_model, openai);
