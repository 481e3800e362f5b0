//! The bridge's own overhead on a turn, the agent excluded.
//!
//! A real [`Bridge`] (SQLite in a temporary directory, production defaults otherwise) is
//! served on `127.0.0.1:0` next to two fakes in the same process:
//!
//! * a webhook agent (`kind = "webhook"`, Standard Webhooks signed; it checks the
//!   signature and answers `200 {"output": …}` at once);
//! * the Feishu Open API (`api_base`): tenant token, bot info, and message replies.
//!
//! Each turn is a new group text message that @-mentions the bot, in a chat of its own
//! and as its own thread root, POSTed encrypted and signed to `/webhook/{profile}/event`.
//! Two intervals are taken with `std::time::Instant` (one process, one clock):
//!
//! * **ingress → agent**: from the moment the benchmark client has the bridge's HTTP 200
//!   for the event to the moment the prompt reaches the fake agent's handler (durable
//!   commit already done; worker wake-up, claim, parse, routing writes, session queue,
//!   context gathering, decision record, signing and the HTTP hop to the agent);
//! * **agent → Feishu**: from the moment the fake agent has its answer ready (just
//!   before its handler returns) to the moment the reply reaches the fake Open API's
//!   handler (answer read, outbound pacing, tenant token from cache, the HTTP hop).
//!
//! The fakes report through unbounded channels; the loop awaits them (with a generous
//! timeout that only guards against a hang) and then awaits the turn's end and the
//! inbox event's outcome, so turns never overlap: the loop is strictly sequential.
//! About 20 turns warm up (connection pools, the cached tenant token, SQLite pages) and
//! are not counted; then `TURNS_N` turns (default 300) are measured.
//!
//! Run with `cargo bench --bench turns` (`TURNS_N=1000 cargo bench --bench turns` for
//! more). Run without `--bench` (as `cargo test --benches` does) it only does a few turns
//! as a smoke test and prints nothing but a line. `TURNS_DATABASE_URL` runs it on another
//! database, e.g. a scratch Postgres database.

use std::time::{Duration, Instant};

use axum::{
    Json, Router,
    body::Bytes,
    extract::{Path, State},
    http::{HeaderMap, StatusCode},
    routing::{delete, get, post},
};
use feishu_bridge::{Bridge, inbox::Processed, protocol::crypto, turns::TurnDone};
use serde_json::{Value, json};
use tokio::{
    net::TcpListener,
    sync::{broadcast, mpsc},
};
use tokio_util::sync::CancellationToken;

const PROFILE: &str = "planner";
const APP_ID: &str = "cli_a1b2c3d4e5f60718";
const APP_SECRET: &str = "bench-app-secret-9f2c";
const ENCRYPT_KEY: &str = "kx9Vq2LmT7pR4sW1";
const TOKEN: &str = "rvaYgkND1GOiu5MM0E1rncYC6PLtF7JV";
const BOT_OPEN_ID: &str = "ou_0b7f2c3d4e5f60718293a4b5c6d7e8f9";
const AGENT_SECRET: &str = "whsec_YmVuY2gtYWdlbnQtc2lnbmluZy1rZXk=";
const TENANT_TOKEN: &str = "t-bench-tenant-token";
const ANSWER: &str = "Plan: 1. reproduce the flaky websocket case 2. collect the server and \
                      worker logs 3. diff against yesterday's green build.";
const REQUEST: &str = "please run the integration tests on the release branch again, the \
                       flaky websocket case failed twice this morning. If it fails again, \
                       collect the server and worker logs and summarise what changed since \
                       yesterday's green build.";

const WARMUP: usize = 20;
const DEFAULT_TURNS: usize = 300;
/// Only against a hang: a turn on an idle machine takes milliseconds.
const HANG: Duration = Duration::from_secs(30);

/// What the fake agent saw of one turn.
struct AgentSeen {
    message_id: String,
    /// The prompt reached the handler.
    prompt_at: Instant,
    /// The answer is ready; the handler returns right after.
    answer_at: Instant,
}

/// What the fake Open API saw of one reply.
struct ReplySeen {
    /// The message replied to.
    reply_to: String,
    text: String,
    at: Instant,
}

// ---------------------------------------------------------------- fake agent

#[derive(Clone)]
struct AgentState {
    seen: mpsc::UnboundedSender<AgentSeen>,
}

