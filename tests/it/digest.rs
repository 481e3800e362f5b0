//! The daily digest end to end, on a clock the test sets and a fake summarizer over
//! HTTP: each session's day summarized, written (database and file) before any reset;
//! every failure path keeping its session untouched and saying why; a crash between the
//! write and the resets resetting nothing; once per date across restarts; a run outside
//! its window skipped; short sessions reset without a call; nothing recorded when there
//! is nothing to see.

use std::{sync::Arc, time::Duration};

use feishu_bridge::{
    Config,
    digest::{Outcome, Stage},
    store::DigestTrigger,
    util::{ManualClock, UnixMs},
};
use serde_json::Value;

use crate::{
    both_backends,
    support::{
        ADMIN, Kind, TestApp, TestDb, config_toml,
        fake_openai::FakeOpenAi,
        fake_summarizer::{FakeSummarizer, KEY},
        feishu::Msg,
    },
};

/// A day of the test, at `hh:mm` UTC.
fn at(date: &str, hhmm: &str) -> UnixMs {
    let ts: jiff::Timestamp = format!("{date}T{hhmm}:00Z").parse().expect("instant");
    UnixMs(ts.as_millisecond())
}

/// The planner (an openai agent that answers "Noted.", replies recorded) with the
/// digest on, `more` in `[digest]`.
fn digest_toml(db: &TestDb, agent: &FakeOpenAi, summarizer: &FakeSummarizer, more: &str) -> String {
    let profile = format!(
        "dry_run = true\n[profiles.agent]\nkind = \"openai\"\nbase_url = \"{}\"\nmodel = \"m\"\n",
        agent.base
    );
    let text = config_toml(db, &profile);
    format!(
        "{text}\n[digest]\nenabled = true\ntimezone = \"UTC\"\n{more}\n\
         [digest.summarizer]\nbase_url = \"{}\"\nmodel = \"cheap\"\ntimeout_secs = 1\n",
        summarizer.base
    )
}

/// The config, with the summarizer's key in the environment when `key`.
fn load(text: &str, key: bool) -> Config {
    feishu_bridge::config::load_from_str(text, &|k| {
        (key && k == "FEISHU_BRIDGE_DIGEST_API_KEY").then(|| KEY.to_string())
    })
    .expect("test config is valid")
}

/// Everything a digest test starts with.
struct Day {
    db: TestDb,
    agent: FakeOpenAi,
    summarizer: FakeSummarizer,
    clock: Arc<ManualClock>,
    dir: tempfile::TempDir,
}

impl Day {
    /// Noon on 2026-12-02: outside the window, so the schedule leaves the day alone
    /// and `POST /digests/run` decides.
    async fn new(db: TestDb) -> Self {
        Self {
            db,
            agent: FakeOpenAi::start(vec!["Noted.".into()]).await,
            summarizer: FakeSummarizer::start().await,
            clock: Arc::new(ManualClock::at(at("2026-12-02", "12:00"))),
            dir: tempfile::tempdir().expect("temp dir"),
        }
    }

    /// `[digest]` lines writing the file under the temp dir.
    fn with_dir(&self) -> String {
        format!("dir = \"{}\"", self.dir.path().display())
    }

    async fn app(&self, more: &str, key: bool) -> TestApp {
        let text = digest_toml(&self.db, &self.agent, &self.summarizer, more);
        TestApp::spawn_with_clock(load(&text, key), self.clock.clone()).await
    }
}

/// Thread sessions of the test group, each opened by an @-request.
fn key(root: &str) -> String {
    format!("thread:oc_group:{root}")
}

/// Opens the thread `root` with an @-request saying `text` (its turn answered), and
/// adds `chatter` to it un-mentioned.
async fn thread(app: &mut TestApp, root: &str, text: &str, chatter: &[&str]) {
    assert_eq!(app.ask(&Msg::group(root, text).at_bot()).await, "answered");
    for (i, said) in chatter.iter().enumerate() {
        app.route(&Msg::group(&format!("{root}_{i}"), said).in_thread(root))
            .await;
    }
}

async fn session_id(app: &TestApp, root: &str) -> String {
    session_id_of(app, &key(root)).await
}

