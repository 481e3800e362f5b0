//! SQL of the [`crate::store::TurnStore`]: turns from queued to ended.

pub(crate) const TURN_COLUMNS: &str = "id, turn_id, profile, session_key, session_id, chat_id, \
     message_id, request_text, job_json, state, decision_id, output, reply_message_id, \
     card_message_id, card_id, error, lease_owner, \
     queued_at, started_at, answered_at, finished_at";

pub(crate) const START: &str = "\
UPDATE turns SET state = 'running', session_id = $2, started_at = $3, decision_id = $4
WHERE turn_id = $1 AND state = 'queued' AND lease_owner = $5 RETURNING id";

pub(crate) const END: &str = "\
UPDATE turns SET state = $2, error = $3, finished_at = $4
WHERE turn_id = $1 AND state IN ('queued', 'running')";

pub(crate) const SUCCEED: &str = "\
UPDATE turns SET state = 'succeeded', reply_message_id = $2, finished_at = $3, error = NULL
WHERE turn_id = $1 AND state = 'running'";

pub(crate) fn select(where_clause: &str) -> String {
    format!("SELECT {TURN_COLUMNS} FROM turns WHERE {where_clause}")
}

/// Implements [`crate::store::TurnStore`] for a backend type with `pool` and `timeout`
/// fields (see `sql` for why this is a macro).
macro_rules! impl_turn_store {
    ($ty:ty) => {
        #[async_trait::async_trait]
        impl $crate::store::TurnStore for $ty {
            async fn start_turn(
                &self,
                s: &$crate::store::TurnStart<'_>,
            ) -> Result<Option<$crate::store::StartedTurn>, $crate::store::StoreError> {
                use $crate::store::sql::{transaction, turns, within, writes};
                transaction!(self, |tx| {
                    let decision_id = writes::insert_decision!(tx, s.decision);
                    let row_id: Option<i64> = within!(
                        tx,
                        query_scalar,
                        fetch_optional,
                        turns::START,
                        s.turn_id,
                        &s.decision.session_id,
                        s.now,
                        decision_id,
                        s.owner,
                    );
                    let Some(row_id) = row_id else {
                        // No longer queued: nothing of this start is kept.
                        tx.rollback().await?;
                        return Ok(None);
                    };
                    if let Some((profile, scope, up_to)) = s.consume {
                        within!(
                            tx,
                            query,
                            execute,
                            writes::CONSUME,
                            profile,
                            scope,
                            up_to,
                            s.now
                        );
                    }
                    Some($crate::store::StartedTurn {
                        row_id,
                        decision_id,
                    })
                })
            }

            async fn set_turn_card(
                &self,
                turn_id: &str,
                message_id: &str,
                card_id: Option<&str>,
            ) -> Result<(), $crate::store::StoreError> {
                $crate::store::sql::execute!(
                    self,
                    "UPDATE turns SET card_message_id = $2, card_id = $3 WHERE turn_id = $1",
                    turn_id,
                    message_id,
                    card_id,
                )
                .map(drop)
            }

            async fn save_turn_output(
                &self,
                turn_id: &str,
                output: &str,
                now: $crate::util::UnixMs,
            ) -> Result<(), $crate::store::StoreError> {
                $crate::store::sql::execute!(
                    self,
                    "UPDATE turns SET output = $2, answered_at = $3 \
                     WHERE turn_id = $1 AND state = 'running'",
                    turn_id,
                    output,
                    now,
                )
                .map(drop)
            }

            async fn end_turn(
                &self,
                turn_id: &str,
                state: $crate::store::TurnState,
                error: &str,
                now: $crate::util::UnixMs,
            ) -> Result<bool, $crate::store::StoreError> {
                let changed = $crate::store::sql::execute!(
                    self,
                    $crate::store::sql::turns::END,
                    turn_id,
                    state.as_str(),
                    error,
                    now,
                )?;
                Ok(changed == 1)
            }

            async fn complete_turn(
                &self,
                c: &$crate::store::TurnCompletion,
            ) -> Result<(), $crate::store::StoreError> {
                use $crate::store::sql::{transaction, turns, within, writes};
                transaction!(self, |tx| {
                    writes::insert_events!(tx, std::slice::from_ref(&c.output_event));
                    if let Some((profile, key, session_id)) = &c.topic_root_delivered {
                        within!(
                            tx,
                            query,
                            execute,
                            "UPDATE sessions SET topic_root_prompt_delivered = TRUE \
                             WHERE profile = $1 AND session_key = $2 AND session_id = $3",
                            profile,
                            key,
                            session_id,
                        );
                    }
                    within!(
                        tx,
                        query,
                        execute,
                        turns::SUCCEED,
                        &c.turn_id,
                        &c.reply_message_id,
                        c.now,
                    );
                })
            }

            async fn turn(
                &self,
                turn_id: &str,
            ) -> Result<Option<$crate::store::TurnRow>, $crate::store::StoreError> {
                let q = $crate::store::sql::turns::select("turn_id = $1");
                $crate::store::sql::fetch!(self, query_as, fetch_optional, &q, turn_id)
            }

            async fn turn_of_decision(
                &self,
                decision_id: i64,
            ) -> Result<Option<$crate::store::TurnRow>, $crate::store::StoreError> {
                let q =
                    $crate::store::sql::turns::select("decision_id = $1 ORDER BY id DESC LIMIT 1");
                $crate::store::sql::fetch!(self, query_as, fetch_optional, &q, decision_id)
            }

            async fn unfinished_turns(
                &self,
            ) -> Result<Vec<$crate::store::TurnRow>, $crate::store::StoreError> {
                let q =
                    $crate::store::sql::turns::select("state IN ('queued', 'running') ORDER BY id");
                $crate::store::sql::fetch!(self, query_as, fetch_all, &q)
            }

            async fn session_history(
                &self,
                h: &$crate::store::HistoryQuery<'_>,
            ) -> Result<Vec<$crate::store::TurnRow>, $crate::store::StoreError> {
                let q = $crate::store::sql::turns::select(
                    "profile = $1 AND session_key = $2 AND id < $4 AND session_id = $3 \
                     AND state = 'succeeded' ORDER BY id DESC LIMIT $5",
                );
                let mut rows: Vec<$crate::store::TurnRow> = $crate::store::sql::fetch!(
                    self,
                    query_as,
                    fetch_all,
                    &q,
                    h.profile,
                    h.session_key,
                    h.session_id,
                    h.before_id,
                    h.limit,
                )?;
                rows.reverse();
                Ok(rows)
            }

            async fn turns(
                &self,
                f: &$crate::store::TurnFilter,
            ) -> Result<Vec<$crate::store::TurnRow>, $crate::store::StoreError> {
                let q = $crate::store::sql::turns::select(
                    "($1 IS NULL OR profile = $1) AND ($2 IS NULL OR session_key = $2) \
                     AND ($3 IS NULL OR state = $3) ORDER BY id DESC LIMIT $4",
                );
                $crate::store::sql::fetch!(
                    self,
                    query_as,
                    fetch_all,
                    &q,
                    &f.profile,
                    &f.session_key,
                    &f.state,
                    f.limit,
                )
            }

            async fn turn_counts(&self) -> Result<(i64, i64), $crate::store::StoreError> {
                let (q, r): (i64, i64) = $crate::store::sql::fetch!(
                    self,
                    query_as,
                    fetch_one,
                    "SELECT COALESCE(SUM(CASE WHEN state = 'queued' THEN 1 ELSE 0 END), 0), \
                     COALESCE(SUM(CASE WHEN state = 'running' THEN 1 ELSE 0 END), 0) \
                     FROM turns WHERE state IN ('queued', 'running')",
                )?;
                Ok((q, r))
            }
        }
    };
}
pub(crate) use impl_turn_store;
