//! The long connection end to end, without a Feishu app:
//!
//! ```text
//! cargo run --example longconn_demo
//! ```
//!
//! It starts a fake Feishu on 127.0.0.1 (`bench/fake_longconn.rs`), then a bridge in this
//! process on 127.0.0.1:0 with a temporary SQLite database, the built-in `echo` agent and
//! one profile with `connection = "websocket"` whose `api_base` is the fake. Once the
//! long connection is up, the fake pushes a group message that @-mentions the bot, as
//! Feishu would; the demo prints the acknowledgement, the answer the bridge posted
//! through the (fake) Open API and the profile's `long_connection` entry of `GET /status`,
//! then shuts the bridge down gracefully, stops the fake and exits 0.
//!
//! `RUST_LOG=info` shows the bridge's own log lines (default: warnings only).

use std::{process::ExitCode, time::Duration};

use feishu_bridge::{Bridge, longconn::status::ConnState};
use serde_json::{Value, json};
use tokio::{net::TcpListener, time::Instant};
use tokio_util::sync::CancellationToken;

#[path = "../bench/fake_longconn.rs"]
mod fake_longconn;

use fake_longconn::{FakeFeishu, Push};

const PROFILE: &str = "demo";
const APP_ID: &str = "cli_demo_longconn";
/// A demo value, not the secret of any real app.
const APP_SECRET: &str = "demo-app-secret";
const BOT_OPEN_ID: &str = "ou_demo_longconn_bot";
const ADMIN_TOKEN: &str = "demo-admin-token";
/// How long any one step may take before the demo gives up.
const PATIENCE: Duration = Duration::from_secs(30);

/// A group text message from Alice that @-mentions the bot, in the schema 2.0 envelope
/// Feishu pushes (plaintext: the long connection authenticated once, at connect).
fn mention_event(event_id: &str, message_id: &str) -> Vec<u8> {
    let now = feishu_bridge::util::now_ms().to_string();
    let mention = json!({
        "key": "@_user_1",
        "id": {"union_id": "on_demo_bot", "user_id": "", "open_id": BOT_OPEN_ID},
        "name": "Demo Bot",
        "mentioned_type": "bot",
        "tenant_key": "tenant_demo"
    });
    let text = "@_user_1 what changed in the release branch since yesterday?";
    json!({
        "schema": "2.0",
        "header": {
            "event_id": event_id,
            "token": "",
            "create_time": now,
            "event_type": "im.message.receive_v1",
            "tenant_key": "tenant_demo",
            "app_id": APP_ID
        },
        "event": {
            "sender": {
                "sender_id": {"union_id": "on_demo_alice", "user_id": "alice", "open_id": "ou_demo_alice"},
                "sender_type": "user",
                "tenant_key": "tenant_demo"
            },
            "message": {
                "message_id": message_id,
                "create_time": now,
                "update_time": now,
                "chat_id": "oc_demo_group",
                "chat_type": "group",
                "message_type": "text",
                "content": json!({"text": text}).to_string(),
                "mentions": [mention]
            }
        }
    })
    .to_string()
    .into_bytes()
}

fn config_text(database_url: &str, api_base: &str) -> String {
    format!(
        r#"
[server]
listen = "127.0.0.1:0"
admin_token = "{ADMIN_TOKEN}"

[database]
url = "{database_url}"

[[profiles]]
name = "{PROFILE}"
app_id = "{APP_ID}"
connection = "websocket"
app_secret = "{APP_SECRET}"
api_base = "{api_base}"

[profiles.agent]
kind = "echo"
"#
    )
}

/// `what` within [`PATIENCE`], or an error naming it.
async fn within<T>(what: &str, f: impl std::future::Future<Output = T>) -> Result<T, String> {
    tokio::time::timeout(PATIENCE, f).await.map_err(|_| {
        format!(
            "timed out after {} s waiting for {what}",
            PATIENCE.as_secs()
        )
    })
}

