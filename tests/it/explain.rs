//! `GET /explain/{root_msg_id}` and the `explain` CLI.

use crate::support::{
    ADMIN, TestApp, TestDb,
    cli::{bridge, write_config},
    config, config_toml,
    feishu::Msg,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_over_rest_and_from_the_cli_with_the_server_down() {
    let db = TestDb::sqlite();
    let text = config_toml(&db, "[context]\nshared_thread_enabled = true\n");
    let mut app = TestApp::spawn(config(&text)).await;
    app.route(&Msg::group("om_root", "We need a login fix"))
        .await;
    app.route(
        &Msg::group("om_talk", "callbacks time out")
            .in_thread("om_root")
            .by("ou_bob"),
    )
    .await;
    let first = Msg::group("om_q1", "look at it")
        .at_bot()
        .in_thread("om_root");
    app.ask(&first).await;
    let second = Msg::group("om_q2", "and the tests")
        .at_bot()
        .in_thread("om_root");
    app.ask(&second).await;

    // JSON: the latest decision by default, with the SPEC fields.
    let e = app.get("/explain/om_root?profile=planner").await;
    assert_eq!(e.status, 200, "{}", e.text);
    for field in [
        "decision_id",
        "profile",
        "bridge_id",
        "root_msg_id",
        "message_id",
        "mode",
        "request_text",
        "context_chars",
        "prompt_chars",
        "selected",
        "excluded",
        "diagnostics",
    ] {
        assert!(!e.json[field].is_null(), "{field} missing: {}", e.text);
    }
    assert_eq!(e.json["message_id"], "om_q2");
    assert!(e.json.get("prompt_preview").is_none(), "only with verbose");
    let latest_id = e.json["decision_id"].as_i64().expect("id");

    // By message and by decision id; the profile defaults to the first one.
    let by_msg = app.get("/explain/om_root?message_id=om_q1").await;
    assert_eq!(by_msg.json["message_id"], "om_q1");
    let by_id = app
        .get(&format!(
            "/explain/om_root?decision_id={latest_id}&verbose=true"
        ))
        .await;
    assert_eq!(by_id.json["decision_id"], latest_id);
    assert!(
        by_id.json["prompt_preview"]
            .as_str()
            .unwrap_or_default()
            .contains("[User request]\nand the tests")
    );
    assert_eq!(app.get("/explain/om_nothing").await.code(), "not_found");
    assert_eq!(
        app.get("/explain/om_root?profile=ghost").await.code(),
        "unknown_profile"
    );
    assert_eq!(app.get_anonymous("/explain/om_root").await.status, 401);

    // Text report for humans.
    let report = app
        .client
        .get(format!(
            "{}/explain/om_root?profile=planner&verbose=true",
            app.base
        ))
        .bearer_auth(ADMIN)
        .header("accept", "text/plain")
        .send()
        .await
        .expect("sent")
        .text()
        .await
        .expect("text");
    assert!(
        report.starts_with(&format!("decision     {latest_id}\n")),
        "{report}"
    );
    assert!(
        report.contains("selected (") && report.contains("prompt preview:"),
        "{report}"
    );
    app.stop().await.expect("clean stop");

    // The CLI reads the database directly: the server is down now.
    let dir = tempfile::tempdir().expect("dir");
    let path = write_config(&dir, &text);
    let out = bridge(&[
        "--config",
        &path,
        "explain",
        "om_root",
        "--profile",
        "planner",
        "--verbose",
    ])
    .output()
    .expect("runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        report,
        "the CLI prints the same report"
    );
    let json = bridge(&[
        "--config",
        &path,
        "explain",
        "om_root",
        "--message-id",
        "om_q1",
        "--json",
    ])
    .output()
    .expect("runs");
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).expect("json");
    assert_eq!(v["message_id"], "om_q1");
    let missing = bridge(&["--config", &path, "explain", "om_nothing"])
        .output()
        .expect("runs");
    assert!(!missing.status.success());
    assert!(String::from_utf8_lossy(&missing.stderr).contains("no context decision"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn simulate_runs_the_example_scenario_against_a_running_bridge() {
    let db = TestDb::sqlite();
    let text = config_toml(
        &db,
        &format!(
            "{}\n[context]\nshared_thread_enabled = true\n",
            crate::support::feishu::CODER_PROFILE
        ),
    );
    let app = TestApp::spawn(config(&text)).await;
    let dir = tempfile::tempdir().expect("dir");
    let path = write_config(&dir, &text);
    let scenario = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/scenario.toml");
    let out = bridge(&[
        "--config",
        &path,
        "simulate",
        "--url",
        &app.base,
        "--scenario",
        scenario,
    ])
    .output()
    .expect("runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("planner → invoked (mention)"), "{stdout}");
    assert!(stdout.contains("coder → invoked (mention)"), "{stdout}");
    let coder_report = stdout.split("== om_demo_code").nth(1).unwrap_or_default();
    assert!(
        coder_report.contains("planner (agent)"),
        "the coder saw the planner's answer:\n{stdout}"
    );

    // One message from flags, to one profile.
    let one = bridge(&[
        "--config",
        &path,
        "simulate",
        "--url",
        &app.base,
        "--profile",
        "planner",
        "--chat",
        "oc_demo",
        "--root",
        "om_demo_root",
        "--text",
        "@planner what next?",
    ])
    .output()
    .expect("runs");
    let stdout = String::from_utf8_lossy(&one.stdout);
    assert!(
        stdout.contains("planner → invoked (mention)")
            && stdout.contains("request      what next?"),
        "{stdout}"
    );

    // The same message id again: the bridge answers it as a duplicate, and simulate says so.
    let again = |id: &str| {
        bridge(&[
            "--config",
            &path,
            "simulate",
            "--url",
            &app.base,
            "--profile",
            "planner",
            "--chat",
            "oc_demo",
            "--root",
            "om_demo_root",
            "--message-id",
            id,
            "--text",
            "@planner and then?",
        ])
        .output()
        .expect("runs")
    };
    let first = String::from_utf8_lossy(&again("om_sim_twice").stdout).into_owned();
    assert!(!first.contains("as a duplicate"), "{first}");
    let second = String::from_utf8_lossy(&again("om_sim_twice").stdout).into_owned();
    assert!(
        second.contains("planner: the bridge answered ev_om_sim_twice as a duplicate"),
        "{second}"
    );
    app.stop().await.expect("clean stop");
}
