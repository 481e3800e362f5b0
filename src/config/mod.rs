//! Configuration: the TOML file, environment overrides for secrets, and validation.
//!
//! Loading goes embedded defaults → file → environment → validate (see `load.rs`).
//! Secrets are [`SecretString`]s, which never print; a validation error names the key it
//! is about, in the `profiles[1].encrypt_key` form, and a load reports every problem it
//! finds ([`ConfigErrors`]). Settings that are accepted but ignored are
//! [`Config::warnings`].

pub(crate) mod clients;
mod digest;
mod egress;
mod error;
mod feed;
mod handoff;
mod limits;
mod listen;
mod load;
mod long_connection;
mod media;
mod names;
mod places;
mod problems;
mod proxy_vars;
mod server;
mod sqlite_path;
mod validate;
mod warnings;

use std::path::PathBuf;

pub use digest::{DigestConfig, DigestPost, SummarizerConfig};
pub use egress::{Egress, Route};
pub use error::{ConfigError, ConfigErrors, Location};
pub use feed::FeedConfig;
pub use handoff::HandoffConfig;
pub use load::{ConfigSource, default_path, load, load_from_str};
pub use media::{FEISHU_IMAGE_MAX_BYTES, MediaConfig};
pub use names::NamesConfig;
use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;
pub use server::{LogFormat, ServerConfig};

use crate::vocab::ChatType;

/// The whole configuration of one hub.
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// HTTP listener and REST protection.
    pub server: ServerConfig,
    /// Database connection.
    pub database: DatabaseConfig,
    /// Hub-wide context defaults (used by the context engine).
    pub context: ContextConfig,
    /// Inbox worker tuning.
    pub worker: WorkerConfig,
    /// The batched feed.
    pub feed: FeedConfig,
    /// The daily digest.
    pub digest: DigestConfig,
    /// Bots handing work to each other.
    pub handoff: HandoffConfig,
    /// Display names of senders and chats.
    pub names: NamesConfig,
    /// What a turn fetches of the images, files, bundles and docs its messages carry.
    pub media: MediaConfig,
    /// Feishu bot profiles: one per app.
    pub profiles: Vec<Profile>,
    /// Group chats configured for the hub.
    pub workspaces: Vec<Workspace>,
    /// Where the configuration came from (not part of the file).
    #[serde(skip)]
    pub source: ConfigSource,
    /// How outbound connections leave: the proxy variables of the environment (not part
    /// of the file; see `egress.rs`).
    #[serde(skip)]
    pub egress: Egress,
}

/// `[database]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DatabaseConfig {
    /// `sqlite://file.db` or `postgres://…`; env `DATABASE_URL` overrides. May hold a
    /// password, so it is a secret; [`DatabaseConfig::redacted_url`] is safe to show.
    pub url: SecretString,
    /// Bound on connecting and on each store operation, so a down database surfaces as
    /// an error instead of a hung request.
    pub timeout_ms: u64,
    /// Pool size (Postgres; SQLite uses a small fixed pool).
    pub max_connections: u32,
    /// Concurrent inbox committers (group-commit writers). SQLite always uses one.
    pub committers: usize,
}

impl Default for DatabaseConfig {
    fn default() -> Self {
        Self {
            url: SecretString::from("sqlite://feishu-bridge.db"),
            timeout_ms: 2000,
            max_connections: 16,
            committers: 2,
        }
    }
}

impl DatabaseConfig {
    /// The URL with any password replaced by `***`.
    pub fn redacted_url(&self) -> String {
        redact_url(self.url.expose_secret())
    }

    /// `sqlite` or `postgres`, from the URL scheme.
    pub fn backend_name(&self) -> &'static str {
        if self.url.expose_secret().starts_with("sqlite:") {
            "sqlite"
        } else {
            "postgres"
        }
    }
}

