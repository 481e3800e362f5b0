//! Semantic checks that serde cannot express. Every check runs, so one pass reports
//! every problem; each names its key.

use std::collections::HashSet;

use secrecy::ExposeSecret;

use super::problems::Problems;
use super::{
    AgentKind, Config, Connection, DatabaseConfig, Profile, ServerConfig, WorkerConfig, Workspace,
    WorkspaceMode,
};

/// Runs every check of `config` (whose listen address is already resolved, when it
/// could be) and records what fails in `out`.
pub(super) fn validate(config: &Config, out: &mut Problems) {
    server(&config.server, out);
    database(&config.database, out);
    worker(&config.worker, out);
    feed(&config.feed, out);
    handoff(&config.handoff, out);
    super::media::validate(&config.media, out);
    out.require(config.names.ttl_secs > 0, "names.ttl_secs", || {
        "must be at least 1".into()
    });
    let mut names = HashSet::new();
    for (i, p) in config.profiles.iter().enumerate() {
        let key = |field: &str| format!("profiles[{i}].{field}");
        out.require(is_url_segment(&p.name), key("name"), || {
            "must be non-empty lowercase letters, digits, '-' or '_' (it is a URL segment)".into()
        });
        out.require(names.insert(p.name.as_str()), key("name"), || {
            format!("duplicate profile name {:?}", p.name)
        });
        profile(p, &key, out);
    }
    super::long_connection::one_per_app(&config.profiles, out);
    let mut chats = HashSet::new();
    for (i, w) in config.workspaces.iter().enumerate() {
        let key = |field: &str| format!("workspaces[{i}].{field}");
        if out.require(!w.chat_id.is_empty(), key("chat_id"), || {
            "must not be empty".into()
        }) {
            out.require(chats.insert(w.chat_id.as_str()), key("chat_id"), || {
                "duplicate workspace".into()
            });
        }
        workspace(w, &key, out);
    }
}

fn server(server: &ServerConfig, out: &mut Problems) {
    out.require(
        server.max_body_bytes >= 1024,
        "server.max_body_bytes",
        || "must be at least 1024".into(),
    );
    out.require(
        server.request_timeout_secs > 0,
        "server.request_timeout_secs",
        || "must be positive".into(),
    );
    out.require(
        (1..3000).contains(&server.ack_deadline_ms),
        "server.ack_deadline_ms",
        || {
            "must be between 1 and 2999: Feishu stops waiting after 3 s and sends the event again"
                .into()
        },
    );
    super::limits::validate(server, out);
    // The address the listener binds; unknown when `listen` did not resolve, which is
    // reported already.
    let Some(addr) = server.resolved else {
        return;
    };
    let open = addr.ip().is_loopback() || server.allow_unauthenticated;
    out.require(
        server.admin_token().is_some() || open,
        "server.admin_token",
        || {
            format!(
                "required when listening on {addr}, a non-loopback address (set it, or \
                 FEISHU_BRIDGE_ADMIN_TOKEN, or allow_unauthenticated = true)"
            )
        },
    );
}

fn database(database: &DatabaseConfig, out: &mut Problems) {
    let url = database.url.expose_secret();
    let known = ["sqlite:", "postgres:", "postgresql:"];
    out.require(
        known.iter().any(|s| url.starts_with(s)),
        "database.url",
        || "expected a sqlite://… or postgres://… URL".into(),
    );
    out.require(database.timeout_ms > 0, "database.timeout_ms", || {
        "must be positive".into()
    });
    out.require(database.committers > 0, "database.committers", || {
        "must be at least 1".into()
    });
}

fn worker(worker: &WorkerConfig, out: &mut Problems) {
    out.require(worker.lease_ms >= 300, "worker.lease_ms", || {
        "must be at least 300 (a heartbeat renews it every third)".into()
    });
    out.require(worker.replica_poll_ms > 0, "worker.replica_poll_ms", || {
        "must be at least 1".into()
    });
    out.require(worker.max_attempts > 0, "worker.max_attempts", || {
        "must be at least 1".into()
    });
    out.require(worker.lanes > 0, "worker.lanes", || {
        "must be at least 1".into()
    });
    out.require((1..=10_000).contains(&worker.batch), "worker.batch", || {
        "must be between 1 and 10000".into()
    });
}

