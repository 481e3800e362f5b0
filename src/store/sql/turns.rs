//! SQL of the [`crate::store::TurnStore`]: turns from queued to ended.

use async_trait::async_trait;

use super::{
    dialect::Dialect,
    handoffs::write_handoff,
    store::SqlStore,
    writes::{CONSUME, insert_decision, insert_events},
};
use crate::{
    store::{
        HistoryQuery, StartedTurn, StoreError, TurnCompletion, TurnFilter, TurnRow, TurnStart,
        TurnState, TurnStore,
    },
    util::UnixMs,
};

pub(crate) const TURN_COLUMNS: &str = "id, turn_id, profile, session_key, session_id, chat_id, \
     message_id, request_text, job_json, state, decision_id, output, reply_message_id, \
     card_message_id, card_id, working_reaction_id, error, lease_owner, \
     queued_at, started_at, answered_at, finished_at, chain_id, hop, handoff_json";

const START: &str = "\
UPDATE turns SET state = 'running', session_id = $2, started_at = $3, decision_id = $4
WHERE turn_id = $1 AND state = 'queued' AND lease_owner = $5 RETURNING id";

const END: &str = "\
UPDATE turns SET state = $2, error = $3, finished_at = $4
WHERE turn_id = $1 AND state IN ('queued', 'running')";

const SUCCEED: &str = "\
UPDATE turns SET state = 'succeeded', reply_message_id = $2, finished_at = $3, error = NULL
WHERE turn_id = $1 AND state = 'running'";

pub(crate) fn select(where_clause: &str) -> String {
    format!("SELECT {TURN_COLUMNS} FROM turns WHERE {where_clause}")
}

const SET_CARD: &str = "UPDATE turns SET card_message_id = $2, card_id = $3 WHERE turn_id = $1";

const RECORD_REACTION: &str = "UPDATE turns SET working_reaction_id = $2 WHERE turn_id = $1";

const CLEAR_REACTION: &str =
    "UPDATE turns SET working_reaction_id = NULL WHERE turn_id = $1 AND working_reaction_id = $2";

const SAVE_OUTPUT: &str = "UPDATE turns SET output = $2, answered_at = $3, handoff_json = $4 \
     WHERE turn_id = $1 AND state = 'running'";

const TOPIC_ROOT_DELIVERED: &str = "\
UPDATE sessions SET topic_root_prompt_delivered = TRUE
WHERE profile = $1 AND session_key = $2 AND session_id = $3";

const COUNTS: &str = "\
SELECT COALESCE(SUM(CASE WHEN state = 'queued' THEN 1 ELSE 0 END), 0),
       COALESCE(SUM(CASE WHEN state = 'running' THEN 1 ELSE 0 END), 0)
FROM turns WHERE state IN ('queued', 'running')";

#[async_trait]
impl<DB: Dialect> TurnStore for SqlStore<DB> {
    async fn start_turn(&self, s: &TurnStart<'_>) -> Result<Option<StartedTurn>, StoreError> {
        self.bounded(async {
            let mut tx = self.transaction().await?;
            let decision_id = insert_decision(&mut tx, s.decision).await?;
            let row_id: Option<i64> = sqlx::query_scalar(START)
                .bind(s.turn_id)
                .bind(&s.decision.session_id)
                .bind(s.now)
                .bind(decision_id)
                .bind(s.owner)
                .fetch_optional(&mut *tx)
                .await?;
            let Some(row_id) = row_id else {
                // No longer queued: nothing of this start is kept.
                tx.rollback().await?;
                return Ok(None);
            };
            if let Some((profile, scope, up_to)) = s.consume {
                sqlx::query(CONSUME)
                    .bind(profile)
                    .bind(scope)
                    .bind(up_to)
                    .bind(s.now)
                    .execute(&mut *tx)
                    .await?;
            }
            tx.commit().await?;
            Ok(Some(StartedTurn {
                row_id,
                decision_id,
            }))
        })
        .await
    }

    async fn set_turn_card(
        &self,
        turn_id: &str,
        message_id: &str,
        card_id: Option<&str>,
    ) -> Result<(), StoreError> {
        let query = sqlx::query(SET_CARD)
            .bind(turn_id)
            .bind(message_id)
            .bind(card_id);
        self.execute(query).await.map(drop)
    }

    async fn record_turn_reaction(
        &self,
        turn_id: &str,
        reaction_id: &str,
    ) -> Result<(), StoreError> {
        let query = sqlx::query(RECORD_REACTION).bind(turn_id).bind(reaction_id);
        self.execute(query).await.map(drop)
    }

