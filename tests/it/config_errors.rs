//! What the binary says about a configuration: a syntax error or a bad key with its file,
//! line and column; every validation problem at once (exit 2); host names in
//! `server.listen`; warnings for settings that are ignored or left to a risky default
//! (a digest without a time zone); and messages that name the
//! config file actually read.

use std::process::Output;

use crate::support::{
    TestDb,
    cli::{Served, bridge, write_config},
};

const PROFILE: &str = "[[profiles]]\nname = \"planner\"\napp_id = \"cli_x\"\nverification_token = \"t\"\n\
     dry_run = true\n";

/// `check-config` on the file at `path`.
fn check_config(path: &str) -> Output {
    bridge(&["--config", path, "check-config"])
        .output()
        .expect("runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn a_profile_that_could_post_no_reply_is_refused_unless_it_is_a_dry_run() {
    let dir = tempfile::tempdir().expect("dir");
    let bare = "[[profiles]]\nname = \"planner\"\napp_id = \"cli_x\"\nverification_token = \"t\"\n";
    let path = write_config(&dir, bare);
    let out = check_config(&path);
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("profiles[0].app_secret: required to post replies")
            && stderr.contains("FEISHU_BRIDGE_PLANNER_APP_SECRET")
            && stderr.contains("dry_run = true"),
        "{stderr}"
    );
    let served = bridge(&["--config", &path, "serve"])
        .output()
        .expect("runs");
    assert_eq!(served.status.code(), Some(2), "serve refuses it too");
    assert!(text(&served.stderr).contains("profiles[0].app_secret"));
    let with_secret = bridge(&["--config", &path, "check-config"])
        .env("FEISHU_BRIDGE_PLANNER_APP_SECRET", "s")
        .output()
        .expect("runs");
    assert!(
        with_secret.status.success(),
        "{}",
        text(&with_secret.stderr)
    );
    let path = write_config(&dir, &format!("{bare}dry_run = true\n"));
    let out = check_config(&path);
    assert!(out.status.success(), "{}", text(&out.stderr));
}

#[test]
fn a_syntax_error_shows_the_file_line_column_and_the_line() {
    let dir = tempfile::tempdir().expect("dir");
    let path = write_config(
        &dir,
        &format!("{PROFILE}[server]\nlisten = \"127.0.0.1:8080\nmax_body_bytes = 4096\n"),
    );
    let out = check_config(&path);
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    assert!(
        stderr.starts_with(&format!("configuration error: {path}:7:25: ")),
        "{stderr}"
    );
    assert!(stderr.contains("string"), "names what is wrong: {stderr}");
    assert!(
        stderr.contains("7 | listen = \"127.0.0.1:8080\n"),
        "shows the line: {stderr}"
    );
    let caret = format!("  | {}^", " ".repeat(24));
    assert!(stderr.contains(&caret), "a caret under column 25: {stderr}");
}

#[test]
fn an_unknown_key_or_a_wrong_type_shows_where_and_which_key() {
    let dir = tempfile::tempdir().expect("dir");
    let path = write_config(
        &dir,
        &format!("[server]\nlisten = \"127.0.0.1:0\"\n\n{PROFILE}encrypt_kye = \"x\"\n"),
    );
    let out = check_config(&path);
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    assert!(
        stderr.starts_with(&format!(
            "configuration error: {path}:9:1: profiles[0].encrypt_kye: unknown field `encrypt_kye`"
        )),
        "{stderr}"
    );
    assert!(stderr.contains("9 | encrypt_kye = \"x\""), "{stderr}");

    let path = write_config(&dir, "[worker]\nlanes = \"four\"\n");
    let stderr = text(&check_config(&path).stderr);
    assert!(
        stderr.starts_with(&format!(
            "configuration error: {path}:2:9: worker.lanes: invalid type: string \"four\""
        )),
        "{stderr}"
    );
}

