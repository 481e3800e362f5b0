//! A real bridge on 127.0.0.1:0, with a client that names the status it expects.

use std::time::Duration;

use feishu_bridge::{AppState, Bridge, Config, inbox::Processed};
use serde_json::Value;
use tokio::{net::TcpListener, sync::broadcast, task::JoinHandle};
use tokio_util::sync::CancellationToken;

use super::{db::TestDb, feishu::Request};

/// Admin token of test configs.
pub const ADMIN: &str = "test-admin-token";

/// Where the profile's Open API calls go unless `extra` says: a closed port on
/// 127.0.0.1, so a test that posts replies without a fake never reaches out of the machine.
pub const NO_OPEN_API: &str = "http://127.0.0.1:9";

/// Config text for a test: one keyed profile `planner` plus `extra` TOML appended. The
/// profile's `api_base` is [`NO_OPEN_API`] unless `extra` sets it (before any table),
/// and it is a `dry_run` unless `extra` gives it an `app_secret` (or says `dry_run`).
pub fn config_toml(db: &TestDb, extra: &str) -> String {
    let sets = |key: &str| {
        extra
            .lines()
            .take_while(|l| !l.trim_start().starts_with('['))
            .any(|l| l.trim_start().starts_with(key))
    };
    let mut api_base = if sets("api_base") {
        String::new()
    } else {
        format!("api_base = \"{NO_OPEN_API}\"\n")
    };
    // Without an app secret a profile must say that it only records its replies.
    if !sets("app_secret") && !sets("dry_run") {
        api_base.push_str("dry_run = true\n");
    }
    format!(
        r#"
[server]
listen = "127.0.0.1:0"
admin_token = "{ADMIN}"

[database]
url = "{url}"
timeout_ms = 1500

[worker]
poll_interval_ms = 50
retry_base_ms = 5

[[profiles]]
name = "planner"
app_id = "{app}"
encrypt_key = "{key}"
verification_token = "{token}"
bot_open_id = "{bot}"
{api_base}{extra}
"#,
        url = db.url,
        app = super::feishu::APP_ID,
        key = super::feishu::ENCRYPT_KEY,
        token = super::feishu::TOKEN,
        bot = super::feishu::BOT_OPEN_ID,
    )
}

/// Parses config text with an empty environment (the real loader and validation).
pub fn config(text: &str) -> Config {
    config_with_env(text, &[])
}

/// Parses config text with `env` as the whole environment: a bridge of its own, in
/// process, without touching the test process's variables.
pub fn config_with_env(text: &str, env: &[(&str, &str)]) -> Config {
    let lookup = |name: &str| {
        env.iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.to_string())
    };
    feishu_bridge::config::load_from_str(text, &lookup).expect("test config is valid")
}

/// A running bridge.
pub struct TestApp {
    /// `http://127.0.0.1:port`
    pub base: String,
    /// Shared state.
    pub state: AppState,
    /// HTTP client.
    pub client: reqwest::Client,
    processed: broadcast::Receiver<Processed>,
    turns: broadcast::Receiver<feishu_bridge::turns::TurnDone>,
    stop: CancellationToken,
    handle: JoinHandle<anyhow::Result<()>>,
}

/// A response: status and JSON body (Null when not JSON).
#[derive(Debug)]
pub struct Answer {
    /// HTTP status.
    pub status: u16,
    /// Body as JSON.
    pub json: Value,
    /// Body as text.
    pub text: String,
    /// The `X-Feishu-Bridge-Outcome` header, when the answer has one.
    pub outcome: Option<String>,
}

impl Answer {
    /// `error.code`.
    pub fn code(&self) -> &str {
        self.json["error"]["code"].as_str().unwrap_or_default()
    }
}

impl TestApp {
    /// Starts a bridge with this config on an ephemeral port.
    pub async fn spawn(config: Config) -> Self {
        let bridge = Bridge::start(config).await.expect("bridge starts");
        Self::serve(bridge).await
    }

    /// Starts a bridge whose timed work reads `clock`.
    pub async fn spawn_with_clock(
        config: Config,
        clock: std::sync::Arc<dyn feishu_bridge::util::Clock>,
    ) -> Self {
        let bridge = Bridge::start_with_clock(config, clock)
            .await
            .expect("bridge starts");
        Self::serve(bridge).await
    }

