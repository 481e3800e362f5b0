//! The binary itself: config errors, the first run's hints, migrate, healthcheck, serve
//! with SIGTERM, and logs that never carry a secret or a message's text, even at trace
//! level.

use crate::support::{
    Signer, TestApp, TestDb,
    cli::{Served, bridge, write_config},
    config, config_toml, feishu,
};

#[test]
fn check_config_names_the_bad_key_and_exits_2() {
    let dir = tempfile::tempdir().expect("dir");
    let path = write_config(
        &dir,
        "[[profiles]]\nname = \"planner\"\napp_id = \"cli_x\"\nverification_token = \"t\"\n\
         [[profiles]]\nname = \"coder\"\napp_id = \"cli_y\"\nverification_token = \"t\"\nencrypt_key = \"\"\n",
    );
    let out = bridge(&["--config", &path, "check-config"])
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("profiles[1].encrypt_key: "), "{stderr}");
}

#[test]
fn check_config_takes_secrets_from_the_environment_and_never_prints_them() {
    let dir = tempfile::tempdir().expect("dir");
    let path = write_config(
        &dir,
        "[[profiles]]\nname = \"planner\"\napp_id = \"cli_x\"\n",
    );
    let out = bridge(&["--config", &path, "check-config"])
        .env(
            "FEISHU_BRIDGE_PLANNER_VERIFICATION_TOKEN",
            "vt-from-env-123",
        )
        .env("FEISHU_BRIDGE_PLANNER_ENCRYPT_KEY", "ek-from-env-456")
        .env("FEISHU_BRIDGE_PLANNER_APP_SECRET", "as-from-env-012")
        .env("DATABASE_URL", "postgres://bridge:pw-789@db.example/hub")
        .output()
        .expect("runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("encrypt_key=set")
            && stdout.contains("postgres://bridge:***@db.example/hub"),
        "{stdout}"
    );
    for secret in [
        "vt-from-env-123",
        "ek-from-env-456",
        "as-from-env-012",
        "pw-789",
    ] {
        assert!(!stdout.contains(secret), "{secret} printed");
    }
}

#[test]
fn the_first_run_names_the_config_file_it_looked_for_and_the_demo() {
    let dir = tempfile::tempdir().expect("dir");
    // No config file anywhere. The database cannot be opened, so the run stops right
    // after its first lines instead of serving on the default port.
    let out = bridge(&[])
        .current_dir(dir.path())
        .env("DATABASE_URL", "sqlite://missing/bridge.db")
        .output()
        .expect("runs");
    let logs = String::from_utf8_lossy(&out.stderr);
    // The working directory as the binary sees it (symbolic links resolved).
    let cwd = dir.path().canonicalize().expect("canonical");
    let looked_for = cwd.join("feishu-bridge.toml");
    assert!(
        logs.contains(&format!("no config file at {}", looked_for.display())),
        "{logs}"
    );
    assert!(logs.contains("run `sh examples/demo.sh`"), "{logs}");
}

#[test]
fn migrate_creates_the_schema() {
    let db = TestDb::sqlite();
    let dir = tempfile::tempdir().expect("dir");
    let path = write_config(&dir, &format!("[database]\nurl = \"{}\"\n", db.url));
    let out = bridge(&["--config", &path, "migrate"])
        .output()
        .expect("runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("migrations applied"));
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    assert_eq!(rt.block_on(db.count("inbox_events")), 0, "the table exists");
}

// Multi-threaded: the child process is waited for synchronously while the app serves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn healthcheck_exits_0_when_healthy_and_1_when_not() {
    let db = TestDb::sqlite();
    let app = TestApp::spawn(config(&config_toml(&db, ""))).await;
    let ok = bridge(&["healthcheck", &format!("{}/healthz", app.base)])
        .output()
        .expect("runs");
    assert!(ok.status.success());
    let missing = bridge(&["healthcheck", &format!("{}/nope", app.base)])
        .output()
        .expect("runs");
    assert_eq!(missing.status.code(), Some(1));
    app.stop().await.expect("clean stop");
    let closed = bridge(&[
        "healthcheck",
        "--timeout",
        "2",
        "http://127.0.0.1:9/healthz",
    ])
    .output()
    .expect("runs");
    assert_eq!(closed.status.code(), Some(1));
}

#[tokio::test]
async fn serve_stops_cleanly_on_sigterm_and_logs_no_secret_or_message_text() {
    let db = TestDb::sqlite();
    let dir = tempfile::tempdir().expect("dir");
    let path = write_config(
        &dir,
        &format!(
            "[server]\nlisten = \"127.0.0.1:0\"\n[database]\nurl = \"{}\"\n\
             [[profiles]]\nname = \"planner\"\napp_id = \"{}\"\nencrypt_key = \"{}\"\n\
             [[profiles]]\nname = \"plain\"\napp_id = \"cli_plain\"\nverification_token = \"plain-vt-never-logged\"\ndry_run = true\n",
            db.url,
            feishu::APP_ID,
            feishu::ENCRYPT_KEY
        ),
    );
    let served = Served::start(
        &path,
        "trace",
        &[
            ("FEISHU_BRIDGE_PLANNER_VERIFICATION_TOKEN", feishu::TOKEN),
            (
                "FEISHU_BRIDGE_PLANNER_APP_SECRET",
                "app-secret-never-logged",
            ),
            ("FEISHU_BRIDGE_ADMIN_TOKEN", "admin-secret-never-logged"),
        ],
    )
    .await;
    let base = served.base.clone();
    let client = reqwest::Client::new();
    let signer = Signer::default();
    let text = "the quarterly numbers are confidential";
    for req in [
        signer.message("ev-log-1", "om-log-1", text),
        signer.message("ev-log-1", "om-log-1", text),
        signer.message("ev-log-2", "om-log-2", text).unsigned(),
        Signer {
            token: "wrong".into(),
            ..Signer::default()
        }
        .message("ev-log-3", "om-log-3", text),
    ] {
        let r = req.apply(client.post(format!("{base}/webhook/planner/event")));
        r.send().await.expect("sent");
    }
    // A plaintext profile: the message text travels in clear inside the body.
    let plain = Signer {
        encrypt_key: None,
        token: "plain-vt-never-logged".into(),
    };
    let req = plain.message("ev-log-4", "om-log-4", text);
    let r = req.apply(client.post(format!("{base}/webhook/plain/event")));
    assert_eq!(r.send().await.expect("sent").status(), 200);
    let status = client
        .get(format!("{base}/status"))
        .bearer_auth("admin-secret-never-logged")
        .send()
        .await
        .expect("sent");
    assert_eq!(status.status(), 200);

    let (exit, logs) = served.stop();
    assert!(exit.success(), "serve exits 0 on SIGTERM, got {exit:?}");
    assert!(
        logs.contains("shutting down"),
        "graceful shutdown is logged"
    );
    assert!(logs.contains("callback stored"), "trace logs were captured");
    for secret in [
        feishu::ENCRYPT_KEY,
        feishu::TOKEN,
        "app-secret-never-logged",
        "admin-secret-never-logged",
        "plain-vt-never-logged",
        text,
    ] {
        assert!(!logs.contains(secret), "{secret:?} reached the logs");
    }
}
