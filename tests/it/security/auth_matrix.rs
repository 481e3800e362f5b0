//! The admin token guards every route that shows or changes conversation content: with
//! a turn, a session, a verdict, a gathered feed and a digest in the database, each admin
//! route answers 401 to a missing or wrong token without a trace of that content (and
//! changes nothing), and shows the content to the right token. The open routes answer
//! anyone; the signed ones take no admin token in place of a signature.

use std::{collections::BTreeSet, sync::Arc};

use feishu_bridge::util::{ManualClock, UnixMs};
use reqwest::Method;
use serde_json::Value;

use super::routes::{Guard, guarded_by};
use crate::support::{
    ADMIN, Answer, TestApp, TestDb,
    app::answer,
    config, config_toml,
    fake_summarizer::{FakeSummarizer, KEY},
    feishu::Msg,
};

const ASKED: &str = "matrix: the launch moves to the ninth";
const SAID: &str = "matrix: the budget doubles, keep it quiet";
const SUMMARY: &str = "agreed on the plan";
const SESSION: &str = "thread:oc_group:om_root";
const DATE: &str = "2026-12-02";

/// Everything a caller without the token must not see.
const CONTENT: &[&str] = &[ASKED, SAID, SUMMARY, "om_root", "oc_group", "ou_alice"];

/// `Authorization` values that are not the admin token (`None`: no header).
fn wrong_credentials() -> Vec<Option<String>> {
    let short = &ADMIN[..ADMIN.len() - 1];
    vec![
        None,
        Some("Bearer wrong-token".into()),
        Some("Bearer ".into()),
        Some(format!("Bearer {short}")),
        Some(format!("Bearer {ADMIN}x")),
        Some(format!("Bearer {}", ADMIN.to_uppercase())),
        Some(format!("Basic {ADMIN}")),
        Some(ADMIN.into()),
        Some(format!("Bearer Bearer {ADMIN}")),
    ]
}

/// One request to an admin route, and what its answer shows the right token.
struct Probe {
    method: Method,
    route: &'static str,
    path: String,
    /// Text the authorized answer contains; `None` for routes that change something,
    /// which are sent with the token only at the end.
    shows: Option<&'static str>,
}

fn probe(method: Method, route: &'static str, path: String, shows: Option<&'static str>) -> Probe {
    Probe {
        method,
        route,
        path,
        shows,
    }
}

fn probes(turn_id: &str) -> Vec<Probe> {
    let feed = format!("?profile=planner&session_key={SESSION}");
    vec![
        probe(Method::GET, "/status", "/status".into(), Some("planner")),
        probe(Method::GET, "/sessions", "/sessions".into(), Some(SESSION)),
        probe(
            Method::GET,
            "/sessions/{session_key}",
            format!("/sessions/{SESSION}?profile=planner"),
            Some("session_id"),
        ),
        probe(
            Method::GET,
            "/explain/message/{message_id}",
            "/explain/message/om_root?profile=planner".into(),
            Some("invoked"),
        ),
        probe(
            Method::GET,
            "/explain/{root_msg_id}",
            "/explain/om_root?profile=planner&verbose=true".into(),
            Some(ASKED),
        ),
        probe(
            Method::GET,
            "/turns",
            "/turns?verbose=true".into(),
            Some(ASKED),
        ),
        probe(
            Method::GET,
            "/turns/{turn_id}",
            format!("/turns/{turn_id}?verbose=true"),
            Some(ASKED),
        ),
        probe(Method::GET, "/feed", format!("/feed{feed}"), Some(SAID)),
        probe(
            Method::GET,
            "/digests",
            format!("/digests?date={DATE}"),
            None,
        ),
        probe(
            Method::POST,
            "/feed/flush",
            format!("/feed/flush{feed}"),
            None,
        ),
        probe(Method::POST, "/digests/run", "/digests/run".into(), None),
        probe(
            Method::DELETE,
            "/sessions/{session_key}",
            format!("/sessions/{SESSION}?profile=planner"),
            None,
        ),
        // Changes nothing: a what-if only reads.
        probe(
            Method::POST,
            "/explain/{root_msg_id}/what-if",
            "/explain/om_root/what-if?profile=planner".into(),
            Some("\"unchanged\":true"),
        ),
    ]
}

