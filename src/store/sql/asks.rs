//! SQL of the [`crate::store::AskStore`]: one row per (turn, ask id). An ask is created
//! with its event (`sql/turn_events.rs` calls [`insert`] in the event's transaction);
//! every change after that is one conditional `UPDATE`, so an ask is answered once and
//! a delivery claimed by one replica at a time on either database.

use async_trait::async_trait;

use super::{dialect::Dialect, store::SqlStore};
use crate::{
    store::{AnswerOutcome, AskRow, AskStore, ClaimedAnswer, NewAsk, StoreError},
    util::UnixMs,
};

/// The columns an [`AskRow`] is read from.
const COLUMNS: &str = "turn_id, ask_id, prompt, style, options_json, default_value, asked_at, \
deadline, answer, answered_by, answered_at, timed_out, delivered_at";

/// Whether the ask's turn still runs (the condition of every write after its creation).
const TURN_RUNNING: &str = "turn_id IN (SELECT turn_id FROM turns WHERE state = 'running')";

const EXISTS: &str = "SELECT COUNT(*) FROM turn_asks WHERE turn_id = $1 AND ask_id = $2";

const INSERT: &str = "\
INSERT INTO turn_asks (turn_id, ask_id, seq, profile, prompt, style, options_json, default_value,
                       asked_at, deadline)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)";

/// Holds the turn's row for the rest of the transaction, as events do.
const HOLD_TURN: &str = "UPDATE turns SET state = state WHERE turn_id = $1 RETURNING state";

/// An ask as stored.
#[derive(Debug, sqlx::FromRow)]
struct Stored {
    turn_id: String,
    ask_id: String,
    prompt: String,
    style: String,
    options_json: String,
    default_value: Option<String>,
    asked_at: UnixMs,
    deadline: UnixMs,
    answer: Option<String>,
    answered_by: Option<String>,
    answered_at: Option<UnixMs>,
    timed_out: bool,
    delivered_at: Option<UnixMs>,
}

impl From<Stored> for AskRow {
    fn from(s: Stored) -> Self {
        Self {
            // Written by the bridge from a validated list; unreadable only if edited.
            options: serde_json::from_str(&s.options_json).unwrap_or_default(),
            turn_id: s.turn_id,
            ask_id: s.ask_id,
            prompt: s.prompt,
            style: s.style,
            default_value: s.default_value,
            asked_at: s.asked_at,
            deadline: s.deadline,
            answer: s.answer,
            answered_by: s.answered_by,
            answered_at: s.answered_at,
            timed_out: s.timed_out,
            delivered_at: s.delivered_at,
        }
    }
}

/// An ask claimed for delivery, with its profile.
#[derive(Debug, sqlx::FromRow)]
struct Claimed {
    profile: String,
    #[sqlx(flatten)]
    ask: Stored,
}

/// Whether `ask_id` was asked in the turn before (in the event's transaction).
pub(super) async fn exists<DB: Dialect>(
    conn: &mut <DB as sqlx::Database>::Connection,
    turn_id: &str,
    ask_id: &str,
) -> Result<bool, StoreError> {
    let found: i64 = sqlx::query_scalar(EXISTS)
        .bind(turn_id)
        .bind(ask_id)
        .fetch_one(&mut *conn)
        .await?;
    Ok(found > 0)
}

/// Creates the ask of an `ask` event (in the event's transaction).
pub(super) async fn insert<DB: Dialect>(
    conn: &mut <DB as sqlx::Database>::Connection,
    (turn_id, profile, seq): (&str, &str, i64),
    ask: &NewAsk<'_>,
    now: UnixMs,
) -> Result<(), StoreError> {
    let timeout_ms = i64::try_from(ask.timeout_secs.saturating_mul(1000)).unwrap_or(i64::MAX);
    sqlx::query(INSERT)
        .bind(turn_id)
        .bind(ask.ask_id)
        .bind(seq)
        .bind(profile)
        .bind(ask.prompt)
        .bind(ask.style)
        .bind(ask.options_json())
        .bind(ask.default_value)
        .bind(now)
        .bind(UnixMs(now.millis().saturating_add(timeout_ms)))
        .execute(&mut *conn)
        .await?;
    Ok(())
}

#[async_trait]
impl<DB: Dialect> AskStore for SqlStore<DB> {
    async fn turn_asks(&self, turn_id: &str) -> Result<Vec<AskRow>, StoreError> {
        let q = format!("SELECT {COLUMNS} FROM turn_asks WHERE turn_id = $1 ORDER BY seq");
        let rows: Vec<Stored> = self
            .fetch(sqlx::query_as(&q).bind(turn_id).fetch_all(&self.pool))
            .await?;
        Ok(rows.into_iter().map(AskRow::from).collect())
    }

    async fn ask(&self, turn_id: &str, ask_id: &str) -> Result<Option<AskRow>, StoreError> {
        let q = format!("SELECT {COLUMNS} FROM turn_asks WHERE turn_id = $1 AND ask_id = $2");
        let row: Option<Stored> = self
            .fetch(
                sqlx::query_as(&q)
                    .bind(turn_id)
                    .bind(ask_id)
                    .fetch_optional(&self.pool),
            )
            .await?;
        Ok(row.map(AskRow::from))
    }