/// The planner's agent-side session id of the session `key`.
pub(crate) async fn session_id_of(app: &TestApp, key: &str) -> String {
    let a = app.get(&format!("/sessions/{key}?profile=planner")).await;
    assert_eq!(a.status, 200, "{}", a.text);
    a.json["session_id"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// Runs the digest now: the answer's status and body.
pub(crate) async fn run_now(app: &TestApp) -> (u16, Value) {
    let r = app
        .client
        .post(format!("{}/digests/run", app.base))
        .bearer_auth(ADMIN)
        .send()
        .await
        .expect("run answers");
    let status = r.status().as_u16();
    (status, r.json().await.expect("JSON"))
}

/// A date's digests by session key: (status, reason).
fn outcomes(body: &Value) -> Vec<(String, String, String)> {
    body["digests"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|d| {
            let s = |k: &str| d[k].as_str().unwrap_or_default().to_string();
            (s("session_key"), s("status"), s("reason"))
        })
        .collect()
}

fn digest_of<'a>(body: &'a Value, root: &str) -> &'a Value {
    body["digests"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|d| d["session_key"] == key(root).as_str())
        .unwrap_or(&Value::Null)
}

fn triple(root: &str, status: &str, reason: &str) -> (String, String, String) {
    (key(root), status.into(), reason.into())
}

