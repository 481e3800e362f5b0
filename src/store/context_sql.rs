//! SQL of the [`super::ContextStore`], shared by both backends.

pub(crate) const INSERT_EVENT: &str = "\
INSERT INTO thread_context_events
    (chat_id, chat_type, root_msg_id, thread_id, message_id, event_type, actor_type, actor_id,
     bridge_id, bot_profile, target_id, target_name, session_name, history_scope, text,
     metadata_json, created_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)
ON CONFLICT DO NOTHING
RETURNING id";

pub(crate) const INSERT_ITEM: &str = "\
INSERT INTO thread_context_items
    (event_id, item_type, role, author_label, text, token_estimate, truncated, created_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)";

pub(crate) const UPSERT_NAME: &str = "\
INSERT INTO user_names (profile, open_id, name, updated_at) VALUES ($1, $2, $3, $4)
ON CONFLICT (profile, open_id) DO UPDATE SET name = excluded.name, updated_at = excluded.updated_at";

pub(crate) const INSERT_VERDICT: &str = "\
INSERT INTO routing_verdicts (profile, message_id, chat_id, verdict, reason, session_key, created_at)
VALUES ($1, $2, $3, $4, $5, $6, $7)
ON CONFLICT DO NOTHING";

/// The verdict insert with its values bound (the first verdict of a message stands).
pub(crate) fn insert_verdict<DB: sqlx::Database>(
    v: &super::NewVerdict,
) -> sqlx::query::Query<'_, DB, <DB as sqlx::Database>::Arguments<'_>>
where
    String: for<'q> sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    Option<String>: for<'q> sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    i64: for<'q> sqlx::Encode<'q, DB> + sqlx::Type<DB>,
{
    sqlx::query(INSERT_VERDICT)
        .bind(&v.profile)
        .bind(&v.message_id)
        .bind(&v.chat_id)
        .bind(&v.verdict)
        .bind(&v.reason)
        .bind(&v.session_key)
        .bind(v.created_at)
}

pub(crate) const SESSION_COLUMNS: &str = "profile, session_key, session_id, chat_id, chat_type, \
     user_id, root_msg_id, history_scope, topic_root_prompt_delivered, created_at, updated_at";

pub(crate) fn upsert_session() -> String {
    format!(
        "INSERT INTO sessions (profile, session_key, session_id, chat_id, chat_type, user_id, \
         root_msg_id, history_scope, topic_root_prompt_delivered, created_at, updated_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, FALSE, $9, $9) \
         ON CONFLICT (profile, session_key) DO UPDATE SET updated_at = excluded.updated_at \
         RETURNING {SESSION_COLUMNS}"
    )
}

pub(crate) fn rotate_session() -> String {
    format!(
        "UPDATE sessions SET session_id = $3, topic_root_prompt_delivered = FALSE, updated_at = $4 \
         WHERE profile = $1 AND session_key = $2 RETURNING {SESSION_COLUMNS}"
    )
}

pub(crate) fn select_sessions(where_clause: &str) -> String {
    format!(
        "SELECT {SESSION_COLUMNS} FROM sessions WHERE {where_clause} ORDER BY updated_at DESC, session_key"
    )
}

/// Moves a scope's watermark to its newest event: everything observed so far is no
/// longer pending.
pub(crate) const CLEAR_SCOPE: &str = "\
INSERT INTO history_watermarks (profile, history_scope, last_event_id, updated_at)
VALUES ($1, $2, (SELECT COALESCE(MAX(id), 0) FROM thread_context_events
                 WHERE bot_profile = $1 AND history_scope = $2), $3)
ON CONFLICT (profile, history_scope)
DO UPDATE SET last_event_id = excluded.last_event_id, updated_at = excluded.updated_at";

pub(crate) const PENDING_COUNT: &str = "\
SELECT COUNT(*) FROM thread_context_events
WHERE bot_profile = $1 AND history_scope = $2 AND recalled = FALSE
  AND event_type IN ('topic_root', 'human_message')
  AND id > COALESCE((SELECT last_event_id FROM history_watermarks
                     WHERE profile = $1 AND history_scope = $2), 0)";

/// A recall is remembered (so a late delivery is ignored) …
pub(crate) const RECALL_MARK: &str = "INSERT INTO recalled_messages (message_id, chat_id, recalled_at) VALUES ($1, $2, $3) \
     ON CONFLICT DO NOTHING";

