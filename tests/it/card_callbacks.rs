//! Card callbacks as Feishu sends them, which it never retries: answered within 3 s even
//! while the database is locked (and finished once it is back, shutdown included), the
//! legacy card URL taking the encrypted schema 2.0 format too, and `/status` showing each
//! bot's identity as the bridge learned it.

use feishu_bridge::Config;
use serde_json::{Value, json};
use tokio::{io::AsyncReadExt, net::TcpStream};

use crate::{
    both_backends,
    support::{
        TestApp, TestDb,
        cards::{post_within_3s, press_request, streaming, until},
        config, config_toml,
        db_lock::Lock,
        fake_feishu::FakeFeishu,
        fake_openai::FakeOpenAi,
        feishu::Msg,
    },
};

/// Who may press the planner's buttons in these tests.
const ALLOW: &str = "allow_users = [\"ou_alice\"]";

/// The streaming planner of these tests.
fn planner(db: &TestDb, fake: &FakeFeishu, llm: &FakeOpenAi) -> Config {
    config(&streaming(db, fake, llm, ALLOW))
}

/// A planner whose answer to `om_a` is streaming into a card and held there: returns
/// the running turn and its card's message id.
async fn running_turn(
    cfg: Config,
    fake: &FakeFeishu,
    llm: &FakeOpenAi,
) -> (TestApp, feishu_bridge::store::TurnRow, String) {
    llm.hold_after(1);
    let mut app = TestApp::spawn(cfg).await;
    let ask = Msg::group("om_a", "task a").at_bot().in_thread("om_root_a");
    app.route(&ask).await;
    llm.requests(1).await;
    until(fake, || !fake.state.sent.lock().expect("lock").is_empty()).await;
    let turn = app.turn_of("om_a").await;
    let card = turn.card_message_id.clone().expect("card posted");
    until(fake, || {
        fake.state.shown_text(&card).as_deref() == Some("Working")
    })
    .await;
    assert_eq!(turn.state, "running");
    (app, turn, card)
}

/// Rows of the inbox with this event id, straight from the database.
async fn stored(db: &TestDb, event_id: &str) -> i64 {
    db.scalar(&format!(
        "SELECT COUNT(*) FROM inbox_events WHERE event_id = '{event_id}'"
    ))
    .await
}

async fn slow_database(db: TestDb) {
    let fake = FakeFeishu::planner().await;
    let llm = FakeOpenAi::start(vec!["Working".into(), " on it".into()]).await;
    let (app, turn, card) = running_turn(planner(&db, &fake, &llm), &fake, &llm).await;

    let lock = Lock::take(&db).await;
    let id = "ev-press-slow";
    let req = press_request(id, "ou_alice", "stop", &turn.turn_id, &card);
    let answered = post_within_3s(&app, "event", &req).await;
    assert_eq!(answered.status, 200, "{}", answered.text);
    assert_eq!(answered.json["toast"]["type"], "info", "{}", answered.text);
    assert!(
        answered.json["toast"]["content"]
            .as_str()
            .is_some_and(|c| !c.is_empty()),
        "{}",
        answered.text
    );
    // What the button does waits for the press to be stored.
    assert_eq!(app.turn_of("om_a").await.state, "running");

    lock.release().await;
    let row = app.turn_ended("om_a").await;
    assert_eq!(
        (row.state.as_str(), row.error.as_deref()),
        ("cancelled", Some("stopped by the user"))
    );
    assert_eq!(stored(&db, id).await, 1);
    app.stop().await.expect("clean stop");
}
both_backends!(
    a_press_is_answered_within_3s_while_the_database_is_locked_and_acted_on_after,
    slow_database
);

async fn fast_database(db: TestDb) {
    let fake = FakeFeishu::planner().await;
    let llm = FakeOpenAi::start(vec!["Working".into(), " on it".into()]).await;
    let (app, turn, card) = running_turn(planner(&db, &fake, &llm), &fake, &llm).await;

    let req = press_request("ev-press-fast", "ou_alice", "stop", &turn.turn_id, &card);
    let answered = post_within_3s(&app, "event", &req).await;
    assert_eq!(
        (answered.status, &answered.json),
        (
            200,
            &json!({"toast": {"type": "success", "content": "Stopping this answer."}})
        )
    );
    let row = app.turn_ended("om_a").await;
    assert_eq!(row.state, "cancelled", "{:?}", row.error);

    // The same delivery again is only acknowledged.
    let again = post_within_3s(&app, "event", &req).await;
    assert_eq!(
        (again.status, &again.json),
        (200, &json!({})),
        "{}",
        again.text
    );
    assert_eq!(stored(&db, "ev-press-fast").await, 1);
    app.stop().await.expect("clean stop");
}
both_backends!(
    a_press_on_a_fast_database_gets_the_buttons_own_toast,
    fast_database
);

