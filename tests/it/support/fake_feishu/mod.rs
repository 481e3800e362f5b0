//! A fake Feishu Open API on 127.0.0.1:0 (the real one is outside our control): it
//! serves what the bridge calls, behaves like Feishu where it matters (documented size
//! and frequency limits, uuid idempotency, error codes, CardKit streaming cards), and
//! counts the calls. Wire formats and codes: `/work/shared/feishu-protocol.md` §10, §11.
//!
//! `limits`: sizes and sliding windows; `gate`: refusals and the checks every call
//! passes first; `tokens`: the tenant tokens; `messages`: send/reply; `reads`: bot info,
//! get; `card_patch`: card PATCH; `cardkit`: card entities; `interactions`: presses in
//! flight, during which a card takes no updates; `streaming_window`: CardKit closing
//! streaming after ten minutes, on a clock tests move; `mentions`: who would be pinged;
//! `views`: what tests read back; `directory`: users' and chats' names; `reactions`:
//! emoji reactions on messages; `media`: resources, bundles, docs and uploads. The
//! long connection (`super::fake_longconn`) can be mounted beside it.

mod card_patch;
mod cardkit;
mod directory;
mod entities;
mod gate;
mod interactions;
mod limits;
mod media;
mod mentions;
mod messages;
mod reactions;
mod reads;
mod streaming_window;
mod tokens;
mod views;

use std::{
    collections::{HashMap, HashSet},
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicU64, AtomicUsize},
    },
};

use axum::{
    Router,
    extract::DefaultBodyLimit,
    routing::{delete, get, patch, post, put},
};
pub use directory::{CHATS_SCOPE, Directory, USERS_PER_CALL, USERS_SCOPE};
pub use entities::{CardEntity, CardOp};
pub use gate::{Refusal, Storm};
pub use limits::{
    APP_PER_MIN, APP_PER_SEC, CARD_MAX_BYTES, CARDKIT_OPS_PER_SEC_PER_CARD,
    PATCH_PER_SEC_PER_MESSAGE, SlidingWindow, TEXT_MAX_BYTES,
};
pub use media::{FILE_MAX_BYTES, IMAGE_MAX_BYTES, Media};
pub use mentions::tags_in as mention_tags;
pub use reactions::{REACTIONS_SCOPE, ReactionOp, Reactions, is_reaction_endpoint};
use serde_json::Value;
pub use streaming_window::STREAMING_WINDOW;
pub use tokens::{TokenFault, Tokens};
use tokio::{net::TcpListener, sync::broadcast};

