//! Several replicas on one Postgres database, each running its worker and its turns: a
//! request is answered once by one replica; a session's turns run one at a time whichever
//! replica runs them; `/stop` reaches a turn on another replica; a dead replica's turns
//! are taken over (the running one failed with a notice, the queued one run); together
//! they keep the app's Open API limits. With SQLite, a second process on the same file is
//! refused at start.
//!
//! Each replica polls its inbox only once an hour here, so an event is processed by the
//! replica it was posted to (its arrival wakes that replica's worker): the tests decide
//! where each turn is queued.

use feishu_bridge::store::TurnRow;
use tokio::sync::broadcast;

use crate::support::{
    Signer, TestApp, TestDb,
    cli::{bridge, write_config},
    config, config_toml,
    crash::Crashable,
    fake_feishu::FakeFeishu,
    feishu::Msg,
    gated_agent::GatedAgent,
    next_matching,
};

/// The config of replica `name`: the inbox polled rarely, turns on other replicas often,
/// and a short lease.
fn replica(db: &TestDb, fake: &FakeFeishu, agent: &str, name: &str) -> String {
    let text = config_toml(db, &format!("{}{agent}", fake.profile_keys()));
    text.replace(
        "[worker]\npoll_interval_ms = 50\n",
        &format!(
            "[worker]\npoll_interval_ms = 3600000\nreplica_poll_ms = 10\nlease_ms = 600\n\
             replica_id = \"{name}\"\n"
        ),
    )
}

/// Waits until the turn of `message_id` has ended, on whichever of `apps` runs it.
async fn ended(apps: &[&TestApp], message_id: &str) -> TurnRow {
    let mut done: Vec<_> = apps
        .iter()
        .map(|a| a.state.turns_done.subscribe())
        .collect();
    loop {
        let row = apps[0].turn_of(message_id).await;
        if !matches!(row.state.as_str(), "queued" | "running") {
            return row;
        }
        let what = format!("the end of the turn of {message_id}");
        let (first, rest) = done.split_at_mut(1);
        tokio::select! {
            _ = next_matching(&mut first[0], &what, |_| true) => {}
            _ = any(rest, &what) => {}
        }
    }
}

async fn any(rx: &mut [broadcast::Receiver<feishu_bridge::turns::TurnDone>], what: &str) {
    match rx.first_mut() {
        Some(rx) => {
            next_matching(rx, what, |_| true).await;
        }
        None => std::future::pending().await,
    }
}

/// Waits for the turn of `message_id` to end on one of `apps`: it succeeded and got
/// exactly one reply.
async fn answered_once(apps: &[&TestApp], fake: &FakeFeishu, message_id: &str) -> TurnRow {
    let row = ended(apps, message_id).await;
    assert_eq!(row.state, "succeeded", "{message_id}: {:?}", row.error);
    assert_eq!(
        fake.state.replies_to(message_id).len(),
        1,
        "{message_id} answered once"
    );
    row
}

/// Two requests to the bot in one thread, so in one session: `om_1` "first", then
/// `om_2` "second".
fn one_session_two_requests() -> (Msg, Msg) {
    let first = Msg::group("om_1", "first").at_bot().in_thread("om_root");
    let second = Msg::group("om_2", "second").at_bot().in_thread("om_root");
    (first, second)
}