/// Postgres only: there a write waiting for a lock can be made to fail from outside at a
/// chosen moment (SQLite's waits end by themselves), which is what tells a shutdown
/// that waits for answered presses from one that stops the committers under them.
#[tokio::test]
#[cfg_attr(
    pg_unreachable,
    ignore = "Postgres was unreachable when the tests were built"
)]
async fn a_press_answered_before_a_shutdown_is_stored_before_the_bridge_stops() {
    let db = TestDb::postgres().await;
    let fake = FakeFeishu::planner().await;
    let llm = FakeOpenAi::start(vec!["Working".into(), " on it".into()]).await;
    let mut cfg = config(&streaming(&db, &fake, &llm, ALLOW));
    // A write waits for the lock for as long as the test holds it.
    cfg.database.timeout_ms = 60_000;
    let (app, turn, card) = running_turn(cfg, &fake, &llm).await;

    let mut lock = Lock::take(&db).await;
    let id = "ev-press-at-shutdown";
    let req = press_request(id, "ou_alice", "stop", &turn.turn_id, &card);
    let answered = post_within_3s(&app, "event", &req).await;
    assert_eq!(answered.json["toast"]["type"], "info", "{}", answered.text);

    // An idle connection is closed as soon as the shutdown begins.
    let mut idle = TcpStream::connect(app.base.trim_start_matches("http://"))
        .await
        .expect("connect");
    let stopping = tokio::spawn(app.stop());
    let mut buf = [0u8; 16];
    let read = idle.read(&mut buf).await.expect("closed cleanly");
    assert_eq!(read, 0, "the server closed the idle connection");
    // The press's write, waiting for the lock, fails; only then is the database back.
    assert!(
        lock.fail_waiting_writes().await >= 1,
        "the press was waiting"
    );
    lock.release().await;
    stopping.await.expect("join").expect("clean stop");
    assert_eq!(
        stored(&db, id).await,
        1,
        "the press answered before the shutdown was stored before the bridge stopped"
    );
}

async fn legacy_url_new_format(db: TestDb) {
    let fake = FakeFeishu::planner().await;
    let llm = FakeOpenAi::start(vec!["Working".into(), " on it".into()]).await;
    let (app, turn, card) = running_turn(planner(&db, &fake, &llm), &fake, &llm).await;
    let id = "ev-press-on-card-url";
    let req = press_request(id, "ou_alice", "stop", &turn.turn_id, &card);

    // Unsigned, or signed with anything but the Encrypt Key: refused, nothing stored.
    let unsigned = post_within_3s(&app, "card", &req.clone().unsigned()).await;
    assert_eq!(
        (unsigned.status, unsigned.code()),
        (401, "bad_signature"),
        "{}",
        unsigned.text
    );
    let forged = req.clone().with_header("x-lark-signature", &"0".repeat(64));
    let forged = post_within_3s(&app, "card", &forged).await;
    assert_eq!(
        (forged.status, forged.code()),
        (401, "bad_signature"),
        "{}",
        forged.text
    );
    assert_eq!(stored(&db, id).await, 0);

    let answered = post_within_3s(&app, "card", &req).await;
    assert_eq!(
        (answered.status, &answered.json["toast"]["type"]),
        (200, &json!("success")),
        "{}",
        answered.text
    );
    let row = app.turn_ended("om_a").await;
    assert_eq!(row.state, "cancelled", "{:?}", row.error);
    let event = app
        .state
        .store
        .inbox_event("planner", id)
        .await
        .expect("store answers")
        .expect("stored");
    assert_eq!(event.event.event_type, "card.action.trigger");

    let again = post_within_3s(&app, "card", &req).await;
    assert_eq!(
        (again.status, &again.json),
        (200, &json!({})),
        "{}",
        again.text
    );
    assert_eq!(stored(&db, id).await, 1);
    app.stop().await.expect("clean stop");
}
both_backends!(
    the_legacy_card_url_takes_an_encrypted_schema_2_press,
    legacy_url_new_format
);

