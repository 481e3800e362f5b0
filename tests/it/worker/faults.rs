//! Faults in the middle of a batch: an event the database refuses fails alone, a failure
//! of the database keeps what the batch recorded before it, and a kill leaves every
//! acknowledged event to be processed once after the restart.

use std::sync::atomic::Ordering;

use super::{assert_recorded_in_arrival_order, execute, said, store_waiting, worker_on};
use crate::{
    both_backends,
    support::{
        Kind, Request, Signer, TestApp, TestDb, config_toml, crash::Crashable,
        fake_feishu::FakeFeishu, feishu::Msg, next_matching,
    },
};

/// Puts a trigger `name` on `routing_verdicts` that fails the verdict of `message_id`:
/// on SQLite its body runs `sqlite`, on Postgres `raise` (a plpgsql `RAISE`).
async fn fail_verdict_of(db: &TestDb, name: &str, message_id: &str, sqlite: &str, raise: &str) {
    match db.kind {
        Kind::Sqlite => {
            let q = format!(
                "CREATE TRIGGER {name} BEFORE INSERT ON routing_verdicts \
                 WHEN NEW.message_id = '{message_id}' BEGIN {sqlite}; END"
            );
            execute(db, &q).await;
        }
        Kind::Postgres => {
            let q = format!(
                "CREATE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN \
                 IF NEW.message_id = '{message_id}' THEN {raise}; END IF; RETURN NEW; END $$"
            );
            execute(db, &q).await;
            let q = format!(
                "CREATE TRIGGER {name} BEFORE INSERT ON routing_verdicts \
                 FOR EACH ROW EXECUTE FUNCTION {name}()"
            );
            execute(db, &q).await;
        }
    }
}

/// Drops a trigger of [`fail_verdict_of`].
async fn drop_trigger(db: &TestDb, name: &str) {
    match db.kind {
        Kind::Sqlite => execute(db, &format!("DROP TRIGGER {name}")).await,
        Kind::Postgres => execute(db, &format!("DROP TRIGGER {name} ON routing_verdicts")).await,
    }
}

/// Counts of one message's rows: `$m` in `q` stands for its id.
async fn count_of(db: &TestDb, q: &str, message_id: &str) -> i64 {
    db.scalar(&q.replace("$m", message_id)).await
}

const VERDICTS: &str = "SELECT COUNT(*) FROM routing_verdicts WHERE message_id = '$m'";
const RECORDS: &str = "SELECT COUNT(*) FROM thread_context_events WHERE message_id = '$m'";
const ATTEMPTS: &str = "SELECT attempts FROM inbox_events WHERE message_id = '$m'";

async fn poisoned_alone(db: TestDb) {
    let text = config_toml(&db, "");
    let signer = Signer::default();
    let mut messages: Vec<Msg> = (0..6).map(|i| said("oc_batch", i)).collect();
    messages.insert(3, Msg::group("om_poison", "note").in_chat("oc_batch"));
    let mates = || messages.iter().filter(|m| m.message_id != "om_poison");

    // Seven events of one chat wait in the inbox: the worker claims them as one batch.
    let reqs: Vec<_> = messages.iter().map(|m| signer.deliver(m)).collect();
    store_waiting(&text, &[reqs]).await;
    // The database refuses its verdict the way it refuses a row that breaks a
    // constraint (SQLite reports a trigger's RAISE as one; Postgres is told to).
    fail_verdict_of(
        &db,
        "poison",
        "om_poison",
        "SELECT RAISE(ABORT, 'poison')",
        "RAISE EXCEPTION 'poison' USING ERRCODE = 'check_violation'",
    )
    .await;

    let mut cfg = worker_on(&text);
    cfg.worker.max_attempts = 1000;
    cfg.worker.retry_max_ms = 20;
    let mut app = TestApp::spawn(cfg).await;
    // Retried: wait for its third attempt (each is reported; so is a deferral when the
    // database is slow, which counts no attempt).
    for round in 0.. {
        assert!(round < 100, "the poisoned event was not retried");
        assert_eq!(app.processed("ev-om_poison").await.outcome, "retry");
        if count_of(&db, ATTEMPTS, "om_poison").await >= 3 {
            break;
        }
    }
    for m in mates() {
        let id = &m.message_id;
        assert_eq!(app.settled(&format!("ev-{id}")).await, "done", "{id}");
        assert_eq!(count_of(&db, VERDICTS, id).await, 1, "verdicts of {id}");
        assert_eq!(count_of(&db, RECORDS, id).await, 1, "records of {id}");
    }
    let row = app
        .state
        .store
        .inbox_event("planner", "ev-om_poison")
        .await
        .expect("store")
        .expect("row");
    // Waiting for its next attempt, or in it.
    let status = row.event.status.as_str();
    assert!(matches!(status, "pending" | "processing"), "{row:?}");
    let error = row.last_error.as_deref().unwrap_or_default();
    assert!(error.starts_with("store: "), "{row:?}");
    assert_eq!(count_of(&db, VERDICTS, "om_poison").await, 0);
    assert_eq!(count_of(&db, RECORDS, "om_poison").await, 0);

    // Once the database takes it, it is processed, once; its batch-mates were done once
    // and never again.
    drop_trigger(&db, "poison").await;
    assert_eq!(app.settled("ev-om_poison").await, "done");
    assert_eq!(count_of(&db, VERDICTS, "om_poison").await, 1);
    assert_eq!(count_of(&db, RECORDS, "om_poison").await, 1);
    for m in mates() {
        let id = &m.message_id;
        assert_eq!(count_of(&db, ATTEMPTS, id).await, 1, "attempts of {id}");
        assert_eq!(count_of(&db, VERDICTS, id).await, 1, "verdicts of {id}");
    }
    app.stop().await.expect("clean stop");
}
both_backends!(
    an_event_the_database_refuses_is_retried_alone_while_its_batch_mates_are_done_once,
    poisoned_alone
);

