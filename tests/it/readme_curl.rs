//! The hand-made callbacks and `curl` calls of docs/http-api.md (the shell blocks marked
//! `# doc-test: …`) run as written, under POSIX `sh`, `dash` and `bash`, against a real
//! bridge made from the configuration the page names, `examples/http-api.toml` — only the
//! address `localhost:8080` becomes the test bridge's. Each block is looked up by its
//! marker in README.md and docs/*.md, so one that moves between pages is still found,
//! and one that is missing or written twice fails the test.

use std::{
    path::{Path, PathBuf},
    process::Command,
    sync::Arc,
};

use axum::{Json, Router, extract::State, http::StatusCode, routing::post};
use feishu_bridge::Config;
use serde_json::{Value, json};
use tokio::{net::TcpListener, sync::mpsc};

use crate::support::{
    TestApp, TestDb, config, config_toml,
    feishu::Msg,
    gated_agent::{AGENT_SECRET, webhook_agent_toml},
    next_matching,
};

/// The pages a block may live on: README.md and every docs/*.md, with their text.
fn pages() -> Vec<(PathBuf, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut paths = vec![root.join("README.md")];
    let docs = std::fs::read_dir(root.join("docs")).expect("docs/ is readable");
    let mut md: Vec<PathBuf> = docs
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    md.sort();
    paths.extend(md);
    paths
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p)
                .unwrap_or_else(|e| panic!("reading {}: {e}", p.display()));
            (p, text)
        })
        .collect()
}

/// The shell block that starts with the comment line `# doc-test: {name}`: its lines up
/// to the closing fence, marker included, with `localhost:8080` made `addr`. It must be a
/// ```` ```sh ```` block, and the marker must occur once in all the pages.
fn doc_block(name: &str, addr: &str) -> String {
    let marker = format!("# doc-test: {name}");
    let pages = pages();
    let mut found = Vec::new();
    for (path, text) in &pages {
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            if *line == marker {
                found.push((path, lines.clone(), i));
            }
        }
    }
    let [(path, lines, start)] = &found[..] else {
        let places: Vec<String> = found
            .iter()
            .map(|(p, _, i)| format!("{}:{}", p.display(), i + 1))
            .collect();
        panic!(
            "README.md and docs/*.md have {} lines `{marker}`, not one: {places:?}",
            found.len()
        );
    };
    let (path, start) = (path.display(), *start);
    assert!(
        start > 0 && lines[start - 1] == "```sh",
        "`{marker}` is not the first line of a ```sh block in {path}"
    );
    let len = lines[start..]
        .iter()
        .position(|l| *l == "```")
        .unwrap_or_else(|| panic!("the block of `{marker}` in {path} is not closed"));
    (lines[start..start + len].join("\n") + "\n").replace("localhost:8080", addr)
}

/// A bridge made from `examples/http-api.toml`, the configuration the examples are
/// written for, on a port of its own and the test's database.
async fn example_bridge(db: &TestDb) -> TestApp {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/http-api.toml");
    let text = std::fs::read_to_string(&path).expect("examples/http-api.toml");
    let swap = |text: String, from: &str, to: &str| {
        assert!(
            text.contains(from),
            "examples/http-api.toml has no `{from}`"
        );
        text.replacen(from, to, 1)
    };
    let text = swap(
        text,
        "listen = \"127.0.0.1:8080\"",
        "listen = \"127.0.0.1:0\"",
    );
    let text = swap(
        text,
        "url = \"sqlite://feishu-bridge-http-api.db\"",
        &format!("url = \"{}\"", db.url),
    );
    let config: Config = config(&text);
    TestApp::spawn(config).await
}

