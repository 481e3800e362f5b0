//! Running the real binary: a command with a clean environment, a config file, and a
//! `serve` process whose every output line is captured.

use std::{
    io::{BufRead, BufReader, Read},
    process::{Child, Command, ExitStatus, Stdio},
    sync::{Arc, Mutex},
    thread::JoinHandle,
    time::Duration,
};

use tokio::sync::mpsc;

/// The binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_feishu-bridge");

/// The binary with `args`, without the environment a developer's shell may carry.
pub fn bridge(args: &[&str]) -> Command {
    let mut c = Command::new(BIN);
    c.args(args)
        .env_remove("DATABASE_URL")
        .env_remove("FEISHU_BRIDGE_CONFIG")
        .env_remove("FEISHU_BRIDGE_ADMIN_TOKEN")
        .env_remove("RUST_LOG");
    for proxy in ["HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "NO_PROXY"] {
        c.env_remove(proxy).env_remove(proxy.to_lowercase());
    }
    c
}

/// Writes `text` as the config file in `dir`; returns its path.
pub fn write_config(dir: &tempfile::TempDir, text: &str) -> String {
    let path = dir.path().join("feishu-bridge.toml");
    std::fs::write(&path, text).expect("write config");
    path.display().to_string()
}

/// A running `serve` process. Its stdout and stderr are drained by threads as it writes
/// them (a full pipe cannot stall it), kept whole, and passed on line by line.
pub struct Served {
    /// `http://127.0.0.1:port`
    pub base: String,
    child: Child,
    lines: mpsc::UnboundedReceiver<String>,
    output: Arc<Mutex<String>>,
    drains: Vec<JoinHandle<()>>,
}

impl Served {
    /// Starts `serve` with `config_path`, `RUST_LOG=rust_log` and `envs`; returns once it
    /// has logged its bound address (the listener is bound before the line is written).
    pub async fn start(config_path: &str, rust_log: &str, envs: &[(&str, &str)]) -> Self {
        let mut cmd = bridge(&["--config", config_path]);
        cmd.stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .env("RUST_LOG", rust_log);
        for (k, v) in envs {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("spawn serve");
        let (tx, lines) = mpsc::unbounded_channel();
        let output = Arc::new(Mutex::new(String::new()));
        let stdout = child.stdout.take().expect("stdout");
        let stderr = child.stderr.take().expect("stderr");
        let drains = vec![
            drain(stdout, tx.clone(), output.clone()),
            drain(stderr, tx, output.clone()),
        ];
        let mut served = Self {
            base: String::new(),
            child,
            lines,
            output,
            drains,
        };
        let line = served
            .wait_for_line("the listening line", |l| {
                l.contains("feishu-bridge listening")
            })
            .await;
        let addr = line
            .split("addr=")
            .nth(1)
            .and_then(|s| s.split_whitespace().next())
            .expect("the listening line names the address");
        served.base = format!("http://{addr}");
        served
    }

    /// Waits (at most 30 s, event-driven) for an output line that `wanted` accepts.
    pub async fn wait_for_line(&mut self, what: &str, wanted: impl Fn(&str) -> bool) -> String {
        let wait = async {
            while let Some(line) = self.lines.recv().await {
                if wanted(&line) {
                    return Some(line);
                }
            }
            None
        };
        match tokio::time::timeout(Duration::from_secs(30), wait).await {
            Ok(Some(line)) => line,
            Ok(None) => panic!("serve ended before {what}:\n{}", self.output()),
            Err(_) => panic!("timed out waiting for {what}:\n{}", self.output()),
        }
    }

    fn output(&self) -> String {
        self.output.lock().expect("lock").clone()
    }

    /// Sends SIGTERM, waits for the exit; returns its status and everything printed.
    pub fn stop(mut self) -> (ExitStatus, String) {
        let pid = self.child.id().to_string();
        let killed = Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .expect("kill");
        assert!(killed.success(), "SIGTERM delivered");
        let exit = self.child.wait().expect("wait");
        for d in self.drains.drain(..) {
            d.join().expect("drain thread");
        }
        (exit, self.output())
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        // A failing test must not leave a server behind.
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn drain(
    pipe: impl Read + Send + 'static,
    tx: mpsc::UnboundedSender<String>,
    output: Arc<Mutex<String>>,
) -> JoinHandle<()> {
    std::thread::spawn(move || {
        let mut reader = BufReader::new(pipe);
        let mut buf = Vec::new();
        // Bytes, not `lines()`: a line that is not UTF-8 must still be captured.
        while reader.read_until(b'\n', &mut buf).unwrap_or(0) > 0 {
            let line = String::from_utf8_lossy(&buf).into_owned();
            output.lock().expect("lock").push_str(&line);
            let _ = tx.send(line);
            buf.clear();
        }
    })
}