/// Replaces the password of a URL with `***`, in its user part and in a `password=`
/// parameter (which Postgres URLs also take); leaves other strings alone.
pub fn redact_url(raw: &str) -> String {
    let Ok(mut u) = url::Url::parse(raw) else {
        return raw.to_string();
    };
    let in_query = u.query_pairs().any(|(k, _)| k == "password");
    if u.password().is_none() && !in_query {
        return raw.to_string();
    }
    if u.password().is_some() {
        // Cannot fail: a URL that has a password has a host, so it takes a new one.
        let _ = u.set_password(Some("***"));
    }
    if in_query {
        let pairs: Vec<(String, String)> = u
            .query_pairs()
            .map(|(k, v)| {
                let v = if k == "password" { "***".into() } else { v };
                (k.into_owned(), v.into_owned())
            })
            .collect();
        u.query_pairs_mut().clear().extend_pairs(pairs);
    }
    u.to_string()
}

/// `[context]`: hub defaults for the context engine.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ContextConfig {
    /// Days an event is kept.
    pub retention_days: u32,
    /// Longer agent outputs are truncated and flagged.
    pub max_agent_output_chars: usize,
    /// Character budget of the thread context.
    pub max_context_chars: usize,
    /// Item budget of the thread context.
    pub thread_context_limit: usize,
    /// Budget of a quoted reply, truncation marker included.
    pub quoted_reply_max_chars: usize,
    /// Inject the thread context (topic root, discussion, other bots' outputs).
    pub shared_thread_enabled: bool,
    /// Inject the topic root into a new session's first turn.
    pub topic_root_enabled: bool,
    /// Inject the group messages observed since the last accepted turn.
    pub group_chat_history_share: bool,
}

impl Default for ContextConfig {
    fn default() -> Self {
        Self {
            retention_days: 30,
            max_agent_output_chars: 20_000,
            max_context_chars: 24_000,
            thread_context_limit: 20,
            quoted_reply_max_chars: 12_000,
            shared_thread_enabled: false,
            topic_root_enabled: true,
            group_chat_history_share: false,
        }
    }
}

/// `[worker]`: the background inbox worker.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WorkerConfig {
    /// Run the inbox worker in this process.
    pub enabled: bool,
    /// Chats processed side by side.
    pub lanes: usize,
    /// Events of one chat claimed and recorded together (one transaction).
    pub batch: u32,
    /// Attempts before an event is marked failed.
    pub max_attempts: u32,
    /// First retry delay; doubles per attempt.
    pub retry_base_ms: u64,
    /// Longest retry delay.
    pub retry_max_ms: u64,
    /// How often an idle worker looks for due retries and other replicas' work.
    pub poll_interval_ms: u64,
    /// How long a claimed event stays reserved for one worker; a heartbeat renews the
    /// leases of events still in hand every third of it. Also how long a replica may be
    /// silent before other replicas take its unfinished turns over.
    pub lease_ms: u64,
    /// How often turns on other replicas are looked at: an earlier turn of a session
    /// that a turn here waits for, and stops asked on another replica.
    pub replica_poll_ms: u64,
    /// This process's name on its inbox claims (default `<hostname>:<listen port>`): a
    /// restart under the same name takes its earlier claims back at once (Postgres;
    /// on SQLite every claim is the one process's).
    pub replica_id: Option<String>,
}

impl Default for WorkerConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            lanes: 4,
            batch: 256,
            max_attempts: 8,
            retry_base_ms: 1000,
            retry_max_ms: 5 * 60 * 1000,
            poll_interval_ms: 1000,
            lease_ms: 30 * 1000,
            replica_poll_ms: 250,
            replica_id: None,
        }
    }
}

/// How a profile's events reach the bridge.
#[derive(Debug, Clone, Copy, Deserialize, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Connection {
    /// Feishu POSTs them to the event URL (`/webhook/<name>/event`): needs a public URL.
    #[default]
    Webhook,
    /// The bridge holds Feishu's long connection (a WebSocket it opens): no public URL.
    Websocket,
}

/// How a group chat's sessions are keyed.
#[derive(Debug, Clone, Copy, Deserialize, Default, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum GroupScope {
    /// `group:<chat_id>`
    #[default]
    SharedChat,
    /// `group-user:<chat_id>:<open_id>`
    PerUser,
    /// `thread:<chat_id>:<root_id>`
    Thread,
}