/// … its text leaves the items, the inbox and every decision that held it …
pub(crate) const RECALL_SCRUB: [&str; 3] = [
    "UPDATE thread_context_items SET text = '' \
     WHERE event_id IN (SELECT id FROM thread_context_events WHERE message_id = $1)",
    "UPDATE inbox_events SET payload = '{}' WHERE message_id = $1",
    "UPDATE thread_context_decisions SET request_text = '', thread_context = '', selected_json = '[]', \
     prompt_preview = '[removed: a message in this decision was recalled]' \
     WHERE source_message_ids LIKE '%,' || $1 || ',%'",
];

/// … and its event-log records are marked recalled.
pub(crate) const RECALL_EVENTS: &str = "UPDATE thread_context_events SET text = '', metadata_json = '{}', recalled = TRUE \
     WHERE message_id = $1";

/// Retention: old events (their items go with them: `ON DELETE CASCADE`), and finished
/// inbox rows, verdicts, replies and turns of the same age.
pub(crate) const PURGE: [&str; 5] = [
    "DELETE FROM thread_context_events WHERE created_at < $1",
    "DELETE FROM inbox_events WHERE received_at < $1 AND status IN ('done', 'skipped', 'failed')",
    "DELETE FROM routing_verdicts WHERE created_at < $1",
    "DELETE FROM outbound_messages WHERE created_at < $1",
    "DELETE FROM turns WHERE queued_at < $1 AND state IN ('succeeded', 'failed', 'cancelled')",
];

pub(crate) const EVENT_COLUMNS: &str = "e.id, e.chat_id, e.root_msg_id, e.message_id, e.event_type, \
     e.actor_type, e.actor_id, e.bot_profile, e.bridge_id, e.session_name, e.history_scope, e.text, \
     e.recalled, e.created_at, i.id AS item_id, i.author_label, i.text AS item_text";

pub(crate) fn select_events(where_clause: &str) -> String {
    format!(
        "SELECT {EVENT_COLUMNS} FROM thread_context_events e \
         LEFT JOIN thread_context_items i ON i.event_id = e.id WHERE {where_clause} ORDER BY e.id"
    )
}

/// Inserts event-log records (and their items) inside an open transaction; a record that
/// already exists (same profile, message and type) is skipped with its item.
macro_rules! insert_events {
    ($tx:expr, $events:expr) => {
        for e in $events {
            let id: Option<i64> = sqlx::query_scalar($crate::store::context_sql::INSERT_EVENT)
                .bind(&e.chat_id)
                .bind(&e.chat_type)
                .bind(&e.root_msg_id)
                .bind(&e.thread_id)
                .bind(&e.message_id)
                .bind(&e.event_type)
                .bind(&e.actor_type)
                .bind(&e.actor_id)
                .bind(&e.bridge_id)
                .bind(&e.bot_profile)
                .bind(&e.target_id)
                .bind(&e.target_name)
                .bind(&e.session_name)
                .bind(&e.history_scope)
                .bind(&e.text)
                .bind(&e.metadata_json)
                .bind(e.created_at)
                .fetch_optional($tx)
                .await?;
            if let (Some(id), Some(item)) = (id, &e.item) {
                sqlx::query($crate::store::context_sql::INSERT_ITEM)
                    .bind(id)
                    .bind(&item.item_type)
                    .bind(&item.role)
                    .bind(&item.author_label)
                    .bind(&item.text)
                    .bind(item.token_estimate)
                    .bind(item.truncated)
                    .bind(e.created_at)
                    .execute($tx)
                    .await?;
            }
        }
    };
}
pub(crate) use insert_events;