/// The metric line with all of `labels`, its value.
fn metric(text: &str, name: &str, labels: &[&str]) -> Option<f64> {
    text.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")) || l.starts_with(&format!("{name} ")))
        .find(|l| labels.iter().all(|x| l.contains(x)))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

const PLAN: &str = "let us plan the offsite for next week, somewhere near the lake";

async fn written_then_reset_and_every_failure_kept(db: TestDb) {
    let day = Day::new(db).await;
    let mut app = day.app(&day.with_dir(), true).await;
    thread(
        &mut app,
        "om_plan",
        PLAN,
        &["Friday works for me, the usual place"],
    )
    .await;
    thread(&mut app, "om_hi", "hi", &[]).await;
    thread(
        &mut app,
        "om_fail",
        "FAIL: this one is long enough to be summarized",
        &[],
    )
    .await;
    thread(
        &mut app,
        "om_empty",
        "EMPTY: this one is long enough to be summarized",
        &[],
    )
    .await;
    thread(
        &mut app,
        "om_slow",
        "SLOW: this one is long enough to be summarized",
        &[],
    )
    .await;
    let before: Vec<String> = {
        let mut ids = Vec::new();
        for root in ["om_plan", "om_hi", "om_fail", "om_empty", "om_slow"] {
            ids.push(session_id(&app, root).await);
        }
        ids
    };

    let (status, body) = run_now(&app).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["outcome"], "ran");
    assert_eq!(body["date"], "2026-12-02");
    assert_eq!(
        outcomes(&body),
        [
            triple("om_empty", "kept", "empty_summary"),
            triple("om_fail", "kept", "summarizer_error"),
            triple("om_hi", "reset", "short"),
            triple("om_plan", "reset", "summarized"),
            triple("om_slow", "kept", "summarizer_timeout"),
        ],
        "{body}"
    );
    let fail = digest_of(&body, "om_fail");
    assert!(
        fail["detail"].as_str().unwrap_or_default().contains("500"),
        "{fail}"
    );
    // The short session cost no call; the others one each, with the instructions.
    let transcripts = day.summarizer.transcripts();
    assert_eq!(transcripts.len(), 4, "{transcripts:?}");
    assert!(transcripts.iter().all(|t| !t.contains(": hi")));
    assert!(
        day.summarizer
            .instructions()
            .iter()
            .all(|i| i.contains("300 to 500 characters") && i.contains("language")),
    );
    let plan_text = transcripts
        .iter()
        .find(|t| t.contains("offsite"))
        .expect("the plan was summarized");
    assert!(plan_text.contains("Friday works for me"), "{plan_text}");
    assert!(
        plan_text.contains("Noted."),
        "the bot's answers are part of the day"
    );
    let plan = digest_of(&body, "om_plan");
    assert_eq!(
        plan["summary"],
        FakeSummarizer::summary_of(plan_text).as_str()
    );

    // Reset: the summarized and the short; every other untouched.
    let mut after = Vec::new();
    for root in ["om_plan", "om_hi", "om_fail", "om_empty", "om_slow"] {
        after.push(session_id(&app, root).await);
    }
    assert_ne!(after[0], before[0]);
    assert_ne!(after[1], before[1]);
    assert_eq!(after[2..], before[2..]);
    assert_eq!(plan["new_session_id"], after[0].as_str());

    // The file says each one's summary and status.
    let file = day.dir.path().join("digest").join("2026-12-02.md");
    let text = std::fs::read_to_string(&file).expect("the digest file");
    assert!(
        text.contains(&FakeSummarizer::summary_of(plan_text)),
        "{text}"
    );
    assert!(
        text.contains("kept, untouched: the summarizer failed"),
        "{text}"
    );
    assert!(
        text.contains("kept, untouched: the summary was empty"),
        "{text}"
    );
    assert!(
        text.contains("kept, untouched: the summarizer timed out"),
        "{text}"
    );
    assert!(
        text.contains(&format!("reset; new session {}", after[0])),
        "{text}"
    );
    assert!(
        text.contains("reset without a summary (under 40 characters)"),
        "{text}"
    );
    assert_eq!(body["run"]["file"], file.display().to_string().as_str());

    // Read back over REST, in /status, in the metrics, and from the CLI.
    let listed = app.get("/digests?date=2026-12-02").await;
    assert_eq!(outcomes(&listed.json), outcomes(&body));
    assert_eq!(outcomes(&app.get("/digests").await.json), outcomes(&body));
    let status = app.get("/status").await.json;
    let last = &status["digest"]["last_run"];
    assert_eq!(last["date"], "2026-12-02", "{status}");
    assert_eq!(
        (
            last["sessions"].as_i64(),
            last["reset"].as_i64(),
            last["kept"].as_i64()
        ),
        (Some(5), Some(2), Some(3))
    );
    assert!(last["duration_ms"].as_i64().is_some(), "{last}");
    let metrics = app.get_anonymous("/metrics").await.text;
    let sessions = "feishu_bridge_digest_sessions_total";
    assert_eq!(
        metric(
            &metrics,
            sessions,
            &[r#"status="reset""#, r#"reason="summarized""#]
        ),
        Some(1.0),
        "{metrics}"
    );
    assert_eq!(
        metric(
            &metrics,
            sessions,
            &[r#"status="kept""#, r#"reason="summarizer_error""#]
        ),
        Some(1.0)
    );
    assert_eq!(
        metric(
            &metrics,
            "feishu_bridge_digest_runs_total",
            &[r#"outcome="ran""#]
        ),
        Some(1.0)
    );
    assert!(
        metric(
            &metrics,
            "feishu_bridge_digest_last_run_timestamp_seconds",
            &[]
        )
        .is_some_and(|v| v > 0.0)
    );
    let cli_config = crate::support::cli::write_config(
        &day.dir,
        &digest_toml(&day.db, &day.agent, &day.summarizer, ""),
    );
    let out =
        crate::support::cli::bridge(&["--config", &cli_config, "digest", "--date", "2026-12-02"])
            .output()
            .expect("the CLI runs");
    let printed = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{printed}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        printed.contains(&FakeSummarizer::summary_of(plan_text)),
        "{printed}"
    );
    assert!(printed.contains("run: 2026-12-02 (manual)"), "{printed}");

    // Once per date.
    let (status, again) = run_now(&app).await;
    assert_eq!(status, 409, "{again}");
    assert_eq!(again["error"]["code"], "digest_already_ran");
    assert_eq!(day.summarizer.transcripts().len(), 4);

    // The next day, the kept sessions' text is still there to summarize; the reset ones
    // had nothing new said, so they are not in it.
    day.clock.advance(Duration::from_secs(24 * 3600));
    let (status, next) = run_now(&app).await;
    assert_eq!(status, 200, "{next}");
    assert_eq!(next["date"], "2026-12-03");
    let keys: Vec<String> = outcomes(&next).into_iter().map(|o| o.0).collect();
    assert_eq!(keys, [key("om_empty"), key("om_fail"), key("om_slow")]);
    app.stop().await.expect("stops");
}
both_backends!(
    written_then_reset_and_every_failure_kept,
    written_then_reset_and_every_failure_kept
);

async fn no_key_keeps_every_session_but_the_short(db: TestDb) {
    let day = Day::new(db).await;
    let mut app = day.app("", false).await;
    thread(&mut app, "om_plan", PLAN, &[]).await;
    thread(&mut app, "om_hi", "hi", &[]).await;
    let plan = session_id(&app, "om_plan").await;
    let (status, body) = run_now(&app).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        outcomes(&body),
        [
            triple("om_hi", "reset", "short"),
            triple("om_plan", "kept", "no_api_key")
        ]
    );
    assert!(
        day.summarizer.transcripts().is_empty(),
        "no call without a key"
    );
    assert_eq!(session_id(&app, "om_plan").await, plan);
    assert!(
        digest_of(&body, "om_plan")["detail"]
            .as_str()
            .unwrap_or_default()
            .contains("FEISHU_BRIDGE_DIGEST_API_KEY")
    );
    assert!(body["run"]["file"].is_null(), "no dir, no file");
    app.stop().await.expect("stops");
}
both_backends!(
    no_key_keeps_every_session_but_the_short,
    no_key_keeps_every_session_but_the_short
);

async fn an_unreadable_transcript_keeps_its_session(db: TestDb) {
    let day = Day::new(db).await;
    let mut app = day.app("", true).await;
    thread(&mut app, "om_plan", PLAN, &[]).await;
    thread(
        &mut app,
        "om_odd",
        "a conversation that a newer version wrote",
        &[],
    )
    .await;
    let odd = session_id(&app, "om_odd").await;
    // A record of a type this version does not know (as a newer version may write).
    let corrupt = "UPDATE thread_context_events SET event_type = 'from_the_future' \
                   WHERE message_id = 'om_odd' AND event_type = 'user_request'";
    match day.db.kind {
        Kind::Sqlite => day.db.exec(&["PRAGMA ignore_check_constraints = ON", corrupt]).await,
        Kind::Postgres => {
            day.db.exec(&[
                    "ALTER TABLE thread_context_events DROP CONSTRAINT thread_context_events_event_type_check",
                    corrupt,
                ],
            )
            .await
        }
    }
    let (status, body) = run_now(&app).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        outcomes(&body),
        [
            triple("om_odd", "kept", "unreadable_transcript"),
            triple("om_plan", "reset", "summarized")
        ],
        "{body}"
    );
    assert_eq!(session_id(&app, "om_odd").await, odd);
    assert_eq!(day.summarizer.transcripts().len(), 1);
    app.stop().await.expect("stops");
}
both_backends!(
    an_unreadable_transcript_keeps_its_session,
    an_unreadable_transcript_keeps_its_session
);

