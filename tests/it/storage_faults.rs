//! Storage faults: a full disk, a row the database refuses, a database that stalls, and
//! a restart. No acknowledged event is lost and none is processed twice.

use std::{
    sync::{Arc, atomic::Ordering},
    time::Duration,
};

use feishu_bridge::{
    Bridge,
    inbox::{Arrivals, CommitError, Committer},
    store::{InboxStatus, InsertOutcome, NewInboxEvent, Store},
    telemetry::Metrics,
};
use futures_util::future::join_all;
use sqlx::Connection;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::{
    both_backends,
    support::{
        Kind, Signer, TestApp, TestDb, config, config_toml, crash::Crashable,
        fake_feishu::FakeFeishu, feishu::Msg, full_disk::FullDisk, next_matching,
    },
};

/// Message `i` of a stream: every fourth asks the bot (a turn, in a chat of its own), the
/// rest are observed discussion.
fn message(i: usize) -> Msg {
    if i.is_multiple_of(4) {
        Msg::group(&format!("om_{i}"), "question")
            .at_bot()
            .in_chat(&format!("oc_{i}"))
    } else {
        Msg::group(&format!("om_{i}"), "discussion")
    }
}

fn is_question(m: &Msg) -> bool {
    !m.mentions.is_empty()
}

async fn disk_full(db: TestDb) {
    let fake = FakeFeishu::planner().await;
    let cfg = config(&config_toml(&db, &fake.profile_keys()));
    let timeout = Duration::from_millis(cfg.database.timeout_ms);
    let (store, disk) = FullDisk::open(&db, timeout).await;
    let bridge = Bridge::start_on(cfg, store).await.expect("bridge starts");
    let mut app = TestApp::serve(bridge).await;
    let signer = Signer::default();
    let (mut acked, mut refused) = (Vec::new(), Vec::new());
    let mut next = 0;
    for _ in 0..8 {
        let m = message(next);
        next += 1;
        assert_eq!(app.event(&signer.deliver(&m)).await.status, 200);
        acked.push(m);
    }

    // The disk fills under load (SQLite: as the bridge writes; Postgres: from here on).
    disk.fill().await;
    while refused.len() < 32 {
        assert!(next < 4000, "the disk never filled");
        let wave: Vec<Msg> = (next..next + 16).map(message).collect();
        next += 16;
        let requests: Vec<_> = wave.iter().map(|m| signer.deliver(m)).collect();
        let answers = join_all(requests.iter().map(|r| app.event(r))).await;
        for (m, a) in wave.into_iter().zip(answers) {
            match a.status {
                200 => acked.push(m),
                503 => {
                    assert_eq!(a.code(), "store_unavailable", "{}", a.text);
                    refused.push(m);
                }
                other => panic!("{other}: {}", a.text),
            }
        }
    }
    let ready = app.get_anonymous("/readyz").await;
    assert_eq!(
        (ready.status, ready.code()),
        (503, "store_unavailable"),
        "not ready while the database cannot take writes"
    );

    // Room again: the same process takes writes, without a restart, and Feishu's
    // retries of the refused events get through.
    disk.make_room().await;
    let ready = app.get_anonymous("/readyz").await;
    assert_eq!(ready.status, 200, "{}", ready.text);
    for m in refused {
        let a = app.event(&signer.deliver(&m)).await;
        assert_eq!(a.status, 200, "{}", a.text);
        acked.push(m);
    }

    // Every acknowledged event is in the database as another connection sees it, and
    // was processed; every question was answered, once.
    assert_eq!(db.count("inbox_events").await, acked.len() as i64);
    for m in &acked {
        let id = format!("ev-{}", m.message_id);
        assert_eq!(app.settled(&id).await, "done", "{id}");
    }
    let questions: Vec<&Msg> = acked.iter().filter(|m| is_question(m)).collect();
    for m in &questions {
        let turn = app.turn_ended(&m.message_id).await;
        assert_eq!(
            turn.state, "succeeded",
            "{}: {:?}",
            m.message_id, turn.error
        );
    }
    assert_eq!(db.count("turns").await, questions.len() as i64);
    let sent = fake.state.sent.lock().expect("lock").clone();
    for m in &questions {
        let replies = sent.iter().filter(|(to, _)| *to == m.message_id).count();
        assert_eq!(replies, 1, "replies to {}", m.message_id);
    }
    assert_eq!(sent.len(), questions.len());
    app.stop().await.expect("clean stop");
}
both_backends!(
    a_full_disk_refuses_with_503_loses_nothing_acknowledged_and_recovers_without_a_restart,
    disk_full
);

