//! SQL of the [`crate::store::InboxStore`]: the group-committed insert, claims with
//! owners and leases, outcomes. SQLite accepts the same `$n` placeholders as Postgres,
//! so only statements whose meaning differs (locking) are passed in per backend.

use crate::store::{Finish, InboxEvent};

/// One multi-row `INSERT` for a whole group-commit batch: a statement per event would
/// cost a round trip (and, on SQLite, a hand-off to its thread) per row. Rows that hit a
/// unique index — an event id or message id already stored, or repeated earlier in the
/// same batch — are skipped, and `RETURNING` names the ones that went in.
pub(crate) fn insert_inbox(rows: usize) -> String {
    let mut q = String::from(
        "INSERT INTO inbox_events \
         (profile, event_id, event_type, message_id, payload, received_at, status, next_attempt_at) VALUES ",
    );
    for i in 0..rows {
        let b = i * 7;
        if i > 0 {
            q.push_str(", ");
        }
        q.push_str(&format!(
            "(${}, ${}, ${}, ${}, ${}, ${}, ${}, ${})",
            b + 1,
            b + 2,
            b + 3,
            b + 4,
            b + 5,
            b + 6,
            b + 7,
            b + 6
        ));
    }
    q.push_str(" ON CONFLICT DO NOTHING RETURNING profile, event_id");
    q
}

/// Matches the `RETURNING` rows back to the batch: the first occurrence of a returned
/// (profile, event id) was inserted; everything else was a duplicate.
pub(crate) fn outcomes(
    events: &[crate::store::NewInboxEvent],
    inserted: Vec<(String, String)>,
) -> Vec<crate::store::InsertOutcome> {
    let mut inserted: std::collections::HashSet<(String, String)> = inserted.into_iter().collect();
    events
        .iter()
        .map(|e| {
            if inserted.remove(&(e.profile.clone(), e.event_id.clone())) {
                crate::store::InsertOutcome::Inserted
            } else {
                crate::store::InsertOutcome::Duplicate
            }
        })
        .collect()
}

/// Columns of an [`InboxEvent`], for `SELECT` and `RETURNING`.
pub(crate) const INBOX_COLUMNS: &str = "id, profile, event_id, event_type, message_id, payload, \
     received_at, status, attempts, last_error, next_attempt_at";

/// Rows that are due: pending and past their retry time, or claimed by a worker whose
/// lease ran out (it crashed).
pub(crate) const DUE: &str = "(status = 'pending' AND next_attempt_at <= $1) \
     OR (status = 'processing' AND lease_until < $1)";

pub(crate) const FINISH_DONE: &str = "UPDATE inbox_events \
     SET status = 'done', last_error = $2, processed_at = $3, lease_until = NULL, lease_owner = NULL \
     WHERE id = $1";
pub(crate) const FINISH_RETRY: &str = "UPDATE inbox_events \
     SET status = 'pending', last_error = $2, next_attempt_at = $3, lease_until = NULL, \
     lease_owner = NULL WHERE id = $1";
pub(crate) const FINISH_DEFERRED: &str = "UPDATE inbox_events \
     SET status = 'pending', attempts = attempts - 1, last_error = $2, next_attempt_at = $3, \
     lease_until = NULL, lease_owner = NULL WHERE id = $1";
pub(crate) const FINISH_FAILED: &str = "UPDATE inbox_events \
     SET status = 'failed', last_error = $2, processed_at = $3, lease_until = NULL, \
     lease_owner = NULL WHERE id = $1";
pub(crate) const RELEASE: &str = "UPDATE inbox_events \
     SET status = 'pending', attempts = attempts - 1, lease_until = NULL, lease_owner = NULL \
     WHERE id = $1 AND status = 'processing'";

/// An earlier run's claims become due at once: `$2` names the owner, `$3` takes every
/// claim whatever its owner (SQLite, where one process owns the file).
pub(crate) const RECLAIM: &str = "UPDATE inbox_events \
     SET status = 'pending', lease_until = NULL, lease_owner = NULL, next_attempt_at = $1 \
     WHERE status = 'processing' AND (lease_owner = $2 OR $3)";

/// The heartbeat: `$1` the new lease end, `$2` the owner, then one placeholder per id.
pub(crate) fn renew(ids: usize) -> String {
    let list = (0..ids)
        .map(|i| format!("${}", i + 3))
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "UPDATE inbox_events SET lease_until = $1 \
         WHERE status = 'processing' AND lease_owner = $2 AND id IN ({list})"
    )
}

/// Each count uses the status index, so the cost follows the size of the small states,
/// not of the whole history.
pub(crate) const COUNTS: &str = "SELECT \
     (SELECT COUNT(*) FROM inbox_events WHERE status = 'pending') AS pending, \
     (SELECT COUNT(*) FROM inbox_events WHERE status = 'processing') AS processing, \
     (SELECT COUNT(*) FROM inbox_events WHERE status = 'failed') AS failed, \
     (SELECT COUNT(*) FROM inbox_events WHERE status = 'pending' AND attempts > 0) AS retrying";

pub(crate) const PROBLEMS: &str = "SELECT profile, event_id, event_type, status, attempts, last_error \
     FROM inbox_events WHERE status = 'failed' OR (status = 'pending' AND attempts > 0) \
     ORDER BY id DESC LIMIT $1";

pub(crate) fn select_inbox_by_key() -> String {
    format!("SELECT {INBOX_COLUMNS} FROM inbox_events WHERE profile = $1 AND event_id = $2")
}

/// Rows claimed together come back from `RETURNING` in no particular order.
pub(crate) fn in_arrival_order(mut events: Vec<InboxEvent>) -> Vec<InboxEvent> {
    events.sort_by_key(|e| e.id);
    events
}

