//! The four scenarios, and the steps they share once the load has stopped: Feishu's
//! retry of what was not acknowledged, waiting for the backlog to drain by itself, the
//! database checks, and the bridges' exits.

pub mod disk_full;
pub mod pg_outage;
pub mod replica_kill;
pub mod slow_agent;

use std::{sync::Arc, time::Duration};

use crate::support::{
    bridge::Bridge,
    checks,
    db::Db,
    events::Event,
    fake_agent::FakeAgent,
    fake_openapi::FakeOpenApi,
    load::{Load, Sent},
    report::Report,
};

/// What the checks after the load read from.
pub struct Verify<'a> {
    /// The bridges' database.
    pub db: &'a Db,
    /// The fake Open API.
    pub api: &'a FakeOpenApi,
    /// The fake agent, when the bridges use one.
    pub agent: Option<&'a FakeAgent>,
    /// A turn may end `failed` as interrupted (its replica died under it).
    pub interrupted_ok: bool,
    /// How long the retries may take, and then the backlog to drain.
    pub drain_limit: Duration,
}

/// Redelivers what had no 200, waits for the backlog to drain, then checks every event
/// and every request.
pub async fn after_load(report: &mut Report, load: &Arc<Load>, sent: &[Sent], v: Verify<'_>) {
    let events = checks::redeliver(report, load, sent, v.drain_limit).await;
    let (backlog, took) = v.db.drained(v.drain_limit).await;
    report.figure("drain_s", format!("{:.1}", took.as_secs_f64()));
    report.check(backlog.is_empty(), "the backlog drains by itself", || {
        format!(
            "left after {took:.1?}: {} inbox rows, {} turns queued, {} running",
            backlog.inbox, backlog.queued, backlog.running
        )
    });
    if !backlog.is_empty()
        && let Ok(left) = v.db.unfinished_turns().await
    {
        report.progress(format!("turns left: {}", left.join(", ")));
    }
    match v.db.snapshot().await {
        Ok(snap) => {
            let mut duplicates = checks::processed(report, &snap, &events);
            let requests: Vec<&Event> = events.iter().filter(|e| e.request).collect();
            duplicates += checks::turns(report, &snap, &requests, v.api, v.agent, v.interrupted_ok);
            report.figure("duplicates", duplicates);
        }
        Err(e) => report.check(false, "the database can be read back", || e.to_string()),
    }
}

/// The bridge process is still running (it never exited, whatever happened around it)
/// and nothing in it panicked.
pub fn still_running(report: &mut Report, bridge: &mut Bridge) {
    let exited = bridge.exited();
    report.check(exited.is_none(), "the bridge never exited", || {
        format!("{} exited: {exited:?}\n{}", bridge.name(), bridge.tail())
    });
    let panics = bridge.log_lines("panicked at");
    report.check(panics.is_empty(), "no task of the bridge panicked", || {
        format!("{}: {}", bridge.name(), panics.join(" | "))
    });
}

/// Stops the bridge with SIGTERM: it must exit by itself, with status 0.
pub async fn stop(report: &mut Report, bridge: &mut Bridge) {
    let status = bridge.terminate().await;
    report.check(
        status.as_deref() == Some("exit status: 0"),
        "a graceful stop exits 0",
        || format!("{}: {status:?}", bridge.name()),
    );
}