fn feed(feed: &super::FeedConfig, out: &mut Problems) {
    for (ok, key, why) in [
        (
            feed.batch_messages > 0,
            "feed.batch_messages",
            "must be at least 1",
        ),
        (
            feed.max_wait_secs > 0,
            "feed.max_wait_secs",
            "must be at least 1",
        ),
        (
            feed.segment_items > 0,
            "feed.segment_items",
            "must be at least 1",
        ),
        (
            feed.segment_chars >= 100,
            "feed.segment_chars",
            "must be at least 100",
        ),
        (
            feed.max_unread_segments > 0,
            "feed.max_unread_segments",
            "must be at least 1",
        ),
    ] {
        out.require(ok, key, || why.into());
    }
}

fn handoff(h: &super::HandoffConfig, out: &mut Problems) {
    out.require((1..=32).contains(&h.max_hops), "handoff.max_hops", || {
        "must be between 1 and 32".into()
    });
    out.require(
        (1..=10_000).contains(&h.thread_budget_per_hour),
        "handoff.thread_budget_per_hour",
        || "must be between 1 and 10000".into(),
    );
}

/// A profile name: it is a segment of `/feishu/<name>/…` URLs.
fn is_url_segment(name: &str) -> bool {
    let allowed = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_';
    !name.is_empty() && name.chars().all(allowed)
}