async fn a_digest_file_that_cannot_be_written_resets_nothing(db: TestDb) {
    let day = Day::new(db).await;
    // A file where the digest directory should be.
    let blocked = day.dir.path().join("blocked");
    std::fs::write(&blocked, "not a directory").expect("file");
    let mut app = day
        .app(&format!("dir = \"{}\"", blocked.display()), true)
        .await;
    thread(&mut app, "om_plan", PLAN, &[]).await;
    thread(&mut app, "om_hi", "hi", &[]).await;
    let ids = (
        session_id(&app, "om_plan").await,
        session_id(&app, "om_hi").await,
    );
    let (status, body) = run_now(&app).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        outcomes(&body),
        [
            triple("om_hi", "kept", "file_write_failed"),
            triple("om_plan", "kept", "file_write_failed")
        ],
        "{body}"
    );
    // The summary is kept in the database all the same.
    assert!(digest_of(&body, "om_plan")["summary"].is_string(), "{body}");
    assert!(body["run"]["file"].is_null());
    assert_eq!(
        (
            session_id(&app, "om_plan").await,
            session_id(&app, "om_hi").await
        ),
        ids
    );
    app.stop().await.expect("stops");
}
both_backends!(
    a_digest_file_that_cannot_be_written_resets_nothing,
    a_digest_file_that_cannot_be_written_resets_nothing
);