use super::fake_longconn::FakeLongConn;

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
    /// Replies and sends received: (path target, body), one per message created.
    pub sent: Mutex<Vec<(String, Value)>>,
    /// Each send's (`receive_id`, `receive_id_type`), in order, retries included.
    pub receive_id_types: Mutex<Vec<(String, String)>>,
    /// uuid → (message id, create time) already created (Feishu's one-hour
    /// idempotency: a repeated send answers the message it created).
    pub uuids: Mutex<HashMap<String, (String, i64)>>,
    /// The `create_time` (ms) it gives the messages it creates; `None`: the current time.
    pub create_time: Mutex<Option<i64>>,
    /// Answers to give before succeeding: (HTTP status, code), consumed in order.
    pub failures: Mutex<Vec<(u16, i64)>>,
    /// Send attempts seen (including refused ones).
    pub send_attempts: AtomicUsize,
    /// The tenant tokens it issued and accepts, and its token endpoint's failures.
    pub tokens: Tokens,
    /// Card updates received, in order: (message id, card JSON).
    pub patches: Mutex<Vec<(String, Value)>>,
    /// While set, replies and sends are recorded as attempts and never answered (a
    /// Feishu that stopped answering mid-request).
    pub hang: AtomicBool,
    /// What happens, as it happens: `attempt:<uuid>`, `sent:<uuid>`, `lost:<message id>`,
    /// `patch:<id>`, `cardkit:<op>:<card_id>`, `refused:<code>`,
    /// `reaction:add:<message id>:<reaction id>`, `reaction:delete:<…>:<…>`.
    pub activity: broadcast::Sender<String>,
    /// The uuid of every send attempt, in order (including ones that hung).
    pub attempt_uuids: Mutex<Vec<String>>,
    /// Messages in chats that refuse thread replies: a reply to one with
    /// `reply_in_thread: true` is refused with 230071.
    pub no_thread: Mutex<HashSet<String>>,
    /// Aggregated (merged) messages: a reply to one with `reply_in_thread: true` is
    /// refused with 230072 ([DOC] `im-v1/message/reply.md`); its chat takes thread
    /// replies to other messages.
    pub aggregated: Mutex<HashSet<String>>,
    /// Presses in flight, by the message whose card was pressed (see `interactions`).
    interactions: Mutex<HashMap<String, usize>>,
    /// How long a card's streaming mode stays on (see `streaming_window`).
    streaming_window: Mutex<std::time::Duration>,
    /// How far a test moved the fake's clock forward.
    clock_ahead: Mutex<std::time::Duration>,
    /// Recalled messages: replies to them are refused (230011), and so are GETs and
    /// card updates of them.
    pub recalled: Mutex<HashSet<String>>,
    /// Requests that targeted a recalled message (replies, GETs, card updates).
    pub calls_to_recalled: AtomicUsize,
    /// Refusals for going over a frequency limit: `app/s`, `app/min`,
    /// `patch:<message_id>`, `cardkit:<card_id>` (storms are not listed).
    pub violations: Mutex<Vec<String>>,
    /// An injected rate-limit storm, while set.
    pub storm: Mutex<Option<Storm>>,
    /// Requests refused by a storm.
    pub storm_refusals: AtomicUsize,
    /// One-off refusals: the next request to each one's endpoint is answered with its
    /// status and code (then the entry is gone), past a storm and before the token.
    pub refuse_next: Mutex<Vec<Refusal>>,
    /// The next N sends/replies that succeed (create a message, or answer a repeated
    /// uuid with the one it created) are carried out, but their answer is cut: the client
    /// sees a transport error. Refused requests do not use one up.
    pub lose_answers: AtomicUsize,
    /// The next N sends/replies (past a storm) are answered HTTP 502 with an HTML body,
    /// creating nothing. Having no code, they are not listed in `refusals`.
    pub server_errors: AtomicUsize,
    /// While set, every CardKit endpoint answers 99991672 (scope `cardkit:card:write`
    /// not granted).
    pub cardkit_refused: AtomicBool,
    /// Card entities by card_id.
    pub cards: Mutex<HashMap<String, CardEntity>>,
    /// Every CardKit request, in order.
    pub card_ops: Mutex<Vec<CardOp>>,
    /// Mention tags in everything accepted: the people the real Feishu would ping.
    pub notified: Mutex<Vec<String>>,
    /// Every refused request: (`METHOD /path/{template}`, code).
    pub refusals: Mutex<Vec<(String, i64)>>,
    /// The frequency windows.
    limits: Mutex<limits::Limits>,
    /// Messages created, by id.
    posted: Mutex<HashMap<String, messages::Posted>>,
    /// Card entities created so far (for their ids).
    next_card: AtomicU64,
    /// Users and chats with their names, and the scopes withheld (see `directory`).
    pub directory: Directory,
    /// Reactions on messages (see `reactions`).
    pub reactions: Reactions,
    /// Resources, bundles, docs and uploads (see `media`).
    pub media: Media,
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
        Self::serve(app_secret, bot_open_id, |_| None).await.0
    }

    /// The fake for the default test profile (app `cli_test_planner`, secret `s`, the
    /// planner bot) that also serves Feishu's long connection on the same `api_base`.
    pub async fn planner_with_long_connection() -> (Self, FakeLongConn) {
        let (app_id, bot) = (super::feishu::APP_ID, super::feishu::BOT_OPEN_ID);
        Self::with_long_connection(app_id, "s", bot).await
    }

    /// Starts the fake with Feishu's long connection mounted beside the Open API (the
    /// bridge has one `api_base` for both): `POST /callback/ws/endpoint` checks
    /// `app_id`/`app_secret`, and `GET /ws/v2` upgrades.
    pub async fn with_long_connection(
        app_id: &str,
        app_secret: &str,
        bot_open_id: &str,
    ) -> (Self, FakeLongConn) {
        let (fake, long_conn) = Self::serve(app_secret, bot_open_id, |base| {
            Some(FakeLongConn::new(app_id, app_secret, base))
        })
        .await;
        (fake, long_conn.expect("long connection mounted"))
    }

    /// Binds, then builds the routes (the long connection's URLs need the port).
    async fn serve(
        app_secret: &str,
        bot_open_id: &str,
        long_conn: impl FnOnce(&str) -> Option<FakeLongConn>,
    ) -> (Self, Option<FakeLongConn>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind fake");
        let base = format!("http://{}", listener.local_addr().expect("addr"));
        let long_conn = long_conn(&base);
        let state = Arc::new(FakeState {
            app_secret: app_secret.into(),
            bot_open_id: bot_open_id.into(),
            token_requests: AtomicUsize::default(),
            bot_info_requests: AtomicUsize::default(),
            get_requests: AtomicUsize::default(),
            messages: Arc::default(),
            sent: Mutex::default(),
            receive_id_types: Mutex::default(),
            uuids: Mutex::default(),
            create_time: Mutex::default(),
            failures: Mutex::default(),
            send_attempts: AtomicUsize::default(),
            tokens: Tokens::default(),
            patches: Mutex::default(),
            hang: AtomicBool::default(),
            activity: broadcast::channel(1024).0,
            attempt_uuids: Mutex::default(),
            no_thread: Mutex::default(),
            aggregated: Mutex::default(),
            interactions: Mutex::default(),
            streaming_window: Mutex::new(STREAMING_WINDOW),
            clock_ahead: Mutex::default(),
            recalled: Mutex::default(),
            calls_to_recalled: AtomicUsize::default(),
            violations: Mutex::default(),
            storm: Mutex::default(),
            storm_refusals: AtomicUsize::default(),
            refuse_next: Mutex::default(),
            lose_answers: AtomicUsize::default(),
            server_errors: AtomicUsize::default(),
            cardkit_refused: AtomicBool::default(),
            cards: Mutex::default(),
            card_ops: Mutex::default(),
            notified: Mutex::default(),
            refusals: Mutex::default(),
            limits: Mutex::default(),
            posted: Mutex::default(),
            next_card: AtomicU64::default(),
            directory: Directory::default(),
            reactions: Reactions::default(),
            media: Media::default(),
        });
        let app = Router::new()
            .route(
                "/open-apis/auth/v3/tenant_access_token/internal",
                post(tokens::token),
            )
            .route("/open-apis/bot/v3/info", get(reads::bot_info))
            .route(
                "/open-apis/im/v1/messages/{id}",
                get(reads::get_message).patch(card_patch::patch_card),
            )
            .route(
                "/open-apis/im/v1/messages/{id}/reply",
                post(messages::reply),
            )
            .route("/open-apis/im/v1/messages", post(messages::send))
            .route(
                "/open-apis/contact/v3/users/batch",
                get(directory::users_batch),
            )
            .route("/open-apis/im/v1/chats/{chat_id}", get(directory::chat))
            .route(
                "/open-apis/im/v1/messages/{id}/reactions",
                post(reactions::add),
            )
            .route(
                "/open-apis/im/v1/messages/{id}/reactions/{reaction_id}",
                delete(reactions::delete),
            )
            .route(
                "/open-apis/im/v1/messages/{id}/resources/{key}",
                get(media::resource),
            )
            .route("/open-apis/wiki/v2/spaces/get_node", get(media::wiki_node))
            .route(
                "/open-apis/docx/v1/documents/{id}/raw_content",
                get(media::docx_raw),
            )
            .route(
                "/open-apis/im/v1/images",
                post(media::upload_image).layer(DefaultBodyLimit::max(64 * 1024 * 1024)),
            )
            .route(
                "/open-apis/im/v1/files",
                post(media::upload_file).layer(DefaultBodyLimit::max(64 * 1024 * 1024)),
            )
            .route("/open-apis/cardkit/v1/cards", post(cardkit::create))
            .route(
                "/open-apis/cardkit/v1/cards/{card_id}",
                put(cardkit::update),
            )
            .route(
                "/open-apis/cardkit/v1/cards/{card_id}/settings",
                patch(cardkit::settings),
            )
            .route(
                "/open-apis/cardkit/v1/cards/{card_id}/elements/{element_id}/content",
                put(cardkit::content),
            )
            .with_state(state.clone());
        let app = match &long_conn {
            Some(lc) => app.merge(lc.router()),
            None => app,
        };
        tokio::spawn(async move { axum::serve(listener, app).await });
        let messages = state.messages.clone();
        let fake = Self {
            base,
            state,
            messages,
        };
        (fake, long_conn)
    }
}