async fn agent_turn(
    State(s): State<AgentState>,
    headers: HeaderMap,
    body: Bytes,
) -> (StatusCode, Json<Value>) {
    let prompt_at = Instant::now();
    let h = |n: &str| {
        headers
            .get(n)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
    };
    let checked = feishu_bridge::agent::webhook::verify(
        AGENT_SECRET,
        Some(h("webhook-id")),
        Some(h("webhook-timestamp")),
        Some(h("webhook-signature")),
        &body,
    );
    if checked.is_err() {
        // The bench stops on the missing report; say why.
        eprintln!("fake agent: bad webhook-signature; turn refused");
        return (StatusCode::UNAUTHORIZED, Json(json!({})));
    }
    let turn: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let message_id = turn["message_id"].as_str().unwrap_or_default().to_string();
    let answer = Json(json!({ "output": ANSWER }));
    let answer_at = Instant::now();
    let _ = s.seen.send(AgentSeen {
        message_id,
        prompt_at,
        answer_at,
    });
    (StatusCode::OK, answer)
}

async fn start_agent() -> (String, mpsc::UnboundedReceiver<AgentSeen>) {
    let (seen, rx) = mpsc::unbounded_channel();
    let app = Router::new()
        .route("/turn", post(agent_turn))
        .with_state(AgentState { seen });
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind agent");
    let url = format!("http://{}/turn", listener.local_addr().expect("addr"));
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, rx)
}

// ------------------------------------------------------------ fake Open API

#[derive(Clone)]
struct FeishuState {
    seen: mpsc::UnboundedSender<ReplySeen>,
    unexpected: mpsc::UnboundedSender<String>,
}

fn authorized(headers: &HeaderMap) -> bool {
    headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v == format!("Bearer {TENANT_TOKEN}"))
}

async fn tenant_token(Json(body): Json<Value>) -> Json<Value> {
    if body["app_id"] != APP_ID || body["app_secret"] != APP_SECRET {
        return Json(json!({"code": 10014, "msg": "app secret invalid"}));
    }
    Json(json!({"code": 0, "msg": "ok", "tenant_access_token": TENANT_TOKEN, "expire": 7200}))
}

async fn bot_info(headers: HeaderMap) -> Json<Value> {
    if !authorized(&headers) {
        return Json(json!({"code": 99991663, "msg": "invalid access token"}));
    }
    Json(
        json!({"code": 0, "msg": "ok", "bot": {"activate_status": 2, "app_name": "Planner", "open_id": BOT_OPEN_ID}}),
    )
}

/// Senders' names, as the contact API answers (every user asked about has one).
async fn users(headers: HeaderMap, uri: axum::http::Uri) -> Json<Value> {
    if !authorized(&headers) {
        return Json(json!({"code": 99991663, "msg": "invalid access token"}));
    }
    let items: Vec<Value> = uri
        .query()
        .unwrap_or_default()
        .split('&')
        .filter_map(|pair| pair.strip_prefix("user_ids="))
        .map(|id| json!({"open_id": id, "name": format!("User {id}")}))
        .collect();
    Json(json!({"code": 0, "msg": "success", "data": {"items": items}}))
}

