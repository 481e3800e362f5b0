//! Command-line interface.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

/// Feishu (Lark) event URL for AI-agent bots.
#[derive(Debug, Parser)]
#[command(name = "feishu-bridge", version, about)]
pub struct Cli {
    /// Config file (default: $FEISHU_BRIDGE_CONFIG, else ./feishu-bridge.toml if present,
    /// else built-in defaults).
    #[arg(long, global = true)]
    pub config: Option<PathBuf>,

    /// What to do (default: serve).
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the service (migrates the database first).
    Serve,
    /// Apply database migrations and exit.
    Migrate,
    /// Validate the configuration and print a summary (no secrets).
    CheckConfig,
    /// GET a URL and exit 0 on a 2xx answer (the container health check; needs no curl).
    Healthcheck {
        /// e.g. http://127.0.0.1:8080/healthz
        #[arg(default_value = "http://127.0.0.1:8080/healthz")]
        url: String,
        /// Seconds to wait for an answer.
        #[arg(long, default_value_t = 3)]
        timeout: u64,
    },
    /// Print the OpenAPI document (YAML).
    Openapi,
}
