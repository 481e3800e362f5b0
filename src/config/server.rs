//! `[server]`: the HTTP listener, its limits and the protection of the REST routes.

use std::net::SocketAddr;

use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;

/// Log output format.
#[derive(Debug, Clone, Copy, Deserialize, Default, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

/// `[server]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServerConfig {
    /// Listen address, `ip:port` or `host:port`; a host name is resolved at load time
    /// ([`ServerConfig::listen_addr`] is what the listener binds).
    pub listen: String,
    /// Bearer token for the REST routes; env `FEISHU_BRIDGE_ADMIN_TOKEN`.
    pub admin_token: Option<SecretString>,
    /// Largest accepted webhook body.
    pub max_body_bytes: usize,
    /// Freshness window for `X-Lark-Request-Timestamp`; 0 disables the check.
    pub timestamp_tolerance_secs: u64,
    /// Allow REST routes without a token on a non-loopback address.
    pub allow_unauthenticated: bool,
    /// Require the admin token on `/metrics` too.
    pub protect_metrics: bool,
    /// Log line format.
    pub log_format: LogFormat,
    /// Whole-request timeout for every route.
    pub request_timeout_secs: u64,
    /// Bound on answering a Feishu callback, queueing for the committer included: an
    /// event not durably stored by then is answered 503 (Feishu waits 3 s, then retries);
    /// a card press, which Feishu does not retry, gets an `info` toast and is finished
    /// after the answer.
    pub ack_deadline_ms: u64,
    /// How long a graceful shutdown may take before in-flight work is abandoned.
    pub shutdown_grace_secs: u64,
    /// How long a client may take to send a request head, from its first byte.
    pub header_timeout_secs: u64,
    /// How long a client may take to send a request body, from the end of its head.
    pub body_timeout_secs: u64,
    /// How long a connection may wait for its next request (or a new one for its first);
    /// keep it above the idle timeout of the reverse proxy's upstream connections.
    pub idle_timeout_secs: u64,
    /// Most connections served at once; at the cap the waiting connection nearest to its
    /// deadline makes room for a new one. Keep it well below the file-descriptor limit.
    pub max_connections: u32,
    /// `listen` resolved at load time (not part of the file).
    #[serde(skip)]
    pub(super) resolved: Option<SocketAddr>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            listen: "127.0.0.1:8080".into(),
            admin_token: None,
            max_body_bytes: 1024 * 1024,
            timestamp_tolerance_secs: 3600,
            allow_unauthenticated: false,
            protect_metrics: false,
            log_format: LogFormat::Text,
            request_timeout_secs: 30,
            ack_deadline_ms: 2500,
            shutdown_grace_secs: 20,
            header_timeout_secs: 10,
            body_timeout_secs: 10,
            idle_timeout_secs: 75,
            max_connections: 512,
            resolved: None,
        }
    }
}

impl ServerConfig {
    /// The address the listener binds: `listen` itself when it is an `ip:port`, else the
    /// address its host name resolved to at load time.
    pub fn listen_addr(&self) -> SocketAddr {
        // Parsed first, so a `listen` changed after loading still counts.
        self.listen
            .parse()
            .ok()
            .or(self.resolved)
            .unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 8080)))
    }

    /// The admin token, if one is set and non-empty.
    pub fn admin_token(&self) -> Option<&str> {
        self.admin_token
            .as_ref()
            .map(|t| t.expose_secret())
            .filter(|t| !t.is_empty())
    }
}
