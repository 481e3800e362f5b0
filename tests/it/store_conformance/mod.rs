//! One conformance suite for the store, run against SQLite and Postgres: a module per
//! surface, each test once per backend (`both_backends!`).
//!
//! The builders below make rows with fixed, distinct values (an item's text differs from
//! its record's, every profile has its own app id), so a test states only what it varies
//! and a read shows which value it took.

mod api_calls;
mod database;
mod decisions;
mod differences;
mod digest_carry;
mod digests;
mod event_log;
mod feed;
mod inbox;
mod inbox_depth;
mod media;
mod names;
mod outbound;
mod said_order;
mod sessions;
mod timeline;
mod turn_leases;
mod turns;

use std::sync::Arc;

use feishu_bridge::{
    config::DatabaseConfig,
    routing::{Reason, Verdict},
    store::{
        self, HistoryQuery, InboxStatus, NewContextEvent, NewDecision, NewInboxEvent, NewItem,
        NewOutbound, NewSession, NewTurn, NewVerdict, ReplyKind, RouteWrite, Routed, SessionReset,
        SessionRow, StartedTurn, Store, TurnCompletion, TurnStart,
    },
    util::UnixMs,
    vocab::ChatType,
    vocab::kinds::{EventType, ItemType, Role},
};

use crate::support::TestDb;

/// The chat rows are in unless a test says otherwise.
const CHAT: &str = "oc_1";
/// The thread root rows are in unless a test says otherwise.
const ROOT: &str = "om_root";
/// The history scope rows are in unless a test says otherwise.
const SCOPE: &str = "chat:oc_1";
/// The session key turns run in unless a test says otherwise.
const KEY: &str = "group:oc_1";

/// The store of `db`, not migrated.
async fn open_unmigrated(db: &TestDb) -> Arc<dyn Store> {
    let config = DatabaseConfig {
        url: db.url.clone().into(),
        ..DatabaseConfig::default()
    };
    store::open(&config).await.expect("open")
}

/// The store of `db`, migrated (twice: the second run is a no-op).
async fn open(db: &TestDb) -> Arc<dyn Store> {
    let store = open_unmigrated(db).await;
    store.migrate().await.expect("migrate");
    store.migrate().await.expect("migrating twice is a no-op");
    store
}

/// A pending inbox event of `profile`, received at 1 000, in a chat of its own
/// (`oc_<event_id>`).
fn ev(profile: &str, event_id: &str, message_id: Option<&str>) -> NewInboxEvent {
    NewInboxEvent {
        profile: profile.into(),
        event_id: event_id.into(),
        event_type: "im.message.receive_v1".into(),
        message_id: message_id.map(str::to_string),
        chat_key: format!("oc_{event_id}"),
        payload: format!("{{\"id\":\"{event_id}\"}}"),
        received_at: UnixMs(1_000),
        status: InboxStatus::Pending,
    }
}

/// A record of `message_id` by `profile` (app `cli_<profile>`) in thread [`ROOT`] of
/// [`CHAT`] and scope [`SCOPE`], at 1 000, with its item when the type has one.
fn record(profile: &str, message_id: &str, event_type: EventType) -> NewContextEvent {
    NewContextEvent {
        chat_id: CHAT.into(),
        chat_type: ChatType::Group,
        root_msg_id: ROOT.into(),
        thread_id: None,
        message_id: message_id.into(),
        event_type,
        actor_type: "user".into(),
        actor_id: "ou_alice".into(),
        bridge_id: format!("cli_{profile}"),
        bot_profile: profile.into(),
        target_id: None,
        target_name: None,
        session_name: None,
        history_scope: SCOPE.into(),
        text: format!("text of {message_id}"),
        metadata_json: "{\"message_type\":\"text\"}".into(),
        created_at: UnixMs(1_000),
        item: ItemType::of(event_type).map(|item_type| NewItem {
            item_type,
            role: Role::Human,
            author_label: "Alice".into(),
            text: format!("item of {message_id}"),
            token_estimate: 3,
            truncated: false,
        }),
    }
}