fn vector(name: &str) -> Value {
    let all: Vec<Value> =
        serde_json::from_str(include_str!("../fixtures/feishu-vectors.json")).expect("vectors");
    all.into_iter()
        .find(|v| v["name"] == name)
        .unwrap_or_else(|| panic!("no vector {name}"))
}

fn vector_request(v: &Value) -> crate::support::Request {
    crate::support::Request {
        body: v["body"].as_str().expect("body").to_string(),
        headers: v["headers"]
            .as_object()
            .expect("headers")
            .iter()
            .map(|(k, v)| (k.to_lowercase(), v.as_str().unwrap_or_default().to_string()))
            .collect(),
    }
}

async fn card_vector_on_the_legacy_url(db: TestDb) {
    let v = vector("card_action_trigger_v2");
    assert_eq!(v["kind"], "card_action_v2");
    // The vectors were made in 2025: no freshness window here.
    let text = format!(
        "[server]\ntimestamp_tolerance_secs = 0\n[database]\nurl = \"{}\"\n\
         [[profiles]]\nname = \"main\"\napp_id = \"cli_a1b2c3d4e5f60718\"\n\
         encrypt_key = \"{}\"\nverification_token = \"{}\"\ndry_run = true\n",
        db.url,
        v["encrypt_key"].as_str().unwrap_or_default(),
        v["verification_token"].as_str().unwrap_or_default(),
    );
    let app = TestApp::spawn(config(&text)).await;

    let forged = app
        .post(
            "main",
            "card",
            &vector_request(&vector("negative_bad_signature")),
        )
        .await;
    assert_eq!(
        (forged.status, forged.code()),
        (401, "bad_signature"),
        "{}",
        forged.text
    );

    let answered = app.post("main", "card", &vector_request(&v)).await;
    // The vector's button is not one of the bridge's: acknowledged, nothing to show.
    assert_eq!(
        (answered.status, &answered.json),
        (200, &json!({})),
        "{}",
        answered.text
    );
    let event = app
        .state
        .store
        .inbox_event("main", "f7984f25108f8137722bb63cee927e66")
        .await
        .expect("store answers")
        .expect("stored");
    assert_eq!(event.event.event_type, "card.action.trigger");
    assert_eq!(db.count("inbox_events").await, 1);
    app.stop().await.expect("clean stop");
}
both_backends!(
    the_card_action_vector_is_accepted_on_the_legacy_card_url,
    card_vector_on_the_legacy_url
);

async fn learned_identity(db: TestDb) {
    let fake = FakeFeishu::start("s", "ou_bot_learned").await;
    let extra = format!(
        "\n[[profiles]]\nname = \"learner\"\napp_id = \"cli_test_learner\"\n\
         verification_token = \"learner-token\"\n{}\n\
         [[profiles]]\nname = \"stranger\"\napp_id = \"cli_test_stranger\"\n\
         verification_token = \"stranger-token\"\ndry_run = true\n",
        fake.profile_keys()
    );
    // The bridge asks the bot info API before `start` returns, when the API answers.
    let app = TestApp::spawn(config(&config_toml(&db, &extra))).await;
    assert_eq!(
        fake.state
            .bot_info_requests
            .load(std::sync::atomic::Ordering::SeqCst),
        1
    );

    let status = app.get("/status").await;
    assert_eq!(status.status, 200, "{}", status.text);
    let ids: Vec<(Value, Value)> = status.json["profiles"]
        .as_array()
        .expect("profiles")
        .iter()
        .map(|p| (p["name"].clone(), p["bot_open_id"].clone()))
        .collect();
    assert_eq!(
        ids,
        [
            (json!("planner"), json!(crate::support::feishu::BOT_OPEN_ID)),
            (json!("learner"), json!("ou_bot_learned")),
            // No bot_open_id and no app_secret: unknown.
            (json!("stranger"), Value::Null),
        ]
    );
    app.stop().await.expect("clean stop");
}
both_backends!(status_reports_each_bots_learned_identity, learned_identity);
