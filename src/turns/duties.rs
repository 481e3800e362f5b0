//! What each replica does so that several can share one database: it renews its
//! heartbeat, takes over the unfinished turns of replicas that stopped renewing theirs,
//! cancels its own running turns when a stop for them was asked on another replica, and
//! counts the live replicas, which split each app's Open API limits. When it stops, it
//! gives up its heartbeat, so the others pick up what it leaves at once.

use std::{sync::Arc, time::Duration};

use tokio_util::sync::CancellationToken;

use super::{queue::SessionQueues, recovery::Recovery};
use crate::{feishu_api::ApiShare, store::TurnLeases, util::UnixMs};

/// A replica's duties, run until `stop`.
pub struct ReplicaDuties {
    recovery: Recovery,
    queues: SessionQueues,
    leases: Arc<dyn TurnLeases>,
    share: Arc<ApiShare>,
    me: String,
    started_at: UnixMs,
    /// Heartbeat and takeover period (a third of the lease).
    beat: Duration,
    /// How often stops asked elsewhere are looked for.
    poll: Duration,
    /// How long the turns still running at a stop may take before the heartbeat is
    /// given up.
    grace: Duration,
}

impl std::fmt::Debug for ReplicaDuties {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ReplicaDuties({})", self.me)
    }
}

impl ReplicaDuties {
    /// The duties of the replica `recovery` runs for, once it has run at the start:
    /// stops asked elsewhere are looked for every `poll`, the live replicas are counted
    /// into `share` at every heartbeat, and the turns still running at a stop get `grace`.
    pub fn new(
        recovery: &Recovery,
        queues: &SessionQueues,
        share: &Arc<ApiShare>,
        poll: Duration,
        grace: Duration,
    ) -> Self {
        let runner = recovery.runner();
        Self {
            recovery: recovery.clone(),
            queues: queues.clone(),
            leases: runner.leases().clone(),
            share: share.clone(),
            me: runner.owner().to_string(),
            started_at: UnixMs::now(),
            beat: (recovery.lease() / 3).max(Duration::from_millis(1)),
            poll: poll.max(Duration::from_millis(1)),
            grace,
        }
    }

    /// Renews this replica's heartbeat.
    async fn beat(&self) {
        if let Err(e) = self
            .leases
            .heartbeat(&self.me, self.started_at, UnixMs::now())
            .await
        {
            tracing::warn!(replica = %self.me, error = %e, "heartbeat not written; other replicas may take this one's turns over once its lease runs out");
        }
    }

    /// Renews the heartbeat and counts the live replicas: at the start, and at every beat.
    pub async fn join(&self) {
        self.beat().await;
        self.count().await;
    }

    /// Counts the live replicas (this one always among them) into the share.
    async fn count(&self) {
        let since = crate::store::alive_since(UnixMs::now(), self.recovery.lease());
        let rows = match self.leases.replicas(since).await {
            Ok(rows) => rows,
            Err(e) => {
                tracing::debug!(error = %e, "live replicas not readable");
                return;
            }
        };
        let replicas = rows.iter().filter(|r| r.replica_id != self.me).count() + 1;
        if self.share.set_replicas(replicas) {
            tracing::info!(
                replicas,
                "live replicas changed: each keeps to its share of the Open API limits"
            );
        }
    }

    /// Beats, sweeps and watches for stops until `stop`; then, once the turns still in
    /// hand have ended (or the grace is spent), gives up the heartbeat.
    pub async fn run(self, stop: CancellationToken) {
        let mut beat = tokio::time::interval(self.beat);
        let mut poll = tokio::time::interval(self.poll);
        beat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = beat.tick() => {
                    self.join().await;
                    if let Err(e) = self.recovery.sweep(&self.queues).await {
                        tracing::warn!(error = %e, "turns of stopped replicas not looked at; trying again");
                    }
                }
                _ = poll.tick() => self.cancel_asked().await,
                () = stop.cancelled() => break,
            }
        }
        if tokio::time::timeout(self.grace, self.queues.idle())
            .await
            .is_err()
        {
            tracing::warn!(
                "turns still running at the stop: the heartbeat is kept until they are taken over"
            );
            return;
        }
        if let Err(e) = self
            .leases
            .heartbeat(&self.me, self.started_at, UnixMs(0))
            .await
        {
            tracing::warn!(error = %e, "heartbeat not given up: other replicas take this one's queued turns once its lease runs out");
        }
    }

    /// Cancels the running turns of this replica that were asked to stop elsewhere.
    async fn cancel_asked(&self) {
        match self.leases.stop_requests(&self.me).await {
            Ok(asked) => {
                for turn_id in asked {
                    if self.queues.cancel_label(&turn_id) {
                        tracing::info!(turn_id = %turn_id, "stop asked through the database: cancelling the turn");
                    }
                }
            }
            Err(e) => tracing::debug!(error = %e, "stops asked elsewhere not readable"),
        }
    }
}