/// `e`, said at `ms` (its message's create time).
fn said_at(ms: i64, e: NewContextEvent) -> NewContextEvent {
    NewContextEvent {
        created_at: UnixMs(ms),
        ..e
    }
}

/// An observed (not mentioned) verdict of `profile` on `message_id` in [`CHAT`], at 10.
fn verdict(profile: &str, message_id: &str) -> NewVerdict {
    NewVerdict {
        profile: profile.into(),
        message_id: message_id.into(),
        chat_id: CHAT.into(),
        verdict: Verdict::Observed,
        reason: Reason::NoMention,
        session_key: None,
        created_at: UnixMs(10),
    }
}

/// What routing `message_id` for `profile` writes: its verdict and `events`, no more.
fn route(profile: &str, message_id: &str, events: Vec<NewContextEvent>) -> RouteWrite {
    RouteWrite {
        verdict: verdict(profile, message_id),
        events,
        session: None,
        names: Vec::new(),
        turn: None,
        feed: None,
    }
}

/// The session `key` of `profile` in [`CHAT`] (scope [`SCOPE`]), created as `session_id`
/// at `now`.
fn session(profile: &str, key: &str, session_id: &str, now: i64) -> NewSession {
    NewSession {
        profile: profile.into(),
        session_key: key.into(),
        session_id: session_id.into(),
        chat_id: CHAT.into(),
        chat_type: ChatType::Group,
        user_id: Some("ou_alice".into()),
        root_msg_id: Some(ROOT.into()),
        history_scope: SCOPE.into(),
        now: UnixMs(now),
    }
}

/// Creates (or touches) a session mapping the way routing does, with a message of its
/// own; returns the mapping.
async fn map_session(s: &dyn Store, new: NewSession) -> SessionRow {
    let message_id = format!("om_{}_{}_{}", new.profile, new.session_key, new.now.0);
    let write = RouteWrite {
        session: Some(new.clone()),
        ..route(&new.profile, &message_id, Vec::new())
    };
    let routed = s.apply_route(&write).await.expect("route");
    routed.session.expect("the session mapping")
}

/// The replica that queues and starts the conformance suite's turns.
const OWNER: &str = "replica-a";

/// Turn `turn_id` of `profile` in session `key`, for message `om_<turn_id>`, queued at
/// 100 by [`OWNER`].
fn turn(profile: &str, key: &str, turn_id: &str) -> NewTurn {
    NewTurn {
        turn_id: turn_id.into(),
        profile: profile.into(),
        session_key: key.into(),
        chat_id: CHAT.into(),
        message_id: format!("om_{turn_id}"),
        request_text: format!("ask {turn_id}"),
        job_json: format!("{{\"turn\":\"{turn_id}\"}}"),
        queued_at: UnixMs(100),
        owner: OWNER.into(),
    }
}

/// Routes the message of `t` as an invocation: its verdict, its session (created as
/// `sid-1` at 100) and the turn, queued.
async fn queue(s: &dyn Store, t: NewTurn) -> Routed {
    let base = route(&t.profile, &t.message_id, Vec::new());
    let write = RouteWrite {
        verdict: NewVerdict {
            verdict: Verdict::Invoked,
            reason: Reason::Mention,
            session_key: Some(t.session_key.clone()),
            ..base.verdict.clone()
        },
        session: Some(session(&t.profile, &t.session_key, "sid-1", 100)),
        turn: Some(t),
        ..base
    };
    s.apply_route(&write).await.expect("route")
}