/// A Feishu `emoji_type` as its emoji list spells them (`Typing`, `OnIt`, `THUMBSUP`),
/// or empty (no reaction). Whether Feishu knows it only Feishu can say: an unknown one
/// is refused with 231001 when first used, and the bridge stops trying (`/status`).
fn is_emoji_type(emoji: &str) -> bool {
    emoji.len() <= 64 && emoji.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// One profile past its name; `key` names its fields (`profiles[i].…`).
fn profile(p: &Profile, key: &dyn Fn(&str) -> String, out: &mut Problems) {
    out.require(!p.app_id.trim().is_empty(), key("app_id"), || {
        "must not be empty".into()
    });
    let prefix = p.env_prefix();
    let has_secret = p
        .app_secret
        .as_ref()
        .is_some_and(|s| !s.expose_secret().is_empty());
    match p.connection {
        Connection::Webhook => {
            out.require(
                p.verification_token.is_some(),
                key("verification_token"),
                || format!("missing (set it in the file or {prefix}VERIFICATION_TOKEN)"),
            );
            // Without it no reply can be posted: every answer would be recorded and
            // never reach Feishu, while its turn shows "succeeded".
            out.require(p.dry_run || has_secret, key("app_secret"), || {
                format!(
                    "required to post replies (set it in the file or {prefix}APP_SECRET), or set \
                     dry_run = true to record replies in the database without sending them"
                )
            });
        }
        Connection::Websocket => {
            out.require(
                has_secret,
                key("app_secret"),
                || {
                    format!(
                        "required for connection = \"websocket\" (set it in the file or {prefix}APP_SECRET)"
                    )
                },
            );
        }
    }
    out.require(
        p.verification_token.is_none() || !p.verification_token().is_empty(),
        key("verification_token"),
        || "must not be empty".into(),
    );
    out.require(
        p.encrypt_key.is_none() || p.encrypt_key().is_some(),
        key("encrypt_key"),
        || "must not be empty (remove the key to run without encryption)".into(),
    );
    out.require(
        url::Url::parse(&p.api_base).is_ok(),
        key("api_base"),
        || "not a URL".into(),
    );
    out.require(
        is_emoji_type(&p.agent.working_reaction),
        key("agent.working_reaction"),
        || {
            "expected one of Feishu's emoji types (letters, digits and _, at most 64; e.g. \"Typing\"), or \"\" for none".into()
        },
    );
    match p.agent.kind {
        AgentKind::Webhook => webhook_agent(p, key, out),
        AgentKind::Openai => openai_agent(p, key, out),
        AgentKind::Echo => {}
    }
}

fn webhook_agent(p: &Profile, key: &dyn Fn(&str) -> String, out: &mut Problems) {
    let url = p.agent.url.as_deref();
    if out.require(url.is_some(), key("agent.url"), || {
        "required for kind = \"webhook\"".into()
    }) {
        out.require(
            url.is_some_and(|u| url::Url::parse(u).is_ok()),
            key("agent.url"),
            || "not a URL".into(),
        );
    }
    let secret = p.agent.secret.as_ref();
    out.require(
        secret.is_some_and(|s| !s.expose_secret().is_empty()),
        key("agent.secret"),
        || {
            format!(
                "required for kind = \"webhook\" (or {}AGENT_SECRET)",
                p.env_prefix()
            )
        },
    );
}

fn openai_agent(p: &Profile, key: &dyn Fn(&str) -> String, out: &mut Problems) {
    let is_http = |u: &str| {
        url::Url::parse(u).is_ok_and(|u| matches!(u.scheme(), "http" | "https") && u.has_host())
    };
    let base_url = p.agent.base_url.as_deref();
    if out.require(base_url.is_some(), key("agent.base_url"), || {
        format!(
            "required for kind = \"openai\" in profile {:?} (e.g. \"http://127.0.0.1:11434/v1\")",
            p.name
        )
    }) {
        out.require(base_url.is_some_and(is_http), key("agent.base_url"), || {
            format!(
                "profile {:?}: expected an http:// or https:// URL (e.g. \"http://127.0.0.1:11434/v1\")",
                p.name
            )
        });
    }
    let model = p.agent.model.as_deref();
    out.require(
        model.is_some_and(|m| !m.trim().is_empty()),
        key("agent.model"),
        || format!("required for kind = \"openai\" in profile {:?}", p.name),
    );
}

/// One workspace past its chat id; `key` names its fields (`workspaces[i].…`).
fn workspace(w: &Workspace, key: &dyn Fn(&str) -> String, out: &mut Problems) {
    let owned = w.owner.as_deref().is_some_and(|o| !o.is_empty());
    out.require(
        w.mode != WorkspaceMode::OwnerOnly || owned,
        key("owner"),
        || "required when mode = \"owner_only\"".into(),
    );
    out.require(
        w.thread_context_limit != Some(0),
        key("thread_context_limit"),
        || "must be positive".into(),
    );
}

#[cfg(test)]
mod tests {
    use super::super::{ConfigError, ConfigErrors, load_from_str};

    const BASE: &str = r#"
[[profiles]]
name = "planner"
app_id = "cli_a"
verification_token = "vt-a"
dry_run = true

[profiles.agent]
kind = "openai"
"#;

    fn load(agent_lines: &str) -> Result<super::super::Config, ConfigError> {
        load_from_str(&format!("{BASE}{agent_lines}"), &|_| None).map_err(ConfigErrors::single)
    }

    #[test]
    fn the_working_reaction_is_an_emoji_type_or_empty() {
        const AGENT: &str = "base_url = \"http://127.0.0.1:11434/v1\"\nmodel = \"m\"\n";
        for good in ["", "Typing", "OnIt", "THUMBSUP", "Get_it"] {
            let config = load(&format!("{AGENT}working_reaction = \"{good}\"\n"));
            assert!(config.is_ok(), "{good:?}: {config:?}");
        }
        for bad in [" Typing", "👀", "On It", "a/b", &"x".repeat(65)] {
            let err = load(&format!("{AGENT}working_reaction = {bad:?}\n")).expect_err(bad);
            assert_eq!(err.key, "profiles[0].agent.working_reaction", "{bad}");
        }
        let config = load(AGENT).expect("defaults");
        assert_eq!(config.profiles[0].agent.working_reaction, "Typing");
    }

    #[test]
    fn the_admin_token_check_looks_at_the_resolved_address() {
        let keys = |resolved: &str| {
            let mut config = super::super::Config::default();
            config.server.listen = "bridge.internal:8080".into();
            config.server.resolved = Some(resolved.parse().expect("addr"));
            let mut out = crate::config::problems::Problems::default();
            super::validate(&config, &mut out);
            out.into_vec()
                .into_iter()
                .map(|e| e.key)
                .collect::<Vec<_>>()
        };
        assert_eq!(keys("10.0.0.5:8080"), ["server.admin_token"]);
        assert_eq!(keys("127.0.0.1:8080"), Vec::<String>::new());
        assert_eq!(keys("[::1]:8080"), Vec::<String>::new());
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
            ("[worker]\nlanes = 0\n", "worker.lanes"),
            ("[worker]\nbatch = 0\n", "worker.batch"),
        ] {
            let err = load_from_str(text, &|_| None).expect_err(text).single();
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

    #[test]
    fn a_websocket_profile_needs_an_app_secret_and_no_verification_token() {
        let profile = |more: &str| {
            format!(
                "[[profiles]]\nname = \"p\"\napp_id = \"cli_1\"\nconnection = \"websocket\"\n{more}"
            )
        };
        let err = load_from_str(&profile(""), &|_| None)
            .expect_err("no secret")
            .single();
        assert_eq!(err.key, "profiles[0].app_secret");
        assert!(err.message.contains("websocket"), "{err}");
        let ok = load_from_str(&profile("app_secret = \"s\"\n"), &|_| None).expect("valid");
        assert_eq!(
            ok.profiles[0].connection,
            super::super::Connection::Websocket
        );
        assert_eq!(ok.profiles[0].verification_token(), "");
        let from_env = load_from_str(&profile(""), &|k| {
            (k == "FEISHU_BRIDGE_P_APP_SECRET").then(|| "s".to_string())
        });
        assert!(from_env.is_ok(), "{from_env:?}");
        let err = load_from_str(&profile("connection = \"carrier-pigeon\"\n"), &|_| None);
        assert!(err.is_err());
        // A webhook profile still needs its token.
        let webhook = "[[profiles]]\nname = \"p\"\napp_id = \"cli_1\"\ndry_run = true\n";
        let err = load_from_str(webhook, &|_| None)
            .expect_err("no token")
            .single();
        assert_eq!(err.key, "profiles[0].verification_token");
    }

    #[test]
    fn a_profile_that_cannot_post_replies_must_say_it_is_a_dry_run() {
        let profile = |more: &str| {
            format!(
                "[[profiles]]\nname = \"p\"\napp_id = \"a\"\nverification_token = \"t\"\n{more}"
            )
        };
        for no_secret in ["", "app_secret = \"\"\n", "dry_run = false\n"] {
            let err = load_from_str(&profile(no_secret), &|_| None)
                .expect_err("replies could never be posted")
                .single();
            assert_eq!(err.key, "profiles[0].app_secret", "{no_secret:?}");
            assert!(err.message.contains("FEISHU_BRIDGE_P_APP_SECRET"), "{err}");
            assert!(err.message.contains("dry_run = true"), "{err}");
        }
        for fine in ["dry_run = true\n", "app_secret = \"s\"\n"] {
            let ok = load_from_str(&profile(fine), &|_| None);
            assert!(ok.is_ok(), "{fine:?}: {ok:?}");
        }
        let from_env = load_from_str(&profile(""), &|k| {
            (k == "FEISHU_BRIDGE_P_APP_SECRET").then(|| "s".to_string())
        });
        assert!(from_env.is_ok(), "{from_env:?}");
    }

    #[test]
    fn the_feed_is_off_by_default_and_its_overrides_go_workspace_profile_hub() {
        let base = "[[profiles]]\nname = \"p\"\napp_id = \"a\"\nverification_token = \"t\"\ndry_run = true\n";
        let c = load_from_str(base, &|_| None).expect("valid");
        assert!(!c.feed_enabled(&c.profiles[0], "oc_1"));
        assert_eq!(c.feed.batch_messages, 25);
        let text = format!(
            "[feed]\nenabled = true\n{base}feed_enabled = false\n\
             [[workspaces]]\nchat_id = \"oc_on\"\nfeed_enabled = true\n"
        );
        let c = load_from_str(&text, &|_| None).expect("valid");
        let p = &c.profiles[0];
        assert!(!c.feed_enabled(p, "oc_1"), "the profile's override");
        assert!(c.feed_enabled(p, "oc_on"), "the workspace's, last");
        for (bad, key) in [
            ("[feed]\nbatch_messages = 0\n", "feed.batch_messages"),
            ("[feed]\nsegment_chars = 10\n", "feed.segment_chars"),
            (
                "[feed]\nmax_unread_segments = 0\n",
                "feed.max_unread_segments",
            ),
            ("[handoff]\nmax_hops = 0\n", "handoff.max_hops"),
            (
                "[handoff]\nthread_budget_per_hour = 0\n",
                "handoff.thread_budget_per_hour",
            ),
        ] {
            let err = load_from_str(bad, &|_| None).expect_err(bad).single();
            assert_eq!(err.key, key);
        }
    }
}