async fn poisoned_for_good(db: TestDb) {
    let text = config_toml(&db, "");
    let signer = Signer::default();
    // The poisoned message first, then two more of its chat.
    let messages = [
        Msg::group("om_raise", "note").in_chat("oc_raise"),
        said("oc_raise", 1),
        said("oc_raise", 2),
    ];
    let reqs: Vec<_> = messages.iter().map(|m| signer.deliver(m)).collect();
    store_waiting(&text, &[reqs]).await;
    // An exception no list of the database's conditions names: a plain plpgsql RAISE
    // (SQLSTATE P0001); SQLite reports a trigger's RAISE as a constraint.
    fail_verdict_of(
        &db,
        "raising",
        "om_raise",
        "SELECT RAISE(ABORT, 'raised by a trigger')",
        "RAISE EXCEPTION 'raised by a trigger'",
    )
    .await;

    let mut cfg = worker_on(&text);
    cfg.worker.max_attempts = 3;
    cfg.worker.retry_max_ms = 20;
    let mut app = TestApp::spawn(cfg).await;
    assert_eq!(app.settled("ev-om_raise").await, "failed");
    let row = app
        .state
        .store
        .inbox_event("planner", "ev-om_raise")
        .await
        .expect("store")
        .expect("row");
    assert_eq!(row.attempts, 3, "{row:?}");
    let error = row.last_error.as_deref().unwrap_or_default();
    assert!(error.contains("raised by a trigger"), "the reason: {row:?}");
    if db.kind == Kind::Postgres {
        assert!(error.contains("P0001"), "{row:?}");
    }
    assert!(!error.contains("database error"), "{row:?}");
    // The chat moved on.
    for m in &messages[1..] {
        let id = &m.message_id;
        assert_eq!(app.settled(&format!("ev-{id}")).await, "done", "{id}");
        assert_eq!(count_of(&db, VERDICTS, id).await, 1, "verdicts of {id}");
    }
    assert_eq!(count_of(&db, VERDICTS, "om_raise").await, 0);
    app.stop().await.expect("clean stop");
}
both_backends!(
    an_event_that_keeps_failing_with_an_unknown_code_is_failed_with_its_reason_and_its_chat_moves_on,
    poisoned_for_good
);

async fn failure_after_a_command(db: TestDb) {
    let fake = FakeFeishu::planner().await;
    let text = config_toml(&db, &fake.profile_keys());
    let signer = Signer::default();
    // One batch: a message and a command (recorded together, then the command runs),
    // then two messages, the second of which the database fails to record.
    let messages = [
        said("oc_mid", 0),
        Msg::group("om_mid_help", "/help")
            .at_bot()
            .in_chat("oc_mid"),
        said("oc_mid", 2),
        Msg::group("om_fail", "note").in_chat("oc_mid"),
    ];
    let reqs: Vec<_> = messages.iter().map(|m| signer.deliver(m)).collect();
    store_waiting(&text, &[reqs]).await;
    // Writing its verdict fails the way a database does, not the way it refuses a row:
    // Postgres says its disk is full, SQLite meets an error inside the trigger (the
    // bridge takes both for the database's failure).
    fail_verdict_of(
        &db,
        "fail",
        "om_fail",
        "SELECT json('not json')",
        "RAISE EXCEPTION 'full' USING ERRCODE = 'disk_full'",
    )
    .await;

    let mut app = TestApp::spawn(worker_on(&text)).await;
    assert_eq!(
        app.processed("ev-om_oc_mid_0").await.outcome,
        "done",
        "recorded before the failure"
    );
    assert_eq!(app.processed("ev-om_mid_help").await.outcome, "done");
    // Two rounds on the failing part of the batch: what was recorded stays recorded.
    for _ in 0..2 {
        assert_eq!(app.processed("ev-om_fail").await.outcome, "retry");
    }
    let done = "SELECT COUNT(*) FROM inbox_events WHERE message_id = '$m' AND status = 'done'";
    assert_eq!(count_of(&db, done, "om_oc_mid_0").await, 1);
    assert_eq!(count_of(&db, done, "om_mid_help").await, 1);
    assert_eq!(count_of(&db, done, "om_fail").await, 0);

    drop_trigger(&db, "fail").await;
    for m in &messages {
        let id = format!("ev-{}", m.message_id);
        assert_eq!(app.settled(&id).await, "done", "{id}");
    }
    let attempts = "SELECT COUNT(*) FROM inbox_events WHERE attempts = 1";
    assert_eq!(
        db.scalar(attempts).await,
        4,
        "the database's failures counted no attempt"
    );
    assert_eq!(
        fake.state.send_attempts.load(Ordering::SeqCst),
        1,
        "the command ran once"
    );
    app.stop().await.expect("clean stop");
}
both_backends!(
    a_database_failure_late_in_a_batch_keeps_what_the_batch_recorded_before_it,
    failure_after_a_command
);