/// The statement and its `$2` (error) and `$3` (time) arguments for one [`Finish`].
pub(crate) fn finish_statement(
    finish: &Finish,
    now: crate::util::UnixMs,
) -> (&'static str, Option<&str>, crate::util::UnixMs) {
    match finish {
        Finish::Done => (FINISH_DONE, None, now),
        Finish::Retry { error, at } => (FINISH_RETRY, Some(error.as_str()), *at),
        Finish::Deferred { error, at } => (FINISH_DEFERRED, Some(error.as_str()), *at),
        Finish::Failed { error } => (FINISH_FAILED, Some(error.as_str()), now),
    }
}

/// Binds one [`NewInboxEvent`] to its seven placeholders of [`insert_inbox`].
macro_rules! bind_new_event {
    ($query:expr, $e:expr) => {
        $query
            .bind(&$e.profile)
            .bind(&$e.event_id)
            .bind(&$e.event_type)
            .bind(&$e.message_id)
            .bind(&$e.payload)
            .bind($e.received_at)
            .bind($e.status.as_str())
    };
}
pub(crate) use bind_new_event;

/// Implements [`crate::store::InboxStore`] for a backend type with `pool` and `timeout`
/// fields (see `sql` for why this is a macro).
macro_rules! impl_inbox_store {
    ($ty:ty, $backend:expr, $claim_lock:expr) => {
        #[async_trait::async_trait]
        impl $crate::store::InboxStore for $ty {
            async fn insert_inbox_batch(
                &self,
                events: &[$crate::store::NewInboxEvent],
            ) -> Result<Vec<$crate::store::InsertOutcome>, $crate::store::StoreError> {
                if events.is_empty() {
                    return Ok(Vec::new());
                }
                let q = $crate::store::sql::inbox::insert_inbox(events.len());
                $crate::store::bounded(self.timeout, async {
                    let inserted = self.write_inbox(&q, events).await?;
                    Ok($crate::store::sql::inbox::outcomes(events, inserted))
                })
                .await
            }

            async fn claim_inbox(
                &self,
                owner: &str,
                now: $crate::util::UnixMs,
                lease_ms: i64,
                limit: i64,
            ) -> Result<Vec<$crate::store::InboxEvent>, $crate::store::StoreError> {
                let q = format!(
                    "UPDATE inbox_events SET status = 'processing', lease_until = $1 + $2, \
                     lease_owner = $4, attempts = attempts + 1 \
                     WHERE id IN (SELECT id FROM inbox_events WHERE {} ORDER BY id LIMIT $3 {}) \
                     RETURNING {}",
                    $crate::store::sql::inbox::DUE,
                    $claim_lock,
                    $crate::store::sql::inbox::INBOX_COLUMNS
                );
                let rows = $crate::store::sql::fetch!(
                    self, query_as, fetch_all,
                    &q,
                    now, lease_ms, limit, owner,
                )?;
                Ok($crate::store::sql::inbox::in_arrival_order(rows))
            }

            async fn renew_leases(
                &self,
                owner: &str,
                ids: &[i64],
                until: $crate::util::UnixMs,
            ) -> Result<(), $crate::store::StoreError> {
                if ids.is_empty() {
                    return Ok(());
                }
                let q = $crate::store::sql::inbox::renew(ids.len());
                $crate::store::bounded(self.timeout, async {
                    let mut query = sqlx::query(&q).persistent(false).bind(until).bind(owner);
                    for id in ids {
                        query = query.bind(id);
                    }
                    query.execute(&self.pool).await?;
                    Ok(())
                })
                .await
            }

            async fn reclaim_inbox(
                &self,
                owner: &str,
                now: $crate::util::UnixMs,
            ) -> Result<u64, $crate::store::StoreError> {
                let every_claim = matches!($backend, $crate::store::Backend::Sqlite);
                $crate::store::sql::execute!(
                    self,
                    $crate::store::sql::inbox::RECLAIM,
                    now, owner, every_claim,
                )
            }

            async fn finish_inbox(
                &self,
                id: i64,
                finish: &$crate::store::Finish,
                now: $crate::util::UnixMs,
            ) -> Result<(), $crate::store::StoreError> {
                let (q, error, at) = $crate::store::sql::inbox::finish_statement(finish, now);
                $crate::store::sql::execute!(
                    self,
                    q,
                    id, error, at,
                ).map(drop)
            }

            async fn release_inbox(&self, ids: &[i64]) -> Result<(), $crate::store::StoreError> {
                $crate::store::sql::transaction!(self, |tx| {
                    for id in ids {
                        $crate::store::sql::within!(
                            tx, query, execute,
                            $crate::store::sql::inbox::RELEASE,
                            id,
                        );
                    }
                })
            }

            async fn inbox_counts(
                &self,
            ) -> Result<$crate::store::InboxCounts, $crate::store::StoreError> {
                $crate::store::sql::fetch!(
                    self, query_as, fetch_one,
                    $crate::store::sql::inbox::COUNTS,
                )
            }

            async fn inbox_problems(
                &self,
                limit: i64,
            ) -> Result<Vec<$crate::store::InboxProblem>, $crate::store::StoreError> {
                $crate::store::sql::fetch!(
                    self, query_as, fetch_all,
                    $crate::store::sql::inbox::PROBLEMS,
                    limit,
                )
            }

            async fn inbox_event(
                &self,
                profile: &str,
                event_id: &str,
            ) -> Result<Option<$crate::store::InboxEvent>, $crate::store::StoreError> {
                $crate::store::sql::fetch!(
                    self, query_as, fetch_optional,
                    &$crate::store::sql::inbox::select_inbox_by_key(),
                    profile, event_id,
                )
            }
        }
    };
}
pub(crate) use impl_inbox_store;