/// `om_2` got exactly one reply: the agent's answer to "second".
fn second_answered_once(fake: &FakeFeishu) {
    let answered = fake.state.replies_to("om_2");
    assert_eq!(answered.len(), 1, "{answered:?}");
    assert!(answered[0].contains("answer: second"), "{answered:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    pg_unreachable,
    ignore = "Postgres was unreachable when the tests were built"
)]
async fn both_replicas_run_turns_and_each_request_is_answered_once() {
    let db = TestDb::postgres().await;
    let fake = FakeFeishu::planner().await;
    let mut a = TestApp::spawn(config(&replica(&db, &fake, "", "replica-a"))).await;
    let mut b = TestApp::spawn(config(&replica(&db, &fake, "", "replica-b"))).await;
    let signer = Signer::default();
    let ids: Vec<String> = (0..12).map(|i| format!("om_q{i}")).collect();
    let mut processed_by = Vec::new();
    for (i, id) in ids.iter().enumerate() {
        let ask = Msg::group(id, &format!("question {i}"))
            .at_bot()
            .in_thread(&format!("om_root{i}"));
        let to = if i % 2 == 0 { &a } else { &b };
        assert_eq!(to.event(&signer.deliver(&ask)).await.status, 200);
        // Whichever replica's worker claims it first processes it, once.
        let event = format!("ev-{id}");
        let by = tokio::select! {
            p = a.processed(&event) => ("replica-a", p),
            p = b.processed(&event) => ("replica-b", p),
        };
        assert_eq!(by.1.outcome, "done");
        processed_by.push(by.0);
    }
    for (id, by) in ids.iter().zip(&processed_by) {
        let row = answered_once(&[&a, &b], &fake, id).await;
        assert_eq!(
            row.lease_owner.as_deref(),
            Some(*by),
            "{id}: the turn ran on the replica that queued it"
        );
    }
    assert_eq!(db.count("turns").await, 12, "one turn per request");
    // Each replica names itself, and sees both alive.
    let status = a.get("/status").await.json;
    assert_eq!(status["turns"]["replica_id"], "replica-a", "{status}");
    let alive: Vec<_> = status["turns"]["replicas"]
        .as_array()
        .map(|r| r.iter().map(|r| r["replica_id"].clone()).collect())
        .unwrap_or_default();
    assert_eq!(alive, ["replica-a", "replica-b"], "{status}");
    a.stop().await.expect("clean stop");
    b.stop().await.expect("clean stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    pg_unreachable,
    ignore = "Postgres was unreachable when the tests were built"
)]
async fn a_sessions_turns_wait_across_replicas_and_stop_reaches_the_other_replica() {
    let db = TestDb::postgres().await;
    let fake = FakeFeishu::planner().await;
    let mut agent = GatedAgent::start().await;
    let a = TestApp::spawn(config(&replica(&db, &fake, &agent.config(), "replica-a"))).await;
    let signer = Signer::default();
    let (first, second) = one_session_two_requests();
    assert_eq!(a.event(&signer.deliver(&first)).await.status, 200);
    assert_eq!(agent.next().await["request_text"], "first");
    // b starts once a is running the first turn, and a's worker is idle from then on.
    let mut b = TestApp::spawn(config(&replica(&db, &fake, &agent.config(), "replica-b"))).await;

    // The same session's next request reaches replica b: its turn waits for a's.
    assert_eq!(b.event(&signer.deliver(&second)).await.status, 200);
    assert_eq!(b.processed("ev-om_2").await.outcome, "done");
    let one = a.turn_of("om_1").await;
    let two = b.turn_of("om_2").await;
    assert_eq!(
        (one.state.as_str(), one.lease_owner.as_deref()),
        ("running", Some("replica-a"))
    );
    assert_eq!(
        (two.state.as_str(), two.lease_owner.as_deref()),
        ("queued", Some("replica-b"))
    );

    // /stop, processed by b, stops the turn running on a.
    let stop = Msg::group("om_stop", "/stop").at_bot().in_thread("om_root");
    assert_eq!(b.event(&signer.deliver(&stop)).await.status, 200);
    assert_eq!(b.processed("ev-om_stop").await.outcome, "done");
    let one = ended(&[&a, &b], "om_1").await;
    assert_eq!(one.state, "cancelled", "{:?}", one.error);
    let told = fake.state.replies_to("om_stop");
    assert!(told.iter().any(|t| t.contains("Stopping")), "{told:?}");

    // Only then does b's turn start.
    assert_eq!(agent.next().await["request_text"], "second");
    agent.open();
    let two = ended(&[&a, &b], "om_2").await;
    assert_eq!(two.state, "succeeded", "{:?}", two.error);
    let (finished, started) = (one.finished_at, two.started_at);
    assert!(
        started.zip(finished).is_some_and(|(s, f)| s >= f),
        "the second started after the first ended: {started:?} vs {finished:?}"
    );
    assert_eq!(
        fake.state.replies_to("om_1").len(),
        1,
        "one notice for the stop"
    );
    second_answered_once(&fake);
    a.stop().await.expect("clean stop");
    b.stop().await.expect("clean stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    pg_unreachable,
    ignore = "Postgres was unreachable when the tests were built"
)]
async fn a_dead_replicas_turns_are_taken_over_running_failed_queued_run() {
    let db = TestDb::postgres().await;
    let fake = FakeFeishu::planner().await;
    let mut agent = GatedAgent::start().await;
    let mut dead =
        Crashable::start(config(&replica(&db, &fake, &agent.config(), "replica-a"))).await;
    let signer = Signer::default();
    let (first, second) = one_session_two_requests();
    assert_eq!(dead.event(&signer.deliver(&first)).await, 200);
    assert_eq!(agent.next().await["request_text"], "first");
    assert_eq!(dead.event(&signer.deliver(&second)).await, 200);
    assert_eq!(dead.processed("ev-om_2").await.outcome, "done");
    dead.crash().await;

    // The survivor takes both over once the dead one's heartbeat is older than the lease.
    agent.open();
    let survivor = TestApp::spawn(config(&replica(&db, &fake, &agent.config(), "replica-b"))).await;
    let one = ended(&[&survivor], "om_1").await;
    assert_eq!(
        (one.state.as_str(), one.error.as_deref()),
        ("failed", Some("interrupted: the bridge restarted"))
    );
    assert_eq!(one.lease_owner.as_deref(), Some("replica-b"));
    let two = ended(&[&survivor], "om_2").await;
    assert_eq!(two.state, "succeeded", "{:?}", two.error);
    assert_eq!(two.lease_owner.as_deref(), Some("replica-b"));
    assert_eq!(agent.next().await["request_text"], "second");
    let told = fake.state.replies_to("om_1");
    assert_eq!(
        told.len(),
        1,
        "the interrupted request's user is told once: {told:?}"
    );
    second_answered_once(&fake);
    survivor.stop().await.expect("clean stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    pg_unreachable,
    ignore = "Postgres was unreachable when the tests were built"
)]
async fn replicas_keep_the_apps_open_api_limits_together() {
    let db = TestDb::postgres().await;
    let fake = FakeFeishu::planner().await;
    let a = TestApp::spawn(config(&replica(&db, &fake, "", "replica-a"))).await;
    let b = TestApp::spawn(config(&replica(&db, &fake, "", "replica-b"))).await;
    // Each counts both (b at its start, a at its next heartbeat), and says so: the share it
    // keeps to when the database cannot record its calls.
    for app in [&a, &b] {
        let mut share = app.state.api_share.subscribe();
        let counted = share.wait_for(|n| *n == 2);
        tokio::time::timeout(std::time::Duration::from_secs(30), counted)
            .await
            .expect("both replicas counted within 30 s")
            .expect("the replica runs");
        let status = app.get("/status").await.json;
        assert_eq!(status["turns"]["open_api_share"], 2, "{status}");
    }
    // More answers at once than one second of Feishu's limit (50 calls per app), half
    // on each replica: each on its own would make 30 a second, together they record
    // every call in the database first and make at most 30 a second between them.
    let signer = Signer::default();
    let ids: Vec<String> = (0..140).map(|i| format!("om_q{i}")).collect();
    for (i, id) in ids.iter().enumerate() {
        let ask = Msg::group(id, &format!("question {i}"))
            .at_bot()
            .in_thread(&format!("om_root{i}"));
        let to = if i % 2 == 0 { &a } else { &b };
        assert_eq!(to.event(&signer.deliver(&ask)).await.status, 200);
    }
    for id in &ids {
        answered_once(&[&a, &b], &fake, id).await;
    }
    let over = fake.state.violations.lock().expect("lock").clone();
    assert!(
        over.is_empty(),
        "together the replicas stayed within the app's limits: {over:?}"
    );
    a.stop().await.expect("clean stop");
    b.stop().await.expect("clean stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    pg_unreachable,
    ignore = "Postgres was unreachable when the tests were built"
)]
async fn calls_are_recorded_in_the_database_and_still_made_when_it_cannot_record_them() {
    let db = TestDb::postgres().await;
    let fake = FakeFeishu::planner().await;
    let mut a = TestApp::spawn(config(&replica(&db, &fake, "", "replica-a"))).await;
    let ask = Msg::group("om_q1", "first").at_bot().in_thread("om_root1");
    assert_eq!(a.ask(&ask).await, "answered");
    assert!(
        db.count("api_calls").await >= 1,
        "the reply was recorded before it was made"
    );
    // A database that refuses the record (here: the table is gone) does not hold the
    // answer back: the replica keeps to its own share of the limits instead.
    db.exec(&["DROP TABLE api_calls"]).await;
    let ask = Msg::group("om_q2", "second").at_bot().in_thread("om_root2");
    assert_eq!(a.ask(&ask).await, "answered");
    assert_eq!(fake.state.replies_to("om_q2").len(), 1);
    a.stop().await.expect("clean stop");
}

#[tokio::test]
async fn a_second_process_on_the_same_sqlite_file_is_refused() {
    let db = TestDb::sqlite();
    let dir = tempfile::tempdir().expect("dir");
    let path = write_config(&dir, &config_toml(&db, ""));
    let first = crate::support::cli::Served::start(&path, "info", &[]).await;
    let second = bridge(&["--config", &path, "serve"])
        .output()
        .expect("runs");
    assert!(
        !second.status.success(),
        "the second process does not serve"
    );
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert!(
        stderr.contains("another feishu-bridge process is serving the SQLite database"),
        "{stderr}"
    );
    assert!(
        stderr.contains("run several replicas on Postgres"),
        "{stderr}"
    );
    let (status, _) = first.stop();
    assert!(status.success(), "the first one was untouched");
    let third = crate::support::cli::Served::start(&path, "info", &[]).await;
    let (status, out) = third.stop();
    assert!(
        status.success(),
        "once the first is gone, another may serve: {status:?}\n{out}"
    );
}
