//! A fake Feishu Open API on 127.0.0.1:0 (the real one is outside our control): it
//! serves what the bridge calls and counts the calls.

use std::{
    collections::HashMap,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering},
    },
};

use axum::{
    Json, Router,
    extract::{Path, State},
    http::HeaderMap,
    routing::{get, post},
};
use serde_json::{Value, json};
use tokio::{net::TcpListener, sync::broadcast};

/// What the fake knows and has seen.
pub struct FakeState {
    /// Accepted app secret.
    pub app_secret: String,
    /// The bot's open_id it reports.
    pub bot_open_id: String,
    /// Token requests seen.
    pub token_requests: AtomicUsize,
    /// Bot info requests seen.
    pub bot_info_requests: AtomicUsize,
    /// Get-message requests seen.
    pub get_requests: AtomicUsize,
    /// Messages it can return: id → text.
    pub messages: Arc<Mutex<HashMap<String, String>>>,
    /// Replies and sends received: (path target, body), one per distinct uuid.
    pub sent: Mutex<Vec<(String, Value)>>,
    /// uuid → (message id, create time) already created (Feishu's one-hour
    /// idempotency: a repeated send answers the message it created).
    pub uuids: Mutex<HashMap<String, (String, i64)>>,
    /// The `create_time` (ms) it gives the messages it creates; `None`: the current time.
    pub create_time: Mutex<Option<i64>>,
    /// Answers to give before succeeding: (HTTP status, code), consumed in order.
    pub failures: Mutex<Vec<(u16, i64)>>,
    /// Send attempts seen (including refused ones).
    pub send_attempts: AtomicUsize,
    /// `expire` of issued tokens, in seconds.
    pub token_expire: AtomicU64,
    /// Current token generation: only `t-fake-<gen>` is valid.
    pub token_gen: AtomicUsize,
    /// Card updates received, in order: (message id, card JSON).
    pub patches: Mutex<Vec<(String, Value)>>,
    /// While set, replies and sends are recorded as attempts and never answered (a
    /// Feishu that stopped answering mid-request).
    pub hang: AtomicBool,
    /// What happens, as it happens: `attempt:<uuid>`, `sent:<uuid>`, `patch:<id>`.
    pub activity: broadcast::Sender<String>,
    /// The uuid of every send attempt, in order (including ones that hung).
    pub attempt_uuids: Mutex<Vec<String>>,
}

impl FakeState {
    /// The one token it accepts now.
    pub fn current_token(&self) -> String {
        format!("t-fake-{}", self.token_gen.load(Ordering::SeqCst))
    }

    /// Invalidates the current token (Feishu answers 99991663 to it from now on).
    pub fn revoke_token(&self) {
        self.token_gen.fetch_add(1, Ordering::SeqCst);
    }

    fn authorized(&self, headers: &HeaderMap) -> bool {
        headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v == format!("Bearer {}", self.current_token()))
    }

    /// The `create_time` (ms) it gave the message `id` it created.
    pub fn created_at(&self, id: &str) -> Option<i64> {
        self.uuids
            .lock()
            .expect("lock")
            .values()
            .find(|(m, _)| m == id)
            .map(|(_, at)| *at)
    }

    /// The text shown in the latest update of card `id`.
    pub fn card_text(&self, id: &str) -> Option<String> {
        self.patches
            .lock()
            .expect("lock")
            .iter()
            .rev()
            .find(|(m, _)| m == id)
            .map(|(_, card)| {
                card["body"]["elements"][0]["content"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string()
            })
    }
}

/// The running fake.
pub struct FakeFeishu {
    /// Base URL for `api_base`.
    pub base: String,
    /// Its state.
    pub state: Arc<FakeState>,
    /// Messages it can return (shared with the state).
    pub messages: Arc<Mutex<HashMap<String, String>>>,
}

impl FakeFeishu {
    /// The fake for the default test profile (app secret `s`, the planner bot).
    pub async fn planner() -> Self {
        Self::start("s", super::feishu::BOT_OPEN_ID).await
    }

    /// The profile keys that point the default test profile at this fake.
    pub fn profile_keys(&self) -> String {
        format!("api_base = \"{}\"\napp_secret = \"s\"\n", self.base)
    }

    /// Starts the fake.
    pub async fn start(app_secret: &str, bot_open_id: &str) -> Self {
        let state = Arc::new(FakeState {
            app_secret: app_secret.into(),
            bot_open_id: bot_open_id.into(),
            token_requests: AtomicUsize::default(),
            bot_info_requests: AtomicUsize::default(),
            get_requests: AtomicUsize::default(),
            messages: Arc::default(),
            sent: Mutex::default(),
            uuids: Mutex::default(),
            create_time: Mutex::default(),
            failures: Mutex::default(),
            send_attempts: AtomicUsize::default(),
            token_expire: AtomicU64::new(7200),
            token_gen: AtomicUsize::default(),
            patches: Mutex::default(),
            hang: AtomicBool::default(),
            activity: broadcast::channel(1024).0,
            attempt_uuids: Mutex::default(),
        });
        let app = Router::new()
            .route(
                "/open-apis/auth/v3/tenant_access_token/internal",
                post(token),
            )
            .route("/open-apis/bot/v3/info", get(bot_info))
            .route(
                "/open-apis/im/v1/messages/{id}",
                get(get_message).patch(patch_card),
            )
            .route("/open-apis/im/v1/messages/{id}/reply", post(reply))
            .route("/open-apis/im/v1/messages", post(send))
            .with_state(state.clone());
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind fake");
        let base = format!("http://{}", listener.local_addr().expect("addr"));
        tokio::spawn(async move { axum::serve(listener, app).await });
        let messages = state.messages.clone();
        Self {
            base,
            state,
            messages,
        }
    }
}

