//! A fake Feishu Open API as its own small HTTP server on 127.0.0.1:0, shared by the
//! bridge processes of a scenario. It behaves like Feishu where a fault proof needs it:
//!
//! - `tenant_access_token/internal` checks the app secret; every other call needs the
//!   token (99991663 otherwise);
//! - reply and send keep Feishu's `uuid` idempotency: a repeated uuid answers the message
//!   it created first and creates nothing;
//! - the app's frequency limits (50 calls/s, 1,000/min) are enforced with HTTP 429, code
//!   99991400 and `x-ogw-ratelimit-reset` — a refusal there is the bridge's fault and is
//!   counted as a violation;
//! - on purpose, a fraction of replies (chosen by their uuid) are refused 429 the first
//!   time(s) they are tried, and a storm refuses every reply for a while (its reset:
//!   the time left in it).
//!
//! It records every message it created (by the message replied to), so a scenario can
//! count replies per request.

use std::{
    collections::{HashMap, VecDeque},
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use axum::{
    Json, Router,
    body::Bytes,
    extract::{Path, State},
    http::{HeaderMap, Method, StatusCode, Uri},
    response::{IntoResponse, Response},
    routing::{delete, get, post},
};
use serde_json::{Value, json};

use super::events::KEYS;

const TOKEN: &str = "t-faults-tenant-token";
const RATE_LIMITED: i64 = 99991400;

/// Which replies are refused on purpose.
#[derive(Debug, Clone, Copy, Default)]
pub struct Refusals {
    /// One uuid in this many is refused (0: none).
    pub one_in: u64,
    /// How many times each chosen uuid is refused before it goes through.
    pub times: u32,
    /// The `x-ogw-ratelimit-reset` given, in seconds.
    pub reset_secs: u64,
}

/// A message the fake created.
#[derive(Debug, Clone)]
pub struct Created {
    /// Its id.
    pub id: String,
    /// The message it replies to (a reply), or the chat (a send).
    pub target: String,
    /// The uuid it was created under.
    pub uuid: String,
}

#[derive(Default)]
struct Inner {
    by_uuid: HashMap<String, String>,
    created: Vec<Created>,
    attempts: HashMap<String, u32>,
    per_sec: VecDeque<Instant>,
    per_min: VecDeque<Instant>,
    /// uuid → when the reset it was given runs out.
    refused_until: HashMap<String, Instant>,
    /// Reactions added (their ids).
    reactions: u64,
}

/// What the fake counts.
#[derive(Default)]
pub struct Counters {
    /// Reply/send attempts, refused ones included.
    pub attempts: AtomicU64,
    /// 429s it gave on purpose (chosen uuids and storms).
    pub injected_429: AtomicU64,
    /// 429s for going over 50 calls in a second: the bridge broke Feishu's rules.
    pub over_per_sec: AtomicU64,
    /// 429s for going over 1,000 calls in a minute: the bridge broke Feishu's rules.
    pub over_per_min: AtomicU64,
    /// Retries of a refused uuid before the `x-ogw-ratelimit-reset` it was given ran out.
    pub early_retries: AtomicU64,
    /// Repeated uuids answered with the message created before.
    pub repeats: AtomicU64,
    /// Tenant tokens issued.
    pub tokens: AtomicU64,
    /// Calls to anything this fake does not serve.
    pub unexpected: AtomicU64,
}

struct Fake {
    inner: Mutex<Inner>,
    refusals: Refusals,
    storm_until: Mutex<Option<Instant>>,
    counters: Counters,
}

/// The running fake.
#[derive(Clone)]
pub struct FakeOpenApi {
    /// `api_base` for the bridge.
    pub base: String,
    fake: Arc<Fake>,
}

impl FakeOpenApi {
    /// Starts it, refusing replies as `refusals` says.
    pub async fn start(refusals: Refusals) -> Self {
        let fake = Arc::new(Fake {
            inner: Mutex::default(),
            refusals,
            storm_until: Mutex::default(),
            counters: Counters::default(),
        });
        let app = Router::new()
            .route(
                "/open-apis/auth/v3/tenant_access_token/internal",
                post(token),
            )
            .route("/open-apis/bot/v3/info", get(bot_info))
            .route("/open-apis/im/v1/messages/{id}", get(get_message))
            .route("/open-apis/im/v1/messages/{id}/reply", post(reply))
            .route("/open-apis/im/v1/messages", post(send))
            .route("/open-apis/contact/v3/users/batch", get(users))
            .route("/open-apis/im/v1/chats/{id}", get(chat))
            .route(
                "/open-apis/im/v1/messages/{id}/reactions",
                post(add_reaction),
            )
            .route(
                "/open-apis/im/v1/messages/{id}/reactions/{reaction_id}",
                delete(delete_reaction),
            )
            .fallback(unexpected)
            .with_state(fake.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind fake Open API");
        let base = format!("http://{}", listener.local_addr().expect("addr"));
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self { base, fake }
    }

    /// Refuses every reply and send with 429 for `span` from now.
    pub fn storm(&self, span: Duration) {
        *self.fake.storm_until.lock().expect("lock") = Some(Instant::now() + span);
    }

    /// Its counters.
    pub fn counters(&self) -> &Counters {
        &self.fake.counters
    }

    /// Every message created so far.
    pub fn created(&self) -> Vec<Created> {
        self.fake.inner.lock().expect("lock").created.clone()
    }
}

/// `{"code", "msg"}` with an HTTP status.
fn refuse(status: StatusCode, code: i64, msg: &str) -> Response {
    (status, Json(json!({"code": code, "msg": msg}))).into_response()
}

/// HTTP 429 / 99991400 with Feishu's rate-limit headers.
fn rate_limited(reset_secs: u64) -> Response {
    let mut r = refuse(
        StatusCode::TOO_MANY_REQUESTS,
        RATE_LIMITED,
        "request trigger frequency limit",
    );
    let h = r.headers_mut();
    h.insert("x-ogw-ratelimit-limit", 50.into());
    h.insert("x-ogw-ratelimit-reset", reset_secs.into());
    r
}

impl Fake {
    fn authorized(&self, headers: &HeaderMap) -> bool {
        headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v == format!("Bearer {TOKEN}"))
    }

    /// Feishu's app limits: 50 calls in any second, 1,000 in any minute. `Err(reset)`;
    /// the window that refused is counted.
    fn app_rate(&self, inner: &mut Inner) -> Result<(), u64> {
        let now = Instant::now();
        let c = &self.counters;
        let windows = [
            (
                &mut inner.per_sec,
                Duration::from_secs(1),
                50usize,
                &c.over_per_sec,
            ),
            (
                &mut inner.per_min,
                Duration::from_secs(60),
                1000usize,
                &c.over_per_min,
            ),
        ];
        let mut reset = None;
        for (hits, span, limit, over) in windows {
            while hits.front().is_some_and(|t| now.duration_since(*t) >= span) {
                hits.pop_front();
            }
            hits.push_back(now);
            if hits.len() > limit {
                over.fetch_add(1, Ordering::SeqCst);
                let frees = hits[hits.len() - limit] + span;
                let secs = frees.saturating_duration_since(now).as_secs() + 1;
                reset = Some(reset.unwrap_or(0).max(secs));
            }
        }
        reset.map_or(Ok(()), Err)
    }

    /// Whether this attempt of `uuid` is one refused on purpose: `Some(reset)`. A
    /// storm's reset is the time left in it, as Feishu's says when the window frees.
    fn chosen(&self, uuid: &str, attempt: u32) -> Option<u64> {
        let r = self.refusals;
        let storm = *self.storm_until.lock().expect("lock");
        if let Some(left) = storm.and_then(|until| until.checked_duration_since(Instant::now())) {
            return Some(left.as_secs() + 1);
        }
        let chosen = r.one_in > 0 && fnv(uuid).is_multiple_of(r.one_in) && attempt <= r.times;
        chosen.then_some(r.reset_secs.max(1))
    }

    fn deliver(&self, target: String, headers: &HeaderMap, raw: &[u8]) -> Response {
        let c = &self.counters;
        c.attempts.fetch_add(1, Ordering::SeqCst);
        if !self.authorized(headers) {
            return refuse(StatusCode::OK, 99991663, "invalid access token");
        }
        let body: Value = serde_json::from_slice(raw).unwrap_or(Value::Null);
        let uuid = body["uuid"].as_str().unwrap_or_default().to_string();
        // One lock for the whole decision: two replicas sending one uuid at once must
        // still create one message.
        let mut inner = self.inner.lock().expect("lock");
        let now = Instant::now();
        // Whole seconds on the wire: a retry within 50 ms of the reset is on time.
        if inner
            .refused_until
            .get(&uuid)
            .is_some_and(|until| now + Duration::from_millis(50) < *until)
        {
            c.early_retries.fetch_add(1, Ordering::SeqCst);
        }
        if let Err(reset) = self.app_rate(&mut inner) {
            return rate_limited(reset);
        }
        let attempt = {
            let n = inner.attempts.entry(uuid.clone()).or_default();
            *n += 1;
            *n
        };
        if let Some(reset) = self.chosen(&uuid, attempt) {
            c.injected_429.fetch_add(1, Ordering::SeqCst);
            inner
                .refused_until
                .insert(uuid, now + Duration::from_secs(reset));
            return rate_limited(reset);
        }
        if let Some(id) = inner.by_uuid.get(&uuid).filter(|_| !uuid.is_empty()) {
            c.repeats.fetch_add(1, Ordering::SeqCst);
            return created(id, &body);
        }
        let id = format!("om_fake_{}", inner.created.len() + 1);
        if !uuid.is_empty() {
            inner.by_uuid.insert(uuid.clone(), id.clone());
        }
        inner.created.push(Created {
            id: id.clone(),
            target,
            uuid,
        });
        created(&id, &body)
    }
}

fn created(id: &str, body: &Value) -> Response {
    let at = feishu_bridge::util::now_ms().to_string();
    Json(json!({"code": 0, "msg": "success", "data": {
        "message_id": id, "msg_type": body["msg_type"], "create_time": at, "update_time": at,
        "deleted": false, "updated": false,
        "sender": {"id": KEYS.app_id, "id_type": "app_id", "sender_type": "app"},
    }}))
    .into_response()
}

/// FNV-1a: a stable choice of uuids, the same in every run.
fn fnv(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

async fn token(State(f): State<Arc<Fake>>, raw: Bytes) -> Response {
    let body: Value = serde_json::from_slice(&raw).unwrap_or(Value::Null);
    if body["app_secret"] != KEYS.app_secret {
        return refuse(StatusCode::OK, 10014, "app secret invalid");
    }
    f.counters.tokens.fetch_add(1, Ordering::SeqCst);
    Json(json!({"code": 0, "msg": "ok", "tenant_access_token": TOKEN, "expire": 7200}))
        .into_response()
}

async fn bot_info(State(f): State<Arc<Fake>>, headers: HeaderMap) -> Response {
    if !f.authorized(&headers) {
        return refuse(StatusCode::OK, 99991663, "invalid access token");
    }
    Json(json!({"code": 0, "msg": "ok", "bot": {"activate_status": 2, "open_id": KEYS.bot}}))
        .into_response()
}

/// Every user asked about has a name (at most 50 a call, as Feishu allows).
async fn users(State(f): State<Arc<Fake>>, headers: HeaderMap, uri: Uri) -> Response {
    if !f.authorized(&headers) {
        return refuse(StatusCode::OK, 99991663, "invalid access token");
    }
    let query = uri.query().unwrap_or_default();
    let ids: Vec<&str> = query
        .split('&')
        .filter_map(|pair| pair.strip_prefix("user_ids="))
        .collect();
    if ids.len() > 50 {
        return refuse(StatusCode::BAD_REQUEST, 99992402, "field validation failed");
    }
    let items: Vec<Value> = ids
        .iter()
        .map(|id| json!({"open_id": id, "name": format!("User {id}")}))
        .collect();
    Json(json!({"code": 0, "msg": "success", "data": {"items": items}})).into_response()
}

/// Every chat has a name.
async fn chat(State(f): State<Arc<Fake>>, headers: HeaderMap) -> Response {
    if !f.authorized(&headers) {
        return refuse(StatusCode::OK, 99991663, "invalid access token");
    }
    Json(json!({"code": 0, "msg": "success", "data": {"name": "Load group"}})).into_response()
}

/// A turn's working reaction: a fresh id, counted against the app's limits as Feishu
/// counts every call.
async fn add_reaction(State(f): State<Arc<Fake>>, headers: HeaderMap) -> Response {
    if !f.authorized(&headers) {
        return refuse(StatusCode::OK, 99991663, "invalid access token");
    }
    let mut inner = f.inner.lock().expect("lock");
    if let Err(reset) = f.app_rate(&mut inner) {
        return rate_limited(reset);
    }
    inner.reactions += 1;
    let id = format!("reaction_{}", inner.reactions);
    Json(json!({"code": 0, "msg": "success", "data": {"reaction_id": id}})).into_response()
}

/// Its removal (any id: the harness checks replies, not reactions).
async fn delete_reaction(State(f): State<Arc<Fake>>, headers: HeaderMap) -> Response {
    if !f.authorized(&headers) {
        return refuse(StatusCode::OK, 99991663, "invalid access token");
    }
    let mut inner = f.inner.lock().expect("lock");
    if let Err(reset) = f.app_rate(&mut inner) {
        return rate_limited(reset);
    }
    Json(json!({"code": 0, "msg": "success", "data": {}})).into_response()
}

/// No message is known: Feishu's "recalled or not found", which the bridge reads as gone.
async fn get_message(State(f): State<Arc<Fake>>, headers: HeaderMap) -> Response {
    if !f.authorized(&headers) {
        return refuse(StatusCode::OK, 99991663, "invalid access token");
    }
    refuse(StatusCode::OK, 230011, "message recalled or not found")
}

async fn reply(
    State(f): State<Arc<Fake>>,
    Path(id): Path<String>,
    headers: HeaderMap,
    raw: Bytes,
) -> Response {
    f.deliver(id, &headers, &raw)
}

async fn send(State(f): State<Arc<Fake>>, headers: HeaderMap, raw: Bytes) -> Response {
    let body: Value = serde_json::from_slice(&raw).unwrap_or(Value::Null);
    let chat = body["receive_id"].as_str().unwrap_or_default().to_string();
    f.deliver(chat, &headers, &raw)
}

async fn unexpected(State(f): State<Arc<Fake>>, method: Method, uri: Uri) -> Response {
    f.counters.unexpected.fetch_add(1, Ordering::SeqCst);
    eprintln!("fake Open API: unexpected {method} {}", uri.path());
    refuse(StatusCode::NOT_FOUND, 404, "not served by this fake")
}
