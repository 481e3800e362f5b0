//! SQL of the [`crate::store::DecisionStore`]: context decisions as recorded.

pub(crate) const DECISION_COLUMNS: &str = "id, chat_id, root_msg_id, message_id, bridge_id, bot_profile, \
     target_id, workspace_mode, mode, session_key, session_id, request_text, thread_context, \
     selected_item_ids_json, selected_json, excluded_json, prompt_preview, diagnostics_json, \
     created_at";

/// Implements [`crate::store::DecisionStore`] for a backend type with `pool` and `timeout`
/// fields (see `sql` for why this is a macro).
macro_rules! impl_decision_store {
    ($ty:ty) => {
        #[async_trait::async_trait]
        impl $crate::store::DecisionStore for $ty {
            async fn record_decision(
                &self,
                d: &$crate::store::NewDecision,
            ) -> Result<i64, $crate::store::StoreError> {
                $crate::store::sql::transaction!(self, |tx| {
                    $crate::store::sql::writes::insert_decision!(tx, d)
                })
            }

            async fn decision(&self, id: i64) -> Result<Option<$crate::store::DecisionRow>, $crate::store::StoreError> {
                let q = format!(
                    "SELECT {} FROM thread_context_decisions WHERE id = $1",
                    $crate::store::sql::decisions::DECISION_COLUMNS
                );
                $crate::store::sql::fetch!(self, query_as, fetch_optional, &q, id)
            }

            async fn latest_decision(
                &self,
                profile: &str,
                root_msg_id: &str,
                message_id: Option<&str>,
            ) -> Result<Option<$crate::store::DecisionRow>, $crate::store::StoreError> {
                let cols = $crate::store::sql::decisions::DECISION_COLUMNS;
                $crate::store::bounded(self.timeout, async {
                    Ok(match message_id {
                        Some(m) => {
                            let q = format!(
                                "SELECT {cols} FROM thread_context_decisions \
                                 WHERE bot_profile = $1 AND message_id = $2 AND root_msg_id = $3 \
                                 ORDER BY id DESC LIMIT 1"
                            );
                            sqlx::query_as(&q).bind(profile).bind(m).bind(root_msg_id).fetch_optional(&self.pool).await?
                        }
                        None => {
                            let q = format!(
                                "SELECT {cols} FROM thread_context_decisions \
                                 WHERE bot_profile = $1 AND root_msg_id = $2 ORDER BY id DESC LIMIT 1"
                            );
                            sqlx::query_as(&q).bind(profile).bind(root_msg_id).fetch_optional(&self.pool).await?
                        }
                    })
                })
                .await
            }
        }
    };
}
pub(crate) use impl_decision_store;