async fn a_reset_that_fails_is_recorded_and_changes_nothing(db: TestDb) {
    let day = Day::new(db).await;
    let mut app = day.app(&day.with_dir(), true).await;
    thread(&mut app, "om_plan", PLAN, &[]).await;
    thread(
        &mut app,
        "om_locked",
        "a session whose reset the database refuses",
        &[],
    )
    .await;
    let locked = session_id(&app, "om_locked").await;
    let refused = key("om_locked");
    match day.db.kind {
        Kind::Sqlite => {
            let trigger = format!(
                "CREATE TRIGGER refuse_reset BEFORE UPDATE ON sessions \
                 WHEN OLD.session_key = '{refused}' BEGIN SELECT RAISE(ABORT, 'resets refused here'); END"
            );
            day.db.exec(&[&trigger]).await;
        }
        Kind::Postgres => {
            let function = format!(
                "CREATE FUNCTION refuse_reset() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN \
                 IF OLD.session_key = '{refused}' THEN RAISE EXCEPTION 'resets refused here'; END IF; \
                 RETURN NEW; END $$"
            );
            day.db
                .exec(&[
                    &function,
                    "CREATE TRIGGER refuse_reset BEFORE UPDATE ON sessions \
                     FOR EACH ROW EXECUTE FUNCTION refuse_reset()",
                ])
                .await;
        }
    }
    let (status, body) = run_now(&app).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        outcomes(&body),
        [
            triple("om_locked", "reset_failed", "database_error"),
            triple("om_plan", "reset", "summarized")
        ],
        "{body}"
    );
    assert_eq!(session_id(&app, "om_locked").await, locked);
    assert_eq!(body["run"]["failed"], 1);
    let file = std::fs::read_to_string(day.dir.path().join("digest/2026-12-02.md"))
        .expect("the digest file");
    assert!(file.contains("kept, untouched: the reset failed"), "{file}");
    app.stop().await.expect("stops");
}
both_backends!(
    a_reset_that_fails_is_recorded_and_changes_nothing,
    a_reset_that_fails_is_recorded_and_changes_nothing
);

async fn a_crash_between_write_and_reset_resets_nothing(db: TestDb) {
    let day = Day::new(db).await;
    let more = day.with_dir();
    let mut app = day.app(&more, true).await;
    thread(&mut app, "om_plan", PLAN, &[]).await;
    let plan = session_id(&app, "om_plan").await;
    // The run stops after its writes, as a crash there would leave it.
    let outcome = app
        .state
        .digest
        .run(DigestTrigger::Manual, Stage::Written)
        .await
        .expect("the run");
    let Outcome::Ran { digests, .. } = outcome else {
        panic!("it ran: {outcome:?}");
    };
    assert_eq!(digests[0].status.as_str(), "written");
    app.stop().await.expect("stops");

    // Restarted: the date does not run again, and nothing was reset.
    let app = day.app(&more, true).await;
    assert_eq!(session_id(&app, "om_plan").await, plan);
    let (status, again) = run_now(&app).await;
    assert_eq!(status, 409, "{again}");
    let listed = app.get("/digests?date=2026-12-02").await.json;
    assert_eq!(
        outcomes(&listed),
        [triple("om_plan", "written", "summarized")]
    );
    assert!(listed["run"]["finished_at"].is_null(), "{listed}");
    let file = std::fs::read_to_string(day.dir.path().join("digest/2026-12-02.md"))
        .expect("written before the resets");
    assert!(
        file.contains("written; the session is reset once this file is on disk"),
        "{file}"
    );
    assert_eq!(session_id(&app, "om_plan").await, plan);

    // The next day takes it up: its text was never marked done.
    day.clock.advance(Duration::from_secs(24 * 3600));
    let (status, next) = run_now(&app).await;
    assert_eq!(status, 200, "{next}");
    assert_eq!(outcomes(&next), [triple("om_plan", "reset", "summarized")]);
    assert_ne!(session_id(&app, "om_plan").await, plan);
    app.stop().await.expect("stops");
}
both_backends!(
    a_crash_between_write_and_reset_resets_nothing,
    a_crash_between_write_and_reset_resets_nothing
);

