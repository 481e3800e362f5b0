//! One-shot CLI commands: `migrate`, `check-config`, `healthcheck`, `explain` (and
//! its what-if), `digest`.

pub mod digests;
pub mod simulate;
mod what_if;

use std::time::Duration;

use anyhow::Context as _;

use crate::{config::Config, store};

pub use what_if::what_if;

/// Applies migrations and reports the backend.
pub async fn migrate(config: &Config) -> anyhow::Result<String> {
    let store = store::open(&config.database)
        .await
        .with_context(|| format!("cannot open database {}", config.database.redacted_url()))?;
    store.migrate().await.context("migration failed")?;
    Ok(format!(
        "migrations applied to {} ({})",
        config.database.redacted_url(),
        store.backend().as_str()
    ))
}

/// A summary of a valid configuration, without secrets, ending with its warnings.
pub fn describe(config: &Config) -> String {
    let mut out = String::new();
    let source = config.source_label();
    out.push_str(&format!("config OK ({source})\n"));
    let addr = config.server.listen_addr();
    if config.server.listen == addr.to_string() {
        out.push_str(&format!("listen: {addr}\n"));
    } else {
        out.push_str(&format!("listen: {} ({addr})\n", config.server.listen));
    }
    out.push_str(&format!("database: {}\n", config.database.redacted_url()));
    out.push_str(&format!(
        "admin token: {}\n",
        if config.server.admin_token().is_some() {
            "set"
        } else {
            "not set (REST open on loopback only)"
        }
    ));
    out.push_str(&format!("egress: {}\n", config.egress.describe()));
    for p in &config.profiles {
        out.push_str(&format!(
            "profile {}: app_id={} encrypt_key={} agent={} → POST /webhook/{}/event, /webhook/{}/card\n",
            p.name,
            p.app_id,
            if p.encrypt_key().is_some() { "set" } else { "none" },
            p.agent.kind.as_str(),
            p.name,
            p.name
        ));
    }
    if config.profiles.is_empty() {
        out.push_str(&format!(
            "no profiles in {source}: add a [[profiles]] table (name, app_id, app_secret, verification_token) to receive Feishu events\n"
        ));
    }
    for w in config.warnings() {
        out.push_str(&format!("warning: {w}\n"));
    }
    out
}

/// GETs `url`, never through a proxy; Ok on a 2xx answer.
pub async fn healthcheck(url: &str, timeout: Duration) -> anyhow::Result<()> {
    // Straight to `url`, whatever proxy the environment names: the check is of this
    // host's own process (a container's HTTP_PROXY must not turn it unhealthy).
    let client = reqwest::Client::builder()
        .timeout(timeout)
        .no_proxy()
        .build()?;
    let resp = client
        .get(url)
        .send()
        .await
        .with_context(|| format!("no answer from {url}"))?;
    let status = resp.status();
    anyhow::ensure!(status.is_success(), "{url} answered {status}");
    Ok(())
}

/// Opens the database of `config` for `command`, which only reads it: a SQLite file that
/// is not there is an error naming the path, and is not created (a wrong path must not
/// leave an empty database behind).
pub(crate) async fn open_to_read(
    config: &Config,
    command: &str,
) -> anyhow::Result<std::sync::Arc<dyn store::Store>> {
    if let Some(file) = config.database.sqlite_file()
        && !file.exists()
    {
        anyhow::bail!(
            "no database at {}: `{command}` reads the database `serve` writes and creates \
             none; check database.url in {} (a relative path in a config file is read from \
             the file's directory)",
            file.display(),
            config.source_label()
        );
    }
    store::open_existing(&config.database)
        .await
        .with_context(|| format!("cannot open database {}", config.database.redacted_url()))
}

/// The `explain` CLI: opens the database named by the config, reads the decision.
pub async fn explain(
    config: &Config,
    q: crate::explain::Query<'_>,
    json: bool,
) -> anyhow::Result<String> {
    anyhow::ensure!(
        config.profiles.iter().any(|p| p.name == q.profile),
        "no profile named {:?} in the config",
        q.profile
    );
    let store = open_to_read(config, "explain").await?;
    let found = crate::explain::load(store.as_ref(), &q)
        .await
        .context("cannot read the decision")?;
    let Some(e) = found else {
        anyhow::bail!(q.not_found());
    };
    if json {
        Ok(serde_json::to_string_pretty(&e)? + "\n")
    } else {
        Ok(crate::context::report::render_text(&e))
    }
}
