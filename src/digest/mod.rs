//! The daily digest: once a day, at `digest.at` local time, each session with something
//! said since its last digest is summarized by a cheap model, the digests are written
//! (database, then `<dir>/digest/<date>.md`), and only then are the summarized sessions
//! reset — so a session's conversation is never gone without its summary.
//!
//! Its three disciplines: a failed summary keeps its session untouched (the reason is in
//! the digest); the digest is written before any session is reset; a date runs once,
//! claimed in the database before any work (a crash mid-run is not retried that day).
//! A run that would start after `digest.window_end` is skipped: sessions are not reset
//! while people use them. The time comes from the app's [`Clock`].
//!
//! After the resets, each digest is carried into its session's next turn (see the turns'
//! carry-over) and, with `digest.post`, posted once ([`post`]).

pub mod file;
mod naming;
pub mod post;
mod run;
pub mod schedule;
pub mod summarizer;
pub mod transcript;

use std::{collections::HashMap, sync::Arc, time::Duration};

use tokio_util::sync::CancellationToken;

use crate::{
    config::Config,
    feishu_api::FeishuClient,
    store::{DigestRow, DigestRunRow, DigestTrigger, Store, StoreError},
    telemetry::Metrics,
    util::Clock,
};
use schedule::{Local, Window};
pub use summarizer::Summarizer;

/// How often the schedule is looked at.
const TICK: Duration = Duration::from_secs(30);

/// What asking for a run came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// It ran: the run and its digests as stored.
    Ran {
        run: DigestRunRow,
        digests: Vec<DigestRow>,
    },
    /// The date had already run (here or on another replica, finished or not).
    AlreadyRan { date: String },
    /// Nothing to look at (no profile configured): no date was recorded.
    NothingToSee { why: &'static str },
    /// The schedule's window passed before the run could start (the process was down):
    /// skipped today, no date recorded.
    OutsideWindow { date: String },
    /// Not time yet (or off, or today is settled).
    NotDue,
}

impl Outcome {
    /// The metric label.
    pub fn label(&self) -> &'static str {
        match self {
            Self::Ran { .. } => "ran",
            Self::AlreadyRan { .. } => "already_ran",
            Self::NothingToSee { .. } => "nothing_to_see",
            Self::OutsideWindow { .. } => "outside_window",
            Self::NotDue => "not_due",
        }
    }
}

/// How far a run goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// Everything: summaries, writes, resets.
    All,
    /// Up to the writes, no reset: what a crash between the write and the resets leaves.
    Written,
}

/// The daily digest.
pub struct Digest {
    config: Arc<Config>,
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    metrics: Metrics,
    summarizer: Summarizer,
    /// Each profile's Open API client (posting the digests).
    clients: HashMap<String, Arc<FeishuClient>>,
    /// The date today's schedule was settled for (ran, or found already run or skipped).
    settled: std::sync::Mutex<Option<String>>,
    /// One run at a time in this process.
    running: tokio::sync::Mutex<()>,
    /// Senders' and chats' names for transcripts and headings.
    names: Option<Arc<crate::names::Names>>,
}

impl std::fmt::Debug for Digest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Digest")
    }
}

impl Digest {
    /// The digest over the app's parts; `http` has no overall timeout.
    pub fn new(
        config: Arc<Config>,
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
        metrics: Metrics,
        http: reqwest::Client,
    ) -> Self {
        let summarizer = Summarizer::new(http, config.digest.summarizer.clone());
        Self {
            config,
            store,
            clock,
            metrics,
            summarizer,
            clients: HashMap::new(),
            settled: std::sync::Mutex::new(None),
            running: tokio::sync::Mutex::new(()),
            names: None,
        }
    }

    /// The digest naming senders and chats.
    pub fn with_names(mut self, names: Arc<crate::names::Names>) -> Self {
        self.names = Some(names);
        self
    }

    /// With each profile's Open API client, to post the digests through.
    #[must_use]
    pub fn with_clients(mut self, clients: HashMap<String, Arc<FeishuClient>>) -> Self {
        self.clients = clients;
        self
    }