async fn the_schedule_runs_in_its_window_once_and_skips_a_missed_one(db: TestDb) {
    let day = Day::new(db).await;
    // Before the window: the schedule waits.
    day.clock.set(at("2026-12-02", "03:00"));
    let mut app = day.app("", true).await;
    thread(&mut app, "om_plan", PLAN, &[]).await;
    let digest = app.state.digest.clone();
    assert_eq!(digest.tick().await.expect("tick"), Outcome::NotDue);

    // The process "was down" until after the window: the day is skipped, no date kept.
    day.clock.set(at("2026-12-02", "09:00"));
    let skipped = digest.tick().await.expect("tick");
    assert!(
        matches!(skipped, Outcome::OutsideWindow { .. } | Outcome::NotDue),
        "{skipped:?}"
    );
    assert!(app.get("/digests").await.json["date"].is_null());
    let metrics = app.get_anonymous("/metrics").await.text;
    assert_eq!(
        metric(
            &metrics,
            "feishu_bridge_digest_runs_total",
            &[r#"outcome="outside_window""#]
        ),
        Some(1.0),
        "{metrics}"
    );

    // The next day, inside the window, it runs — once, across a restart.
    day.clock.set(at("2026-12-03", "04:20"));
    digest.tick().await.expect("tick");
    let listed = app.get("/digests").await.json;
    assert_eq!(listed["date"], "2026-12-03", "{listed}");
    assert_eq!(listed["run"]["trigger"], "schedule");
    assert_eq!(
        outcomes(&listed),
        [triple("om_plan", "reset", "summarized")]
    );
    let started = listed["run"]["started_at"].clone();
    app.stop().await.expect("stops");

    day.clock.advance(Duration::from_secs(600));
    let app = day.app("", true).await;
    let again = app.state.digest.tick().await.expect("tick");
    assert!(
        matches!(again, Outcome::AlreadyRan { .. } | Outcome::NotDue),
        "{again:?}"
    );
    let listed = app.get("/digests").await.json;
    assert_eq!(listed["run"]["started_at"], started);
    assert_eq!(day.summarizer.transcripts().len(), 1);
    app.stop().await.expect("stops");
}
both_backends!(
    the_schedule_runs_in_its_window_once_and_skips_a_missed_one,
    the_schedule_runs_in_its_window_once_and_skips_a_missed_one
);

async fn nothing_to_see_records_no_date(db: TestDb) {
    let summarizer = FakeSummarizer::start().await;
    let text = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\nadmin_token = \"{ADMIN}\"\n\
         [database]\nurl = \"{}\"\n[digest]\nenabled = true\n\
         [digest.summarizer]\nbase_url = \"{}\"\nmodel = \"cheap\"\n",
        db.url, summarizer.base
    );
    let clock = Arc::new(ManualClock::at(at("2026-12-02", "12:00")));
    let app = TestApp::spawn_with_clock(load(&text, true), clock).await;
    let (status, body) = run_now(&app).await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["error"]["code"], "nothing_to_digest");
    assert!(app.get("/digests").await.json["run"].is_null());
    assert_eq!(db.count("digest_runs").await, 0);
    app.stop().await.expect("stops");
}
both_backends!(
    nothing_to_see_records_no_date,
    nothing_to_see_records_no_date
);

async fn a_store_that_cannot_list_sessions_records_no_date(db: TestDb) {
    let day = Day::new(db).await;
    let mut app = day.app("", true).await;
    thread(&mut app, "om_plan", PLAN, &[]).await;
    // The sessions cannot be read (as when the database is down for that query).
    day.db
        .exec(&["ALTER TABLE sessions RENAME TO sessions_away"])
        .await;
    let (status, body) = run_now(&app).await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["error"]["code"], "store_unavailable");
    assert_eq!(day.db.count("digest_runs").await, 0, "no date recorded");
    assert!(day.summarizer.transcripts().is_empty());
    // Back: the same date runs.
    day.db
        .exec(&["ALTER TABLE sessions_away RENAME TO sessions"])
        .await;
    let (status, body) = run_now(&app).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(outcomes(&body), [triple("om_plan", "reset", "summarized")]);
    app.stop().await.expect("stops");
}
both_backends!(
    a_store_that_cannot_list_sessions_records_no_date,
    a_store_that_cannot_list_sessions_records_no_date
);