async fn nul_refused_alone(db: TestDb) {
    let mut app = TestApp::spawn(config(&config_toml(&db, ""))).await;
    let signer = Signer::default();
    let mut requests: Vec<_> = (0..15)
        .map(|i| signer.message(&format!("ev-{i}"), &format!("om-{i}"), "hello"))
        .collect();
    requests.insert(7, signer.message("ev-nul", "om-\u{0}-x", "hello"));
    let answers = join_all(requests.iter().map(|r| app.event(r))).await;
    for (i, a) in answers.iter().enumerate() {
        if i == 7 {
            assert_eq!((a.status, a.code()), (400, "invalid_event"), "{}", a.text);
            let message = a.json["error"]["message"].as_str().unwrap_or_default();
            assert!(message.contains("message_id"), "{message}");
        } else {
            assert_eq!(a.status, 200, "{}", a.text);
        }
    }
    assert_eq!(
        db.count("inbox_events").await,
        15,
        "its batch-mates are stored"
    );
    for i in 0..15 {
        assert_eq!(app.settled(&format!("ev-{i}")).await, "done");
    }
    // In message text (inside the content string) U+0000 is dropped when the text is
    // normalized, the same on both backends: the message is recorded, not retried.
    let a = app
        .event(&signer.message("ev-nul-text", "om-nul-text", "a\u{0}b"))
        .await;
    assert_eq!(a.status, 200, "{}", a.text);
    assert_eq!(app.settled("ev-nul-text").await, "done");
    let recorded = app
        .state
        .store
        .message_events("om-nul-text")
        .await
        .expect("store answers");
    assert!(recorded.iter().any(|r| r.text == "ab"), "{recorded:?}");
    app.stop().await.expect("clean stop");
}
both_backends!(
    an_event_holding_nul_is_refused_alone_while_its_batch_mates_are_stored,
    nul_refused_alone
);

/// A trigger makes the database itself refuse one event's row (what a value or size
/// limit the bridge does not check would do).
async fn poison_one_row(db: &TestDb) {
    match db.kind {
        Kind::Sqlite => {
            let mut c = sqlx::SqliteConnection::connect(&db.url)
                .await
                .expect("connect");
            sqlx::query(
                "CREATE TRIGGER poison BEFORE INSERT ON inbox_events \
                 WHEN NEW.event_id = 'ev-poison' BEGIN SELECT RAISE(ABORT, 'poisoned row'); END",
            )
            .execute(&mut c)
            .await
            .expect("trigger");
        }
        Kind::Postgres => {
            let mut c = sqlx::PgConnection::connect(&db.url).await.expect("connect");
            sqlx::query(
                "CREATE FUNCTION poison() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN \
                 IF NEW.event_id = 'ev-poison' THEN \
                 RAISE EXCEPTION 'poisoned row' USING ERRCODE = 'check_violation'; END IF; \
                 RETURN NEW; END $$",
            )
            .execute(&mut c)
            .await
            .expect("function");
            sqlx::query(
                "CREATE TRIGGER poison BEFORE INSERT ON inbox_events \
                 FOR EACH ROW EXECUTE FUNCTION poison()",
            )
            .execute(&mut c)
            .await
            .expect("trigger");
        }
    }
}

fn inbox_event(event_id: &str) -> NewInboxEvent {
    NewInboxEvent {
        profile: "planner".into(),
        event_id: event_id.into(),
        event_type: "im.message.receive_v1".into(),
        message_id: Some(format!("om-{event_id}")),
        chat_key: String::new(),
        payload: "{}".into(),
        received_at: feishu_bridge::util::UnixMs(1),
        status: InboxStatus::Pending,
    }
}

