//! SQL of the [`super::DecisionStore`], shared by both backends. Every read here is an
//! index range with a LIMIT, so its cost does not grow with the thread's length.

pub(crate) const CANDIDATE_COLUMNS: &str = "i.id AS item_id, e.id AS event_id, i.item_type, \
     e.bot_profile, e.bridge_id, e.message_id, i.author_label, i.text, i.truncated, e.recalled";

/// The thread's newest items. The thread is selected with row-value ranges rather than
/// equalities, and ordered by the full `(chat_id, root_msg_id, id)` key: only the
/// thread index can deliver that order, so a planner cannot walk the primary key
/// backwards and filter (fast for a busy thread, but a scan of everything written since
/// for a thread that went quiet). The two ranges together mean exactly
/// `chat_id = $2 AND root_msg_id = $3`.
pub(crate) fn thread_candidates() -> String {
    format!(
        "SELECT {CANDIDATE_COLUMNS} FROM thread_context_events e \
         JOIN thread_context_items i ON i.event_id = e.id \
         WHERE (e.chat_id, e.root_msg_id) >= ($2, $3) \
           AND (e.chat_id, e.root_msg_id, e.id) <= ($2, $3, 9223372036854775807) \
           AND (e.bot_profile = $1 OR e.event_type = 'agent_output') \
         ORDER BY e.chat_id DESC, e.root_msg_id DESC, e.id DESC LIMIT $4"
    )
}

pub(crate) fn pending_candidates() -> String {
    format!(
        "SELECT {CANDIDATE_COLUMNS} FROM thread_context_events e \
         JOIN thread_context_items i ON i.event_id = e.id \
         WHERE e.bot_profile = $1 AND e.history_scope = $2 \
           AND e.event_type IN ('topic_root', 'human_message') \
           AND e.id > COALESCE((SELECT last_event_id FROM history_watermarks \
                                WHERE profile = $1 AND history_scope = $2), 0) \
         ORDER BY e.id DESC LIMIT $3"
    )
}

pub(crate) const CONSUME: &str = "\
INSERT INTO history_watermarks (profile, history_scope, last_event_id, updated_at)
VALUES ($1, $2, $3, $4)
ON CONFLICT (profile, history_scope) DO UPDATE SET
    last_event_id = CASE WHEN excluded.last_event_id > history_watermarks.last_event_id
                         THEN excluded.last_event_id ELSE history_watermarks.last_event_id END,
    updated_at = excluded.updated_at";

pub(crate) const TOPIC_ROOT: &str = "\
SELECT e.text, COALESCE(i.author_label, e.actor_id) FROM thread_context_events e
LEFT JOIN thread_context_items i ON i.event_id = e.id
WHERE e.chat_id = $2 AND e.root_msg_id = $3 AND e.message_id = $3
  AND e.event_type = 'topic_root' AND e.recalled = FALSE
ORDER BY CASE WHEN e.bot_profile = $1 THEN 0 ELSE 1 END, e.id
LIMIT 1";

pub(crate) const MESSAGE_TEXT: &str = "\
SELECT COALESCE(i.text, e.text), COALESCE(i.author_label, e.actor_id) FROM thread_context_events e
LEFT JOIN thread_context_items i ON i.event_id = e.id
WHERE e.message_id = $1 AND e.recalled = FALSE
ORDER BY CASE WHEN i.id IS NULL THEN 1 ELSE 0 END, e.id
LIMIT 1";

pub(crate) const INSERT_DECISION: &str = "\
INSERT INTO thread_context_decisions
    (chat_id, root_msg_id, message_id, bridge_id, bot_profile, target_id, workspace_mode, mode,
     session_key, session_id, request_text, thread_context, selected_item_ids_json, selected_json,
     excluded_json, prompt_preview, diagnostics_json, source_message_ids, created_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19)
RETURNING id";

pub(crate) const DECISION_COLUMNS: &str = "id, chat_id, root_msg_id, message_id, bridge_id, bot_profile, \
     target_id, workspace_mode, mode, session_key, session_id, request_text, thread_context, \
     selected_item_ids_json, selected_json, excluded_json, prompt_preview, diagnostics_json, \
     source_message_ids, created_at";

