//! SQL of the [`crate::store::TurnEventStore`]: one row per (turn, seq).

use async_trait::async_trait;

use super::{asks, dialect::Dialect, store::SqlStore};
use crate::store::{
    AppendOutcome, NewTurnEvent, StoreError, TurnEventLimits, TurnEventRow, TurnEventStore,
};

/// Holds the turn's row for the rest of the transaction (Postgres locks it; SQLite has
/// one writer), so the events of one turn, and its end, take turns.
const HOLD_TURN: &str =
    "UPDATE turns SET state = state WHERE turn_id = $1 AND profile = $2 RETURNING state";

const SAME_SEQ: &str = "SELECT body, stale FROM turn_events WHERE turn_id = $1 AND seq = $2";

const TOTALS: &str = "\
SELECT COUNT(*), CAST(COALESCE(SUM(body_bytes), 0) AS BIGINT), COALESCE(MAX(seq), 0)
FROM turn_events WHERE turn_id = $1";

const INSERT: &str = "\
INSERT INTO turn_events (turn_id, seq, kind, body, body_bytes, stale, received_at)
VALUES ($1, $2, $3, $4, $5, $6, $7)";

const EVENTS: &str = "\
SELECT turn_id, seq, kind, body, stale, received_at FROM turn_events
WHERE turn_id = $1 ORDER BY seq";

#[async_trait]
impl<DB: Dialect> TurnEventStore for SqlStore<DB> {
    async fn append_turn_event(
        &self,
        e: &NewTurnEvent<'_>,
        limits: TurnEventLimits,
    ) -> Result<AppendOutcome, StoreError> {
        self.bounded(async {
            let mut tx = self.transaction().await?;
            let state: Option<String> = sqlx::query_scalar(HOLD_TURN)
                .bind(e.turn_id)
                .bind(e.profile)
                .fetch_optional(&mut *tx)
                .await?;
            let refused = match state.as_deref() {
                None => Some(AppendOutcome::UnknownTurn),
                Some("queued") => Some(AppendOutcome::NotStarted),
                Some("running") => None,
                Some(_) => Some(AppendOutcome::Ended),
            };
            if let Some(outcome) = refused {
                tx.rollback().await?;
                return Ok(outcome);
            }
            let same: Option<(String, bool)> = sqlx::query_as(SAME_SEQ)
                .bind(e.turn_id)
                .bind(e.seq)
                .fetch_optional(&mut *tx)
                .await?;
            if let Some((body, stale)) = same {
                tx.rollback().await?;
                return Ok(if body == e.body {
                    AppendOutcome::Duplicate { stale }
                } else {
                    AppendOutcome::Conflict
                });
            }
            if let Some(ask) = &e.ask
                && asks::exists::<DB>(&mut tx, e.turn_id, ask.ask_id).await?
            {
                tx.rollback().await?;
                return Ok(AppendOutcome::AskConflict);
            }
            let (count, bytes, newest): (i64, i64, i64) = sqlx::query_as(TOTALS)
                .bind(e.turn_id)
                .fetch_one(&mut *tx)
                .await?;
            let size = i64::try_from(e.body.len()).unwrap_or(i64::MAX);
            if count >= limits.max_events || bytes.saturating_add(size) > limits.max_bytes {
                tx.rollback().await?;
                return Ok(AppendOutcome::Full);
            }
            let stale = e.seq < newest;
            sqlx::query(INSERT)
                .bind(e.turn_id)
                .bind(e.seq)
                .bind(e.kind)
                .bind(e.body)
                .bind(size)
                .bind(stale)
                .bind(e.now)
                .execute(&mut *tx)
                .await?;
            if let Some(ask) = &e.ask {
                asks::insert::<DB>(&mut tx, (e.turn_id, e.profile, e.seq), ask, e.now).await?;
            }
            tx.commit().await?;
            Ok(AppendOutcome::Stored { stale })
        })
        .await
    }

    async fn turn_events(&self, turn_id: &str) -> Result<Vec<TurnEventRow>, StoreError> {
        let query = sqlx::query_as(EVENTS).bind(turn_id);
        self.fetch(query.fetch_all(&self.pool)).await
    }
}