#[test]
fn check_config_reports_every_problem_and_exits_2() {
    let dir = tempfile::tempdir().expect("dir");
    let path = write_config(
        &dir,
        &format!(
            "[server]\nmax_body_bytes = 10\n[worker]\nlanes = 0\n{PROFILE}encrypt_key = \"\"\n"
        ),
    );
    let out = check_config(&path);
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(
        lines,
        [
            format!("configuration error: {path}: server.max_body_bytes: must be at least 1024"),
            format!("configuration error: {path}: worker.lanes: must be at least 1"),
            format!(
                "configuration error: {path}: profiles[0].encrypt_key: must not be empty \
                 (remove the key to run without encryption)"
            ),
            "3 configuration errors".to_string(),
        ],
        "{stderr}"
    );
    assert!(out.stdout.is_empty(), "no summary for an invalid config");
}

#[test]
fn a_host_name_listen_passes_and_shows_what_it_resolved_to() {
    let dir = tempfile::tempdir().expect("dir");
    let path = write_config(
        &dir,
        &format!("[server]\nlisten = \"localhost:0\"\n{PROFILE}"),
    );
    let out = check_config(&path);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    assert!(
        stdout.contains("listen: localhost:0 (127.0.0.1:0)\n"),
        "{stdout}"
    );

    let path = write_config(&dir, "[server]\nlisten = \"no-such-host.invalid:8080\"\n");
    let out = check_config(&path);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        text(&out.stderr),
        format!(
            "configuration error: {path}: server.listen: cannot resolve host \
             \"no-such-host.invalid\"; expected an IP address or host name and a port, \
             e.g. 127.0.0.1:8080\n"
        )
    );
}

#[test]
fn check_config_warns_about_a_group_scope_that_thread_isolation_overrides() {
    let dir = tempfile::tempdir().expect("dir");
    let warning = "warning: profiles[0].group_scope: ignored while thread_isolation = true \
                   (the default); set thread_isolation = false to use it\n";
    let path = write_config(&dir, &format!("{PROFILE}group_scope = \"per-user\"\n"));
    let out = check_config(&path);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "a warning is not an error: {stdout}");
    assert!(stdout.starts_with("config OK"), "{stdout}");
    assert!(stdout.ends_with(warning), "{stdout}");

    let used = format!("{PROFILE}thread_isolation = false\ngroup_scope = \"per-user\"\n");
    let path = write_config(&dir, &used);
    let stdout = text(&check_config(&path).stdout);
    assert!(!stdout.contains("warning"), "{stdout}");
}

#[test]
fn check_config_warns_about_a_digest_without_a_time_zone_and_refuses_bad_digest_keys() {
    let dir = tempfile::tempdir().expect("dir");
    let digest = "[digest]\nenabled = true\n[digest.summarizer]\n\
                  base_url = \"http://127.0.0.1:1/v1\"\nmodel = \"m\"\n";
    let warning = "warning: digest.timezone: not set, so the digest runs at 04:10 UTC \
                   (12:10 in Asia/Shanghai) and sessions are reset then; set \
                   digest.timezone to the IANA name of the chats' zone, e.g. \
                   timezone = \"Asia/Shanghai\"\n";
    let path = write_config(&dir, &format!("{PROFILE}{digest}"));
    let out = check_config(&path);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "a warning is not an error: {stdout}");
    assert!(stdout.ends_with(warning), "{stdout}");

    // A zone written out, or a digest that is off, says nothing.
    let zoned = digest.replace("enabled = true\n", "enabled = true\ntimezone = \"UTC\"\n");
    let path = write_config(&dir, &format!("{PROFILE}{zoned}"));
    let stdout = text(&check_config(&path).stdout);
    assert!(!stdout.contains("warning"), "{stdout}");
    let path = write_config(&dir, &format!("{PROFILE}[digest]\nenabled = false\n"));
    let stdout = text(&check_config(&path).stdout);
    assert!(!stdout.contains("warning"), "{stdout}");

    // The new keys take booleans, and a bad one is named.
    for (more, key) in [
        ("digest = \"no\"\n", "profiles[0].digest"),
        ("[digest]\ninclude_dms = 1\n", "digest.include_dms"),
        (
            "[[workspaces]]\nchat_id = \"oc_1\"\ndigest = \"off\"\n",
            "workspaces[0].digest",
        ),
    ] {
        let path = write_config(&dir, &format!("{PROFILE}{more}"));
        let out = check_config(&path);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains(key), "{key}: {stderr}");
    }
    let good = "digest = false\n[digest]\ninclude_dms = false\n\
                [[workspaces]]\nchat_id = \"oc_1\"\ndigest = true\n";
    let out = check_config(&write_config(&dir, &format!("{PROFILE}{good}")));
    assert!(out.status.success(), "{}", text(&out.stderr));
}