/// One Feishu app, its agent backend and its policies.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    /// URL segment: `/webhook/<name>/event`.
    pub name: String,
    /// The app's `app_id`; also the profile's `bridge_id`.
    pub app_id: String,
    /// Where the file writes `app_id` (not part of the file; see `places.rs`).
    #[serde(skip)]
    app_id_at: Option<Location>,
    /// How its events arrive: the event URL (default) or the long connection. The HTTP
    /// routes stay open either way.
    #[serde(default)]
    pub connection: Connection,
    /// env `FEISHU_BRIDGE_<NAME>_APP_SECRET`.
    #[serde(default)]
    pub app_secret: Option<SecretString>,
    /// env `FEISHU_BRIDGE_<NAME>_ENCRYPT_KEY`; optional.
    #[serde(default)]
    pub encrypt_key: Option<SecretString>,
    /// env `FEISHU_BRIDGE_<NAME>_VERIFICATION_TOKEN`.
    #[serde(default)]
    pub verification_token: Option<SecretString>,
    /// The bot's own open_id; else asked from the bot info API at start.
    #[serde(default)]
    pub bot_open_id: Option<String>,
    /// Open API base URL.
    #[serde(default = "default_api_base")]
    pub api_base: String,
    /// Accept private chats.
    #[serde(default = "yes")]
    pub dm_enabled: bool,
    /// Accept group chats.
    #[serde(default = "yes")]
    pub group_enabled: bool,
    /// In groups, only an @ of this bot invokes it.
    #[serde(default = "yes")]
    pub require_mention: bool,
    /// In groups, every message invokes the bot.
    #[serde(default)]
    pub group_reply_all: bool,
    /// Threads get their own history scope.
    #[serde(default = "yes")]
    pub thread_isolation: bool,
    /// How group sessions are keyed; only with `thread_isolation = false` (with thread
    /// isolation every group session is a thread's).
    #[serde(default)]
    pub group_scope: GroupScope,
    /// Whether the file sets `group_scope` (not part of the file; see `warnings.rs`).
    #[serde(skip)]
    group_scope_set: bool,
    /// Record replies instead of sending them.
    #[serde(default)]
    pub dry_run: bool,
    /// Chats that may be observed; empty = all.
    #[serde(default)]
    pub allow_chats: Vec<String>,
    /// Users who may invoke; empty = everyone.
    #[serde(default)]
    pub allow_users: Vec<String>,
    /// Overrides `context.shared_thread_enabled` for this profile.
    #[serde(default)]
    pub shared_thread_enabled: Option<bool>,
    /// Overrides `context.topic_root_enabled` for this profile.
    #[serde(default)]
    pub topic_root_enabled: Option<bool>,
    /// Overrides `context.group_chat_history_share` for this profile.
    #[serde(default)]
    pub group_chat_history_share: Option<bool>,
    /// Overrides `feed.enabled` for this profile.
    #[serde(default)]
    pub feed_enabled: Option<bool>,
    /// `false`: the daily digest leaves this profile's sessions alone (a workspace's
    /// `digest` overrides it in its chat).
    #[serde(default)]
    pub digest: Option<bool>,
    /// Agent backend.
    #[serde(default)]
    pub agent: AgentConfig,
}

fn default_api_base() -> String {
    "https://open.feishu.cn".into()
}

fn yes() -> bool {
    true
}

impl Profile {
    /// The encrypt key, if one is configured and non-empty.
    pub fn encrypt_key(&self) -> Option<&str> {
        self.encrypt_key
            .as_ref()
            .map(|k| k.expose_secret())
            .filter(|k| !k.is_empty())
    }

    /// The verification token (validated to be present and non-empty for webhook
    /// profiles; empty when a long-connection profile has none, which no callback can
    /// then match).
    pub fn verification_token(&self) -> &str {
        self.verification_token
            .as_ref()
            .map(|k| k.expose_secret())
            .unwrap_or_default()
    }

