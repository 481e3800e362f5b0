//! SQL of the [`crate::store::HandoffStore`], and a handoff written inside its
//! completion's transaction.

use async_trait::async_trait;

use super::{
    dialect::Dialect,
    store::{SqlStore, Write},
    writes::{insert_turn, upsert_session_within},
};
use crate::{
    store::{ChainPlace, ChainTurn, HandoffRow, HandoffStore, HandoffWrite, StoreError},
    util::UnixMs,
};

const COLUMNS: &str = "turn_id, chain_id, hop, parent_turn_id, from_profile, to_profile, \
     chat_id, root_msg_id, message_id, root_open_id, root_name, path, via, outcome, created_at";

const INSERT: &str = "\
INSERT INTO handoffs (turn_id, chain_id, hop, parent_turn_id, from_profile, to_profile, chat_id,
    root_msg_id, message_id, root_open_id, root_name, path, via, outcome, created_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)
ON CONFLICT (turn_id) DO NOTHING";

/// The target's verdict: a handoff decides it, whatever the target's routing of the same
/// message (another bot's, so never an invocation) said before.
const VERDICT: &str = "\
INSERT INTO routing_verdicts (profile, message_id, chat_id, verdict, reason, session_key,
    created_at, chain_id)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
ON CONFLICT (profile, message_id) DO UPDATE SET verdict = excluded.verdict,
    reason = excluded.reason, session_key = excluded.session_key,
    chain_id = excluded.chain_id";

const CHAIN_OF_TURN: &str = "UPDATE turns SET chain_id = $2, hop = $3 WHERE turn_id = $1";

const STARTED_SINCE: &str = "\
SELECT COUNT(*) FROM handoffs
WHERE chat_id = $1 AND root_msg_id = $2 AND created_at >= $3 AND outcome IN ('started', 'cancelled')";

/// `h` is the handoffs table; `$1` the chat, `$2` the thread (or NULL for all).
const AT_PLACE: &str = "h.chat_id = $1 AND ($2 IS NULL OR h.root_msg_id = $2)";

/// Writes a handoff inside its completion's transaction (see [`HandoffWrite`]); `false`
/// when it was written before.
pub(crate) async fn write_handoff<DB: Dialect>(
    tx: &mut Write<'_, DB>,
    w: &HandoffWrite,
) -> Result<bool, StoreError> {
    let r = &w.record;
    let inserted = sqlx::query(INSERT)
        .bind(&r.turn_id)
        .bind(&r.chain_id)
        .bind(r.hop)
        .bind(&r.parent_turn_id)
        .bind(&r.from_profile)
        .bind(&r.to_profile)
        .bind(&r.chat_id)
        .bind(&r.root_msg_id)
        .bind(&r.message_id)
        .bind(&r.root_open_id)
        .bind(&r.root_name)
        .bind(&r.path)
        .bind(&r.via)
        .bind(&r.outcome)
        .bind(r.created_at)
        .execute(&mut **tx)
        .await?;
    if DB::rows_affected(&inserted) == 0 {
        return Ok(false);
    }
    sqlx::query(VERDICT)
        .bind(&r.to_profile)
        .bind(&r.message_id)
        .bind(&r.chat_id)
        .bind(w.verdict.to_string())
        .bind(w.reason.to_string())
        .bind(w.turn.as_ref().map(|t| t.session_key.as_str()))
        .bind(r.created_at)
        .bind(&r.chain_id)
        .execute(&mut **tx)
        .await?;
    if let Some(s) = &w.session {
        upsert_session_within(tx, s).await?;
    }
    if let Some(t) = &w.turn {
        insert_turn(tx, t).await?;
        sqlx::query(CHAIN_OF_TURN)
            .bind(&t.turn_id)
            .bind(&r.chain_id)
            .bind(r.hop)
            .execute(&mut **tx)
            .await?;
    }
    Ok(true)
}

#[async_trait]
impl<DB: Dialect> HandoffStore for SqlStore<DB> {
    async fn handoffs_started_since(
        &self,
        chat_id: &str,
        root_msg_id: &str,
        since: UnixMs,
    ) -> Result<i64, StoreError> {
        let query = sqlx::query_scalar(STARTED_SINCE)
            .bind(chat_id)
            .bind(root_msg_id)
            .bind(since);
        self.fetch(query.fetch_one(&self.pool)).await
    }

    async fn handoff(&self, turn_id: &str) -> Result<Option<HandoffRow>, StoreError> {
        let q = format!("SELECT {COLUMNS} FROM handoffs WHERE turn_id = $1");
        let query = sqlx::query_as(&q).bind(turn_id);
        self.fetch(query.fetch_optional(&self.pool)).await
    }

    async fn cancel_chain_hops(
        &self,
        place: ChainPlace<'_>,
        now: UnixMs,
    ) -> Result<Vec<ChainTurn>, StoreError> {
        let cancel = format!(
            "UPDATE turns SET state = 'cancelled', error = 'stopped by the user', \
             finished_at = $3 WHERE state = 'queued' AND turn_id IN \
             (SELECT h.turn_id FROM handoffs h WHERE {AT_PLACE}) \
             RETURNING turn_id, profile, session_key"
        );
        let mark = "UPDATE handoffs SET outcome = 'cancelled' WHERE turn_id = $1";
        self.bounded(async {
            let mut tx = self.transaction().await?;
            let turns: Vec<ChainTurn> = sqlx::query_as(&cancel)
                .bind(place.chat_id)
                .bind(place.root_msg_id)
                .bind(now)
                .fetch_all(&mut *tx)
                .await?;
            for t in &turns {
                sqlx::query(mark).bind(&t.turn_id).execute(&mut *tx).await?;
            }
            tx.commit().await?;
            Ok(turns)
        })
        .await
    }

    async fn running_chain_turns(
        &self,
        place: ChainPlace<'_>,
    ) -> Result<Vec<ChainTurn>, StoreError> {
        let q = format!(
            "SELECT t.turn_id, t.profile, t.session_key FROM turns t \
             JOIN handoffs h ON h.turn_id = t.turn_id \
             WHERE t.state = 'running' AND {AT_PLACE} ORDER BY t.id"
        );
        let query = sqlx::query_as(&q)
            .bind(place.chat_id)
            .bind(place.root_msg_id);
        self.fetch(query.fetch_all(&self.pool)).await
    }
}
