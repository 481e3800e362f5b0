//! `explain --what-if key=value`: a decision's selection made again under other settings,
//! reading the database directly (works while the server is down).

use anyhow::Context as _;

use super::open_to_read;
use crate::{config::Config, explain::Overrides};

/// The what-if report (or its JSON, the REST shape) of the decision `q` names.
pub async fn what_if(
    config: &Config,
    q: crate::explain::Query<'_>,
    settings: &[String],
    json: bool,
) -> anyhow::Result<String> {
    let overrides = Overrides::parse(settings).map_err(anyhow::Error::msg)?;
    anyhow::ensure!(
        config.profiles.iter().any(|p| p.name == q.profile),
        "no profile named {:?} in the config",
        q.profile
    );
    let store = open_to_read(config, "explain").await?;
    let found = crate::explain::what_if(store.as_ref(), &q, &overrides, config)
        .await
        .context("cannot read the decision")?;
    let Some(w) = found else {
        anyhow::bail!(q.not_found());
    };
    if json {
        Ok(serde_json::to_string_pretty(&w)? + "\n")
    } else {
        Ok(crate::explain::render_what_if(&w))
    }
}
