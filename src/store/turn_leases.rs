//! Turns across replicas: which replica owns each unfinished turn, which replicas are
//! alive, and stops asked for through the database.
//!
//! A turn is owned by the replica that queued it. A replica renews its heartbeat in
//! `replicas`; once a replica's heartbeat is older than the lease, its unfinished turns
//! may be taken over, each by exactly one live replica (a conditional update on the
//! owner it was read with). A stop is a flag on the running turn that its owner watches.

use async_trait::async_trait;

use super::{StoreError, TurnRow};
use crate::util::UnixMs;

/// The oldest heartbeat at `now` of a replica still alive when replicas are taken for
/// dead after `lease`.
pub fn alive_since(now: UnixMs, lease: std::time::Duration) -> UnixMs {
    let lease = i64::try_from(lease.as_millis()).unwrap_or(i64::MAX);
    UnixMs(now.0.saturating_sub(lease))
}

/// A replica as its heartbeat shows it.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct ReplicaRow {
    /// `worker.replica_id` of the process.
    pub replica_id: String,
    /// When it started.
    pub started_at: UnixMs,
    /// Its latest heartbeat.
    pub heartbeat_at: UnixMs,
}

/// An unfinished turn of a session and its owner.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct OwnedTurn {
    /// `turn_<hex>`.
    pub turn_id: String,
    /// The replica that owns it (`None` for turns queued before owners were kept).
    pub lease_owner: Option<String>,
}

/// Turn ownership and stops across replicas.
#[async_trait]
pub trait TurnLeases: Send + Sync + 'static {
    /// Records that `replica_id` (started at `started_at`) is alive at `now`.
    async fn heartbeat(
        &self,
        replica_id: &str,
        started_at: UnixMs,
        now: UnixMs,
    ) -> Result<(), StoreError>;
    /// Replicas whose heartbeat is at or after `alive_since`, by id.
    async fn replicas(&self, alive_since: UnixMs) -> Result<Vec<ReplicaRow>, StoreError>;
    /// Unfinished turns `me` may pick up, in queue order: its own, those without an
    /// owner, and those of replicas with no heartbeat since `alive_since`.
    async fn claimable_turns(
        &self,
        me: &str,
        alive_since: UnixMs,
    ) -> Result<Vec<TurnRow>, StoreError>;
    /// Makes `me` the owner of an unfinished turn that `from` owned when it was read;
    /// `false` when it has ended or another replica took it first.
    async fn take_turn(
        &self,
        turn_id: &str,
        from: Option<&str>,
        me: &str,
    ) -> Result<bool, StoreError>;
    /// The earliest unfinished turn of the same session queued before `turn_id`.
    async fn earlier_unfinished(&self, turn_id: &str) -> Result<Option<OwnedTurn>, StoreError>;
    /// Asks the session's running turn to stop; the turn asked, if one runs.
    async fn request_stop(
        &self,
        profile: &str,
        session_key: &str,
        now: UnixMs,
    ) -> Result<Option<OwnedTurn>, StoreError>;
    /// Asks one turn to stop if it is running; its owner, when it was asked.
    async fn request_stop_turn(
        &self,
        turn_id: &str,
        now: UnixMs,
    ) -> Result<Option<OwnedTurn>, StoreError>;
    /// Running turns of `me` asked to stop.
    async fn stop_requests(&self, me: &str) -> Result<Vec<String>, StoreError>;
}
