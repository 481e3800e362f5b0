//! SQL of the [`crate::store::TurnLeases`]: owners, heartbeats, takeovers and stops.

pub(crate) const HEARTBEAT: &str = "\
INSERT INTO replicas (replica_id, started_at, heartbeat_at) VALUES ($1, $2, $3)
ON CONFLICT (replica_id) DO UPDATE SET
    started_at = excluded.started_at, heartbeat_at = excluded.heartbeat_at";

pub(crate) const CLAIMABLE: &str = "state IN ('queued', 'running') AND (lease_owner IS NULL \
     OR lease_owner = $1 \
     OR lease_owner NOT IN (SELECT replica_id FROM replicas WHERE heartbeat_at >= $2)) \
     ORDER BY id";

pub(crate) const TAKE: &str = "\
UPDATE turns SET lease_owner = $3
WHERE turn_id = $1 AND state IN ('queued', 'running') AND COALESCE(lease_owner, '') = $2";

pub(crate) const EARLIER_UNFINISHED: &str = "\
SELECT e.turn_id, e.lease_owner FROM turns t
JOIN turns e ON e.profile = t.profile AND e.session_key = t.session_key AND e.id < t.id
WHERE t.turn_id = $1 AND e.state IN ('queued', 'running')
ORDER BY e.id LIMIT 1";

pub(crate) const STOP_SESSION: &str = "\
UPDATE turns SET cancel_requested_at = $3
WHERE profile = $1 AND session_key = $2 AND state = 'running'
RETURNING turn_id, lease_owner";

pub(crate) const STOP_TURN: &str = "\
UPDATE turns SET cancel_requested_at = $2 WHERE turn_id = $1 AND state = 'running'
RETURNING turn_id, lease_owner";

/// Marks a stop with `$sql` (an `UPDATE … RETURNING turn_id, lease_owner`) in a write
/// transaction; the turn asked, if any.
macro_rules! stop_asked {
    ($store:ident, $sql:expr $(, $arg:expr)* $(,)?) => {{
        use $crate::store::sql::{transaction, within};
        transaction!($store, |tx| {
            within!(tx, query_as, fetch_optional, $sql $(, $arg)*)
        })
    }};
}
pub(crate) use stop_asked;

/// Implements [`crate::store::TurnLeases`] for a backend type with `pool` and `timeout`
/// fields (see `sql` for why this is a macro).
macro_rules! impl_turn_leases {
    ($ty:ty) => {
        #[async_trait::async_trait]
        impl $crate::store::TurnLeases for $ty {
            async fn heartbeat(
                &self,
                replica_id: &str,
                started_at: $crate::util::UnixMs,
                now: $crate::util::UnixMs,
            ) -> Result<(), $crate::store::StoreError> {
                $crate::store::sql::execute!(
                    self,
                    $crate::store::sql::turn_leases::HEARTBEAT,
                    replica_id,
                    started_at,
                    now,
                )
                .map(drop)
            }

            async fn replicas(
                &self,
                alive_since: $crate::util::UnixMs,
            ) -> Result<Vec<$crate::store::ReplicaRow>, $crate::store::StoreError> {
                $crate::store::sql::fetch!(
                    self,
                    query_as,
                    fetch_all,
                    "SELECT replica_id, started_at, heartbeat_at FROM replicas \
                     WHERE heartbeat_at >= $1 ORDER BY replica_id",
                    alive_since,
                )
            }

            async fn claimable_turns(
                &self,
                me: &str,
                alive_since: $crate::util::UnixMs,
            ) -> Result<Vec<$crate::store::TurnRow>, $crate::store::StoreError> {
                let q =
                    $crate::store::sql::turns::select($crate::store::sql::turn_leases::CLAIMABLE);
                $crate::store::sql::fetch!(self, query_as, fetch_all, &q, me, alive_since)
            }

            async fn take_turn(
                &self,
                turn_id: &str,
                from: Option<&str>,
                me: &str,
            ) -> Result<bool, $crate::store::StoreError> {
                let n = $crate::store::sql::execute!(
                    self,
                    $crate::store::sql::turn_leases::TAKE,
                    turn_id,
                    from.unwrap_or_default(),
                    me,
                )?;
                Ok(n == 1)
            }

            async fn earlier_unfinished(
                &self,
                turn_id: &str,
            ) -> Result<Option<$crate::store::OwnedTurn>, $crate::store::StoreError> {
                $crate::store::sql::fetch!(
                    self,
                    query_as,
                    fetch_optional,
                    $crate::store::sql::turn_leases::EARLIER_UNFINISHED,
                    turn_id,
                )
            }

            async fn request_stop(
                &self,
                profile: &str,
                session_key: &str,
                now: $crate::util::UnixMs,
            ) -> Result<Option<$crate::store::OwnedTurn>, $crate::store::StoreError> {
                use $crate::store::sql::turn_leases::{STOP_SESSION, stop_asked};
                stop_asked!(self, STOP_SESSION, profile, session_key, now)
            }

            async fn request_stop_turn(
                &self,
                turn_id: &str,
                now: $crate::util::UnixMs,
            ) -> Result<Option<$crate::store::OwnedTurn>, $crate::store::StoreError> {
                use $crate::store::sql::turn_leases::{STOP_TURN, stop_asked};
                stop_asked!(self, STOP_TURN, turn_id, now)
            }

            async fn stop_requests(
                &self,
                me: &str,
            ) -> Result<Vec<String>, $crate::store::StoreError> {
                $crate::store::sql::fetch!(
                    self,
                    query_scalar,
                    fetch_all,
                    "SELECT turn_id FROM turns WHERE lease_owner = $1 AND state = 'running' \
                     AND cancel_requested_at IS NOT NULL ORDER BY id",
                    me,
                )
            }
        }
    };
}
pub(crate) use impl_turn_leases;