/// `host:port` of a test bridge, for `localhost:8080` in a block.
fn addr(app: &TestApp) -> String {
    app.base.trim_start_matches("http://").to_string()
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
        panic!("`{program}` is not on PATH: the curl examples of docs/http-api.md need it to run")
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
    let what = format!("{} -c <docs block>", shell.display());
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
async fn the_signed_event_block_is_stored_under_sh_dash_and_bash() {
    let db = TestDb::sqlite();
    let mut app = example_bridge(&db).await;
    let block = doc_block("signed-event", &addr(&app));
    for shell in shells() {
        let name = shell.file_name().unwrap_or_default().to_string_lossy();
        // Its own ids for each run (the block makes random ones), to find what it stored.
        let id = format!("readme-{name}");
        let ran = run(&shell, &block, &[("ID", id.clone())]).await;
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
async fn the_signed_card_block_is_stored_under_sh_dash_and_bash() {
    let db = TestDb::sqlite();
    let app = example_bridge(&db).await;
    let block = doc_block("signed-card", &addr(&app));
    for (n, shell) in (1..).zip(shells()) {
        // Subscribed before the request, so its processing cannot be missed.
        let mut processed = app.state.processed.subscribe();
        let ran = run(&shell, &block, &[]).await;
        // The block's button is not one of the bridge's: acknowledged, nothing to show.
        assert_eq!(
            answered(&ran),
            (json!({}), "200"),
            "{}: {}",
            shell.display(),
            ran.stdout
        );

        // A legacy callback has no event id: the bridge derives one per delivery.
        let p = next_matching(&mut processed, "the documented card callback", |p| {
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

#[tokio::test]
async fn the_url_verification_and_status_blocks_answer_as_documented() {
    let db = TestDb::sqlite();
    let app = example_bridge(&db).await;
    let challenge = doc_block("url-verification", &addr(&app));
    // The page sets ADMIN_TOKEN once, in a block of its own, for every example after it.
    let status = doc_block("admin-token", &addr(&app)) + &doc_block("status", &addr(&app));
    for shell in shells() {
        let ran = run(&shell, &challenge, &[]).await;
        let answer: Value = serde_json::from_str(ran.stdout.trim())
            .unwrap_or_else(|e| panic!("{}: no JSON ({e}): {}", shell.display(), ran.stdout));
        assert_eq!(answer, json!({"challenge": "abc"}), "{}", shell.display());

        let ran = run(&shell, &status, &[]).await;
        let answer: Value = serde_json::from_str(ran.stdout.trim())
            .unwrap_or_else(|e| panic!("{}: no JSON ({e}): {}", shell.display(), ran.stdout));
        let profiles: Vec<&str> = answer["profiles"]
            .as_array()
            .map(|ps| ps.iter().filter_map(|p| p["name"].as_str()).collect())
            .unwrap_or_default();
        assert_eq!(
            profiles,
            ["planner", "coder"],
            "{}: {answer}",
            shell.display()
        );
        assert_eq!(answer["database"]["ok"], true, "{answer}");
    }
    app.stop().await.expect("clean stop");
}

/// A webhook agent that takes each turn with `202` and hands its body to the test.
async fn answers_later() -> (String, mpsc::UnboundedReceiver<Value>) {
    let (tx, turns) = mpsc::unbounded_channel::<Value>();
    async fn turn(
        State(tx): State<Arc<mpsc::UnboundedSender<Value>>>,
        Json(body): Json<Value>,
    ) -> StatusCode {
        tx.send(body).ok();
        StatusCode::ACCEPTED
    }
    let app = Router::new()
        .route("/turn", post(turn))
        .with_state(Arc::new(tx));
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}/turn", listener.local_addr().expect("addr"));
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, turns)
}

#[tokio::test]
async fn the_agent_output_block_completes_a_waiting_turn_under_sh_dash_and_bash() {
    let db = TestDb::sqlite();
    let (url, mut turns) = answers_later().await;
    let mut app = TestApp::spawn(config(&config_toml(&db, &webhook_agent_toml(&url, 60)))).await;
    let block = doc_block("agent-output", &addr(&app));
    for shell in shells() {
        let name = shell.file_name().unwrap_or_default().to_string_lossy();
        let ask = Msg::group(&format!("om_ask_{name}"), "take your time").at_bot();
        let answer = async {
            let turn = turns.recv().await.expect("the turn reaches the agent");
            let turn_id = turn["turn_id"].as_str().unwrap_or_default().to_string();
            let vars = [("TURN", turn_id), ("SECRET", AGENT_SECRET.to_string())];
            run(&shell, &block, &vars).await
        };
        let (outcome, ran) = tokio::join!(app.ask(&ask), answer);
        assert_eq!(
            answered(&ran),
            (json!({"status": "accepted"}), "200"),
            "{}: {}",
            shell.display(),
            ran.stdout
        );
        assert_eq!(outcome, "answered", "{}", shell.display());
        assert_eq!(app.last_reply("planner").await, "Here is the plan.");
    }
    app.stop().await.expect("clean stop");
}

#[tokio::test]
async fn the_turn_event_block_is_stored_for_a_running_turn_under_sh_dash_and_bash() {
    let db = TestDb::sqlite();
    let (url, mut turns) = answers_later().await;
    let mut app = TestApp::spawn(config(&config_toml(&db, &webhook_agent_toml(&url, 60)))).await;
    let block = doc_block("turn-event", &addr(&app));
    for shell in shells() {
        let name = shell.file_name().unwrap_or_default().to_string_lossy();
        let message_id = format!("om_work_{name}");
        app.route(&Msg::group(&message_id, "book a trip").at_bot())
            .await;
        let turn = turns.recv().await.expect("the turn reaches the agent");
        let turn_id = turn["turn_id"].as_str().unwrap_or_default().to_string();
        let vars = [
            ("TURN", turn_id.clone()),
            ("SECRET", AGENT_SECRET.to_string()),
        ];
        let ran = run(&shell, &block, &vars).await;
        let accepted = json!({"status": "accepted", "seq": 1, "duplicate": false, "stale": false});
        assert_eq!(
            answered(&ran),
            (accepted, "200"),
            "{}: {}",
            shell.display(),
            ran.stdout
        );
        let events = app.state.store.turn_events(&turn_id).await.expect("store");
        assert_eq!(
            events.iter().map(|e| e.kind.as_str()).collect::<Vec<_>>(),
            ["tool"]
        );
        // The turn ends with its answer, as the agent would send it.
        assert!(app.state.callbacks.complete(&turn_id, "booked".into()));
        assert_eq!(app.turn_ended(&message_id).await.state, "succeeded");
    }
    app.stop().await.expect("clean stop");
}

#[tokio::test]
async fn the_ask_answer_block_shows_an_open_question_under_sh_dash_and_bash() {
    use feishu_bridge::store::{NewAsk, NewTurnEvent, TurnEventLimits};
    let db = TestDb::sqlite();
    let (url, mut turns) = answers_later().await;
    let mut app = TestApp::spawn(config(&config_toml(&db, &webhook_agent_toml(&url, 60)))).await;
    let block = doc_block("ask-answer", &addr(&app));
    for shell in shells() {
        let name = shell.file_name().unwrap_or_default().to_string_lossy();
        let message_id = format!("om_fly_{name}");
        app.route(&Msg::group(&message_id, "book a flight").at_bot())
            .await;
        let turn = turns.recv().await.expect("the turn reaches the agent");
        let turn_id = turn["turn_id"].as_str().unwrap_or_default().to_string();
        let body = r#"{"kind":"ask","id":"q1","prompt":"Book the 9:40 flight?","style":"confirm","timeout_secs":600}"#;
        let event = NewTurnEvent {
            turn_id: &turn_id,
            profile: "planner",
            seq: 1,
            kind: "ask",
            body,
            now: feishu_bridge::util::UnixMs::now(),
            ask: Some(NewAsk {
                ask_id: "q1",
                prompt: "Book the 9:40 flight?",
                style: "confirm",
                options: &[],
                default_value: Some("no"),
                timeout_secs: 600,
            }),
        };
        let limits = TurnEventLimits {
            max_events: 10,
            max_bytes: 1 << 20,
        };
        app.state
            .store
            .append_turn_event(&event, limits)
            .await
            .expect("the ask is stored");
        let vars = [
            ("TURN", turn_id.clone()),
            ("SECRET", AGENT_SECRET.to_string()),
        ];
        let ran = run(&shell, &block, &vars).await;
        let (json, status) = answered(&ran);
        assert_eq!(status, "200", "{}: {}", shell.display(), ran.stdout);
        assert_eq!(
            (
                json["id"].as_str(),
                json["state"].as_str(),
                json["default"].as_str()
            ),
            (Some("q1"), Some("open"), Some("no")),
            "{}",
            ran.stdout
        );
        assert!(app.state.callbacks.complete(&turn_id, "booked".into()));
        assert_eq!(app.turn_ended(&message_id).await.state, "succeeded");
    }
    app.stop().await.expect("clean stop");
}

#[tokio::test]
async fn the_what_if_block_reselects_a_decision_under_sh_dash_and_bash() {
    use crate::support::{
        ADMIN, Signer,
        feishu::{CODER_PROFILE, now_ms},
    };
    let db = TestDb::sqlite();
    let extra = format!("{CODER_PROFILE}\n[context]\nshared_thread_enabled = true\n");
    let mut app = TestApp::spawn(config(&config_toml(&db, &extra))).await;
    let coder = Signer::coder();
    let base = now_ms() - 60_000;
    let said = [
        ("om_demo_root", "We need an H5 snake game."),
        ("om_demo_size", "Keep it under 50 KB."),
        ("om_demo_phones", "Make it work on phones."),
    ];
    for (i, (id, text)) in (0..).zip(said) {
        let mut msg = Msg::group(id, text).at(base + i * 1_000);
        if i > 0 {
            msg = msg.in_thread("om_demo_root");
        }
        app.route_as("coder", &coder, &msg).await;
    }
    let ask = Msg::group("om_demo_code", "build it")
        .mentioning("ou_bot_coder", "coder")
        .in_thread("om_demo_root")
        .at(base + 5_000);
    assert_eq!(app.ask_as("coder", &coder, &ask).await, "answered");
    let block = doc_block("what-if", &addr(&app));
    for shell in shells() {
        let ran = run(&shell, &block, &[("ADMIN_TOKEN", ADMIN.to_string())]).await;
        let (json, status) = answered(&ran);
        assert_eq!(status, "200", "{}: {}", shell.display(), ran.stdout);
        assert_eq!(json["settings"]["thread_context_limit"], 1, "{json}");
        assert_eq!(json["recorded"]["thread_context_limit"], 20, "{json}");
        let dropped: Vec<&str> = json["diff"]["dropped"]
            .as_array()
            .map(|d| d.iter().filter_map(|e| e["reason"].as_str()).collect())
            .unwrap_or_default();
        assert_eq!(dropped, ["limit"], "the older message: {json}");
    }
    app.stop().await.expect("clean stop");
}