/// Implements [`super::ContextStore`] for a backend type with `pool` and `timeout`
/// fields (see `impl_inbox_store!` for why this is a macro).
macro_rules! impl_context_store {
    ($ty:ty) => {
        #[async_trait::async_trait]
        impl $crate::store::ContextStore for $ty {
            async fn is_recalled(&self, message_id: &str) -> Result<bool, $crate::store::StoreError> {
                $crate::store::bounded(self.timeout, async {
                    let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM recalled_messages WHERE message_id = $1")
                        .bind(message_id)
                        .fetch_one(&self.pool)
                        .await?;
                    Ok(n > 0)
                })
                .await
            }

            async fn apply_route(
                &self,
                w: &$crate::store::RouteWrite,
            ) -> Result<$crate::store::Routed, $crate::store::StoreError> {
                use $crate::store::context_sql as sql;
                $crate::store::bounded(self.timeout, async {
                    let mut tx = self.pool.begin().await?;
                    // The first verdict of a message stands; finding one means this
                    // message was routed before.
                    let fresh = $crate::store::context_sql::insert_verdict(&w.verdict)
                        .execute(&mut *tx)
                        .await?
                        .rows_affected()
                        == 1;
                    $crate::store::context_sql::insert_events!(&mut *tx, &w.events);
                    for (open_id, name) in &w.names {
                        sqlx::query(sql::UPSERT_NAME)
                            .bind(&w.verdict.profile)
                            .bind(open_id)
                            .bind(name)
                            .bind(w.verdict.created_at)
                            .execute(&mut *tx)
                            .await?;
                    }
                    let session = match &w.session {
                        Some(s) => Some(
                            sqlx::query_as::<_, $crate::store::SessionRow>(&sql::upsert_session())
                                .bind(&s.profile)
                                .bind(&s.session_key)
                                .bind(&s.session_id)
                                .bind(&s.chat_id)
                                .bind(&s.chat_type)
                                .bind(&s.user_id)
                                .bind(&s.root_msg_id)
                                .bind(&s.history_scope)
                                .bind(s.now)
                                .fetch_one(&mut *tx)
                                .await?,
                        ),
                        None => None,
                    };
                    if let Some(t) = w.turn.as_ref().filter(|_| fresh) {
                        $crate::store::turn_sql::insert_turn!(&mut *tx, t);
                    }
                    tx.commit().await?;
                    Ok($crate::store::Routed { session, fresh })
                })
                .await
            }

            async fn purge(&self, cutoff: i64) -> Result<(), $crate::store::StoreError> {
                $crate::store::bounded(self.timeout, async {
                    let mut tx = self.pool.begin().await?;
                    for q in $crate::store::context_sql::PURGE {
                        sqlx::query(q).bind(cutoff).execute(&mut *tx).await?;
                    }
                    tx.commit().await?;
                    Ok(())
                })
                .await
            }

            async fn record_verdict(
                &self,
                v: &$crate::store::NewVerdict,
            ) -> Result<(), $crate::store::StoreError> {
                $crate::store::bounded(self.timeout, async {
                    $crate::store::context_sql::insert_verdict(v)
                        .execute(&self.pool)
                        .await?;
                    Ok(())
                })
                .await
            }

            async fn recall(
                &self,
                message_id: &str,
                chat_id: &str,
                now: i64,
            ) -> Result<u64, $crate::store::StoreError> {
                use $crate::store::context_sql as sql;
                $crate::store::bounded(self.timeout, async {
                    let mut tx = self.pool.begin().await?;
                    sqlx::query(sql::RECALL_MARK)
                        .bind(message_id)
                        .bind(chat_id)
                        .bind(now)
                        .execute(&mut *tx)
                        .await?;
                    for q in sql::RECALL_SCRUB {
                        sqlx::query(q).bind(message_id).execute(&mut *tx).await?;
                    }
                    sqlx::query($crate::store::turn_sql::RECALL)
                        .bind(message_id)
                        .bind(now)
                        .execute(&mut *tx)
                        .await?;
                    let done = sqlx::query(sql::RECALL_EVENTS).bind(message_id).execute(&mut *tx).await?;
                    tx.commit().await?;
                    Ok(done.rows_affected())
                })
                .await
            }

            async fn name_of(
                &self,
                profile: &str,
                open_id: &str,
            ) -> Result<Option<String>, $crate::store::StoreError> {
                $crate::store::bounded(self.timeout, async {
                    Ok(sqlx::query_scalar("SELECT name FROM user_names WHERE profile = $1 AND open_id = $2")
                        .bind(profile)
                        .bind(open_id)
                        .fetch_optional(&self.pool)
                        .await?)
                })
                .await
            }

            async fn verdicts(
                &self,
                message_id: &str,
                profile: Option<&str>,
            ) -> Result<Vec<$crate::store::VerdictRow>, $crate::store::StoreError> {
                $crate::store::bounded(self.timeout, async {
                    Ok(sqlx::query_as(
                        "SELECT profile, message_id, chat_id, verdict, reason, session_key, decision_id, created_at \
                         FROM routing_verdicts WHERE message_id = $1 AND ($2 IS NULL OR profile = $2) ORDER BY profile",
                    )
                    .bind(message_id)
                    .bind(profile)
                    .fetch_all(&self.pool)
                    .await?)
                })
                .await
            }

            async fn sessions(
                &self,
                profile: Option<&str>,
                chat_id: Option<&str>,
            ) -> Result<Vec<$crate::store::SessionRow>, $crate::store::StoreError> {
                let q = $crate::store::context_sql::select_sessions(
                    "($1 IS NULL OR profile = $1) AND ($2 IS NULL OR chat_id = $2)",
                );
                $crate::store::bounded(self.timeout, async {
                    Ok(sqlx::query_as(&q).bind(profile).bind(chat_id).fetch_all(&self.pool).await?)
                })
                .await
            }

            async fn session(
                &self,
                profile: &str,
                key: &str,
            ) -> Result<Option<$crate::store::SessionRow>, $crate::store::StoreError> {
                let q = $crate::store::context_sql::select_sessions("profile = $1 AND session_key = $2");
                $crate::store::bounded(self.timeout, async {
                    Ok(sqlx::query_as(&q).bind(profile).bind(key).fetch_optional(&self.pool).await?)
                })
                .await
            }

            async fn reset_session(
                &self,
                profile: &str,
                key: &str,
                history_scope: &str,
                new_session_id: &str,
                now: i64,
            ) -> Result<Option<$crate::store::SessionRow>, $crate::store::StoreError> {
                use $crate::store::context_sql as sql;
                $crate::store::bounded(self.timeout, async {
                    let mut tx = self.pool.begin().await?;
                    let row: Option<$crate::store::SessionRow> = sqlx::query_as(&sql::rotate_session())
                        .bind(profile)
                        .bind(key)
                        .bind(new_session_id)
                        .bind(now)
                        .fetch_optional(&mut *tx)
                        .await?;
                    if row.is_some() {
                        sqlx::query(sql::CLEAR_SCOPE)
                            .bind(profile)
                            .bind(history_scope)
                            .bind(now)
                            .execute(&mut *tx)
                            .await?;
                    }
                    tx.commit().await?;
                    Ok(row)
                })
                .await
            }

            async fn pending_history_count(
                &self,
                profile: &str,
                scope: &str,
            ) -> Result<i64, $crate::store::StoreError> {
                $crate::store::bounded(self.timeout, async {
                    Ok(sqlx::query_scalar($crate::store::context_sql::PENDING_COUNT)
                        .bind(profile)
                        .bind(scope)
                        .fetch_one(&self.pool)
                        .await?)
                })
                .await
            }

            async fn record_outbound(
                &self,
                m: &$crate::store::NewOutbound,
            ) -> Result<i64, $crate::store::StoreError> {
                $crate::store::bounded(self.timeout, async {
                    Ok(sqlx::query_scalar(
                        "INSERT INTO outbound_messages (profile, chat_id, reply_to, kind, text, created_at) \
                         VALUES ($1, $2, $3, $4, $5, $6) RETURNING id",
                    )
                    .bind(&m.profile)
                    .bind(&m.chat_id)
                    .bind(&m.reply_to)
                    .bind(&m.kind)
                    .bind(&m.text)
                    .bind(m.created_at)
                    .fetch_one(&self.pool)
                    .await?)
                })
                .await
            }

            async fn outbound(
                &self,
                profile: &str,
                limit: i64,
            ) -> Result<Vec<$crate::store::OutboundRow>, $crate::store::StoreError> {
                $crate::store::bounded(self.timeout, async {
                    let mut rows: Vec<$crate::store::OutboundRow> = sqlx::query_as(
                        "SELECT id, profile, chat_id, reply_to, kind, text, created_at FROM outbound_messages \
                         WHERE profile = $1 ORDER BY id DESC LIMIT $2",
                    )
                    .bind(profile)
                    .bind(limit)
                    .fetch_all(&self.pool)
                    .await?;
                    rows.reverse();
                    Ok(rows)
                })
                .await
            }

            async fn thread_events(
                &self,
                profile: &str,
                chat_id: &str,
                root_msg_id: &str,
            ) -> Result<Vec<$crate::store::ContextEventRow>, $crate::store::StoreError> {
                let q = $crate::store::context_sql::select_events(
                    "e.chat_id = $2 AND e.root_msg_id = $3 AND e.bot_profile = $1",
                );
                $crate::store::bounded(self.timeout, async {
                    Ok(sqlx::query_as(&q)
                        .bind(profile)
                        .bind(chat_id)
                        .bind(root_msg_id)
                        .fetch_all(&self.pool)
                        .await?)
                })
                .await
            }

            async fn message_events(
                &self,
                message_id: &str,
            ) -> Result<Vec<$crate::store::ContextEventRow>, $crate::store::StoreError> {
                let q = $crate::store::context_sql::select_events("e.message_id = $1");
                $crate::store::bounded(self.timeout, async {
                    Ok(sqlx::query_as(&q).bind(message_id).fetch_all(&self.pool).await?)
                })
                .await
            }
        }
    };
}
pub(crate) use impl_context_store;
