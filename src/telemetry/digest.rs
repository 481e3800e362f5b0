//! The daily digest's metrics: runs by outcome, sessions by what happened to them and
//! why, and the last run's time and duration.

use prometheus::{Gauge, IntCounterVec, Opts, Registry};

/// The digest's metrics.
#[derive(Clone)]
pub struct DigestMetrics {
    /// Runs, by outcome: `ran`, `already_ran`, `outside_window`, `nothing_to_see`,
    /// `failed`.
    pub runs: IntCounterVec,
    /// Sessions digested, by status (`reset`, `kept`, `reset_failed`, `written`) and
    /// reason.
    pub sessions: IntCounterVec,
    /// When the last run started, Unix seconds.
    pub last_run: Gauge,
    /// How long the last run took.
    pub last_run_duration: Gauge,
}

impl DigestMetrics {
    /// The metrics, registered in `registry`.
    pub(super) fn registered(registry: &Registry) -> Self {
        let runs = IntCounterVec::new(
            Opts::new("digest_runs_total", "Daily digest runs, by outcome."),
            &["outcome"],
        )
        .expect("valid metric");
        for o in [
            "ran",
            "already_ran",
            "outside_window",
            "nothing_to_see",
            "failed",
        ] {
            runs.with_label_values(&[o]);
        }
        let sessions = IntCounterVec::new(
            Opts::new(
                "digest_sessions_total",
                "Sessions in a daily digest, by what happened to them and why.",
            ),
            &["status", "reason"],
        )
        .expect("valid metric");
        let last_run = Gauge::new(
            "digest_last_run_timestamp_seconds",
            "When the last daily digest run of this process started.",
        )
        .expect("valid metric");
        let last_run_duration = Gauge::new(
            "digest_last_run_duration_seconds",
            "How long the last daily digest run of this process took.",
        )
        .expect("valid metric");
        for c in [
            Box::new(runs.clone()) as Box<dyn prometheus::core::Collector>,
            Box::new(sessions.clone()),
            Box::new(last_run.clone()),
            Box::new(last_run_duration.clone()),
        ] {
            registry.register(c).expect("metric names are unique");
        }
        Self {
            runs,
            sessions,
            last_run,
            last_run_duration,
        }
    }
}