/// A decision of `profile` on `message_id` in thread [`ROOT`] and session [`KEY`], made
/// in `session_id` at 200, holding its request's text; every text field is distinct.
fn decision(profile: &str, message_id: &str, session_id: &str) -> NewDecision {
    NewDecision {
        chat_id: CHAT.into(),
        root_msg_id: ROOT.into(),
        message_id: message_id.into(),
        bridge_id: format!("cli_{profile}"),
        bot_profile: profile.into(),
        target_id: Some(format!("ou_bot_{profile}")),
        workspace_mode: "shared".into(),
        mode: "thread+history".into(),
        session_key: KEY.into(),
        session_id: session_id.into(),
        request_text: format!("ask {message_id}"),
        thread_context: "the thread so far".into(),
        selected_item_ids_json: "[1,2]".into(),
        selected_json: "[{\"item_id\":1}]".into(),
        excluded_json: "[{\"item_id\":3,\"reason\":\"limit\"}]".into(),
        prompt_preview: "the prompt".into(),
        diagnostics_json: "{\"context_chars\":42}".into(),
        source_message_ids: vec![message_id.into()],
        created_at: UnixMs(200),
    }
}

/// Starts turn `turn_id` at 200 with `decision`, consuming the pending history named by
/// `consume`.
async fn start_with(
    s: &dyn Store,
    turn_id: &str,
    decision: &NewDecision,
    consume: Option<(&str, &str, i64)>,
) -> Option<StartedTurn> {
    let start = TurnStart {
        turn_id,
        decision,
        consume,
        now: UnixMs(200),
        owner: OWNER,
    };
    s.start_turn(&start).await.expect("start")
}

/// Starts turn `turn_id` at 200 with a decision made in `session_id`, consuming no
/// history.
async fn start(s: &dyn Store, turn_id: &str, session_id: &str) -> Option<StartedTurn> {
    let t = s.turn(turn_id).await.expect("read").expect("the turn");
    let decision = NewDecision {
        session_key: t.session_key,
        ..decision(&t.profile, &t.message_id, session_id)
    };
    start_with(s, turn_id, &decision, None).await
}

/// The delivered answer of `profile`'s turn `turn_id` (reply `om_reply_<turn_id>`), at
/// 600.
fn completion(
    profile: &str,
    turn_id: &str,
    topic_root_delivered: Option<(&str, &str, &str)>,
) -> TurnCompletion {
    let reply = format!("om_reply_{turn_id}");
    TurnCompletion {
        turn_id: turn_id.into(),
        output_event: record(profile, &reply, EventType::AgentOutput),
        reply_message_id: reply,
        topic_root_delivered: topic_root_delivered
            .map(|(p, k, id)| (p.to_string(), k.to_string(), id.to_string())),
        handoff: None,
        now: UnixMs(600),
    }
}

/// An answer of `profile` in [`CHAT`], replying to no message, at `created_at`.
fn reply(profile: &str, text: &str, created_at: i64) -> NewOutbound {
    NewOutbound {
        profile: profile.into(),
        chat_id: CHAT.into(),
        reply_to: None,
        kind: ReplyKind::Answer,
        text: text.into(),
        created_at: UnixMs(created_at),
    }
}

/// Writes event-log records without a verdict.
async fn write(s: &dyn Store, events: &[NewContextEvent]) {
    s.record_events(events).await.expect("record events");
}

/// How many messages are pending in `profile`'s history `scope`.
async fn pending(s: &dyn Store, profile: &str, scope: &str) -> i64 {
    s.pending_history_count(profile, scope)
        .await
        .expect("pending count")
}

/// A reset of session `key` of `profile`, clearing `scope`, to `new_id` at `at`.
fn reset<'a>(
    profile: &'a str,
    key: &'a str,
    scope: &'a str,
    new_id: &'a str,
    at: UnixMs,
) -> SessionReset<'a> {
    SessionReset {
        profile,
        key,
        history_scope: scope,
        new_session_id: new_id,
        now: at,
    }
}

/// The history of session [`KEY`] of `profile` under `session_id`, before row `before`.
fn history<'a>(profile: &'a str, session_id: &'a str, before: i64, limit: i64) -> HistoryQuery<'a> {
    HistoryQuery {
        profile,
        session_key: KEY,
        session_id,
        before_id: before,
        limit,
    }
}