    /// Serves an already started bridge.
    pub async fn serve(bridge: Bridge) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let state = bridge.state().clone();
        let processed = state.processed.subscribe();
        let turns = state.turns_done.subscribe();
        let stop = CancellationToken::new();
        let handle = tokio::spawn(bridge.serve(listener, stop.clone().cancelled_owned()));
        Self {
            base: format!("http://{addr}"),
            state,
            client: reqwest::Client::builder()
                .timeout(Duration::from_secs(20))
                .build()
                .expect("client"),
            processed,
            turns,
            stop,
            handle,
        }
    }

    /// Graceful shutdown; returns what `serve` returned.
    pub async fn stop(self) -> anyhow::Result<()> {
        self.stop.cancel();
        self.handle.await.expect("serve task")
    }

    /// POSTs a callback to `/webhook/{profile}/{kind}`.
    pub async fn post(&self, profile: &str, kind: &str, req: &Request) -> Answer {
        let r = req.apply(
            self.client
                .post(format!("{}/webhook/{profile}/{kind}", self.base)),
        );
        answer(r.send().await.expect("request sent")).await
    }

    /// POSTs an event callback to the default profile.
    pub async fn event(&self, req: &Request) -> Answer {
        self.post("planner", "event", req).await
    }

    /// GET with the admin token.
    pub async fn get(&self, path: &str) -> Answer {
        let r = self
            .client
            .get(format!("{}{path}", self.base))
            .bearer_auth(ADMIN)
            .send()
            .await
            .expect("request sent");
        answer(r).await
    }

    /// GET without a token.
    pub async fn get_anonymous(&self, path: &str) -> Answer {
        let r = self
            .client
            .get(format!("{}{path}", self.base))
            .send()
            .await
            .expect("request sent");
        answer(r).await
    }

    /// Waits until `event_id` of the default profile is done or failed, whether that
    /// happened before this call (read from the store) or after (reported by the worker).
    /// The subscription predates the store read, so nothing falls between the two.
    pub async fn settled(&mut self, event_id: &str) -> &'static str {
        let row = self
            .state
            .store
            .inbox_event("planner", event_id)
            .await
            .expect("store answers");
        match row.map(|r| r.event.status.as_str()) {
            Some(s @ ("done" | "failed")) => s,
            _ => loop {
                let p = self.processed(event_id).await;
                if p.outcome != "retry" {
                    break p.outcome.as_str();
                }
            },
        }
    }

    /// Delivers a message to `profile` and waits until the worker has processed it.
    pub async fn route_as(
        &mut self,
        profile: &str,
        signer: &super::Signer,
        msg: &super::feishu::Msg,
    ) {
        let a = self.post(profile, "event", &signer.deliver(msg)).await;
        assert_eq!(a.status, 200, "{}", a.text);
        let id = format!("ev-{}", msg.message_id);
        let row = self
            .state
            .store
            .inbox_event(profile, &id)
            .await
            .expect("store answers");
        if row.is_some_and(|r| matches!(r.event.status.as_str(), "done" | "failed")) {
            return;
        }
        loop {
            let p = self.processed(&id).await;
            if p.profile == profile {
                break;
            }
        }
    }

    /// Delivers a message to `profile` and waits until the turn it starts has finished;
    /// returns the turn's outcome.
    pub async fn ask_as(
        &mut self,
        profile: &str,
        signer: &super::Signer,
        msg: &super::feishu::Msg,
    ) -> &'static str {
        self.route_as(profile, signer, msg).await;
        let what = format!("the turn of {}", msg.message_id);
        super::next_matching(&mut self.turns, &what, |t| {
            t.profile == profile && t.message_id == msg.message_id
        })
        .await
        .outcome
        .as_str()
    }

    /// Delivers a message to the default profile and waits for its turn.
    pub async fn ask(&mut self, msg: &super::feishu::Msg) -> &'static str {
        self.ask_as("planner", &super::Signer::default(), msg).await
    }

    /// `GET /explain/{root}` as JSON for a profile (and message).
    pub async fn explain(&self, profile: &str, root: &str, message_id: Option<&str>) -> Answer {
        let m = message_id
            .map(|m| format!("&message_id={m}"))
            .unwrap_or_default();
        self.get(&format!(
            "/explain/{root}?profile={profile}&verbose=true{m}"
        ))
        .await
    }

    /// Delivers a message to the default profile and waits until it is processed.
    pub async fn route(&mut self, msg: &super::feishu::Msg) {
        self.route_as("planner", &super::Signer::default(), msg)
            .await;
    }

    /// The verdict of `message_id` for `profile`: (verdict, reason).
    pub async fn verdict(&self, profile: &str, message_id: &str) -> (String, String) {
        let a = self
            .get(&format!("/explain/message/{message_id}?profile={profile}"))
            .await;
        assert_eq!(a.status, 200, "{}", a.text);
        let v = &a.json["verdicts"][0];
        (
            v["verdict"].as_str().unwrap_or_default().into(),
            v["reason"].as_str().unwrap_or_default().into(),
        )
    }

    /// Event types recorded for a message by `profile`, in write order.
    pub async fn recorded(&self, profile: &str, message_id: &str) -> Vec<String> {
        let rows = self
            .state
            .store
            .message_events(message_id)
            .await
            .expect("store answers");
        rows.into_iter()
            .filter(|r| r.bot_profile == profile)
            .map(|r| r.event_type.to_string())
            .collect()
    }

    /// Text of the latest reply recorded for `profile`.
    pub async fn last_reply(&self, profile: &str) -> String {
        let rows = self
            .state
            .store
            .outbound(profile, 1)
            .await
            .expect("store answers");
        rows.last().map(|r| r.text.clone()).unwrap_or_default()
    }

    /// The planner's `agent_output` records in the test group's `om_root` thread.
    pub async fn planner_outputs(&self) -> Vec<feishu_bridge::store::ContextEventRow> {
        self.state
            .store
            .thread_events(feishu_bridge::store::ProfileThread::new(
                "planner", "oc_group", "om_root",
            ))
            .await
            .expect("store answers")
            .into_iter()
            .filter(|e| e.event_type == "agent_output")
            .collect()
    }

    /// The turn of a request message.
    pub async fn turn_of(&self, message_id: &str) -> feishu_bridge::store::TurnRow {
        turn_of(self.state.store.as_ref(), message_id).await
    }

    /// Waits until the turn of `message_id` has ended (whether before this call or
    /// after: the subscription predates the read); returns the row.
    pub async fn turn_ended(&self, message_id: &str) -> feishu_bridge::store::TurnRow {
        let mut done = self.state.turns_done.subscribe();
        loop {
            let row = self.turn_of(message_id).await;
            if !matches!(row.state.as_str(), "queued" | "running") {
                return row;
            }
            let what = format!("the end of the turn of {message_id}");
            super::next_matching(&mut done, &what, |_| true).await;
        }
    }

    /// Waits for the worker to report on `event_id` (bounded, event-driven: no sleeps).
    pub async fn processed(&mut self, event_id: &str) -> Processed {
        let what = format!("the processing of {event_id}");
        super::next_matching(&mut self.processed, &what, |p| p.event_id == event_id).await
    }
}

/// Reads a response into an [`Answer`].
pub async fn answer(r: reqwest::Response) -> Answer {
    let status = r.status().as_u16();
    let outcome = r
        .headers()
        .get(feishu_bridge::inbox::OUTCOME_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let text = r.text().await.unwrap_or_default();
    let json = serde_json::from_str(&text).unwrap_or(Value::Null);
    Answer {
        status,
        json,
        text,
        outcome,
    }
}

/// The (latest) turn of a request message, read from a store.
pub async fn turn_of(
    store: &dyn feishu_bridge::store::Store,
    message_id: &str,
) -> feishu_bridge::store::TurnRow {
    store
        .turns(&feishu_bridge::store::TurnFilter {
            limit: 1000,
            ..Default::default()
        })
        .await
        .expect("store answers")
        .into_iter()
        .find(|t| t.message_id == message_id)
        .unwrap_or_else(|| panic!("no turn for {message_id}"))
}
