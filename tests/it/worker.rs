//! The inbox worker under load: each chat's events in arrival order while chats run side
//! by side, and a quiet chat's request going ahead of another chat's backlog; what
//! failures and kills in the middle of a batch leave is in [`faults`].
//!
//! Backlogs are stored by a bridge whose worker is off, so what the worker claims first
//! (and how each chat's events split into batches) follows from the inbox alone.

mod faults;

use futures_util::future::join_all;
use sqlx::Connection;

use crate::{
    both_backends,
    support::{
        Kind, Request, Signer, TestApp, TestDb, config, config_toml, fake_feishu::FakeFeishu,
        feishu::Msg,
    },
};

const MESSAGE: &str = "im.message.receive_v1";

/// Runs one statement straight on the database (what a test sets up behind the bridge).
async fn execute(db: &TestDb, q: &str) {
    match db.kind {
        Kind::Sqlite => {
            let mut c = sqlx::SqliteConnection::connect(&db.url)
                .await
                .expect("connect");
            sqlx::query(q).execute(&mut c).await.expect(q);
        }
        Kind::Postgres => {
            let mut c = sqlx::PgConnection::connect(&db.url).await.expect("connect");
            sqlx::query(q).execute(&mut c).await.expect(q);
        }
    }
}

/// The first column of a query's rows, as text, straight from the database.
async fn texts(db: &TestDb, q: &str) -> Vec<String> {
    match db.kind {
        Kind::Sqlite => {
            let mut c = sqlx::SqliteConnection::connect(&db.url)
                .await
                .expect("connect");
            sqlx::query_scalar(q).fetch_all(&mut c).await.expect(q)
        }
        Kind::Postgres => {
            let mut c = sqlx::PgConnection::connect(&db.url).await.expect("connect");
            sqlx::query_scalar(q).fetch_all(&mut c).await.expect(q)
        }
    }
}

/// Message `i` of chat `chat`: plain discussion, mentioning nobody.
fn said(chat: &str, i: usize) -> Msg {
    Msg::group(&format!("om_{chat}_{i}"), &format!("note {i}")).in_chat(chat)
}

/// Delivers a callback until it is acknowledged, as Feishu does: a loaded machine may
/// answer 503 (not stored in time; retry later) before it answers 200.
async fn deliver(app: &TestApp, req: &Request) {
    for _ in 0..20 {
        let a = app.event(req).await;
        match (a.status, a.code()) {
            (200, _) => return,
            (503, "store_unavailable") => continue,
            _ => panic!("{}: {}", a.status, a.text),
        }
    }
    panic!("not acknowledged after 20 deliveries");
}

/// One chat's callbacks, each acknowledged before the next is sent (so arrival order is
/// the order given); the chats are sent side by side.
async fn send_chats(app: &TestApp, chats: &[Vec<Request>]) {
    join_all(chats.iter().map(|reqs| async move {
        for req in reqs {
            deliver(app, req).await;
        }
    }))
    .await;
}

/// Stores each chat's callbacks (see [`send_chats`]) with a bridge whose worker is off,
/// then stops it: they wait in the inbox for the next bridge on `text`'s database.
async fn store_waiting(text: &str, chats: &[Vec<Request>]) {
    let app = TestApp::spawn(worker_off(text)).await;
    send_chats(&app, chats).await;
    app.stop().await.expect("clean stop");
}

/// Stores callbacks in no particular order, several at a time.
async fn send_unordered(app: &TestApp, reqs: &[Request]) {
    for wave in reqs.chunks(16) {
        join_all(wave.iter().map(|r| deliver(app, r))).await;
    }
}

/// The messages of `chat` in arrival order, as the inbox numbered them.
async fn arrived(db: &TestDb, chat: &str) -> Vec<String> {
    texts(
        db,
        &format!(
            "SELECT message_id FROM inbox_events \
             WHERE chat_key = '{chat}' AND event_type = '{MESSAGE}' ORDER BY id"
        ),
    )
    .await
}

/// Asserts that the verdicts and event-log records of `chat` were written in arrival
/// order, one of each per message.
async fn assert_recorded_in_arrival_order(db: &TestDb, chat: &str) {
    let arrival = arrived(db, chat).await;
    assert!(!arrival.is_empty(), "{chat} received nothing");
    let verdicts = texts(
        db,
        &format!("SELECT message_id FROM routing_verdicts WHERE chat_id = '{chat}' ORDER BY id"),
    )
    .await;
    assert_eq!(verdicts, arrival, "verdicts of {chat}, by id");
    let records = texts(
        db,
        &format!(
            "SELECT message_id FROM thread_context_events WHERE chat_id = '{chat}' ORDER BY id"
        ),
    )
    .await;
    assert_eq!(records, arrival, "event-log records of {chat}, by id");
}

/// The config of a bridge whose worker runs. A loaded machine's slow disk must not turn
/// into database timeouts here: these tests are about order, not outages.
fn worker_on(text: &str) -> feishu_bridge::Config {
    let mut cfg = config(text);
    cfg.database.timeout_ms = 10_000;
    cfg
}

/// The config of a bridge whose worker is off: callbacks are stored and wait.
fn worker_off(text: &str) -> feishu_bridge::Config {
    let mut cfg = worker_on(text);
    cfg.worker.enabled = false;
    cfg
}

