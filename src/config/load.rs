//! File → environment → validation.
//!
//! The environment is passed in as a lookup function rather than read with
//! `std::env::var` inside, so tests can give each load its own environment without
//! touching the process's (no `set_var`).

use std::path::{Path, PathBuf};

use secrecy::SecretString;

use super::{
    Config, ConfigError, ConfigErrors, Location, listen, places, sqlite_path, validate, warnings,
};

/// Where a configuration came from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum ConfigSource {
    /// No file: built-in defaults.
    #[default]
    Defaults,
    /// This TOML file.
    File(PathBuf),
}

/// The default file name looked for in the working directory.
pub const DEFAULT_FILE: &str = "feishu-bridge.toml";

/// The file [`load`] looks for when no path is given: [`DEFAULT_FILE`] in the working
/// directory, as an absolute path when the working directory can be read.
pub fn default_path() -> PathBuf {
    std::env::current_dir()
        .map(|dir| dir.join(DEFAULT_FILE))
        .unwrap_or_else(|_| PathBuf::from(DEFAULT_FILE))
}

/// Loads the configuration: `path`, else `FEISHU_BRIDGE_CONFIG`, else
/// `./feishu-bridge.toml` if it exists, else built-in defaults; then applies environment
/// overrides and validates. Every problem found is returned, each naming the file. A
/// relative SQLite path the file writes is read from the file's directory.
pub fn load(
    path: Option<&Path>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Config, ConfigErrors> {
    let chosen: Option<PathBuf> = match path {
        Some(p) => Some(p.to_path_buf()),
        None => match env("FEISHU_BRIDGE_CONFIG").filter(|v| !v.is_empty()) {
            Some(p) => Some(PathBuf::from(p)),
            None => Some(PathBuf::from(DEFAULT_FILE)).filter(|p| p.exists()),
        },
    };
    let Some(file) = chosen else {
        return finish(Config::default(), env);
    };
    let text = std::fs::read_to_string(&file).map_err(|e| {
        ConfigError::new(
            "",
            format!("cannot read config file {}: {e}", file.display()),
        )
    })?;
    let dir = file.parent().unwrap_or(Path::new(""));
    let mut config = parse(&text, env, Some(dir)).map_err(|e| e.in_file(&file))?;
    config.source = ConfigSource::File(file);
    Ok(config)
}

/// Parses TOML text, applies environment overrides and validates. A syntax error, or a
/// key of the wrong name or type, stops the parse and is the one problem returned (with
/// its line and column); past the parse, every problem found is returned. Relative paths
/// stay relative to the working directory (the text has no file to be relative to).
pub fn load_from_str(
    text: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Config, ConfigErrors> {
    parse(text, env, None)
}

/// [`load_from_str`], with a relative SQLite path the text writes read from `dir`, the
/// directory of the file it came from.
fn parse(
    text: &str,
    env: &dyn Fn(&str) -> Option<String>,
    dir: Option<&Path>,
) -> Result<Config, ConfigErrors> {
    let de = toml::Deserializer::new(text);
    let mut config: Config =
        serde_path_to_error::deserialize(de).map_err(|e| parse_error(text, &e))?;
    warnings::record_explicit(&mut config, text);
    places::record(&mut config, text);
    if let Some(dir) = dir {
        sqlite_path::in_file_dir(&mut config, text, dir);
    }
    finish(config, env)
}

/// Environment (secrets, then the proxy variables), then the listen address, then
/// validation, collecting every problem.
fn finish(
    mut config: Config,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Config, ConfigErrors> {
    apply_env(&mut config, env);
    let mut problems = super::problems::Problems::default();
    config.egress = super::proxy_vars::read(env, &mut problems);
    match listen::resolve(&config.server.listen) {
        Ok(addr) => config.server.resolved = Some(addr),
        Err(e) => problems.push(e),
    }
    validate::validate(&config, &mut problems);
    super::digest::validate(&config.digest, &mut problems);
    let problems = problems.into_vec();
    if problems.is_empty() {
        Ok(config)
    } else {
        Err(ConfigErrors(problems))
    }
}

/// A deserialization error as a [`ConfigError`]: the key path serde was at, the
/// message without `toml`'s own rendering, and the place its span points to.
fn parse_error(text: &str, e: &serde_path_to_error::Error<toml::de::Error>) -> ConfigError {
    let key = e.path().to_string();
    let key = if key == "." { String::new() } else { key };
    let inner = e.inner();
    let error = ConfigError::new(key, one_line(inner.message()));
    match inner.span() {
        Some(span) => error.at(Location::of(text, span.start)),
        None => error,
    }
}

/// `toml` splits a message over lines (`invalid string` / `expected ...`); one line reads
/// better after a `file:line:col:` prefix.
fn one_line(s: &str) -> String {
    let parts: Vec<&str> = s.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
    parts.join("; ")
}

/// Environment overrides: `DATABASE_URL`, `FEISHU_BRIDGE_ADMIN_TOKEN`,
/// `FEISHU_BRIDGE_DIGEST_API_KEY` and, per profile,
/// `FEISHU_BRIDGE_<NAME>_{APP_SECRET,ENCRYPT_KEY,VERIFICATION_TOKEN,AGENT_SECRET,AGENT_API_KEY}`.
/// The environment always wins over the file.
fn apply_env(config: &mut Config, env: &dyn Fn(&str) -> Option<String>) {
    let secret = |name: &str| env(name).filter(|v| !v.is_empty()).map(SecretString::from);
    if let Some(url) = secret("DATABASE_URL") {
        config.database.url = url;
    }
    if let Some(token) = secret("FEISHU_BRIDGE_ADMIN_TOKEN") {
        config.server.admin_token = Some(token);
    }
    if let Some(key) = secret("FEISHU_BRIDGE_DIGEST_API_KEY") {
        config.digest.summarizer.api_key = Some(key);
    }
    for profile in &mut config.profiles {
        let prefix = profile.env_prefix();
        let var = |suffix: &str| secret(&format!("{prefix}{suffix}"));
        if let Some(v) = var("APP_SECRET") {
            profile.app_secret = Some(v);
        }
        if let Some(v) = var("ENCRYPT_KEY") {
            profile.encrypt_key = Some(v);
        }
        if let Some(v) = var("VERIFICATION_TOKEN") {
            profile.verification_token = Some(v);
        }
        if let Some(v) = var("AGENT_SECRET") {
            profile.agent.secret = Some(v);
        }
        if let Some(v) = var("AGENT_API_KEY") {
            profile.agent.api_key = Some(v);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use secrecy::ExposeSecret;

    use super::*;

    fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| map.get(k).cloned()
    }

    const TWO_PROFILES: &str = r#"
[server]
admin_token = "file-admin"

[[profiles]]
name = "planner"
app_id = "cli_a"
verification_token = "vt-a"
dry_run = true

[[profiles]]
name = "code-bot"
app_id = "cli_b"
verification_token = "vt-b"
encrypt_key = "ek-b"
dry_run = true
"#;

    #[test]
    fn defaults_without_a_file_use_sqlite_on_loopback() {
        let config = load(None, &env_of(&[])).expect("defaults load");
        assert_eq!(config.database.redacted_url(), "sqlite://feishu-bridge.db");
        assert_eq!(config.server.listen, "127.0.0.1:8080");
        assert!(config.profiles.is_empty());
        assert_eq!(config.source, ConfigSource::Defaults);
    }

    #[test]
    fn environment_overrides_file_secrets() {
        let env = env_of(&[
            ("DATABASE_URL", "postgres://u:pw@db/x"),
            ("FEISHU_BRIDGE_ADMIN_TOKEN", "env-admin"),
            ("FEISHU_BRIDGE_CODE_BOT_ENCRYPT_KEY", "ek-env"),
            ("FEISHU_BRIDGE_PLANNER_APP_SECRET", "as-env"),
        ]);
        let config = load_from_str(TWO_PROFILES, &env).expect("loads");
        assert_eq!(config.server.admin_token(), Some("env-admin"));
        assert_eq!(config.database.redacted_url(), "postgres://u:***@db/x");
        assert_eq!(
            super::super::redact_url("postgres://u@db/x?sslmode=require&password=pw&user=u"),
            "postgres://u@db/x?sslmode=require&password=***&user=u"
        );
        assert_eq!(config.profiles[1].encrypt_key(), Some("ek-env"));
        let secret = config.profiles[0].app_secret.as_ref().expect("set");
        assert_eq!(secret.expose_secret(), "as-env");
    }

    #[test]
    fn validation_errors_name_the_key() {
        let text = TWO_PROFILES.replace("encrypt_key = \"ek-b\"", "encrypt_key = \"\"");
        let err = load_from_str(&text, &env_of(&[]))
            .expect_err("empty key rejected")
            .single();
        assert_eq!(err.key, "profiles[1].encrypt_key");
        assert!(err.to_string().starts_with("profiles[1].encrypt_key: "));
    }

    #[test]
    fn type_errors_name_the_key() {
        let text = format!("{TWO_PROFILES}\n[context]\nmax_context_chars = \"lots\"\n");
        let err = load_from_str(&text, &env_of(&[]))
            .expect_err("type error")
            .single();
        assert_eq!(err.key, "context.max_context_chars");
    }

    #[test]
    fn unknown_keys_are_rejected_with_their_place() {
        let text = TWO_PROFILES.replace(
            "app_id = \"cli_b\"",
            "app_id = \"cli_b\"\nencrypt_kye = \"x\"",
        );
        let err = load_from_str(&text, &env_of(&[]))
            .expect_err("typo rejected")
            .single();
        assert_eq!(err.key, "profiles[1].encrypt_kye");
        assert!(err.message.contains("encrypt_kye"), "{err}");
        let at = err.at.as_ref().expect("a place");
        assert_eq!((at.line, at.column), (14, 1), "{err}");
        assert_eq!(at.text, "encrypt_kye = \"x\"");
    }

    #[test]
    fn syntax_errors_keep_their_line_and_column() {
        let text = "[server]\nlisten = \"127.0.0.1:80\nmax_body_bytes = 2048\n";
        let err = load_from_str(text, &env_of(&[]))
            .expect_err("unclosed string")
            .single();
        assert_eq!(err.key, "");
        let at = err.at.as_ref().expect("a place");
        assert_eq!((at.line, at.column), (2, 23), "{err}");
        assert!(err.message.contains("string"), "{err}");
        assert!(
            err.to_string().starts_with("line 2, column 23: invalid"),
            "{err}"
        );
        assert!(err.to_string().contains("\n2 | listen = "), "{err}");
    }

    #[test]
    fn a_file_s_problems_name_the_file_and_the_place() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("hub.toml");
        std::fs::write(&path, "[worker]\nlanes = \"four\"\n").expect("write");
        let errors = load(Some(&path), &env_of(&[])).expect_err("type error");
        let shown = errors.to_string();
        assert!(
            shown.starts_with(&format!("{}:2:9: worker.lanes: ", path.display())),
            "{shown}"
        );
        std::fs::write(&path, "[worker]\nlanes = 0\n").expect("write");
        let errors = load(Some(&path), &env_of(&[])).expect_err("invalid");
        assert_eq!(
            errors.to_string(),
            format!("{}: worker.lanes: must be at least 1", path.display())
        );
    }

    #[test]
    fn every_validation_problem_is_reported_in_order() {
        let text = TWO_PROFILES
            .replace("encrypt_key = \"ek-b\"", "encrypt_key = \"\"")
            .replace("[server]\n", "[server]\nmax_body_bytes = 10\n")
            + "\n[[workspaces]]\nchat_id = \"oc_1\"\nmode = \"owner_only\"\n";
        let errors = load_from_str(&text, &env_of(&[])).expect_err("three problems");
        assert_eq!(
            errors.keys(),
            [
                "server.max_body_bytes",
                "profiles[1].encrypt_key",
                "workspaces[0].owner"
            ]
        );
        assert_eq!(errors.to_string().lines().count(), 3, "{errors}");
    }

    #[test]
    fn a_host_name_listen_is_resolved_and_checked_as_what_it_binds() {
        let config = load_from_str("[server]\nlisten = \"localhost:8099\"\n", &env_of(&[]))
            .expect("localhost resolves");
        assert_eq!(config.server.listen, "localhost:8099");
        let addr = config.server.listen_addr();
        assert_eq!(addr, "127.0.0.1:8099".parse().expect("addr"), "{addr}");
        assert!(config.replica_id().ends_with(":8099"));
        let err = load_from_str(
            "[server]\nlisten = \"no-such-host.invalid:80\"\n",
            &env_of(&[]),
        )
        .expect_err("unresolvable")
        .single();
        assert_eq!(err.key, "server.listen");
        assert!(
            err.message
                .starts_with("cannot resolve host \"no-such-host.invalid\"; expected an IP"),
            "{err}"
        );
    }

    #[test]
    fn missing_token_names_the_profile_and_its_variable() {
        let text = TWO_PROFILES.replace("verification_token = \"vt-a\"\n", "");
        let err = load_from_str(&text, &env_of(&[]))
            .expect_err("token required")
            .single();
        assert_eq!(err.key, "profiles[0].verification_token");
        assert!(
            err.message
                .contains("FEISHU_BRIDGE_PLANNER_VERIFICATION_TOKEN")
        );
        let ok = load_from_str(
            &text,
            &env_of(&[("FEISHU_BRIDGE_PLANNER_VERIFICATION_TOKEN", "from-env")]),
        )
        .expect("env supplies the token");
        assert_eq!(ok.profiles[0].verification_token(), "from-env");
    }

    #[test]
    fn rest_routes_are_not_left_open_on_a_public_address() {
        let text = "[server]\nlisten = \"0.0.0.0:8080\"\n";
        let err = load_from_str(text, &env_of(&[]))
            .expect_err("refused")
            .single();
        assert_eq!(err.key, "server.admin_token");
        load_from_str(text, &env_of(&[("FEISHU_BRIDGE_ADMIN_TOKEN", "t")])).expect("token given");
        let allowed = format!("{text}allow_unauthenticated = true\n");
        load_from_str(&allowed, &env_of(&[])).expect("explicitly allowed");
        load_from_str("[server]\nlisten = \"127.0.0.1:9\"\n", &env_of(&[]))
            .expect("loopback is fine");
    }

    #[test]
    fn secrets_never_appear_in_debug_output() {
        let env = env_of(&[("FEISHU_BRIDGE_PLANNER_APP_SECRET", "s3cr3t-app")]);
        let config = load_from_str(TWO_PROFILES, &env).expect("loads");
        let debug = format!("{config:?}");
        for secret in ["s3cr3t-app", "file-admin", "vt-a", "vt-b", "ek-b"] {
            assert!(!debug.contains(secret), "{secret} leaked in Debug output");
        }
        assert!(debug.contains("cli_a"), "non-secret fields still print");
    }
}