async fn token(State(s): State<Arc<FakeState>>, Json(body): Json<Value>) -> Json<Value> {
    s.token_requests.fetch_add(1, Ordering::SeqCst);
    if body["app_secret"] != s.app_secret {
        return Json(json!({"code": 10014, "msg": "app secret invalid"}));
    }
    Json(json!({
        "code": 0, "msg": "ok",
        "tenant_access_token": s.current_token(),
        "expire": s.token_expire.load(Ordering::SeqCst),
    }))
}

async fn bot_info(State(s): State<Arc<FakeState>>, headers: HeaderMap) -> Json<Value> {
    s.bot_info_requests.fetch_add(1, Ordering::SeqCst);
    if !s.authorized(&headers) {
        return Json(json!({"code": 99991663, "msg": "invalid access token"}));
    }
    Json(
        json!({"code": 0, "msg": "ok", "bot": {"activate_status": 2, "app_name": "Planner", "open_id": s.bot_open_id}}),
    )
}

async fn get_message(
    State(s): State<Arc<FakeState>>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Json<Value> {
    s.get_requests.fetch_add(1, Ordering::SeqCst);
    if !s.authorized(&headers) {
        return Json(json!({"code": 99991663, "msg": "invalid access token"}));
    }
    let text = s.messages.lock().expect("lock").get(&id).cloned();
    match text {
        Some(text) => Json(json!({"code": 0, "msg": "success", "data": {"items": [{
            "message_id": id, "msg_type": "text", "deleted": false,
            "body": {"content": json!({"text": text}).to_string()},
            "sender": {"id": "ou_someone", "id_type": "open_id", "sender_type": "user"},
            "mentions": []
        }]}})),
        None => Json(json!({"code": 230011, "msg": "message recalled or not found"})),
    }
}

async fn reply(
    State(s): State<Arc<FakeState>>,
    Path(id): Path<String>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> axum::response::Response {
    deliver(&s, id, &headers, body).await
}

async fn send(
    State(s): State<Arc<FakeState>>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> axum::response::Response {
    let target = body["receive_id"].as_str().unwrap_or_default().to_string();
    deliver(&s, target, &headers, body).await
}

async fn patch_card(
    State(s): State<Arc<FakeState>>,
    Path(id): Path<String>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Json<Value> {
    if !s.authorized(&headers) {
        return Json(json!({"code": 99991663, "msg": "invalid access token"}));
    }
    let card: Value =
        serde_json::from_str(body["content"].as_str().unwrap_or_default()).unwrap_or(Value::Null);
    s.patches.lock().expect("lock").push((id.clone(), card));
    s.activity.send(format!("patch:{id}")).ok();
    Json(json!({"code": 0, "msg": "success", "data": {}}))
}

async fn deliver(
    s: &FakeState,
    target: String,
    headers: &HeaderMap,
    body: Value,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    s.send_attempts.fetch_add(1, Ordering::SeqCst);
    let uuid = body["uuid"].as_str().unwrap_or_default().to_string();
    s.attempt_uuids.lock().expect("lock").push(uuid.clone());
    s.activity.send(format!("attempt:{uuid}")).ok();
    if s.hang.load(Ordering::SeqCst) {
        std::future::pending::<()>().await;
    }
    if !s.authorized(headers) {
        return Json(json!({"code": 99991663, "msg": "invalid access token"})).into_response();
    }
    let failure = {
        let mut f = s.failures.lock().expect("lock");
        (!f.is_empty()).then(|| f.remove(0))
    };
    if let Some((status, code)) = failure {
        let status =
            axum::http::StatusCode::from_u16(status).unwrap_or(axum::http::StatusCode::BAD_REQUEST);
        return (
            status,
            [("x-ogw-ratelimit-reset", "0")],
            Json(json!({"code": code, "msg": "fake failure"})),
        )
            .into_response();
    }
    let mut uuids = s.uuids.lock().expect("lock");
    if let Some((id, at)) = uuids.get(&uuid) {
        return Json(created(id, *at)).into_response();
    }
    let mut sent = s.sent.lock().expect("lock");
    let id = format!("om_bot_reply_{}", sent.len() + 1);
    let at = s
        .create_time
        .lock()
        .expect("lock")
        .unwrap_or_else(feishu_bridge::util::now_ms);
    uuids.insert(uuid.clone(), (id.clone(), at));
    sent.push((target, body));
    s.activity.send(format!("sent:{uuid}")).ok();
    Json(created(&id, at)).into_response()
}

/// The answer to a send or reply that created (or had created) message `id` at `at`:
/// like Feishu's, its times are strings of milliseconds.
fn created(id: &str, at: i64) -> Value {
    json!({"code": 0, "msg": "success", "data": {
        "message_id": id,
        "msg_type": "text",
        "create_time": at.to_string(),
        "update_time": at.to_string(),
        "deleted": false,
        "updated": false,
    }})
}