#[tokio::main]
async fn main() -> ExitCode {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt().with_env_filter(filter).init();
    match run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("longconn_demo: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run() -> Result<(), String> {
    let (fake, mut observed) = FakeFeishu::start(APP_ID, APP_SECRET, BOT_OPEN_ID)
        .await
        .map_err(|e| format!("cannot start the fake Feishu: {e}"))?;
    println!(
        "fake Feishu (Open API and long connection) at {}",
        fake.api_base
    );
    let dir = tempfile::tempdir().map_err(|e| format!("cannot make a temporary directory: {e}"))?;
    let database_url = format!("sqlite://{}", dir.path().join("demo.db").display());
    let text = config_text(&database_url, &fake.api_base);
    let config = feishu_bridge::config::load_from_str(&text, &|_| None)
        .map_err(|e| format!("the demo configuration is invalid: {e}"))?;
    let bridge = Bridge::start(config)
        .await
        .map_err(|e| format!("the bridge did not start: {e:#}"))?;
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| format!("cannot listen on 127.0.0.1: {e}"))?;
    let base = listener
        .local_addr()
        .map(|a| format!("http://{a}"))
        .map_err(|e| format!("no local address: {e}"))?;
    let state = bridge.state().clone();
    let mut turns = state.turns_done.subscribe();
    let stop = CancellationToken::new();
    let serving = tokio::spawn(bridge.serve(listener, stop.clone().cancelled_owned()));
    println!("bridge serving at {base} (SQLite in a temporary directory, echo agent)");

    // Everything from here on ends with the shutdown, whether it worked or not.
    let shown = show(&fake, &mut observed, &state, &mut turns, &base).await;

    stop.cancel();
    let stopped = within("the bridge to stop", serving).await;
    fake.stop().await;
    drop(dir);
    match stopped {
        Ok(Ok(Ok(()))) => {
            let after = state.connections.get(PROFILE);
            let (conn, why) = after.map_or(("unknown", None), |v| (v.state.as_str(), v.reason));
            let why = why.map(|w| format!(" ({w})")).unwrap_or_default();
            println!("bridge stopped gracefully, long connection {conn}{why}; fake stopped");
        }
        Ok(Ok(Err(e))) => return Err(format!("the bridge stopped with an error: {e:#}")),
        Ok(Err(e)) => return Err(format!("the bridge's task failed: {e}")),
        Err(e) => return Err(e),
    }
    shown
}

/// Waits for the connection, pushes the message and prints what came of it.
async fn show(
    fake: &FakeFeishu,
    observed: &mut fake_longconn::Observed,
    state: &feishu_bridge::AppState,
    turns: &mut tokio::sync::broadcast::Receiver<feishu_bridge::turns::TurnDone>,
    base: &str,
) -> Result<(), String> {
    let connected = state
        .connections
        .wait_for(PROFILE, |v| v.state == ConnState::Connected);
    within("the long connection", connected).await?;
    within("the first ping", fake.connected(1)).await?;
    println!("long connection up (the bridge fetched a URL and pinged)");

    let (event_id, message_id) = ("ev_demo_0001", "om_demo_0001");
    let push = Push::event(1, mention_event(event_id, message_id));
    if !fake.push(&push, Instant::now()) {
        return Err("the connection closed before the push".into());
    }
    println!("pushed {event_id}: Alice @-mentions the bot in oc_demo_group");
    let ack = within("the acknowledgement", observed.acks.recv())
        .await?
        .ok_or("the fake stopped before the acknowledgement")?;
    let biz_rt = ack
        .biz_rt_ms
        .map_or_else(|| "missing".to_string(), |ms| format!("{ms} ms"));
    println!(
        "acknowledged SeqID {}: code {}, biz_rt {biz_rt} (stored, then acknowledged; {:.1} ms push → ack)",
        ack.seq_id,
        ack.code,
        ack.latency.as_secs_f64() * 1000.0
    );
    if ack.code != 200 {
        return Err(format!("the bridge answered code {}", ack.code));
    }

    let turn = within("the turn", async {
        loop {
            match turns.recv().await {
                Ok(t) if t.message_id == message_id => return Ok(t),
                Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                Err(e) => return Err(format!("no turn report: {e}")),
            }
        }
    })
    .await??;
    println!("turn {} ended: {}", turn.turn_id, turn.outcome.as_str());
    let mut replies = 0;
    while let Ok(reply) = observed.replies.try_recv() {
        replies += 1;
        println!(
            "the bridge's answer, as the fake Open API received it ({} to {}):",
            reply.msg_type, reply.to
        );
        for line in reply.text.lines() {
            println!("    {line}");
        }
    }
    if replies == 0 {
        return Err("the turn ended without an answer at the Open API".into());
    }

    let status = status(base).await?;
    let entry = status["profiles"]
        .as_array()
        .and_then(|ps| ps.iter().find(|p| p["name"] == PROFILE))
        .map(|p| p["long_connection"].clone())
        .ok_or("GET /status has no entry for the profile")?;
    let pretty = serde_json::to_string_pretty(&entry).unwrap_or_else(|_| entry.to_string());
    println!("GET /status, profiles[\"{PROFILE}\"].long_connection:\n{pretty}");
    println!(
        "fake Feishu: {} connection URL(s) handed out, {} frame(s) it could not place",
        fake.urls_issued(),
        fake.strays()
    );
    if fake.strays() > 0 {
        return Err("the bridge sent frames the fake could not match".into());
    }
    Ok(())
}

async fn status(base: &str) -> Result<Value, String> {
    let client = reqwest::Client::new();
    let asked = client
        .get(format!("{base}/status"))
        .bearer_auth(ADMIN_TOKEN)
        .timeout(PATIENCE)
        .send()
        .await
        .map_err(|e| format!("GET /status failed: {e}"))?;
    if !asked.status().is_success() {
        return Err(format!("GET /status answered {}", asked.status()));
    }
    asked
        .json()
        .await
        .map_err(|e| format!("GET /status is not JSON: {e}"))
}