async fn order_per_chat(db: TestDb) {
    let text = config_toml(&db, "");
    let signer = Signer::default();
    let chats: Vec<String> = (0..3).map(|c| format!("oc_lane{c}")).collect();
    // In `oc_lane1` three messages are recalled right after they were sent. With three
    // events to a batch, the first recall (position 3) is the head of the batch after
    // its message's, the second (position 7) shares its message's batch, the third
    // arrives while the chat is being processed.
    let recalled = ["om_oc_lane1_2", "om_oc_lane1_5", "om_oc_lane1_30"];
    let stream = |chat: &str, from: usize, to: usize| -> Vec<Request> {
        let mut reqs = Vec::new();
        for i in from..to {
            let m = said(chat, i);
            reqs.push(signer.deliver(&m));
            if recalled.contains(&m.message_id.as_str()) {
                reqs.push(signer.recall(&m.message_id, chat));
            }
        }
        reqs
    };

    // A backlog of twenty messages a chat, stored while no worker runs ...
    let backlog: Vec<_> = chats.iter().map(|c| stream(c, 0, 20)).collect();
    store_waiting(&text, &backlog).await;

    // ... drained three events of a chat at a time, the chats side by side, while twenty
    // more a chat arrive. There are more lanes than chats: a lane is always free to take
    // a chat's next events while its earlier ones are still in hand, were a chat in hand
    // not left alone.
    let mut cfg = worker_on(&text);
    cfg.worker.lanes = 4;
    cfg.worker.batch = 3;
    let mut app = TestApp::spawn(cfg).await;
    let live: Vec<_> = chats.iter().map(|c| stream(c, 20, 40)).collect();
    send_chats(&app, &live).await;
    for chat in &chats {
        for i in 0..40 {
            let id = format!("ev-{}", said(chat, i).message_id);
            assert_eq!(app.settled(&id).await, "done", "{id}");
        }
    }
    for m in recalled {
        assert_eq!(app.settled(&format!("ev-recall-{m}")).await, "done", "{m}");
    }

    for chat in &chats {
        let sent: Vec<String> = (0..40).map(|i| said(chat, i).message_id).collect();
        assert_eq!(arrived(&db, chat).await, sent, "{chat} arrived as sent");
        assert_recorded_in_arrival_order(&db, chat).await;
    }
    // Each recalled message was recorded before its recall reached it: routed as the
    // discussion it was, and its record then emptied and marked recalled.
    for m in recalled {
        assert_eq!(
            app.verdict("planner", m).await,
            ("observed".into(), "no_mention".into()),
            "{m} was processed before its recall"
        );
        let rows = app.state.store.message_events(m).await.expect("store");
        assert_eq!(rows.len(), 1, "{m}: {rows:?}");
        assert!(rows[0].recalled && rows[0].text.is_empty(), "{rows:?}");
        assert!(app.state.store.is_recalled(m).await.expect("store"));
    }
    assert_eq!(
        db.scalar("SELECT COUNT(*) FROM thread_context_events WHERE recalled = TRUE")
            .await,
        recalled.len() as i64,
        "only the recalled messages are marked recalled"
    );
    app.stop().await.expect("clean stop");
}
both_backends!(
    one_chats_events_keep_arrival_order_across_lanes_and_a_recall_lands_after_its_message,
    order_per_chat
);

async fn quiet_chat_first(db: TestDb) {
    let fake = FakeFeishu::planner().await;
    let text = config_toml(&db, &fake.profile_keys());
    let signer = Signer::default();
    let backlog: Vec<Request> = (0..1200)
        .map(|i| signer.deliver(&said("oc_busy", i)))
        .collect();
    let ask = Msg::group("om_ask", "are you there?")
        .at_bot()
        .in_chat("oc_quiet");

    // Chat A's backlog, then one request in chat B, stored while no worker runs.
    let app = TestApp::spawn(worker_off(&text)).await;
    send_unordered(&app, &backlog).await;
    send_chats(&app, &[vec![signer.deliver(&ask)]]).await;
    app.stop().await.expect("clean stop");

    // The first claim takes both chats (A's head first), so B's request is processed in
    // a lane of its own while A drains four events at a time: 300 rounds.
    let mut cfg = worker_on(&text);
    cfg.worker.lanes = 2;
    cfg.worker.batch = 4;
    let mut app = TestApp::spawn(cfg).await;
    assert_eq!(app.settled("ev-om_ask").await, "done");
    let waiting = db
        .scalar(
            "SELECT COUNT(*) FROM inbox_events \
             WHERE chat_key = 'oc_busy' AND status IN ('pending', 'processing')",
        )
        .await;
    assert!(
        waiting > 0,
        "the request waited for the whole backlog of the other chat"
    );
    assert_eq!(
        app.verdict("planner", "om_ask").await.0,
        "invoked",
        "the request reached the agent"
    );
    let turn = app.turn_of("om_ask").await;
    assert_eq!(turn.chat_id, "oc_quiet");
    app.stop().await.expect("clean stop");
}
both_backends!(
    a_request_in_a_quiet_chat_is_processed_before_another_chats_backlog_is_drained,
    quiet_chat_first
);