async fn row_by_row(db: TestDb) {
    let store: Arc<dyn Store> = feishu_bridge::store::open(&config(&config_toml(&db, "")).database)
        .await
        .expect("store");
    store.migrate().await.expect("migrate");
    poison_one_row(&db).await;
    let metrics = Metrics::new();
    let stop = CancellationToken::new();
    let (committer, tasks) = Committer::spawn(
        store.clone(),
        store.backend(),
        metrics.clone(),
        Arc::new(Arrivals::default()),
        1,
        stop.clone(),
    );
    // All sixteen are queued before the committer runs (this test's runtime has one
    // thread), so they form one batch.
    let deadline = Instant::now() + Duration::from_secs(30);
    let ids: Vec<String> = (0..16)
        .map(|i| {
            if i == 9 {
                "ev-poison".into()
            } else {
                format!("ev-{i}")
            }
        })
        .collect();
    let answers = join_all(
        ids.iter()
            .map(|id| committer.submit(inbox_event(id), deadline)),
    )
    .await;
    let batches = metrics
        .commit_batch_size
        .with_label_values(&[store.backend().as_str()]);
    assert_eq!(
        (batches.get_sample_count(), batches.get_sample_sum()),
        (1, 16.0),
        "one batch of sixteen"
    );
    for (id, answer) in ids.iter().zip(&answers) {
        match (id.as_str(), answer) {
            ("ev-poison", Err(CommitError::Refused(_))) => {}
            ("ev-poison", other) => panic!("the poisoned row: {other:?}"),
            (_, Ok(InsertOutcome::Inserted)) => {}
            (id, other) => panic!("{id}: {other:?}"),
        }
    }
    assert_eq!(db.count("inbox_events").await, 15);
    stop.cancel();
    for t in tasks {
        t.await.expect("committer stops");
    }
}
both_backends!(
    a_batch_the_database_refuses_is_written_row_by_row_so_only_the_bad_row_fails,
    row_by_row
);

/// Blocks every inbox write until [`Stall::end`]: SQLite's write lock, or a Postgres
/// table lock, held in an open transaction of another connection.
enum Stall {
    Sqlite(sqlx::SqliteConnection),
    Postgres(sqlx::PgConnection),
}

impl Stall {
    async fn begin(db: &TestDb) -> Self {
        match db.kind {
            Kind::Sqlite => {
                let mut c = sqlx::SqliteConnection::connect(&db.url)
                    .await
                    .expect("connect");
                sqlx::query("BEGIN IMMEDIATE")
                    .execute(&mut c)
                    .await
                    .expect("write lock");
                Self::Sqlite(c)
            }
            Kind::Postgres => Self::postgres(db, "LOCK TABLE inbox_events IN EXCLUSIVE MODE").await,
        }
    }

    /// Holds a Postgres table lock (`lock`, a `LOCK TABLE` statement) in an open
    /// transaction.
    async fn postgres(db: &TestDb, lock: &str) -> Self {
        let mut c = sqlx::PgConnection::connect(&db.url).await.expect("connect");
        sqlx::query("BEGIN").execute(&mut c).await.expect("begin");
        sqlx::query(lock).execute(&mut c).await.expect("table lock");
        Self::Postgres(c)
    }

    async fn end(self) {
        match self {
            Self::Sqlite(mut c) => {
                sqlx::query("ROLLBACK").execute(&mut c).await.expect("end");
            }
            Self::Postgres(mut c) => {
                sqlx::query("ROLLBACK").execute(&mut c).await.expect("end");
            }
        }
    }
}

async fn answered_in_time(db: TestDb) {
    let mut cfg = config(&config_toml(&db, ""));
    cfg.worker.enabled = false;
    cfg.server.ack_deadline_ms = 2000;
    let app = TestApp::spawn(cfg).await;
    let signer = Signer::default();
    let stall = Stall::begin(&db).await;
    // Feishu waits 3 s for an answer. Twenty callbacks at once, each queued behind the
    // stuck batches: every one is answered (503) before Feishu stops waiting.
    let feishu = reqwest::Client::builder()
        .timeout(Duration::from_secs(3))
        .build()
        .expect("client");
    let requests: Vec<_> = (0..20)
        .map(|i| signer.message(&format!("ev-s{i}"), &format!("om-s{i}"), "hi"))
        .collect();
    let url = format!("{}/webhook/planner/event", app.base);
    let answers = join_all(requests.iter().map(|r| r.apply(feishu.post(&url)).send())).await;
    for a in answers {
        let a = a.expect("answered before Feishu's 3 s deadline");
        assert_eq!(a.status(), 503);
    }
    stall.end().await;
    let a = app.event(&requests[0]).await;
    assert_eq!(a.status, 200, "{}", a.text);
    app.stop().await.expect("clean stop");
}
both_backends!(
    a_stalled_database_is_answered_503_within_feishus_deadline,
    answered_in_time
);

