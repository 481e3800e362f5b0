//! The operating surface: health, readiness, status, metrics, OpenAPI.

use crate::{
    both_backends,
    support::{ADMIN, Signer, TestApp, TestDb, config, config_toml},
};

async fn health_status_and_auth(db: TestDb) {
    let app = TestApp::spawn(config(&config_toml(&db, ""))).await;
    let a = app.get_anonymous("/healthz").await;
    assert_eq!((a.status, a.json["status"].as_str()), (200, Some("ok")));
    let a = app.get_anonymous("/readyz").await;
    assert_eq!((a.status, a.json["status"].as_str()), (200, Some("ready")));

    // /status needs the bearer token.
    let a = app.get_anonymous("/status").await;
    assert_eq!((a.status, a.code()), (401, "unauthorized"));
    let wrong = app
        .client
        .get(format!("{}/status", app.base))
        .bearer_auth("wrong-token")
        .send()
        .await
        .expect("sent");
    assert_eq!(wrong.status(), 401);
    let a = app.get("/status").await;
    assert_eq!(a.status, 200, "{}", a.text);
    let backend = match db.kind {
        crate::support::Kind::Sqlite => "sqlite",
        crate::support::Kind::Postgres => "postgres",
    };
    assert_eq!(a.json["database"]["backend"], backend);
    assert_eq!(a.json["database"]["ok"], true);
    assert_eq!(a.json["profiles"][0]["name"], "planner");
    assert_eq!(a.json["profiles"][0]["agent_kind"], "echo");
    assert_eq!(a.json["profiles"][0]["encrypted"], true);
    assert_eq!(a.json["version"], env!("CARGO_PKG_VERSION"));
    // The digest's zone in force, and that it is the default; the feed of every profile.
    let digest = &a.json["digest"];
    assert_eq!(
        (
            &digest["timezone"],
            &digest["timezone_set"],
            &digest["include_dms"]
        ),
        (&"UTC".into(), &false.into(), &true.into()),
        "{digest}"
    );
    assert_eq!(
        a.json["feed"],
        serde_json::json!({"enabled": false, "profiles": [
            {"profile": "planner", "gathered": 0, "waiting": 0, "attached": 0}
        ]})
    );
    for secret in [
        crate::support::feishu::ENCRYPT_KEY,
        crate::support::feishu::TOKEN,
        ADMIN,
    ] {
        assert!(!a.text.contains(secret), "/status leaked a secret");
    }

    // Unknown paths answer in the same JSON shape.
    let a = app.get_anonymous("/no/such/route").await;
    assert_eq!((a.status, a.code()), (404, "route_not_found"));
    app.stop().await.expect("clean stop");
}
both_backends!(
    health_readiness_and_bearer_protected_status,
    health_status_and_auth
);

/// A bridge on `db` that has answered an event, its retry and a request for an unknown
/// profile, and its `/metrics` text.
async fn scraped(db: &TestDb) -> (TestApp, String) {
    let mut app = TestApp::spawn(config(&config_toml(db, ""))).await;
    let signer = Signer::default();
    app.event(&signer.message("ev-m", "om-m", "hi")).await;
    assert_eq!(app.processed("ev-m").await.outcome, "done");
    app.event(&signer.message("ev-m", "om-m", "hi")).await;
    app.post("nobody", "event", &signer.message("ev-n", "om-n", "hi"))
        .await;
    let a = app.get_anonymous("/metrics").await;
    assert_eq!(a.status, 200);
    (app, a.text)
}

async fn metrics_series_and_protection(db: TestDb) {
    let (app, text) = scraped(&db).await;
    for name in [
        "feishu_bridge_webhook_requests_total",
        "feishu_bridge_http_request_duration_seconds_bucket",
        "feishu_bridge_inbox_pending",
        "feishu_bridge_inbox_failed",
        "feishu_bridge_events_processed_total",
        "feishu_bridge_inbox_commit_batch_size_bucket",
    ] {
        assert!(text.contains(name), "{name} missing:\n{text}");
    }
    assert!(
        text.contains(r#"route="/webhook/{profile}/event""#),
        "durations are labelled by route template"
    );

    // With protect_metrics, the token is required.
    app.stop().await.expect("clean stop");
    let mut cfg = config(&config_toml(&db, ""));
    cfg.server.protect_metrics = true;
    let app = TestApp::spawn(cfg).await;
    assert_eq!(app.get_anonymous("/metrics").await.status, 401);
    assert_eq!(app.get("/metrics").await.status, 200);
    app.stop().await.expect("clean stop");
}
both_backends!(
    metrics_name_their_series_and_can_be_protected,
    metrics_series_and_protection
);

/// The exposition format is promtool's to judge (on SQLite: the metrics do not depend on
/// the backend). Compiled as ignored when the build found no `promtool`, unless CI
/// requires it (`FEISHU_BRIDGE_TEST_REQUIRE_PROMTOOL=1`): then a missing one fails.
#[tokio::test]
#[cfg_attr(
    promtool_missing,
    ignore = "promtool was not on the PATH when the tests were built"
)]
async fn metrics_pass_promtool_check_metrics() {
    use std::{
        io::Write,
        process::{Command, Stdio},
    };

    let db = TestDb::sqlite();
    let (app, text) = scraped(&db).await;
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| {
            panic!(
                "promtool could not be started ({e}): install it (Debian package prometheus); \
                 either FEISHU_BRIDGE_TEST_REQUIRE_PROMTOOL=1 requires this check, or promtool \
                 was there when the tests were built (the next `cargo test` builds it as ignored)"
            )
        });
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(text.as_bytes())
        .expect("write");
    let out = child.wait_with_output().expect("promtool ran");
    assert!(
        out.status.success(),
        "promtool check metrics failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    app.stop().await.expect("clean stop");
}

#[test]
fn openapi_yaml_matches_the_router() {
    let committed = include_str!("../../openapi.yaml");
    let generated = feishu_bridge::http::openapi::yaml();
    assert!(
        committed == generated,
        "openapi.yaml is out of date: regenerate with `cargo run -- openapi > openapi.yaml`"
    );
}

#[tokio::test]
async fn every_documented_route_is_served() {
    let db = TestDb::sqlite();
    let app = TestApp::spawn(config(&config_toml(&db, ""))).await;
    let doc = feishu_bridge::http::openapi::document();
    let mut seen = 0;
    for (path, item) in &doc.paths.paths {
        let concrete = path.replace("{profile}", "planner");
        let ops = [
            ("GET", item.get.is_some()),
            ("POST", item.post.is_some()),
            ("DELETE", item.delete.is_some()),
            ("PUT", item.put.is_some()),
        ];
        for (method, present) in ops {
            if !present {
                continue;
            }
            let m = reqwest::Method::from_bytes(method.as_bytes()).expect("method");
            let resp = app
                .client
                .request(m, format!("{}{concrete}", app.base))
                .bearer_auth(ADMIN)
                .body("{}")
                .send()
                .await
                .expect("sent");
            let status = resp.status().as_u16();
            let text = resp.text().await.unwrap_or_default();
            assert!(
                !text.contains("route_not_found") && status != 405,
                "{method} {path} is documented but not routed ({status})"
            );
            seen += 1;
        }
    }
    assert!(seen >= 6, "all documented operations were tried");
    app.stop().await.expect("clean stop");
}
