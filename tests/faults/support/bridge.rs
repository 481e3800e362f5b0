//! The bridge under test: the release binary as its own process, with a config file
//! written for the scenario (short leases and retries, so recovery shows within
//! seconds), its log in the output directory, and nothing but 127.0.0.1 around it.

use std::{
    path::{Path, PathBuf},
    process::Command,
    time::{Duration, Instant},
};

use super::{
    child::{Proc, free_port},
    events::KEYS,
};

/// The agent a bridge runs turns with.
#[derive(Debug, Clone)]
pub enum AgentKind {
    /// The built-in echo agent.
    Echo,
    /// A webhook agent at this URL (signed with `fake_agent::SECRET`).
    Webhook(String),
}

/// What differs between the bridges of the scenarios.
#[derive(Debug, Clone)]
pub struct Spec {
    /// `worker.replica_id`, and the name of its log.
    pub replica: String,
    /// `database.url`.
    pub db_url: String,
    /// The fake Open API's base URL.
    pub api_base: String,
    /// The agent.
    pub agent: AgentKind,
    /// `server.ack_deadline_ms`.
    pub ack_deadline_ms: u64,
    /// `worker.lease_ms`.
    pub lease_ms: u64,
}

impl Spec {
    fn toml(&self, port: u16) -> String {
        let agent = match &self.agent {
            AgentKind::Echo => "kind = \"echo\"\n".to_string(),
            AgentKind::Webhook(url) => format!(
                "kind = \"webhook\"\nurl = \"{url}\"\nsecret = \"{}\"\ntimeout_secs = 120\n",
                super::fake_agent::SECRET
            ),
        };
        format!(
            r#"[server]
listen = "127.0.0.1:{port}"
admin_token = "faults-admin-token"
timestamp_tolerance_secs = 300
ack_deadline_ms = {ack}
shutdown_grace_secs = 10
# Above what the load's client can hold open (400 in flight, as many idle) on one
# replica once the other is killed: at the cap a waiting keep-alive connection is
# closed, and a request the client sends on it at that moment goes unanswered (Feishu
# would retry it). That race is the cap's own (tests/it/connections.rs), not these faults'.
max_connections = 2048

[database]
url = "{db}"
timeout_ms = 1000

[worker]
replica_id = "{replica}"
lease_ms = {lease}
poll_interval_ms = 200
retry_base_ms = 200
retry_max_ms = 2000

[[profiles]]
name = "{profile}"
app_id = "{app_id}"
app_secret = "{secret}"
encrypt_key = "{key}"
verification_token = "{token}"
bot_open_id = "{bot}"
api_base = "{api}"
[profiles.agent]
{agent}"#,
            ack = self.ack_deadline_ms,
            db = self.db_url,
            replica = self.replica,
            lease = self.lease_ms,
            profile = KEYS.profile,
            app_id = KEYS.app_id,
            secret = KEYS.app_secret,
            key = KEYS.encrypt_key,
            token = KEYS.token,
            bot = KEYS.bot,
            api = self.api_base,
        )
    }
}

/// A running bridge process.
pub struct Bridge {
    /// Its settings.
    pub spec: Spec,
    /// `http://127.0.0.1:port`.
    pub base: String,
    /// Times it was started.
    pub starts: u32,
    config: PathBuf,
    log: PathBuf,
    proc: Option<Proc>,
}

/// The release binary: `$FAULTS_BRIDGE_BIN`, else `target/release/feishu-bridge` beside
/// the profile directory this test was built into.
pub fn binary() -> PathBuf {
    if let Some(bin) = std::env::var_os("FAULTS_BRIDGE_BIN") {
        return PathBuf::from(bin);
    }
    let built = PathBuf::from(env!("CARGO_BIN_EXE_feishu-bridge"));
    let target = built.parent().and_then(Path::parent).expect("target dir");
    target.join("release").join("feishu-bridge")
}

impl Bridge {
    /// Writes its config into `out` and starts it; waits (bounded) until it answers.
    pub async fn start(out: &Path, spec: Spec) -> Self {
        let port = free_port();
        let config = out.join(format!("{}.toml", spec.replica));
        std::fs::write(&config, spec.toml(port)).expect("write config");
        let log = out.join(format!("{}.log", spec.replica));
        std::fs::write(&log, "").ok();
        let mut bridge = Self {
            spec,
            base: format!("http://127.0.0.1:{port}"),
            starts: 0,
            config,
            log,
            proc: None,
        };
        bridge.launch().await;
        bridge
    }

    /// Starts the process again (after [`Self::kill9`]) on the same port and config.
    pub async fn launch(&mut self) {
        let bin = binary();
        assert!(
            bin.exists(),
            "{} is missing: build it with `cargo build --release`",
            bin.display()
        );
        let mut cmd = Command::new(&bin);
        cmd.env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("RUST_LOG", "info,sqlx=warn,tower_http=warn")
            .arg("--config")
            .arg(&self.config)
            .arg("serve");
        let name = format!("bridge {}", self.spec.replica);
        self.proc = Some(Proc::spawn(&name, cmd, &self.log));
        self.starts += 1;
        self.wait_healthy(Duration::from_secs(60)).await;
    }

    /// Polls `/healthz` until it answers 200; panics (with its log) if the process exits
    /// or `limit` passes.
    async fn wait_healthy(&mut self, limit: Duration) {
        let client = reqwest::Client::builder()
            .no_proxy()
            .timeout(Duration::from_secs(2))
            .build()
            .expect("client");
        let deadline = Instant::now() + limit;
        let url = format!("{}/healthz", self.base);
        loop {
            if let Ok(r) = client.get(&url).send().await
                && r.status().is_success()
            {
                return;
            }
            if let Some(status) = self.exited() {
                panic!(
                    "{} exited at start ({status}):\n{}",
                    self.name(),
                    self.tail()
                );
            }
            assert!(
                Instant::now() < deadline,
                "{} did not answer /healthz within {limit:?}:\n{}",
                self.name(),
                self.tail()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// `bridge <replica>`.
    pub fn name(&self) -> String {
        format!("bridge {}", self.spec.replica)
    }

    /// The exit status once the process has exited; `None` while it runs.
    pub fn exited(&mut self) -> Option<String> {
        let p = self.proc.as_mut()?;
        p.exited().map(|s| s.to_string())
    }

    /// `kill -9`.
    pub async fn kill9(&mut self) {
        if let Some(p) = self.proc.as_mut() {
            p.kill9().await;
        }
        self.proc = None;
    }

    /// SIGTERM and up to 20 s to exit; its exit status (`None`: it had to be killed).
    pub async fn terminate(&mut self) -> Option<String> {
        let p = self.proc.as_mut()?;
        let status = p.terminate(Duration::from_secs(20)).await;
        self.proc = None;
        status.map(|s| s.to_string())
    }

    /// The end of its log.
    pub fn tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }

    /// The lines of its log containing `needle` (at most 5).
    pub fn log_lines(&self, needle: &str) -> Vec<String> {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let found = text.lines().filter(|l| l.contains(needle));
        found.take(5).map(str::to_string).collect()
    }

    /// `GET path` with the admin token: the status, or `None` without an answer.
    pub async fn get_status(&self, path: &str) -> Option<u16> {
        let client = reqwest::Client::builder()
            .no_proxy()
            .timeout(Duration::from_secs(5))
            .build()
            .ok()?;
        let r = client
            .get(format!("{}{path}", self.base))
            .bearer_auth("faults-admin-token")
            .send()
            .await
            .ok()?;
        Some(r.status().as_u16())
    }
}