async fn send(app: &TestApp, method: Method, path: &str, auth: Option<&str>) -> Answer {
    let mut rb = app.client.request(method, format!("{}{path}", app.base));
    if let Some(value) = auth {
        rb = rb.header(reqwest::header::AUTHORIZATION, value);
    }
    answer(rb.send().await.expect("request sent")).await
}

async fn admin(app: &TestApp, method: Method, path: &str) -> Answer {
    send(app, method, path, Some(&format!("Bearer {ADMIN}"))).await
}

/// The planner (echo, replies recorded) with the feed and the digest on, at noon of
/// [`DATE`] (outside the digest's window: only `POST /digests/run` runs it).
async fn app_with_content(db: &TestDb, summarizer: &FakeSummarizer) -> TestApp {
    let text = format!(
        "{}\n[feed]\nenabled = true\n[digest]\nenabled = true\ntimezone = \"UTC\"\n\
         [digest.summarizer]\nbase_url = \"{}\"\nmodel = \"cheap\"\ntimeout_secs = 5\n",
        config_toml(db, "dry_run = true\n"),
        summarizer.base
    );
    let cfg = feishu_bridge::config::load_from_str(&text, &|k| {
        (k == "FEISHU_BRIDGE_DIGEST_API_KEY").then(|| KEY.to_string())
    })
    .expect("test config is valid");
    let noon: jiff::Timestamp = format!("{DATE}T12:00:00Z").parse().expect("instant");
    let clock = Arc::new(ManualClock::at(UnixMs(noon.as_millisecond())));
    let mut app = TestApp::spawn_with_clock(cfg, clock).await;
    let asked = Msg::group("om_root", ASKED).at_bot();
    assert_eq!(app.ask(&asked).await, "answered");
    app.route(&Msg::group("om_said", SAID).in_thread("om_root"))
        .await;
    app
}

fn segments(feed: &Value) -> usize {
    feed["segments"].as_array().map_or(0, Vec::len)
}

#[tokio::test]
async fn admin_routes_answer_401_to_a_missing_or_wrong_token_and_leak_nothing() {
    let db = TestDb::sqlite();
    let summarizer = FakeSummarizer::start().await;
    let app = app_with_content(&db, &summarizer).await;
    let turn_id = app.turn_of("om_root").await.turn_id;
    let probes = probes(&turn_id);
    let probed: BTreeSet<String> = probes
        .iter()
        .map(|p| format!("{} {}", p.method, p.route))
        .collect();
    assert_eq!(
        probed,
        guarded_by(Guard::Admin),
        "every admin route is probed"
    );
    let session_before = admin(&app, Method::GET, &probes[2].path).await;
    assert_eq!(session_before.status, 200, "{}", session_before.text);

    for p in &probes {
        for auth in wrong_credentials() {
            let a = send(&app, p.method.clone(), &p.path, auth.as_deref()).await;
            let what = format!("{} {} with {auth:?}", p.method, p.path);
            assert_eq!(
                (a.status, a.code()),
                (401, "unauthorized"),
                "{what}: {}",
                a.text
            );
            for content in CONTENT {
                assert!(!a.text.contains(content), "{what} showed {content:?}");
            }
        }
    }

    // The refused changes did not happen: no digest ran, the feed was not packed, the
    // session was not reset.
    let digests = admin(&app, Method::GET, &format!("/digests?date={DATE}")).await;
    assert_eq!(digests.status, 200, "{}", digests.text);
    assert_eq!(digests.json["digests"].as_array().map(Vec::len), Some(0));
    let feed = admin(&app, Method::GET, &probes[7].path).await;
    assert_eq!(segments(&feed.json), 0, "{}", feed.text);
    let session_after = admin(&app, Method::GET, &probes[2].path).await;
    assert_eq!(
        session_after.json["session_id"],
        session_before.json["session_id"]
    );

    // The right token sees the content, so a leak above would have shown.
    for p in probes.iter().filter(|p| p.shows.is_some()) {
        let a = admin(&app, p.method.clone(), &p.path).await;
        let shows = p.shows.unwrap_or_default();
        assert_eq!(a.status, 200, "{} {}: {}", p.method, p.path, a.text);
        assert!(
            a.text.contains(shows),
            "{} {} lacks {shows:?}: {}",
            p.method,
            p.path,
            a.text
        );
    }
    let flushed = admin(&app, Method::POST, &probes[9].path).await;
    assert_eq!(flushed.status, 200, "{}", flushed.text);
    assert_eq!(
        segments(&admin(&app, Method::GET, &probes[7].path).await.json),
        1
    );
    let ran = admin(&app, Method::POST, "/digests/run").await;
    assert_eq!(ran.status, 200, "{}", ran.text);
    let digests = admin(&app, Method::GET, &format!("/digests?date={DATE}")).await;
    assert!(digests.text.contains(SUMMARY), "{}", digests.text);
    let reset = admin(&app, Method::DELETE, &probes[11].path).await;
    assert_eq!(reset.status, 200, "{}", reset.text);
    app.stop().await.expect("clean stop");
}