async fn reply(
    State(s): State<FeishuState>,
    Path(id): Path<String>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Json<Value> {
    let at = Instant::now();
    if !authorized(&headers) {
        let _ = s
            .unexpected
            .send(format!("reply to {id} without the tenant token"));
        return Json(json!({"code": 99991663, "msg": "invalid access token"}));
    }
    let content: Value =
        serde_json::from_str(body["content"].as_str().unwrap_or_default()).unwrap_or(Value::Null);
    // An answer is a markdown card (schema 2.0, one markdown element); a notice is text.
    let text = content["text"]
        .as_str()
        .or_else(|| content["body"]["elements"][0]["content"].as_str())
        .unwrap_or_default()
        .to_string();
    let reply_id = format!("om_reply_{id}");
    let _ = s.seen.send(ReplySeen {
        reply_to: id,
        text,
        at,
    });
    Json(json!({"code": 0, "msg": "success", "data": {"message_id": reply_id}}))
}

/// A turn's working reaction, added and removed (the ids are not checked here).
async fn reaction(headers: HeaderMap) -> Json<Value> {
    if !authorized(&headers) {
        return Json(json!({"code": 99991663, "msg": "invalid access token"}));
    }
    Json(json!({"code": 0, "msg": "success", "data": {"reaction_id": "reaction_bench"}}))
}

async fn other_call(
    State(s): State<FeishuState>,
    method: axum::http::Method,
    uri: axum::http::Uri,
) -> (StatusCode, Json<Value>) {
    let _ = s.unexpected.send(format!("{method} {uri}"));
    (
        StatusCode::NOT_FOUND,
        Json(json!({"code": 404, "msg": "not served by the bench fake"})),
    )
}

async fn start_feishu() -> (
    String,
    mpsc::UnboundedReceiver<ReplySeen>,
    mpsc::UnboundedReceiver<String>,
) {
    let (seen, rx) = mpsc::unbounded_channel();
    let (unexpected, unexpected_rx) = mpsc::unbounded_channel();
    let app = Router::new()
        .route(
            "/open-apis/auth/v3/tenant_access_token/internal",
            post(tenant_token),
        )
        .route("/open-apis/bot/v3/info", get(bot_info))
        .route("/open-apis/im/v1/messages/{id}/reply", post(reply))
        .route("/open-apis/contact/v3/users/batch", get(users))
        .route("/open-apis/im/v1/messages/{id}/reactions", post(reaction))
        .route(
            "/open-apis/im/v1/messages/{id}/reactions/{reaction_id}",
            delete(reaction),
        )
        .fallback(other_call)
        .with_state(FeishuState { seen, unexpected });
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind feishu");
    let base = format!("http://{}", listener.local_addr().expect("addr"));
    tokio::spawn(async move { axum::serve(listener, app).await });
    (base, rx, unexpected_rx)
}

// ----------------------------------------------------------------- callbacks

/// A schema 2.0 `im.message.receive_v1` callback: a group text message from a person
/// that @-mentions the bot. No `root_id`: the message is its own thread root.
fn message_event(event_id: &str, message_id: &str, chat_id: &str) -> String {
    let now_ms = (feishu_bridge::util::now_secs() * 1000).to_string();
    let content = json!({ "text": format!("@_user_1 {REQUEST}") }).to_string();
    json!({
        "schema": "2.0",
        "header": {
            "event_id": event_id,
            "token": TOKEN,
            "create_time": now_ms,
            "event_type": "im.message.receive_v1",
            "tenant_key": "2ca1d211f64f6438",
            "app_id": APP_ID
        },
        "event": {
            "sender": {
                "sender_id": {
                    "union_id": "on_8ed6aa67826108097d9ee143816345aa",
                    "user_id": "e33ggbyz",
                    "open_id": "ou_84aad35d084aa403a838cf73ee18467a"
                },
                "sender_type": "user",
                "tenant_key": "2ca1d211f64f6438"
            },
            "message": {
                "message_id": message_id,
                "create_time": now_ms,
                "update_time": now_ms,
                "chat_id": chat_id,
                "chat_type": "group",
                "message_type": "text",
                "content": content,
                "mentions": [{
                    "key": "@_user_1",
                    "id": {
                        "union_id": "on_1f2e3d4c5b6a79880716253443526170",
                        "user_id": "",
                        "open_id": BOT_OPEN_ID
                    },
                    "mentioned_type": "bot",
                    "name": "Planner",
                    "tenant_key": "2ca1d211f64f6438"
                }]
            }
        }
    })
    .to_string()
}

/// The encrypted body and its signature headers, as Feishu sends them.
fn signed(plaintext: &str) -> (String, [(&'static str, String); 4]) {
    let ts = feishu_bridge::util::now_secs().to_string();
    let nonce = rand::random::<u32>().to_string();
    let (body, signature) = crypto::seal(Some(ENCRYPT_KEY), &ts, &nonce, rand::random(), plaintext);
    (
        body,
        [
            ("content-type", "application/json; charset=utf-8".into()),
            ("x-lark-request-timestamp", ts),
            ("x-lark-request-nonce", nonce),
            ("x-lark-signature", signature),
        ],
    )
}

// ------------------------------------------------------------------ the loop

struct Rig {
    client: reqwest::Client,
    event_url: String,
    agent: mpsc::UnboundedReceiver<AgentSeen>,
    replies: mpsc::UnboundedReceiver<ReplySeen>,
    turns_done: broadcast::Receiver<TurnDone>,
    processed: broadcast::Receiver<Processed>,
    /// Distinguishes this run's ids (the database is fresh anyway).
    run: u32,
}

/// One turn's two intervals, in ms (negative would mean the order was not the one
/// assumed; reported, not hidden).
struct Sample {
    ingress_to_agent: f64,
    agent_to_feishu: f64,
}

fn signed_ms(from: Instant, to: Instant) -> f64 {
    match to.checked_duration_since(from) {
        Some(d) => d.as_secs_f64() * 1e3,
        None => -(from.duration_since(to).as_secs_f64() * 1e3),
    }
}

async fn within<T>(what: &str, f: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(HANG, f)
        .await
        .unwrap_or_else(|_| panic!("no {what} within {HANG:?}"))
}

impl Rig {
    async fn turn(&mut self, i: usize) -> Sample {
        let message_id = format!("om_bench_{:08x}_{i:06}", self.run);
        let event_id = format!("ev_bench_{:08x}_{i:06}", self.run);
        // A chat of its own per turn: the outbound pacer spaces sends to the SAME chat by
        // 220 ms (Feishu's shared per-group limit), so reusing one chat would measure the
        // pacing, not the bridge's overhead.
        let chat_id = format!("oc_bench_{:08x}_{i:06}", self.run);
        let (body, headers) = signed(&message_event(&event_id, &message_id, &chat_id));
        let mut request = self.client.post(&self.event_url).body(body);
        for (name, value) in headers {
            request = request.header(name, value);
        }

        let response = request.send().await.expect("event delivered");
        let acked = Instant::now();
        let status = response.status();
        let text = response.text().await.unwrap_or_default();
        assert_eq!(status, StatusCode::OK, "event refused: {text}");

        let seen = within("prompt at the agent", self.agent.recv())
            .await
            .expect("agent channel open");
        assert_eq!(seen.message_id, message_id, "the agent got another turn");
        let reply = within("reply at the Open API", self.replies.recv())
            .await
            .expect("reply channel open");
        assert_eq!(reply.reply_to, message_id, "a reply to another message");
        assert_eq!(reply.text, ANSWER, "the reply is the agent's answer");

        // Let the turn and the inbox event finish (output recorded, event marked done)
        // before the next one, so turns never overlap.
        within("end of the turn", async {
            loop {
                match self.turns_done.recv().await {
                    Ok(t) if t.message_id == message_id => {
                        assert_eq!(t.outcome, "answered", "turn outcome");
                        break;
                    }
                    Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
                    Err(e) => panic!("turn channel closed: {e}"),
                }
            }
        })
        .await;
        within("inbox outcome", async {
            loop {
                match self.processed.recv().await {
                    Ok(p) if p.event_id == event_id => {
                        assert_eq!(p.outcome, "done", "inbox outcome");
                        break;
                    }
                    Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
                    Err(e) => panic!("worker channel closed: {e}"),
                }
            }
        })
        .await;

        Sample {
            ingress_to_agent: signed_ms(acked, seen.prompt_at),
            agent_to_feishu: signed_ms(seen.answer_at, reply.at),
        }
    }
}

struct Stats {
    p50: f64,
    p99: f64,
    mean: f64,
    max: f64,
    min: f64,
}

/// Nearest-rank percentiles.
fn stats(mut v: Vec<f64>) -> Stats {
    v.sort_by(f64::total_cmp);
    let rank = |q: f64| {
        let r = (q * v.len() as f64).ceil() as usize;
        v[r.clamp(1, v.len()) - 1]
    };
    Stats {
        p50: rank(0.50),
        p99: rank(0.99),
        mean: v.iter().sum::<f64>() / v.len() as f64,
        max: v[v.len() - 1],
        min: v[0],
    }
}

fn config_text(db_url: &str, api_base: &str, agent_url: &str) -> String {
    format!(
        r#"
[server]
listen = "127.0.0.1:0"

[database]
url = "{db_url}"

[[profiles]]
name = "{PROFILE}"
app_id = "{APP_ID}"
app_secret = "{APP_SECRET}"
encrypt_key = "{ENCRYPT_KEY}"
verification_token = "{TOKEN}"
bot_open_id = "{BOT_OPEN_ID}"
api_base = "{api_base}"

[profiles.agent]
kind = "webhook"
url = "{agent_url}"
secret = "{AGENT_SECRET}"
timeout_secs = 30
"#
    )
}

/// `/proc/loadavg`'s 1-minute figure: turns share the CPUs with whatever else runs.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().map(str::to_string))
        .unwrap_or_else(|| "unknown".into())
}

async fn bench(warmup: usize, n: usize, report: bool) {
    let load = load_average();
    let dir = tempfile::Builder::new()
        .prefix("fbbench_turns_")
        .tempdir()
        .expect("temp dir");
    // `TURNS_DATABASE_URL` points it at another database (a scratch Postgres database).
    let db_url = std::env::var("TURNS_DATABASE_URL")
        .unwrap_or_else(|_| format!("sqlite://{}", dir.path().join("bench.db").display()));
    let backend = if db_url.starts_with("sqlite:") {
        "SQLite in a temp dir"
    } else {
        "Postgres (TURNS_DATABASE_URL)"
    };
    let (agent_url, agent) = start_agent().await;
    let (api_base, replies, mut unexpected) = start_feishu().await;
    let config =
        feishu_bridge::config::load_from_str(&config_text(&db_url, &api_base, &agent_url), &|_| {
            None
        })
        .expect("bench config is valid");

    let bridge = Bridge::start(config).await.expect("bridge starts");
    let state = bridge.state().clone();
    let turns_done = state.turns_done.subscribe();
    let processed = state.processed.subscribe();
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind bridge");
    let addr = listener.local_addr().expect("addr");
    let stop = CancellationToken::new();
    let server = tokio::spawn(bridge.serve(listener, stop.clone().cancelled_owned()));

    let mut rig = Rig {
        client: reqwest::Client::builder()
            .timeout(HANG)
            .build()
            .expect("client"),
        event_url: format!("http://{addr}/webhook/{PROFILE}/event"),
        agent,
        replies,
        turns_done,
        processed,
        run: rand::random(),
    };

    for i in 0..warmup {
        rig.turn(i).await;
    }
    let mut ingress = Vec::with_capacity(n);
    let mut egress = Vec::with_capacity(n);
    let started = Instant::now();
    for i in warmup..warmup + n {
        let s = rig.turn(i).await;
        ingress.push(s.ingress_to_agent);
        egress.push(s.agent_to_feishu);
    }
    let elapsed = started.elapsed();

    stop.cancel();
    server
        .await
        .expect("serve task")
        .expect("bridge stops cleanly");
    let mut odd = Vec::new();
    while let Ok(call) = unexpected.try_recv() {
        odd.push(call);
    }
    let negative = ingress.iter().chain(&egress).filter(|v| **v < 0.0).count();

    if !report {
        assert!(odd.is_empty(), "unexpected Open API calls: {odd:?}");
        println!("turns bench smoke test: {n} turns ok (run with `cargo bench --bench turns`)");
        return;
    }
    let i = stats(ingress);
    let e = stats(egress);
    let row = |name: &str, s: &Stats| {
        println!(
            "| {name} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} |",
            s.p50, s.p99, s.mean, s.max, s.min
        );
    };
    println!();
    println!("## feishu-bridge turn overhead (agent excluded)");
    println!();
    println!(
        "- {n} sequential turns measured after {warmup} warm-up turns; {backend}; \
         webhook agent and Open API faked in-process on 127.0.0.1"
    );
    println!("- each turn: a new group message @bot, its own chat and thread root");
    println!(
        "- {} CPUs; load average before the run: {load}",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    println!();
    println!("| interval | p50 ms | p99 ms | mean ms | max ms | min ms |");
    println!("|---|---:|---:|---:|---:|---:|");
    row("ingress → agent (HTTP 200 received → prompt at agent)", &i);
    row("agent → Feishu (answer ready → reply at Open API)", &e);
    println!();
    println!(
        "sequential loop: {n} turns in {:.2} s = {:.1} turns/s (each turn waited to its end)",
        elapsed.as_secs_f64(),
        n as f64 / elapsed.as_secs_f64()
    );
    if negative > 0 {
        println!("NOTICE: {negative} negative intervals (the order assumed did not hold)");
    }
    if !odd.is_empty() {
        println!("NOTICE: unexpected Open API calls: {odd:?}");
    }
}

fn main() {
    // `cargo bench` passes `--bench`; without it (`cargo test --benches`) this is a smoke
    // test of a few turns.
    let benching = std::env::args().any(|a| a == "--bench");
    let (warmup, n) = if benching {
        let n = std::env::var("TURNS_N")
            .ok()
            .map(|v| v.parse::<usize>().expect("TURNS_N is a number of turns"))
            .unwrap_or(DEFAULT_TURNS)
            .max(1);
        (WARMUP, n)
    } else {
        (1, 3)
    };
    let rt = tokio::runtime::Runtime::new().expect("tokio runtime");
    rt.block_on(bench(warmup, n, benching));
}
