//! SQL of the [`crate::store::TurnLeases`]: owners, heartbeats, takeovers and stops.

use async_trait::async_trait;
use sqlx::query::QueryAs;

use super::{dialect::Dialect, store::SqlStore, turns};
use crate::{
    store::{OwnedTurn, ReplicaRow, StoreError, TurnLeases, TurnRow},
    util::UnixMs,
};

const HEARTBEAT: &str = "\
INSERT INTO replicas (replica_id, started_at, heartbeat_at) VALUES ($1, $2, $3)
ON CONFLICT (replica_id) DO UPDATE SET
    started_at = excluded.started_at, heartbeat_at = excluded.heartbeat_at";

const CLAIMABLE: &str = "state IN ('queued', 'running') AND (lease_owner IS NULL \
     OR lease_owner = $1 \
     OR lease_owner NOT IN (SELECT replica_id FROM replicas WHERE heartbeat_at >= $2)) \
     ORDER BY id";

const TAKE: &str = "\
UPDATE turns SET lease_owner = $3
WHERE turn_id = $1 AND state IN ('queued', 'running') AND COALESCE(lease_owner, '') = $2";

const EARLIER_UNFINISHED: &str = "\
SELECT e.turn_id, e.lease_owner FROM turns t
JOIN turns e ON e.profile = t.profile AND e.session_key = t.session_key AND e.id < t.id
WHERE t.turn_id = $1 AND e.state IN ('queued', 'running')
ORDER BY e.id LIMIT 1";

const STOP_SESSION: &str = "\
UPDATE turns SET cancel_requested_at = $3
WHERE profile = $1 AND session_key = $2 AND state = 'running'
RETURNING turn_id, lease_owner";

const STOP_TURN: &str = "\
UPDATE turns SET cancel_requested_at = $2 WHERE turn_id = $1 AND state = 'running'
RETURNING turn_id, lease_owner";

const REPLICAS: &str = "\
SELECT replica_id, started_at, heartbeat_at FROM replicas
WHERE heartbeat_at >= $1 ORDER BY replica_id";

const STOP_REQUESTS: &str = "\
SELECT turn_id FROM turns WHERE lease_owner = $1 AND state = 'running'
  AND cancel_requested_at IS NOT NULL ORDER BY id";

/// A statement that answers an [`OwnedTurn`].
type StopQuery<'q, DB> = QueryAs<'q, DB, OwnedTurn, <DB as sqlx::Database>::Arguments<'q>>;

impl<DB: Dialect> SqlStore<DB> {
    /// Marks a stop with `query` (an `UPDATE … RETURNING turn_id, lease_owner`) in a
    /// write transaction; the turn asked, if any.
    async fn stop_asked(&self, query: StopQuery<'_, DB>) -> Result<Option<OwnedTurn>, StoreError> {
        self.bounded(async {
            let mut tx = self.transaction().await?;
            let asked = query.fetch_optional(&mut *tx).await?;
            tx.commit().await?;
            Ok(asked)
        })
        .await
    }
}

#[async_trait]
impl<DB: Dialect> TurnLeases for SqlStore<DB> {
    async fn heartbeat(
        &self,
        replica_id: &str,
        started_at: UnixMs,
        now: UnixMs,
    ) -> Result<(), StoreError> {
        let query = sqlx::query(HEARTBEAT)
            .bind(replica_id)
            .bind(started_at)
            .bind(now);
        self.execute(query).await.map(drop)
    }

    async fn replicas(&self, alive_since: UnixMs) -> Result<Vec<ReplicaRow>, StoreError> {
        let query = sqlx::query_as(REPLICAS).bind(alive_since);
        self.fetch(query.fetch_all(&self.pool)).await
    }

    async fn claimable_turns(
        &self,
        me: &str,
        alive_since: UnixMs,
    ) -> Result<Vec<TurnRow>, StoreError> {
        let q = turns::select(CLAIMABLE);
        let query = sqlx::query_as(&q).bind(me).bind(alive_since);
        self.fetch(query.fetch_all(&self.pool)).await
    }

    async fn take_turn(
        &self,
        turn_id: &str,
        from: Option<&str>,
        me: &str,
    ) -> Result<bool, StoreError> {
        let query = sqlx::query(TAKE)
            .bind(turn_id)
            .bind(from.unwrap_or_default())
            .bind(me);
        Ok(self.execute(query).await? == 1)
    }

    async fn earlier_unfinished(&self, turn_id: &str) -> Result<Option<OwnedTurn>, StoreError> {
        let query = sqlx::query_as(EARLIER_UNFINISHED).bind(turn_id);
        self.fetch(query.fetch_optional(&self.pool)).await
    }

    async fn request_stop(
        &self,
        profile: &str,
        session_key: &str,
        now: UnixMs,
    ) -> Result<Option<OwnedTurn>, StoreError> {
        let query = sqlx::query_as(STOP_SESSION)
            .bind(profile)
            .bind(session_key)
            .bind(now);
        self.stop_asked(query).await
    }

    async fn request_stop_turn(
        &self,
        turn_id: &str,
        now: UnixMs,
    ) -> Result<Option<OwnedTurn>, StoreError> {
        self.stop_asked(sqlx::query_as(STOP_TURN).bind(turn_id).bind(now))
            .await
    }

    async fn stop_requests(&self, me: &str) -> Result<Vec<String>, StoreError> {
        let query = sqlx::query_scalar(STOP_REQUESTS).bind(me);
        self.fetch(query.fetch_all(&self.pool)).await
    }
}