#[tokio::test]
async fn open_routes_answer_anyone_and_signed_routes_take_no_admin_token() {
    let db = TestDb::sqlite();
    let app = TestApp::spawn(config(&config_toml(&db, "dry_run = true\n"))).await;
    for route in guarded_by(Guard::Open)
        .iter()
        .chain(&guarded_by(Guard::Metrics))
    {
        let path = route.trim_start_matches("GET ");
        for auth in wrong_credentials() {
            let a = send(&app, Method::GET, path, auth.as_deref()).await;
            assert_eq!(a.status, 200, "{route} with {auth:?}: {}", a.text);
        }
    }
    // The admin token is no signature: each signed route still refuses the request.
    for route in guarded_by(Guard::Signed) {
        let (method, path) = route.split_once(' ').expect("METHOD /path");
        let path = path
            .replace("{profile}", "planner")
            .replace("{turn_id}", "t_missing")
            .replace("{ask_id}", "q_missing");
        let method = Method::from_bytes(method.as_bytes()).expect("a method");
        let a = app
            .client
            .request(method, format!("{}{path}", app.base))
            .bearer_auth(ADMIN)
            .header("content-type", "application/json")
            .body(r#"{"output":"hi"}"#)
            .send()
            .await
            .expect("sent");
        let a = answer(a).await;
        assert_eq!(
            (a.status, a.code()),
            (401, "bad_signature"),
            "{route}: {}",
            a.text
        );
    }
    // Nor is it a media token: a media URL is its own credential.
    for route in guarded_by(Guard::Token) {
        let path = route
            .trim_start_matches("GET ")
            .replace("{token}", "not.a-token");
        let a = send(&app, Method::GET, &path, Some(&format!("Bearer {ADMIN}"))).await;
        assert_eq!(
            (a.status, a.code()),
            (403, "bad_media_token"),
            "{route}: {}",
            a.text
        );
    }
    app.stop().await.expect("clean stop");

    // With protect_metrics, /metrics is an admin route like the others.
    let mut cfg = config(&config_toml(&db, "dry_run = true\n"));
    cfg.server.protect_metrics = true;
    let app = TestApp::spawn(cfg).await;
    for auth in wrong_credentials() {
        let a = send(&app, Method::GET, "/metrics", auth.as_deref()).await;
        assert_eq!((a.status, a.code()), (401, "unauthorized"), "{auth:?}");
        assert!(!a.text.contains("feishu_bridge_"), "{}", a.text);
    }
    let a = admin(&app, Method::GET, "/metrics").await;
    assert!(
        a.status == 200 && a.text.contains("feishu_bridge_"),
        "{}",
        a.text
    );
    app.stop().await.expect("clean stop");
}