async fn kill_mid_batch(db: TestDb) {
    let fake = FakeFeishu::planner().await;
    let text = config_toml(&db, &fake.profile_keys());
    let signer = Signer::default();
    let chats: Vec<String> = (0..5).map(|c| format!("oc_kill{c}")).collect();
    // Sixty events a chat; in the first, the fourteenth is a command. With eight events
    // to a batch it is in the middle of the chat's second batch.
    let help = Msg::group("om_help", "/help").at_bot().in_chat(&chats[0]);
    let streams: Vec<Vec<Msg>> = chats
        .iter()
        .map(|c| {
            (0..60)
                .map(|i| {
                    if c == &chats[0] && i == 13 {
                        help.clone()
                    } else {
                        said(c, i)
                    }
                })
                .collect()
        })
        .collect();
    let total = 300;

    let reqs: Vec<Vec<Request>> = streams
        .iter()
        .map(|s| s.iter().map(|m| signer.deliver(m)).collect())
        .collect();
    store_waiting(&text, &reqs).await;
    assert_eq!(db.count("inbox_events").await, total);

    // Feishu stops answering: the command's reply hangs, and with it the batch it is in
    // (what came before it in the batch is recorded, what comes after is not). Killed
    // there, while the other chats are being processed.
    let run = || {
        let mut cfg = worker_on(&text);
        cfg.worker.lanes = 3;
        cfg.worker.batch = 8;
        cfg
    };
    fake.state.hang.store(true, Ordering::SeqCst);
    let mut activity = fake.state.activity.subscribe();
    let bridge = Crashable::start(run()).await;
    next_matching(&mut activity, "the /help reply", |a| {
        a.starts_with("attempt:")
    })
    .await;
    bridge.crash().await;
    let in_chat = |status: &str, side: &str| {
        format!(
            "SELECT COUNT(*) FROM inbox_events WHERE chat_key = '{}' AND status = '{status}' \
             AND id {side} (SELECT id FROM inbox_events WHERE message_id = 'om_help')",
            chats[0]
        )
    };
    assert_eq!(
        db.scalar(&in_chat("done", "<")).await,
        13,
        "recorded up to the command"
    );
    // Nothing from the command on was recorded. On Postgres the command and the rest of
    // its batch are claimed in writing; on SQLite claims are held in the killed process's
    // memory, so every row from the command on is still pending in the file.
    let (status, from_the_command) = match db.kind {
        Kind::Sqlite => ("pending", 60 - 13),
        Kind::Postgres => ("processing", 3),
    };
    assert_eq!(
        db.scalar(&in_chat(status, ">=")).await,
        from_the_command,
        "the command and the rest of its batch were in hand"
    );
    let done = db
        .scalar("SELECT COUNT(*) FROM inbox_events WHERE status = 'done'")
        .await;
    assert!(done < total, "all {done} were done before the kill");

    // Restarted on the same database: every acknowledged event is processed, once.
    fake.state.hang.store(false, Ordering::SeqCst);
    let mut app = TestApp::spawn(run()).await;
    for m in streams.iter().flatten() {
        let id = format!("ev-{}", m.message_id);
        assert_eq!(app.settled(&id).await, "done", "{id}");
    }
    assert_eq!(db.count("inbox_events").await, total, "nothing lost");
    let per_message = |table: &str, op: &str| {
        format!(
            "SELECT COUNT(*) FROM (SELECT message_id FROM {table} \
             GROUP BY message_id HAVING COUNT(*) {op} 1) m"
        )
    };
    assert_eq!(db.count("routing_verdicts").await, total);
    assert_eq!(
        db.scalar(&per_message("routing_verdicts", "=")).await,
        total,
        "one verdict for each message"
    );
    assert_eq!(
        db.scalar(&per_message("thread_context_events", ">")).await,
        0,
        "at most one event-log record for each message"
    );
    assert_eq!(
        db.scalar(&per_message("thread_context_events", "=")).await,
        total,
        "every message recorded"
    );
    for chat in &chats {
        assert_recorded_in_arrival_order(&db, chat).await;
    }
    app.stop().await.expect("clean stop");
}
both_backends!(
    a_kill_in_the_middle_of_a_batch_leaves_every_acknowledged_event_processed_once_after_restart,
    kill_mid_batch
);
