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
    /// Explain a context decision, reading the database directly (works while the
    /// server is down).
    Explain {
        /// The thread's root message id.
        root_msg_id: String,
        /// Profile (default: the first configured profile).
        #[arg(long)]
        profile: Option<String>,
        /// The request message (default: the latest decision in the thread).
        #[arg(long)]
        message_id: Option<String>,
        /// A specific decision.
        #[arg(long)]
        decision_id: Option<i64>,
        /// Show the full thread context and prompt preview.
        #[arg(long)]
        verbose: bool,
        /// Print JSON (the REST shape) instead of the report.
        #[arg(long)]
        json: bool,
        /// Re-run the decision's selection with this setting (`key=value`, repeatable;
        /// see docs/context.md) and print the diff; no agent is called.
        #[arg(long = "what-if", value_name = "KEY=VALUE")]
        what_if: Vec<String>,
    },
    /// Print a date's daily digests, reading the database directly (works while the
    /// server is down).
    Digest {
        /// `YYYY-MM-DD` in `digest.timezone` (default: the latest run's date).
        #[arg(long)]
        date: Option<String>,
    },
    /// Sign, encrypt and post realistic Feishu events to a running bridge, then print
    /// the explain report of what happened.
    Simulate {
        /// Bridge base URL (default: from the config's listen address).
        #[arg(long)]
        url: Option<String>,
        /// A scenario file of `[[step]]` tables, run in order.
        #[arg(long, conflicts_with = "text")]
        scenario: Option<PathBuf>,
        /// Message text; `@<profile>` mentions that profile's bot.
        #[arg(long)]
        text: Option<String>,
        /// Deliver only to this profile (default: every profile, as in a group).
        #[arg(long)]
        profile: Option<String>,
        /// Chat id.
        #[arg(long)]
        chat: Option<String>,
        /// Thread root: post the message as a reply in that thread.
        #[arg(long)]
        root: Option<String>,
        /// Sender open_id.
        #[arg(long)]
        sender: Option<String>,
        /// Message id (default: generated).
        #[arg(long)]
        message_id: Option<String>,
        /// A private chat with the profile instead of a group message.
        #[arg(long)]
        dm: bool,
        /// Verbose explain report (thread context and prompt).
        #[arg(long)]
        verbose: bool,
    },
}