#[test]
fn the_deploy_example_passes_check_config_without_warnings() {
    let example = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/deploy/feishu-bridge.example.toml"
    );
    let out = bridge(&["--config", example, "check-config"])
        .env("FEISHU_BRIDGE_ADMIN_TOKEN", "t")
        .env("FEISHU_BRIDGE_PLANNER_VERIFICATION_TOKEN", "vt")
        .env("FEISHU_BRIDGE_PLANNER_APP_SECRET", "s")
        .output()
        .expect("runs");
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    assert!(stdout.contains("profile planner:"), "{stdout}");
    assert!(!stdout.contains("warning"), "{stdout}");
}

#[test]
fn the_no_profiles_message_names_the_config_file_given() {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("hub-a.toml");
    std::fs::write(&path, "[server]\nlisten = \"127.0.0.1:0\"\n").expect("write");
    let path = path.display().to_string();
    let stdout = text(&check_config(&path).stdout);
    assert!(
        stdout.contains(&format!("no profiles in {path}: ")),
        "{stdout}"
    );
    let defaults = bridge(&["check-config"])
        .current_dir(dir.path())
        .output()
        .expect("runs");
    let stdout = text(&defaults.stdout);
    assert!(
        stdout.contains("no profiles in built-in defaults: "),
        "{stdout}"
    );
}

#[tokio::test]
async fn serve_names_the_config_file_when_it_has_no_profiles() {
    let db = TestDb::sqlite();
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("hub-b.toml");
    let config = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n[database]\nurl = \"{}\"\n",
        db.url
    );
    std::fs::write(&path, config).expect("write");
    let path = path.display().to_string();
    let served = Served::start(&path, "info", &[]).await;
    let (_, logs) = served.stop();
    assert!(
        logs.contains(&format!("no profiles configured in {path}: ")),
        "{logs}"
    );
    assert!(!logs.contains("feishu-bridge.toml"), "{logs}");
    assert!(logs.contains("run `sh examples/demo.sh`"), "{logs}");
}

#[tokio::test]
async fn serve_binds_the_resolved_address_and_prints_the_warning_first() {
    let db = TestDb::sqlite();
    let dir = tempfile::tempdir().expect("dir");
    let path = write_config(
        &dir,
        &format!(
            "[server]\nlisten = \"localhost:0\"\n[database]\nurl = \"{}\"\n\
             {PROFILE}bot_open_id = \"ou_bot\"\napi_base = \"http://127.0.0.1:9\"\n\
             group_scope = \"shared-chat\"\n",
            db.url
        ),
    );
    let served = Served::start(&path, "info", &[]).await;
    assert!(
        served.base.starts_with("http://127.0.0.1:"),
        "localhost binds its IPv4 loopback address: {}",
        served.base
    );
    let healthy = reqwest::get(format!("{}/healthz", served.base))
        .await
        .expect("answers");
    assert_eq!(healthy.status(), 200);
    let (_, logs) = served.stop();
    let warning = "warning: profiles[0].group_scope: ignored while thread_isolation = true";
    let at = logs
        .find(warning)
        .unwrap_or_else(|| panic!("no warning in:\n{logs}"));
    let listening = logs
        .find("feishu-bridge listening")
        .expect("listening line");
    assert!(at < listening, "the warning comes before serving:\n{logs}");
}

