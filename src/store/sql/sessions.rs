//! SQL of the [`crate::store::SessionStore`]: session mappings and their history scopes.

use super::writes::SESSION_COLUMNS;

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

/// A session's reset inside the open transaction `$tx`, for the
/// [`crate::store::SessionReset`] `$r`: its id rotated, its history scope's pending
/// history cleared, its unsent feed cleared; the session after it, `None` (nothing
/// changed) when there is no such session.
macro_rules! reset_within {
    ($tx:ident, $r:expr) => {{
        use $crate::store::sql::{feed, sessions, within};
        let r = $r;
        let row: Option<$crate::store::SessionRow> = within!(
            $tx,
            query_as,
            fetch_optional,
            &sessions::rotate_session(),
            r.profile,
            r.key,
            r.new_session_id,
            r.now,
        );
        if row.is_some() {
            within!(
                $tx,
                query,
                execute,
                sessions::CLEAR_SCOPE,
                r.profile,
                r.history_scope,
                r.now,
            );
            for q in feed::CLEAR {
                within!($tx, query, execute, q, r.profile, r.key);
            }
        }
        row
    }};
}
pub(crate) use reset_within;

/// Implements [`crate::store::SessionStore`] for a backend type with `pool` and `timeout`
/// fields (see `sql` for why this is a macro).
macro_rules! impl_session_store {
    ($ty:ty) => {
        #[async_trait::async_trait]
        impl $crate::store::SessionStore for $ty {
            async fn sessions(
                &self,
                profile: Option<&str>,
                chat_id: Option<&str>,
            ) -> Result<Vec<$crate::store::SessionRow>, $crate::store::StoreError> {
                let q = $crate::store::sql::sessions::select_sessions(
                    "($1 IS NULL OR profile = $1) AND ($2 IS NULL OR chat_id = $2)",
                );
                $crate::store::sql::fetch!(self, query_as, fetch_all, &q, profile, chat_id)
            }

            async fn session(
                &self,
                profile: &str,
                key: &str,
            ) -> Result<Option<$crate::store::SessionRow>, $crate::store::StoreError> {
                let q = $crate::store::sql::sessions::select_sessions(
                    "profile = $1 AND session_key = $2",
                );
                $crate::store::sql::fetch!(self, query_as, fetch_optional, &q, profile, key)
            }

            async fn reset_session(
                &self,
                r: &$crate::store::SessionReset<'_>,
            ) -> Result<Option<$crate::store::SessionRow>, $crate::store::StoreError> {
                use $crate::store::sql::transaction;
                transaction!(self, |tx| {
                    $crate::store::sql::sessions::reset_within!(tx, r)
                })
            }

            async fn pending_history_count(
                &self,
                profile: &str,
                scope: &str,
            ) -> Result<i64, $crate::store::StoreError> {
                $crate::store::bounded(self.timeout, async {
                    Ok(
                        sqlx::query_scalar($crate::store::sql::sessions::PENDING_COUNT)
                            .bind(profile)
                            .bind(scope)
                            .fetch_one(&self.pool)
                            .await?,
                    )
                })
                .await
            }
        }
    };
}
pub(crate) use impl_session_store;