    async fn clear_turn_reaction(
        &self,
        turn_id: &str,
        reaction_id: &str,
    ) -> Result<(), StoreError> {
        let query = sqlx::query(CLEAR_REACTION).bind(turn_id).bind(reaction_id);
        self.execute(query).await.map(drop)
    }

    async fn ended_turn_reactions(&self, limit: i64) -> Result<Vec<TurnRow>, StoreError> {
        let q = format!(
            "{} ORDER BY id LIMIT $1",
            select("working_reaction_id IS NOT NULL AND state NOT IN ('queued', 'running')")
        );
        let query = sqlx::query_as(&q).bind(limit);
        self.fetch(query.fetch_all(&self.pool)).await
    }

    async fn save_turn_output(
        &self,
        turn_id: &str,
        output: &str,
        handoff_json: Option<&str>,
        now: UnixMs,
    ) -> Result<(), StoreError> {
        let query = sqlx::query(SAVE_OUTPUT)
            .bind(turn_id)
            .bind(output)
            .bind(now)
            .bind(handoff_json);
        self.execute(query).await.map(drop)
    }

    async fn end_turn(
        &self,
        turn_id: &str,
        state: TurnState,
        error: &str,
        now: UnixMs,
    ) -> Result<bool, StoreError> {
        let query = sqlx::query(END)
            .bind(turn_id)
            .bind(state.as_str())
            .bind(error)
            .bind(now);
        Ok(self.execute(query).await? == 1)
    }

    async fn complete_turn(&self, c: &TurnCompletion) -> Result<(), StoreError> {
        self.bounded(async {
            let mut tx = self.transaction().await?;
            insert_events(&mut tx, &[&c.output_event]).await?;
            if let Some((profile, key, session_id)) = &c.topic_root_delivered {
                sqlx::query(TOPIC_ROOT_DELIVERED)
                    .bind(profile)
                    .bind(key)
                    .bind(session_id)
                    .execute(&mut *tx)
                    .await?;
            }
            let succeeded = sqlx::query(SUCCEED)
                .bind(&c.turn_id)
                .bind(&c.reply_message_id)
                .bind(c.now)
                .execute(&mut *tx)
                .await?;
            if let Some(h) = c
                .handoff
                .as_ref()
                .filter(|_| DB::rows_affected(&succeeded) == 1)
            {
                write_handoff(&mut tx, h).await?;
            }
            tx.commit().await
        })
        .await
    }

    async fn turn(&self, turn_id: &str) -> Result<Option<TurnRow>, StoreError> {
        let q = select("turn_id = $1");
        self.fetch(sqlx::query_as(&q).bind(turn_id).fetch_optional(&self.pool))
            .await
    }

    async fn turn_of_decision(&self, decision_id: i64) -> Result<Option<TurnRow>, StoreError> {
        let q = select("decision_id = $1 ORDER BY id DESC LIMIT 1");
        let query = sqlx::query_as(&q).bind(decision_id);
        self.fetch(query.fetch_optional(&self.pool)).await
    }

    async fn unfinished_turns(&self) -> Result<Vec<TurnRow>, StoreError> {
        let q = select("state IN ('queued', 'running') ORDER BY id");
        self.fetch(sqlx::query_as(&q).fetch_all(&self.pool)).await
    }

    async fn session_history(&self, h: &HistoryQuery<'_>) -> Result<Vec<TurnRow>, StoreError> {
        let q = select(
            "profile = $1 AND session_key = $2 AND id < $4 AND session_id = $3 \
             AND state = 'succeeded' ORDER BY id DESC LIMIT $5",
        );
        let query = sqlx::query_as(&q)
            .bind(h.profile)
            .bind(h.session_key)
            .bind(h.session_id)
            .bind(h.before_id)
            .bind(h.limit);
        let mut rows: Vec<TurnRow> = self.fetch(query.fetch_all(&self.pool)).await?;
        rows.reverse();
        Ok(rows)
    }

    async fn turns(&self, f: &TurnFilter) -> Result<Vec<TurnRow>, StoreError> {
        let q = select(
            "($1 IS NULL OR profile = $1) AND ($2 IS NULL OR session_key = $2) \
             AND ($3 IS NULL OR state = $3) ORDER BY id DESC LIMIT $4",
        );
        let query = sqlx::query_as(&q)
            .bind(&f.profile)
            .bind(&f.session_key)
            .bind(&f.state)
            .bind(f.limit);
        self.fetch(query.fetch_all(&self.pool)).await
    }

    async fn turn_counts(&self) -> Result<(i64, i64), StoreError> {
        self.fetch(sqlx::query_as(COUNTS).fetch_one(&self.pool))
            .await
    }
}
