//! The `digest` CLI: a date's digests, read from the database (works with the server
//! down), printed as the day's digest file reads.

use crate::{config::Config, digest::file};

/// The digests of `date` (default: the latest run's), as text.
pub async fn show(config: &Config, date: Option<&str>) -> anyhow::Result<String> {
    if let Some(d) = date {
        anyhow::ensure!(
            d.len() == 10 && d.parse::<jiff::civil::Date>().is_ok(),
            "--date: expected YYYY-MM-DD, e.g. 2026-12-02"
        );
    }
    let store = super::open_to_read(config, "digest").await?;
    let run = match date {
        Some(d) => store.digest_run(d).await,
        None => store.latest_digest_run().await,
    }
    .map_err(|e| anyhow::anyhow!("cannot read the digests: {}", e.reason()))?;
    let Some(run) = run else {
        return Ok(match date {
            Some(d) => format!("no digest ran on {d}\n"),
            None => "no digest has run yet\n".into(),
        });
    };
    let digests = store
        .digests_of(&run.date)
        .await
        .map_err(|e| anyhow::anyhow!("cannot read the digests: {}", e.reason()))?;
    let mut out = file::render(&run.date, &run.timezone, &digests);
    let ended = match run.finished_at {
        Some(f) => format!("finished after {} ms", f.millis() - run.started_at.millis()),
        None => {
            "not finished (running, or stopped before its end; the date does not run again)".into()
        }
    };
    out.push_str(&format!(
        "---\nrun: {} ({}), {ended}; file: {}\n",
        run.date,
        run.trigger.as_str(),
        run.file.as_deref().unwrap_or("none")
    ));
    Ok(out)
}
