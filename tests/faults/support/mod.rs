//! What the scenarios are built from: child processes that die with the harness, the
//! bridge as a process, a private Postgres, a small real file system, the fake Open API
//! and agent, the event sender, the database read-back and the named checks.

pub mod bridge;
pub mod checks;
pub mod child;
pub mod db;
pub mod disk;
pub mod events;
pub mod fake_agent;
pub mod fake_openapi;
pub mod load;
pub mod pg;
pub mod pg_bin;
pub mod report;

use std::{path::PathBuf, time::Duration};

/// `server.ack_deadline_ms` of every bridge the harness runs.
pub const ACK_DEADLINE_MS: u64 = 2000;
/// What an answer may take beyond the deadline: the way from the bridge's clock to the
/// sender's, on two shared cores. Deadline plus margin stays under Feishu's 3 s.
pub const ACK_MARGIN_MS: u64 = 500;

/// The ack bound every answer is checked against.
pub fn ack_bound() -> Duration {
    Duration::from_millis(ACK_DEADLINE_MS + ACK_MARGIN_MS)
}

/// How much of each fault to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// CI: each scenario in well under a minute.
    Short,
    /// More events, longer outages, repeated kills.
    Long,
}

impl Mode {
    /// `$FAULTS_MODE` (`short`, the default, or `long`).
    pub fn from_env() -> Self {
        match std::env::var("FAULTS_MODE").as_deref() {
            Ok("long") => Self::Long,
            _ => Self::Short,
        }
    }

    /// `short` or `long`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Short => "short",
            Self::Long => "long",
        }
    }

    /// The short or the long value.
    pub fn pick<T>(self, short: T, long: T) -> T {
        match self {
            Self::Short => short,
            Self::Long => long,
        }
    }
}

/// A scenario's output directory (configs, logs): `$FAULTS_OUT/<name>`, by default under
/// the system's temporary directory; emptied first.
pub fn out_dir(name: &str) -> PathBuf {
    let root = std::env::var_os("FAULTS_OUT")
        .map(PathBuf::from)
        .unwrap_or_else(|| std::env::temp_dir().join("feishu-bridge-faults"));
    let dir = root.join(name);
    std::fs::remove_dir_all(&dir).ok();
    std::fs::create_dir_all(&dir).expect("create the output directory");
    dir
}

/// The directory holding every scenario's output (the registry of running clusters).
pub fn out_root(dir: &std::path::Path) -> PathBuf {
    dir.parent()
        .map(PathBuf::from)
        .unwrap_or_else(|| dir.to_path_buf())
}