    /// Looks at the schedule every [`TICK`] until `stop` (only when the digest is on).
    pub async fn run_schedule(self: Arc<Self>, stop: CancellationToken) {
        loop {
            if let Err(e) = self.tick().await {
                tracing::warn!(reason = %e.reason(), "the daily digest could not run; it will try again");
            }
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(TICK) => {}
            }
        }
    }

    /// One look at the schedule: runs the day's digest when its window is open and the
    /// date has not run; skips the day when the window passed before it could run. Then
    /// posts the digests still waiting to be posted.
    pub async fn tick(&self) -> Result<Outcome, StoreError> {
        if !self.config.digest.enabled {
            return Ok(Outcome::NotDue);
        }
        let outcome = self.look().await;
        if let Err(e) = self.post_pending().await {
            tracing::warn!(reason = %e.reason(), "the digests could not be posted; a later look tries again");
        }
        outcome
    }

    /// The schedule's part of [`Self::tick`].
    async fn look(&self) -> Result<Outcome, StoreError> {
        let _one = self.running.lock().await;
        let d = &self.config.digest;
        let local = Local::of(self.clock.now(), &d.tz());
        if self.settled_for(&local.date) {
            return Ok(Outcome::NotDue);
        }
        match Window::of(local.time, d.start(), d.end()) {
            Window::Before => Ok(Outcome::NotDue),
            Window::Passed => {
                tracing::warn!(
                    date = %local.date,
                    at = %d.at,
                    window_end = %d.window_end,
                    "the daily digest is skipped today: the process was not running between digest.at and digest.window_end"
                );
                self.settle(&local.date);
                self.count(&Outcome::OutsideWindow {
                    date: local.date.clone(),
                });
                Ok(Outcome::OutsideWindow { date: local.date })
            }
            Window::Open => {
                let outcome = self.run_locked(DigestTrigger::Schedule, Stage::All).await?;
                if matches!(outcome, Outcome::Ran { .. } | Outcome::AlreadyRan { .. }) {
                    self.settle(&local.date);
                }
                Ok(outcome)
            }
        }
    }

    /// Runs today's digest now, whatever the time (still once per date).
    pub async fn run_now(&self) -> Result<Outcome, StoreError> {
        self.run(DigestTrigger::Manual, Stage::All).await
    }

    /// A run up to `stage` (see [`Stage::Written`]: what a crash before the resets
    /// leaves behind, which the tests prove harmless).
    pub async fn run(&self, trigger: DigestTrigger, stage: Stage) -> Result<Outcome, StoreError> {
        let _one = self.running.lock().await;
        self.run_locked(trigger, stage).await
    }

    /// [`Self::run`], the run lock held.
    async fn run_locked(
        &self,
        trigger: DigestTrigger,
        stage: Stage,
    ) -> Result<Outcome, StoreError> {
        let outcome = run::Run::new(self, trigger).go(stage).await;
        match &outcome {
            Ok(o) => self.count(o),
            Err(_) => self
                .metrics
                .digest
                .runs
                .with_label_values(&["failed"])
                .inc(),
        }
        outcome
    }

    /// The local date of now.
    pub fn today(&self) -> String {
        Local::of(self.clock.now(), &self.config.digest.tz()).date
    }

    fn settled_for(&self, date: &str) -> bool {
        let settled = self.settled.lock().unwrap_or_else(|p| p.into_inner());
        settled.as_deref() == Some(date)
    }

    fn settle(&self, date: &str) {
        *self.settled.lock().unwrap_or_else(|p| p.into_inner()) = Some(date.to_string());
    }

    fn count(&self, outcome: &Outcome) {
        if matches!(outcome, Outcome::NotDue) {
            return;
        }
        let m = &self.metrics.digest;
        m.runs.with_label_values(&[outcome.label()]).inc();
        if let Outcome::Ran { run, digests } = outcome {
            for d in digests {
                m.sessions
                    .with_label_values(&[d.status.as_str(), d.reason.as_str()])
                    .inc();
            }
            m.last_run.set(run.started_at.millis() as f64 / 1000.0);
            let took = run.finished_at.unwrap_or(run.started_at).millis() - run.started_at.millis();
            m.last_run_duration.set(took.max(0) as f64 / 1000.0);
        }
    }
}
