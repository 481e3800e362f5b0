//! Running the real binary: a command with a clean environment, and a config file.

use std::process::Command;

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
    c
}

/// Writes `text` as the config file in `dir`; returns its path.
pub fn write_config(dir: &tempfile::TempDir, text: &str) -> String {
    let path = dir.path().join("feishu-bridge.toml");
    std::fs::write(&path, text).expect("write config");
    path.display().to_string()
}