    async fn answer_ask(
        &self,
        turn_id: &str,
        ask_id: &str,
        value: &str,
        by: &str,
        now: UnixMs,
    ) -> Result<AnswerOutcome, StoreError> {
        let select = format!("SELECT {COLUMNS} FROM turn_asks WHERE turn_id = $1 AND ask_id = $2");
        let update = format!(
            "UPDATE turn_asks SET answer = $3, answered_by = $4, answered_at = $5 \
             WHERE turn_id = $1 AND ask_id = $2 AND answered_at IS NULL RETURNING {COLUMNS}"
        );
        self.bounded(async {
            let mut tx = self.transaction().await?;
            // Under the turn's row: an answer and the turn's end are decided in one order.
            let state: Option<String> = sqlx::query_scalar(HOLD_TURN)
                .bind(turn_id)
                .fetch_optional(&mut *tx)
                .await?;
            let stored: Option<Stored> = sqlx::query_as(&select)
                .bind(turn_id)
                .bind(ask_id)
                .fetch_optional(&mut *tx)
                .await?;
            let (Some(state), Some(stored)) = (state, stored) else {
                tx.rollback().await?;
                return Ok(AnswerOutcome::Unknown);
            };
            let row = AskRow::from(stored);
            let refused = if !row.accepts(value) {
                Some(AnswerOutcome::BadValue)
            } else if row.answered_at.is_some() {
                Some(AnswerOutcome::AlreadyAnswered(row))
            } else if state != "running" {
                Some(AnswerOutcome::TurnEnded)
            } else {
                None
            };
            if let Some(outcome) = refused {
                tx.rollback().await?;
                return Ok(outcome);
            }
            let answered: Option<Stored> = sqlx::query_as(&update)
                .bind(turn_id)
                .bind(ask_id)
                .bind(value)
                .bind(by)
                .bind(now)
                .fetch_optional(&mut *tx)
                .await?;
            match answered {
                Some(a) => {
                    tx.commit().await?;
                    Ok(AnswerOutcome::Answered(a.into()))
                }
                None => {
                    // Its timeout came first (it does not wait for the turn's row).
                    let now_row: Option<Stored> = sqlx::query_as(&select)
                        .bind(turn_id)
                        .bind(ask_id)
                        .fetch_optional(&mut *tx)
                        .await?;
                    tx.rollback().await?;
                    Ok(now_row.map_or(AnswerOutcome::Unknown, |r| {
                        AnswerOutcome::AlreadyAnswered(r.into())
                    }))
                }
            }
        })
        .await
    }

    async fn time_out_asks(&self, now: UnixMs) -> Result<Vec<AskRow>, StoreError> {
        let q = format!(
            "UPDATE turn_asks SET answer = default_value, answered_by = NULL, \
             answered_at = $1, timed_out = TRUE \
             WHERE answered_at IS NULL AND deadline <= $1 AND {TURN_RUNNING} \
             RETURNING {COLUMNS}"
        );
        self.bounded(async {
            let mut tx = self.transaction().await?;
            let rows: Vec<Stored> = sqlx::query_as(&q).bind(now).fetch_all(&mut *tx).await?;
            tx.commit().await?;
            let mut rows: Vec<AskRow> = rows.into_iter().map(AskRow::from).collect();
            rows.sort_by_key(|a| a.deadline);
            Ok(rows)
        })
        .await
    }

    async fn claim_answer_delivery(
        &self,
        turn_id: &str,
        ask_id: &str,
        owner: &str,
        now: UnixMs,
        until: UnixMs,
    ) -> Result<Option<ClaimedAnswer>, StoreError> {
        let q = format!(
            "UPDATE turn_asks SET delivery_owner = $3, delivery_until = $5 \
             WHERE turn_id = $1 AND ask_id = $2 \
               AND answered_at IS NOT NULL AND delivered_at IS NULL \
               AND (delivery_until IS NULL OR delivery_until <= $4 OR delivery_owner = $3) \
               AND {TURN_RUNNING} \
             RETURNING profile, {COLUMNS}"
        );
        self.bounded(async {
            let mut tx = self.transaction().await?;
            let claimed: Option<Claimed> = sqlx::query_as(&q)
                .bind(turn_id)
                .bind(ask_id)
                .bind(owner)
                .bind(now)
                .bind(until)
                .fetch_optional(&mut *tx)
                .await?;
            tx.commit().await?;
            Ok(claimed.map(|c| ClaimedAnswer {
                profile: c.profile,
                ask: c.ask.into(),
            }))
        })
        .await
    }

    async fn mark_answer_delivered(
        &self,
        turn_id: &str,
        ask_id: &str,
        owner: &str,
        now: UnixMs,
    ) -> Result<bool, StoreError> {
        let q = sqlx::query(
            "UPDATE turn_asks SET delivered_at = $4, delivery_until = NULL \
             WHERE turn_id = $1 AND ask_id = $2 AND delivery_owner = $3 AND delivered_at IS NULL",
        )
        .bind(turn_id)
        .bind(ask_id)
        .bind(owner)
        .bind(now);
        Ok(self.execute(q).await? == 1)
    }

    async fn undelivered_answers(
        &self,
        now: UnixMs,
        since: UnixMs,
        limit: i64,
    ) -> Result<Vec<(String, String)>, StoreError> {
        let q = format!(
            "SELECT turn_id, ask_id FROM turn_asks \
             WHERE answered_at IS NOT NULL AND delivered_at IS NULL AND answered_at >= $2 \
               AND (delivery_until IS NULL OR delivery_until <= $1) AND {TURN_RUNNING} \
             ORDER BY answered_at LIMIT $3"
        );
        self.fetch(
            sqlx::query_as(&q)
                .bind(now)
                .bind(since)
                .bind(limit)
                .fetch_all(&self.pool),
        )
        .await
    }
}
