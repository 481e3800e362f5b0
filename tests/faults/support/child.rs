//! Child processes that cannot outlive the harness: every one is killed when its guard
//! is dropped (a failed check, a panic, a timeout), its output goes to a log file, and
//! every wait on it is bounded. Built on `std::process` (waits are polled), so the
//! harness needs no extra tokio feature.

use std::{
    path::Path,
    process::{Child, Command, ExitStatus, Stdio},
    time::{Duration, Instant},
};

/// A running child process, killed (SIGKILL) on drop.
pub struct Proc {
    child: Child,
}

impl Proc {
    /// Spawns `cmd` with stdout and stderr appended to `log`.
    pub fn spawn(name: &str, mut cmd: Command, log: &Path) -> Self {
        let out = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .unwrap_or_else(|e| panic!("{name}: cannot open its log {}: {e}", log.display()));
        let err = out.try_clone().expect("log handle");
        cmd.stdin(Stdio::null())
            .stdout(Stdio::from(out))
            .stderr(Stdio::from(err));
        let child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("{name}: cannot start: {e}"));
        Self { child }
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `Some(status)` once it has exited (never blocks).
    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// Polls (bounded) until it has exited.
    async fn wait_exit(&mut self, limit: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.exited() {
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// `kill -9`, then reaps it.
    pub async fn kill9(&mut self) {
        self.child.kill().ok();
        self.wait_exit(Duration::from_secs(10)).await;
    }

    /// SIGTERM, then up to `grace` for it to exit; SIGKILL after that. The exit status,
    /// `None` when it had to be killed.
    pub async fn terminate(&mut self, grace: Duration) -> Option<ExitStatus> {
        if let Some(status) = self.exited() {
            return Some(status);
        }
        signal("TERM", self.pid()).await;
        match self.wait_exit(grace).await {
            Some(status) => Some(status),
            None => {
                self.kill9().await;
                None
            }
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if self.exited().is_none() {
            self.child.kill().ok();
            self.child.wait().ok();
        }
    }
}

/// Sends `SIG<name>` to `pid` with the system's `kill` (no unsafe code, no extra crate).
pub async fn signal(name: &str, pid: u32) {
    let mut kill = Command::new("kill");
    kill.arg(format!("-{name}")).arg(pid.to_string());
    run("kill", kill, Duration::from_secs(5)).await.ok();
}

/// Runs a short command to completion (off the runtime's threads) within `limit`; its
/// output, or why it failed. Commands given here bound themselves too (`pg_ctl -t`).
pub async fn run(what: &str, mut cmd: Command, limit: Duration) -> Result<String, String> {
    cmd.stdin(Stdio::null());
    let out = tokio::time::timeout(limit, tokio::task::spawn_blocking(move || cmd.output()))
        .await
        .map_err(|_| format!("{what}: no answer within {limit:?}"))?
        .map_err(|e| format!("{what}: {e}"))?
        .map_err(|e| format!("{what}: cannot run: {e}"))?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if out.status.success() {
        Ok(text)
    } else {
        Err(format!("{what}: {}: {}", out.status, text.trim()))
    }
}

/// A loopback port nothing listens on at the moment (bound, then released).
pub fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    l.local_addr().expect("local addr").port()
}

/// True when this process runs as root (then Postgres must run as `postgres`).
pub fn is_root() -> bool {
    std::process::Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}
