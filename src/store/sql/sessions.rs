//! SQL of the [`crate::store::SessionStore`]: session mappings and their history scopes.

use async_trait::async_trait;

use super::{
    dialect::Dialect,
    feed,
    store::{SqlStore, Write},
    writes::SESSION_COLUMNS,
};
use crate::store::{SessionReset, SessionRow, SessionStore, StoreError};

fn rotate_session() -> String {
    format!(
        "UPDATE sessions SET session_id = $3, topic_root_prompt_delivered = FALSE, updated_at = $4 \
         WHERE profile = $1 AND session_key = $2 RETURNING {SESSION_COLUMNS}"
    )
}

fn select_sessions(where_clause: &str) -> String {
    format!(
        "SELECT {SESSION_COLUMNS} FROM sessions WHERE {where_clause} ORDER BY updated_at DESC, session_key"
    )
}

/// Moves a scope's watermark to its newest event: everything observed so far is no
/// longer pending.
const CLEAR_SCOPE: &str = "\
INSERT INTO history_watermarks (profile, history_scope, last_event_id, updated_at)
VALUES ($1, $2, (SELECT COALESCE(MAX(id), 0) FROM thread_context_events
                 WHERE bot_profile = $1 AND history_scope = $2), $3)
ON CONFLICT (profile, history_scope)
DO UPDATE SET last_event_id = excluded.last_event_id, updated_at = excluded.updated_at";

const PENDING_COUNT: &str = "\
SELECT COUNT(*) FROM thread_context_events
WHERE bot_profile = $1 AND history_scope = $2 AND recalled = FALSE
  AND event_type IN ('topic_root', 'human_message')
  AND id > COALESCE((SELECT last_event_id FROM history_watermarks
                     WHERE profile = $1 AND history_scope = $2), 0)";

/// A session's reset inside the open transaction `tx`: its id rotated, its history
/// scope's pending history cleared, its unsent feed cleared (and the chat's own feed
/// passed by); the session after it,
/// `None` (nothing changed) when there is no such session.
pub(crate) async fn reset_within<DB: Dialect>(
    tx: &mut Write<'_, DB>,
    r: &SessionReset<'_>,
) -> Result<Option<SessionRow>, StoreError> {
    let row: Option<SessionRow> = sqlx::query_as(&rotate_session())
        .bind(r.profile)
        .bind(r.key)
        .bind(r.new_session_id)
        .bind(r.now)
        .fetch_optional(&mut **tx)
        .await?;
    if let Some(session) = &row {
        sqlx::query(CLEAR_SCOPE)
            .bind(r.profile)
            .bind(r.history_scope)
            .bind(r.now)
            .execute(&mut **tx)
            .await?;
        for q in feed::CLEAR {
            sqlx::query(q)
                .bind(r.profile)
                .bind(r.key)
                .execute(&mut **tx)
                .await?;
        }
        sqlx::query(feed::CLEAR_CHAT)
            .bind(r.profile)
            .bind(r.key)
            .bind(crate::vocab::chat::chat_feed_key(&session.chat_id))
            .bind(r.now)
            .execute(&mut **tx)
            .await?;
    }
    Ok(row)
}

#[async_trait]
impl<DB: Dialect> SessionStore for SqlStore<DB> {
    async fn sessions(
        &self,
        profile: Option<&str>,
        chat_id: Option<&str>,
    ) -> Result<Vec<SessionRow>, StoreError> {
        let q = select_sessions("($1 IS NULL OR profile = $1) AND ($2 IS NULL OR chat_id = $2)");
        let query = sqlx::query_as(&q).bind(profile).bind(chat_id);
        self.fetch(query.fetch_all(&self.pool)).await
    }

    async fn session(&self, profile: &str, key: &str) -> Result<Option<SessionRow>, StoreError> {
        let q = select_sessions("profile = $1 AND session_key = $2");
        let query = sqlx::query_as(&q).bind(profile).bind(key);
        self.fetch(query.fetch_optional(&self.pool)).await
    }

    async fn reset_session(&self, r: &SessionReset<'_>) -> Result<Option<SessionRow>, StoreError> {
        self.bounded(async {
            let mut tx = self.transaction().await?;
            let row = reset_within(&mut tx, r).await?;
            tx.commit().await?;
            Ok(row)
        })
        .await
    }

    async fn pending_history_count(&self, profile: &str, scope: &str) -> Result<i64, StoreError> {
        let query = sqlx::query_scalar(PENDING_COUNT).bind(profile).bind(scope);
        self.fetch(query.fetch_one(&self.pool)).await
    }
}