async fn restart_reclaims(db: TestDb) {
    let fake = FakeFeishu::planner().await;
    let text = config_toml(&db, &fake.profile_keys());
    // An hour-long lease: only taking the claims back explains prompt processing.
    let cfg = |worker: bool| {
        let mut cfg = config(&text);
        cfg.worker.lease_ms = 3_600_000;
        cfg.worker.enabled = worker;
        cfg
    };
    let signer = Signer::default();
    let messages = [
        Msg::group("om_help", "/help").at_bot(),
        Msg::group("om_a", "first").at_bot(),
        Msg::group("om_b", "second").at_bot(),
        Msg::group("om_c", "chatter"),
    ];
    // Stored while no worker runs.
    let app = TestApp::spawn(cfg(false)).await;
    for m in &messages {
        assert_eq!(app.event(&signer.deliver(m)).await.status, 200);
    }
    app.stop().await.expect("clean stop");

    // A worker claims all four (one chat: one batch, in order), and hangs on the first:
    // its reply never gets an answer.
    fake.state.hang.store(true, Ordering::SeqCst);
    let mut activity = fake.state.activity.subscribe();
    let bridge = Crashable::start(cfg(true)).await;
    next_matching(&mut activity, "the /help reply", |a| {
        a.starts_with("attempt:")
    })
    .await;
    bridge.crash().await;
    // Claimed in writing on Postgres; held in the killed process's memory on SQLite,
    // where the rows are still pending, none of them done.
    let in_hand = match db.kind {
        Kind::Sqlite => "pending",
        Kind::Postgres => "processing",
    };
    let claimed = db
        .scalar(&format!(
            "SELECT COUNT(*) FROM inbox_events WHERE status = '{in_hand}'"
        ))
        .await;
    assert_eq!(claimed, 4, "the killed worker held all four");

    // The next start takes them back at once and processes them in arrival order.
    fake.state.hang.store(false, Ordering::SeqCst);
    let mut app = TestApp::spawn(cfg(true)).await;
    for m in &messages {
        assert_eq!(app.settled(&format!("ev-{}", m.message_id)).await, "done");
    }
    let a = app.turn_ended("om_a").await;
    let b = app.turn_ended("om_b").await;
    assert_eq!(
        (a.state.as_str(), b.state.as_str()),
        ("succeeded", "succeeded")
    );
    // Queued in arrival order (two sessions: they may run side by side).
    assert!(a.id < b.id, "{a:?} {b:?}");
    app.stop().await.expect("clean stop");
}
both_backends!(
    a_restart_takes_back_the_claims_of_the_killed_process_at_once,
    restart_reclaims
);

/// Postgres only: SQLite's readers never wait on a lock (WAL), so a card's read cannot
/// stall there.
#[tokio::test]
#[cfg_attr(
    pg_unreachable,
    ignore = "Postgres was unreachable when the tests were built"
)]
async fn a_card_press_whose_answer_stalls_on_the_database_is_answered_within_feishus_deadline() {
    let db = TestDb::postgres().await;
    let mut cfg = config(&config_toml(&db, ""));
    cfg.worker.enabled = false;
    // The database bound alone would let the answer wait 5 s for the stalled read.
    cfg.database.timeout_ms = 5000;
    let app = TestApp::spawn(cfg).await;
    let stall = Stall::postgres(&db, "LOCK TABLE turns IN ACCESS EXCLUSIVE MODE").await;
    let signer = Signer::default();
    let event = serde_json::json!({
        "operator": {"open_id": "ou_alice", "tenant_key": "tenant_test"},
        "token": "c-delayed-update-token",
        "action": {"value": {"action": "stop", "turn_id": "turn_0123"}, "tag": "button"},
        "context": {"open_message_id": "om_card", "open_chat_id": "oc_group"},
    });
    let req = signer.request(&signer.envelope("ev-card-stall", "card.action.trigger", event));
    let feishu = reqwest::Client::builder()
        .timeout(Duration::from_secs(3))
        .build()
        .expect("client");
    let url = format!("{}/webhook/planner/event", app.base);
    let a = req.apply(feishu.post(&url)).send().await;
    let a = crate::support::app::answer(a.expect("answered before Feishu's 3 s deadline")).await;
    assert_eq!(a.status, 200, "{}", a.text);
    assert_eq!(a.json["toast"]["type"], "info", "{}", a.text);
    stall.end().await;
    assert_eq!(db.count("inbox_events").await, 1, "the press was stored");
    app.stop().await.expect("clean stop");
}
