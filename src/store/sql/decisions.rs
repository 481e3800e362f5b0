//! SQL of the [`crate::store::DecisionStore`]: context decisions as recorded.

use async_trait::async_trait;

use super::{dialect::Dialect, store::SqlStore, writes::insert_decision};
use crate::store::{DecisionRow, DecisionStore, NewDecision, StoreError};

pub(crate) const DECISION_COLUMNS: &str = "id, chat_id, root_msg_id, message_id, bridge_id, bot_profile, \
     target_id, workspace_mode, mode, session_key, session_id, request_text, thread_context, \
     selected_item_ids_json, selected_json, excluded_json, prompt_preview, diagnostics_json, \
     created_at";

/// Retention, inside the event log's purge transaction: decisions recorded before the
/// cutoff go whole (their sources with them: `ON DELETE CASCADE`). By then the verdicts,
/// finished turns and items they point at are purged too, so a blanked row would explain
/// nothing; a decision inside the window never points at a purged verdict or turn, as
/// both are written before it.
pub(crate) const PURGE: &str = "DELETE FROM thread_context_decisions WHERE created_at < $1";

#[async_trait]
impl<DB: Dialect> DecisionStore for SqlStore<DB> {
    async fn record_decision(&self, d: &NewDecision) -> Result<i64, StoreError> {
        self.bounded(async {
            let mut tx = self.transaction().await?;
            let id = insert_decision(&mut tx, d).await?;
            tx.commit().await?;
            Ok(id)
        })
        .await
    }

    async fn decision(&self, id: i64) -> Result<Option<DecisionRow>, StoreError> {
        let q = format!("SELECT {DECISION_COLUMNS} FROM thread_context_decisions WHERE id = $1");
        self.fetch(sqlx::query_as(&q).bind(id).fetch_optional(&self.pool))
            .await
    }

    async fn latest_decision(
        &self,
        profile: &str,
        root_msg_id: &str,
        message_id: Option<&str>,
    ) -> Result<Option<DecisionRow>, StoreError> {
        let cols = DECISION_COLUMNS;
        match message_id {
            Some(m) => {
                let q = format!(
                    "SELECT {cols} FROM thread_context_decisions \
                     WHERE bot_profile = $1 AND message_id = $2 AND root_msg_id = $3 \
                     ORDER BY id DESC LIMIT 1"
                );
                let query = sqlx::query_as(&q).bind(profile).bind(m).bind(root_msg_id);
                self.fetch(query.fetch_optional(&self.pool)).await
            }
            None => {
                let q = format!(
                    "SELECT {cols} FROM thread_context_decisions \
                     WHERE bot_profile = $1 AND root_msg_id = $2 ORDER BY id DESC LIMIT 1"
                );
                let query = sqlx::query_as(&q).bind(profile).bind(root_msg_id);
                self.fetch(query.fetch_optional(&self.pool)).await
            }
        }
    }
}
