//! Semantic checks that serde cannot express; each error names its key.

use std::{collections::HashSet, net::SocketAddr};

use secrecy::ExposeSecret;

use super::{AgentKind, Config, ConfigError, WorkspaceMode};

pub(super) fn validate(config: &Config) -> Result<(), ConfigError> {
    let server = &config.server;
    let addr: SocketAddr = server.listen.parse().map_err(|_| {
        ConfigError::new("server.listen", "expected host:port, e.g. 127.0.0.1:8080")
    })?;
    if server.max_body_bytes < 1024 {
        return Err(ConfigError::new(
            "server.max_body_bytes",
            "must be at least 1024",
        ));
    }
    if server.request_timeout_secs == 0 {
        return Err(ConfigError::new(
            "server.request_timeout_secs",
            "must be positive",
        ));
    }
    if server.admin_token().is_none() && !addr.ip().is_loopback() && !server.allow_unauthenticated {
        return Err(ConfigError::new(
            "server.admin_token",
            "required when listening on a non-loopback address (set it, or \
             FEISHU_BRIDGE_ADMIN_TOKEN, or allow_unauthenticated = true)",
        ));
    }

    let url = config.database.url.expose_secret();
    if !(url.starts_with("sqlite:")
        || url.starts_with("postgres:")
        || url.starts_with("postgresql:"))
    {
        return Err(ConfigError::new(
            "database.url",
            "expected a sqlite://… or postgres://… URL",
        ));
    }
    if config.database.timeout_ms == 0 {
        return Err(ConfigError::new("database.timeout_ms", "must be positive"));
    }
    if config.database.committers == 0 {
        return Err(ConfigError::new(
            "database.committers",
            "must be at least 1",
        ));
    }
    if config.worker.max_attempts == 0 {
        return Err(ConfigError::new(
            "worker.max_attempts",
            "must be at least 1",
        ));
    }

    let mut names = HashSet::new();
    for (i, p) in config.profiles.iter().enumerate() {
        let key = |field: &str| format!("profiles[{i}].{field}");
        if p.name.is_empty()
            || !p
                .name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
        {
            return Err(ConfigError::new(
                key("name"),
                "must be non-empty lowercase letters, digits, '-' or '_' (it is a URL segment)",
            ));
        }
        if !names.insert(p.name.as_str()) {
            return Err(ConfigError::new(
                key("name"),
                format!("duplicate profile name {:?}", p.name),
            ));
        }
        if p.app_id.trim().is_empty() {
            return Err(ConfigError::new(key("app_id"), "must not be empty"));
        }
        let prefix = p.env_prefix();
        if p.verification_token.is_none() {
            return Err(ConfigError::new(
                key("verification_token"),
                format!("missing (set it in the file or {prefix}VERIFICATION_TOKEN)"),
            ));
        }
        if p.verification_token().is_empty() {
            return Err(ConfigError::new(
                key("verification_token"),
                "must not be empty",
            ));
        }
        if p.encrypt_key.is_some() && p.encrypt_key().is_none() {
            return Err(ConfigError::new(
                key("encrypt_key"),
                "must not be empty (remove the key to run without encryption)",
            ));
        }
        if url::Url::parse(&p.api_base).is_err() {
            return Err(ConfigError::new(key("api_base"), "not a URL"));
        }
        match p.agent.kind {
            AgentKind::Webhook => {
                let Some(u) = &p.agent.url else {
                    return Err(ConfigError::new(
                        key("agent.url"),
                        "required for kind = \"webhook\"",
                    ));
                };
                if url::Url::parse(u).is_err() {
                    return Err(ConfigError::new(key("agent.url"), "not a URL"));
                }
                if p.agent
                    .secret
                    .as_ref()
                    .is_none_or(|s| s.expose_secret().is_empty())
                {
                    return Err(ConfigError::new(
                        key("agent.secret"),
                        format!("required for kind = \"webhook\" (or {prefix}AGENT_SECRET)"),
                    ));
                }
            }
            AgentKind::Openai => {
                if p.agent
                    .base_url
                    .as_deref()
                    .is_none_or(|u| url::Url::parse(u).is_err())
                {
                    return Err(ConfigError::new(
                        key("agent.base_url"),
                        "required for kind = \"openai\" (a URL)",
                    ));
                }
                if p.agent.model.as_deref().is_none_or(str::is_empty) {
                    return Err(ConfigError::new(
                        key("agent.model"),
                        "required for kind = \"openai\"",
                    ));
                }
            }
            AgentKind::Echo => {}
        }
    }

    let mut chats = HashSet::new();
    for (i, w) in config.workspaces.iter().enumerate() {
        let key = |field: &str| format!("workspaces[{i}].{field}");
        if w.chat_id.is_empty() {
            return Err(ConfigError::new(key("chat_id"), "must not be empty"));
        }
        if !chats.insert(w.chat_id.as_str()) {
            return Err(ConfigError::new(key("chat_id"), "duplicate workspace"));
        }
        if w.mode == WorkspaceMode::OwnerOnly && w.owner.as_deref().is_none_or(str::is_empty) {
            return Err(ConfigError::new(
                key("owner"),
                "required when mode = \"owner_only\"",
            ));
        }
        if w.thread_context_limit == Some(0) {
            return Err(ConfigError::new(
                key("thread_context_limit"),
                "must be positive",
            ));
        }
    }
    Ok(())
}