    /// Prefix of this profile's environment variables: `FEISHU_BRIDGE_<NAME>_`.
    pub fn env_prefix(&self) -> String {
        format!(
            "FEISHU_BRIDGE_{}_",
            self.name.to_uppercase().replace('-', "_")
        )
    }
}

/// Which agent backend a profile hands its turns to.
#[derive(Debug, Clone, Copy, Deserialize, Default, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum AgentKind {
    /// Built in: answers with a summary of what it was given.
    #[default]
    Echo,
    /// POST to the operator's agent runtime.
    Webhook,
    /// An OpenAI-compatible chat-completions endpoint.
    Openai,
}

impl AgentKind {
    /// The config spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Echo => "echo",
            Self::Webhook => "webhook",
            Self::Openai => "openai",
        }
    }
}

/// `[profiles.agent]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentConfig {
    /// Backend kind.
    #[serde(default)]
    pub kind: AgentKind,
    /// Webhook URL.
    #[serde(default)]
    pub url: Option<String>,
    /// Webhook signing secret; env `FEISHU_BRIDGE_<NAME>_AGENT_SECRET`.
    #[serde(default)]
    pub secret: Option<SecretString>,
    /// Turn timeout.
    #[serde(default = "default_agent_timeout")]
    pub timeout_secs: u64,
    /// OpenAI-compatible base URL.
    #[serde(default)]
    pub base_url: Option<String>,
    /// Model name.
    #[serde(default)]
    pub model: Option<String>,
    /// API key; env `FEISHU_BRIDGE_<NAME>_AGENT_API_KEY`.
    #[serde(default)]
    pub api_key: Option<SecretString>,
    /// openai: ask for a streamed answer and show it in a card as it grows; webhook: show
    /// the agent's turn events (text, tool calls, status, questions) in a card as they
    /// come. `false`: the answer comes as one reply when the agent is done.
    #[serde(default = "yes")]
    pub stream: bool,
    /// openai: show the model's streamed reasoning (`reasoning_content`) collapsed in the
    /// card; never part of the answer.
    #[serde(default)]
    pub show_thinking: bool,
    /// Fewest milliseconds between two updates of a streaming answer's card (at least
    /// 200: Feishu allows 5 updates per second per message).
    #[serde(default = "default_stream_interval")]
    pub stream_interval_ms: u64,
    /// The emoji (Feishu's `emoji_type`, e.g. `Typing`) the bot reacts with on a request
    /// while its turn runs, removed when the turn ends; empty: none.
    #[serde(default = "default_working_reaction")]
    pub working_reaction: String,
}

/// The reaction a running turn shows on its request unless configured otherwise.
pub const DEFAULT_WORKING_REACTION: &str = "Typing";

fn default_working_reaction() -> String {
    DEFAULT_WORKING_REACTION.to_string()
}

fn default_stream_interval() -> u64 {
    500
}

fn default_agent_timeout() -> u64 {
    600
}

impl Default for AgentConfig {
    fn default() -> Self {
        Self {
            kind: AgentKind::Echo,
            url: None,
            secret: None,
            timeout_secs: default_agent_timeout(),
            base_url: None,
            model: None,
            api_key: None,
            stream: yes(),
            show_thinking: false,
            stream_interval_ms: default_stream_interval(),
            working_reaction: default_working_reaction(),
        }
    }
}

/// Workspace collection mode.
#[derive(Debug, Clone, Copy, Deserialize, serde::Serialize, Default, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum WorkspaceMode {
    /// Un-mentioned discussion is recorded and shared.
    #[default]
    Shared,
    /// Only the owner's explicit @ invokes; discussion is not recorded.
    OwnerOnly,
}

impl WorkspaceMode {
    /// The config spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Shared => "shared",
            Self::OwnerOnly => "owner_only",
        }
    }

    /// The mode a config spelling names.
    pub fn parse(s: &str) -> Option<Self> {
        [Self::Shared, Self::OwnerOnly]
            .into_iter()
            .find(|m| m.as_str() == s)
    }
}

