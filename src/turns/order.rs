//! One turn at a time per session, across replicas: a turn starts only once no earlier
//! turn of its session is unfinished, wherever that one runs. Within a replica the
//! session queue already keeps the order; this waits for turns on other replicas (and
//! for turns this replica took over from a dead one), woken by every turn that ends here
//! and, for the others, by a poll of the database.

use std::{sync::Arc, time::Duration};

use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use super::{
    job::{TurnDone, TurnJob},
    persist::pause,
};
use crate::store::TurnLeases;

/// How waiting for a session's earlier turns ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Waited {
    /// None is unfinished: start.
    Go,
    /// Its user stopped it while it waited.
    Cancelled,
    /// The bridge is shutting down: it stays queued.
    Shutdown,
}

/// Waits for a session's earlier turns.
pub(super) struct SessionOrder {
    pub(super) leases: Arc<dyn TurnLeases>,
    /// Turns ending on this replica.
    pub(super) done: broadcast::Sender<TurnDone>,
    /// How often turns on other replicas are looked at.
    pub(super) poll: Duration,
    pub(super) shutdown: CancellationToken,
}

impl SessionOrder {
    /// Resolves once no turn queued before `job` in its session is unfinished.
    pub(super) async fn wait(&self, job: &TurnJob, cancel: &CancellationToken) -> Waited {
        let mut done = self.done.subscribe();
        let (mut told, mut failures) = (false, 0u32);
        loop {
            let wait = match self.leases.earlier_unfinished(&job.turn_id).await {
                Ok(None) => return Waited::Go,
                Ok(Some(earlier)) => {
                    if !told {
                        told = true;
                        tracing::info!(profile = %job.profile, turn_id = %job.turn_id, earlier = %earlier.turn_id, owner = ?earlier.lease_owner, "waiting for an earlier turn of the session");
                    }
                    self.poll
                }
                Err(e) => {
                    failures += 1;
                    if failures == 1 {
                        tracing::warn!(turn_id = %job.turn_id, error = %e, "earlier turns of the session not readable; trying again");
                    }
                    pause(failures)
                }
            };
            tokio::select! {
                () = tokio::time::sleep(wait) => {}
                // A turn ended here: perhaps the one waited for.
                _ = done.recv() => {}
                () = cancel.cancelled() => return Waited::Cancelled,
                () = self.shutdown.cancelled() => return Waited::Shutdown,
            }
        }
    }
}
