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
    if !(1..3000).contains(&server.ack_deadline_ms) {
        return Err(ConfigError::new(
            "server.ack_deadline_ms",
            "must be between 1 and 2999: Feishu stops waiting after 3 s and sends the event again",
        ));
    }
    super::limits::validate(server)?;
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
    if config.worker.lease_ms < 300 {
        return Err(ConfigError::new(
            "worker.lease_ms",
            "must be at least 300 (a heartbeat renews it every third)",
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
                let is_http = |u: &str| {
                    url::Url::parse(u)
                        .is_ok_and(|u| matches!(u.scheme(), "http" | "https") && u.has_host())
                };
                match p.agent.base_url.as_deref() {
                    None => {
                        return Err(ConfigError::new(
                            key("agent.base_url"),
                            format!(
                                "required for kind = \"openai\" in profile {:?} (e.g. \
                                 \"http://127.0.0.1:11434/v1\")",
                                p.name
                            ),
                        ));
                    }
                    Some(u) if !is_http(u) => {
                        return Err(ConfigError::new(
                            key("agent.base_url"),
                            format!(
                                "profile {:?}: expected an http:// or https:// URL (e.g. \
                                 \"http://127.0.0.1:11434/v1\")",
                                p.name
                            ),
                        ));
                    }
                    Some(_) => {}
                }
                if p.agent.model.as_deref().is_none_or(|m| m.trim().is_empty()) {
                    return Err(ConfigError::new(
                        key("agent.model"),
                        format!("required for kind = \"openai\" in profile {:?}", p.name),
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

#[cfg(test)]
mod tests {
    use super::super::{ConfigError, load_from_str};

    const BASE: &str = r#"
[[profiles]]
name = "planner"
app_id = "cli_a"
verification_token = "vt-a"

[profiles.agent]
kind = "openai"
"#;

    fn load(agent_lines: &str) -> Result<super::super::Config, ConfigError> {
        load_from_str(&format!("{BASE}{agent_lines}"), &|_| None)
    }

    #[test]
    fn openai_needs_a_base_url_naming_the_profile() {
        let err = load("model = \"llama3\"\n").expect_err("base_url required");
        assert_eq!(err.key, "profiles[0].agent.base_url");
        assert!(err.message.contains("\"planner\""), "{err}");
        assert!(err.message.contains("openai"), "{err}");
    }

    #[test]
    fn openai_base_url_must_be_http_or_https() {
        for bad in [
            "not a url",
            "ftp://host/v1",
            "file:///tmp/x",
            "unix:/run/x.sock",
        ] {
            let err = load(&format!("base_url = {bad:?}\nmodel = \"m\"\n")).expect_err("refused");
            assert_eq!(err.key, "profiles[0].agent.base_url", "{bad}");
            assert!(err.message.contains("http"), "{err}");
        }
        for good in ["http://127.0.0.1:11434/v1", "https://api.openai.com/v1/"] {
            load(&format!("base_url = {good:?}\nmodel = \"m\"\n")).expect(good);
        }
    }

    #[test]
    fn openai_needs_a_model() {
        for lines in [
            "base_url = \"http://127.0.0.1:11434/v1\"\n",
            "base_url = \"http://127.0.0.1:11434/v1\"\nmodel = \"  \"\n",
        ] {
            let err = load(lines).expect_err("model required");
            assert_eq!(err.key, "profiles[0].agent.model");
            assert!(err.message.contains("\"planner\""), "{err}");
        }
    }

    #[test]
    fn openai_stream_defaults_on_and_the_key_comes_from_the_environment() {
        let text = format!("{BASE}base_url = \"http://127.0.0.1:11434/v1\"\nmodel = \"m\"\n");
        let config = load_from_str(&text, &|k| {
            (k == "FEISHU_BRIDGE_PLANNER_AGENT_API_KEY").then(|| "sk-env".to_string())
        })
        .expect("valid");
        let agent = &config.profiles[0].agent;
        assert!(agent.stream);
        let key = agent
            .api_key
            .as_ref()
            .map(secrecy::ExposeSecret::expose_secret);
        assert_eq!(key, Some("sk-env"));
        assert!(!format!("{config:?}").contains("sk-env"));
        let off = load_from_str(&format!("{text}stream = false\n"), &|_| None).expect("valid");
        assert!(!off.profiles[0].agent.stream);
    }

    #[test]
    fn the_ack_deadline_stays_under_feishus_and_the_lease_has_room_for_a_heartbeat() {
        let defaults = load_from_str("", &|_| None).expect("defaults are valid");
        assert!(defaults.server.ack_deadline_ms < 3000);
        for (text, key) in [
            (
                "[server]\nack_deadline_ms = 3000\n",
                "server.ack_deadline_ms",
            ),
            ("[server]\nack_deadline_ms = 0\n", "server.ack_deadline_ms"),
            ("[worker]\nlease_ms = 10\n", "worker.lease_ms"),
        ] {
            let err = load_from_str(text, &|_| None).expect_err(text);
            assert_eq!(err.key, key, "{text}");
        }
    }

    #[test]
    fn the_replica_id_is_configured_or_names_the_host_and_port() {
        let set = load_from_str("[worker]\nreplica_id = \"a-1\"\n", &|_| None).expect("valid");
        assert_eq!(set.replica_id(), "a-1");
        let default =
            load_from_str("[server]\nlisten = \"127.0.0.1:8099\"\n", &|_| None).expect("valid");
        assert!(
            default.replica_id().ends_with(":8099"),
            "{}",
            default.replica_id()
        );
    }
}