/// `[[workspaces]]`: a group chat configured for the hub.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Workspace {
    /// `oc_…`
    pub chat_id: String,
    /// Collection mode.
    #[serde(default)]
    pub mode: WorkspaceMode,
    /// open_id, union_id or user_id of the owner (required for `owner_only`).
    #[serde(default)]
    pub owner: Option<String>,
    /// Item budget override.
    #[serde(default)]
    pub thread_context_limit: Option<usize>,
    /// Overrides `feed.enabled` (and the profile's `feed_enabled`) in this chat.
    #[serde(default)]
    pub feed_enabled: Option<bool>,
    /// `false`: the daily digest leaves this chat's sessions alone (overrides the
    /// profile's `digest`).
    #[serde(default)]
    pub digest: Option<bool>,
}

impl Config {
    /// The profile with this URL name.
    pub fn profile(&self, name: &str) -> Option<&Profile> {
        self.profiles.iter().find(|p| p.name == name)
    }

    /// The workspace config of a chat, if the chat is one.
    pub fn workspace(&self, chat_id: &str) -> Option<&Workspace> {
        self.workspaces.iter().find(|w| w.chat_id == chat_id)
    }

    /// `topic_root_enabled` for a profile: its override, else the hub default.
    pub fn topic_root_enabled(&self, p: &Profile) -> bool {
        p.topic_root_enabled
            .unwrap_or(self.context.topic_root_enabled)
    }

    /// `shared_thread_enabled` for a profile: its override, else the hub default.
    pub fn shared_thread_enabled(&self, p: &Profile) -> bool {
        p.shared_thread_enabled
            .unwrap_or(self.context.shared_thread_enabled)
    }

    /// Whether profile `p` gathers chat `chat_id`'s messages into its batched feed: the
    /// workspace's override, else the profile's, else `feed.enabled`.
    pub fn feed_enabled(&self, p: &Profile, chat_id: &str) -> bool {
        self.workspace(chat_id)
            .and_then(|w| w.feed_enabled)
            .or(p.feed_enabled)
            .unwrap_or(self.feed.enabled)
    }

    /// Whether the daily digest takes a session of profile `p` in chat `chat_id`: the
    /// workspace's `digest`, else the profile's, else yes; a direct-message session
    /// only with `digest.include_dms`. (Whether the digest runs at all is
    /// `digest.enabled`.)
    pub fn digest_takes(&self, p: &Profile, chat_id: &str, chat_type: ChatType) -> bool {
        let here = self
            .workspace(chat_id)
            .and_then(|w| w.digest)
            .or(p.digest)
            .unwrap_or(true);
        here && (chat_type != ChatType::P2p || self.digest.include_dms)
    }

    /// `group_chat_history_share` for a profile: its override, else the hub default.
    pub fn group_chat_history_share(&self, p: &Profile) -> bool {
        p.group_chat_history_share
            .unwrap_or(self.context.group_chat_history_share)
    }

    /// The name this process puts on its inbox claims: `worker.replica_id`, else
    /// `<hostname>:<listen port>` (stable across restarts of one deployment, distinct
    /// between replicas that share a host).
    pub fn replica_id(&self) -> String {
        if let Some(id) = self.worker.replica_id.as_deref().filter(|s| !s.is_empty()) {
            return id.to_string();
        }
        let host = std::env::var("HOSTNAME")
            .ok()
            .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok())
            .map(|h| h.trim().to_string())
            .filter(|h| !h.is_empty())
            .unwrap_or_else(|| "localhost".into());
        format!("{host}:{}", self.server.listen_addr().port())
    }

    /// The config file's path, or `built-in defaults` when there is none: for messages.
    pub fn source_label(&self) -> String {
        self.path()
            .map_or_else(|| "built-in defaults".into(), |p| p.display().to_string())
    }

    /// Path the configuration was read from, if any.
    pub fn path(&self) -> Option<&PathBuf> {
        match &self.source {
            ConfigSource::File(p) => Some(p),
            ConfigSource::Defaults => None,
        }
    }
}