#[test]
fn two_websocket_profiles_of_one_app_are_refused_by_check_config_and_serve() {
    let dir = tempfile::tempdir().expect("dir");
    let websocket = |name: &str, app: &str| {
        format!(
            "[[profiles]]\nname = \"{name}\"\napp_id = \"{app}\"\nconnection = \"websocket\"\n\
             app_secret = \"s\"\n"
        )
    };
    let toml = format!(
        "{}{}{}",
        websocket("planner", "cli_x"),
        websocket("reviewer", "cli_y"),
        websocket("helper", "cli_x")
    );
    let path = write_config(&dir, &toml);
    let why = "profiles[2].app_id: profiles \"planner\" and \"helper\" both take the long \
               connection of app cli_x (connection = \"websocket\"): Feishu hands each event to \
               one connection of an app, chosen at random, so each profile would miss some of \
               its events; use one profile per app for the long connection, or receive on the \
               event URL (connection = \"webhook\")";
    for args in [
        vec!["--config", path.as_str(), "check-config"],
        vec!["--config", path.as_str(), "serve"],
    ] {
        let out = bridge(&args).output().expect("runs");
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let stderr = text(&out.stderr);
        assert!(
            stderr.starts_with(&format!("configuration error: {path}:13:10: {why}\n")),
            "{args:?}: {stderr}"
        );
        assert!(stderr.contains("13 | app_id = \"cli_x\""), "{stderr}");
    }

    // One of them on the event URL, or another app: fine.
    let fine = toml.replacen(
        "name = \"helper\"\napp_id = \"cli_x\"\nconnection = \"websocket\"",
        "name = \"helper\"\napp_id = \"cli_x\"\nconnection = \"webhook\"\nverification_token = \"t\"",
        1,
    );
    let path = write_config(&dir, &fine);
    let out = check_config(&path);
    assert!(out.status.success(), "{}", text(&out.stderr));
}

#[test]
fn check_config_shows_the_egress_and_refuses_a_proxy_it_cannot_use() {
    let dir = tempfile::tempdir().expect("dir");
    let path = write_config(&dir, PROFILE);
    let out = bridge(&["--config", &path, "check-config"])
        .env("HTTPS_PROXY", "http://alice:s3cret@proxy.corp:3128")
        .env("no_proxy", "localhost,127.0.0.1")
        .output()
        .expect("runs");
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    assert!(
        stdout.contains(
            "egress: https/wss through proxy.corp:3128 (HTTPS_PROXY, with credentials), \
             http/ws direct; direct to localhost,127.0.0.1 (NO_PROXY)\n"
        ),
        "{stdout}"
    );
    assert!(
        !stdout.contains("s3cret") && !stdout.contains("alice"),
        "{stdout}"
    );
    let direct = text(&check_config(&path).stdout);
    assert!(direct.contains("egress: direct ("), "{direct}");

    let out = bridge(&["--config", &path, "check-config"])
        .env("ALL_PROXY", "socks5://alice:s3cret@proxy.corp:1080")
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    assert!(
        stderr.starts_with(&format!(
            "configuration error: {path}: ALL_PROXY: only http:// proxies are supported"
        )),
        "{stderr}"
    );
    assert!(!stderr.contains("s3cret"), "{stderr}");
}

#[test]
fn check_config_refuses_media_budgets_out_of_range_and_names_each() {
    let dir = tempfile::tempdir().expect("dir");
    let bad = "[media]\nmax_images = 50\nmax_image_bytes = 20000000\nmax_file_chars = 10\n\
               max_files_chars = 5\nmax_doc_chars = 0\nurl_ttl_secs = 1\npublic_url = \"ftp://x\"\n";
    let out = check_config(&write_config(&dir, &format!("{PROFILE}{bad}")));
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    for key in [
        "media.max_images",
        "media.max_image_bytes",
        "media.max_file_chars",
        "media.max_files_chars",
        "media.max_doc_chars",
        "media.url_ttl_secs",
        "media.public_url",
    ] {
        assert!(stderr.contains(key), "{key}: {stderr}");
    }
    let good = "[media]\nmax_images = 0\nmax_image_bytes = 10485760\n\
                public_url = \"https://bridge.example.com\"\n";
    let out = check_config(&write_config(&dir, &format!("{PROFILE}{good}")));
    assert!(out.status.success(), "{}", text(&out.stderr));
}
