//! The README's hand-made, signed callbacks (the shell blocks marked `# readme-test: …`)
//! run as written, under POSIX `sh`, `dash` and `bash`, against a real bridge: the
//! bridge answers 200 and stores the event.

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use serde_json::json;

use crate::support::{
    TestApp, TestDb, config, config_toml,
    feishu::{APP_ID, ENCRYPT_KEY, TOKEN},
    next_matching,
};

/// The README shell block that starts with the comment line `# readme-test: {name}`:
/// its lines up to the closing fence, marker included. It must be a ```` ```sh ```` block,
/// and the marker must occur once.
fn readme_block(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md");
    let readme = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    let marker = format!("# readme-test: {name}");
    let lines: Vec<&str> = readme.lines().collect();
    let at: Vec<usize> = (0..lines.len()).filter(|&i| lines[i] == marker).collect();
    let [start] = at[..] else {
        panic!("README.md has {} lines `{marker}`, not one", at.len());
    };
    assert!(
        start > 0 && lines[start - 1] == "```sh",
        "`{marker}` is not the first line of a ```sh block in README.md"
    );
    let len = lines[start..]
        .iter()
        .position(|l| *l == "```")
        .unwrap_or_else(|| panic!("the block of `{marker}` in README.md is not closed"));
    lines[start..start + len].join("\n") + "\n"
}

/// `program` found on `PATH`.
fn on_path(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
}

/// `program` found on `PATH`, or a failure that says the README example needs it.
fn required(program: &str) -> PathBuf {
    on_path(program).unwrap_or_else(|| {
        panic!("`{program}` is not on PATH: the README's curl examples need it to run")
    })
}

/// The shells each block runs under: `/bin/sh`, `dash` when installed, and `bash`.
fn shells() -> Vec<PathBuf> {
    for tool in ["openssl", "curl"] {
        required(tool);
    }
    let sh = PathBuf::from("/bin/sh");
    assert!(sh.is_file(), "/bin/sh is missing");
    [Some(sh), on_path("dash"), Some(required("bash"))]
        .into_iter()
        .flatten()
        .collect()
}

/// What a shell printed.
struct Ran {
    stdout: String,
    stderr: String,
}

/// Runs `block` with `shell -eu -c`, in an environment of only `PATH` and `vars`, off the
/// runtime's thread (the bridge it talks to serves on that thread). The shell must exit
/// 0 without a word on stderr.
async fn run(shell: &Path, block: &str, vars: &[(&str, String)]) -> Ran {
    let mut cmd = Command::new(shell);
    cmd.args(["-eu", "-c", block])
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .envs(vars.iter().map(|(k, v)| (k, v)));
    let what = format!("{} -c <README block>", shell.display());
    let out = tokio::task::spawn_blocking(move || cmd.output())
        .await
        .expect("shell task")
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    let ran = Ran {
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    };
    assert!(
        out.status.success() && ran.stderr.is_empty(),
        "{what}: {}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        ran.stdout,
        ran.stderr
    );
    ran
}

/// The answer body and HTTP status the block's curl printed (`<body>\nHTTP <status>`).
fn answered(ran: &Ran) -> (serde_json::Value, &str) {
    let mut lines = ran.stdout.lines();
    let body = lines.next().unwrap_or_default();
    let status = lines.next().and_then(|l| l.strip_prefix("HTTP "));
    let json = serde_json::from_str(body)
        .unwrap_or_else(|e| panic!("curl printed no JSON ({e}):\n{}", ran.stdout));
    (json, status.unwrap_or_default())
}

#[tokio::test]
async fn the_readme_signed_event_block_is_stored_under_sh_dash_and_bash() {
    let block = readme_block("signed-event");
    let db = TestDb::sqlite();
    let mut app = TestApp::spawn(config(&config_toml(&db, ""))).await;
    for shell in shells() {
        let name = shell.file_name().unwrap_or_default().to_string_lossy();
        let id = format!("readme-{name}");
        let vars = [
            ("URL", format!("{}/webhook/planner/event", app.base)),
            ("KEY", ENCRYPT_KEY.to_string()),
            ("TOKEN", TOKEN.to_string()),
            ("APP_ID", APP_ID.to_string()),
            ("ID", id.clone()),
        ];
        let ran = run(&shell, &block, &vars).await;
        assert_eq!(
            answered(&ran),
            (json!({"msg": "success"}), "200"),
            "{}: {}",
            shell.display(),
            ran.stdout
        );

        // Decrypted, verified and stored under the block's ids, then processed.
        let event_id = format!("ev-{id}");
        assert_eq!(app.settled(&event_id).await, "done", "{}", shell.display());
        let row = app
            .state
            .store
            .inbox_event("planner", &event_id)
            .await
            .expect("store answers")
            .unwrap_or_else(|| panic!("{event_id} stored"));
        assert_eq!(
            (
                row.event.event_type.as_str(),
                row.event.message_id.as_deref()
            ),
            ("im.message.receive_v1", Some(format!("om_{id}").as_str()))
        );
        assert!(
            row.event.payload.contains(r#"{\"text\":\"hello\"}"#),
            "{}",
            row.event.payload
        );
    }
    app.stop().await.expect("clean stop");
}

#[tokio::test]
async fn the_readme_signed_card_block_is_stored_under_sh_dash_and_bash() {
    let block = readme_block("signed-card");
    let db = TestDb::sqlite();
    let app = TestApp::spawn(config(&config_toml(&db, ""))).await;
    for (n, shell) in (1..).zip(shells()) {
        // Subscribed before the request, so its processing cannot be missed.
        let mut processed = app.state.processed.subscribe();
        let vars = [
            ("URL", format!("{}/webhook/planner/card", app.base)),
            ("TOKEN", TOKEN.to_string()),
        ];
        let ran = run(&shell, &block, &vars).await;
        // The block's button is not one of the bridge's: acknowledged, nothing to show.
        assert_eq!(
            answered(&ran),
            (json!({}), "200"),
            "{}: {}",
            shell.display(),
            ran.stdout
        );

        // A legacy callback has no event id: the bridge derives one per delivery.
        let p = next_matching(&mut processed, "the README card callback", |p| {
            p.profile == "planner" && p.event_id.starts_with("card-v1:")
        })
        .await;
        assert_eq!(p.outcome, "done", "{}", shell.display());
        let row = app
            .state
            .store
            .inbox_event("planner", &p.event_id)
            .await
            .expect("store answers")
            .expect("stored");
        assert_eq!(row.event.event_type, "card.action.trigger_v1");
        assert!(
            row.event.payload.contains(r#""open_message_id":"om_1""#),
            "{}",
            row.event.payload
        );
        // Each shell's run is one new delivery (its own nonce).
        assert_eq!(db.count("inbox_events").await, n, "{}", shell.display());
    }
    app.stop().await.expect("clean stop");
}