/// Inserts a decision inside an open transaction and links it from the request's
/// verdict; evaluates to the decision id.
macro_rules! insert_decision {
    ($tx:expr, $d:expr) => {{
        let d = $d;
        let id: i64 = sqlx::query_scalar($crate::store::decision_sql::INSERT_DECISION)
            .bind(&d.chat_id)
            .bind(&d.root_msg_id)
            .bind(&d.message_id)
            .bind(&d.bridge_id)
            .bind(&d.bot_profile)
            .bind(&d.target_id)
            .bind(&d.workspace_mode)
            .bind(&d.mode)
            .bind(&d.session_key)
            .bind(&d.session_id)
            .bind(&d.request_text)
            .bind(&d.thread_context)
            .bind(&d.selected_item_ids_json)
            .bind(&d.selected_json)
            .bind(&d.excluded_json)
            .bind(&d.prompt_preview)
            .bind(&d.diagnostics_json)
            .bind(&d.source_message_ids)
            .bind(d.created_at)
            .fetch_one($tx)
            .await?;
        sqlx::query($crate::store::decision_sql::LINK_VERDICT)
            .bind(id)
            .bind(&d.bot_profile)
            .bind(&d.message_id)
            .execute($tx)
            .await?;
        id
    }};
}
pub(crate) use insert_decision;

/// A decision is linked from its request's verdict.
pub(crate) const LINK_VERDICT: &str =
    "UPDATE routing_verdicts SET decision_id = $1 WHERE profile = $2 AND message_id = $3";

/// Implements [`super::DecisionStore`] (see `impl_inbox_store!` for why this is a macro).
macro_rules! impl_decision_store {
    ($ty:ty) => {
        #[async_trait::async_trait]
        impl $crate::store::DecisionStore for $ty {
            async fn thread_candidates(
                &self,
                profile: &str,
                chat_id: &str,
                root_msg_id: &str,
                window: i64,
            ) -> Result<Vec<$crate::store::CandidateRow>, $crate::store::StoreError> {
                let q = $crate::store::decision_sql::thread_candidates();
                $crate::store::bounded(self.timeout, async {
                    Ok(sqlx::query_as(&q)
                        .bind(profile)
                        .bind(chat_id)
                        .bind(root_msg_id)
                        .bind(window)
                        .fetch_all(&self.pool)
                        .await?)
                })
                .await
            }

            async fn pending_candidates(
                &self,
                profile: &str,
                scope: &str,
                cap: i64,
            ) -> Result<Vec<$crate::store::CandidateRow>, $crate::store::StoreError> {
                let q = $crate::store::decision_sql::pending_candidates();
                $crate::store::bounded(self.timeout, async {
                    Ok(sqlx::query_as(&q).bind(profile).bind(scope).bind(cap).fetch_all(&self.pool).await?)
                })
                .await
            }

            async fn topic_root(
                &self,
                profile: &str,
                chat_id: &str,
                root_msg_id: &str,
            ) -> Result<Option<(String, String)>, $crate::store::StoreError> {
                $crate::store::bounded(self.timeout, async {
                    Ok(sqlx::query_as($crate::store::decision_sql::TOPIC_ROOT)
                        .bind(profile)
                        .bind(chat_id)
                        .bind(root_msg_id)
                        .fetch_optional(&self.pool)
                        .await?)
                })
                .await
            }

            async fn message_text(
                &self,
                message_id: &str,
            ) -> Result<Option<(String, String)>, $crate::store::StoreError> {
                $crate::store::bounded(self.timeout, async {
                    Ok(sqlx::query_as($crate::store::decision_sql::MESSAGE_TEXT)
                        .bind(message_id)
                        .fetch_optional(&self.pool)
                        .await?)
                })
                .await
            }

            async fn record_decision(
                &self,
                d: &$crate::store::NewDecision,
            ) -> Result<i64, $crate::store::StoreError> {
                $crate::store::bounded(self.timeout, async {
                    let mut tx = self.pool.begin().await?;
                    let id = $crate::store::decision_sql::insert_decision!(&mut *tx, d);
                    tx.commit().await?;
                    Ok(id)
                })
                .await
            }

            async fn decision(&self, id: i64) -> Result<Option<$crate::store::DecisionRow>, $crate::store::StoreError> {
                let q = format!(
                    "SELECT {} FROM thread_context_decisions WHERE id = $1",
                    $crate::store::decision_sql::DECISION_COLUMNS
                );
                $crate::store::bounded(self.timeout, async {
                    Ok(sqlx::query_as(&q).bind(id).fetch_optional(&self.pool).await?)
                })
                .await
            }

            async fn latest_decision(
                &self,
                profile: &str,
                root_msg_id: &str,
                message_id: Option<&str>,
            ) -> Result<Option<$crate::store::DecisionRow>, $crate::store::StoreError> {
                let cols = $crate::store::decision_sql::DECISION_COLUMNS;
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

            async fn record_events(
                &self,
                events: &[$crate::store::NewContextEvent],
            ) -> Result<(), $crate::store::StoreError> {
                $crate::store::bounded(self.timeout, async {
                    let mut tx = self.pool.begin().await?;
                    $crate::store::context_sql::insert_events!(&mut *tx, events);
                    tx.commit().await?;
                    Ok(())
                })
                .await
            }
        }
    };
}
pub(crate) use impl_decision_store;
