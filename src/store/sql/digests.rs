//! SQL of the [`crate::store::DigestStore`]: runs claimed by date, each session's digest,
//! and the marks that say where a session's next digest starts.

pub(crate) const RUN_COLUMNS: &str = "date, started_by, timezone, started_at, finished_at, \
     sessions, reset, kept, failed, file";

pub(crate) const DIGEST_COLUMNS: &str = "id, date, profile, session_key, session_id, chat_id, \
     chars, messages, last_event_id, summary, status, reason, detail, new_session_id, \
     created_at, updated_at";

/// A date is claimed by its row: the first insert wins, on every replica.
pub(crate) const CLAIM_RUN: &str = "\
INSERT INTO digest_runs (date, started_by, timezone, started_at) VALUES ($1, $2, $3, $4)
ON CONFLICT (date) DO NOTHING";

pub(crate) const FINISH_RUN: &str = "\
UPDATE digest_runs SET finished_at = $2, sessions = $3, reset = $4, kept = $5, failed = $6,
    file = $7
WHERE date = $1";

pub(crate) fn runs(tail: &str) -> String {
    format!("SELECT {RUN_COLUMNS} FROM digest_runs {tail}")
}

/// A session's records after its mark: its own (`session_name`), its thread's (`$4`,
/// for `thread:` sessions) or its scope's (`$5`, for shared sessions); never a recalled
/// one, never a command.
pub(crate) fn transcript() -> String {
    super::event_log::select_events(
        "e.bot_profile = $1 AND e.recalled = FALSE AND e.event_type <> 'command' \
         AND e.id > COALESCE((SELECT m.last_event_id FROM digest_marks m \
                              WHERE m.profile = $1 AND m.session_key = $2), 0) \
         AND (e.session_name = $2 OR (e.chat_id = $3 AND e.root_msg_id = $4) \
              OR e.history_scope = $5)",
    )
}

pub(crate) const INSERT_DIGEST: &str = "\
INSERT INTO digests (date, profile, session_key, session_id, chat_id, chars, messages,
    last_event_id, summary, status, reason, detail, created_at, updated_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $13)
RETURNING id";

pub(crate) const MARK: &str = "\
INSERT INTO digest_marks (profile, session_key, last_event_id, updated_at) VALUES ($1, $2, $3, $4)
ON CONFLICT (profile, session_key)
DO UPDATE SET last_event_id = excluded.last_event_id, updated_at = excluded.updated_at";

pub(crate) const DIGEST_RESET: &str = "\
UPDATE digests SET status = 'reset', new_session_id = $2, updated_at = $3 WHERE id = $1";

pub(crate) const MARK_DIGEST: &str = "\
UPDATE digests SET status = $2, reason = $3, detail = $4, updated_at = $5 WHERE id = $1";

pub(crate) fn digests_of() -> String {
    format!("SELECT {DIGEST_COLUMNS} FROM digests WHERE date = $1 ORDER BY profile, session_key")
}

/// Implements [`crate::store::DigestStore`] for a backend type with `pool` and `timeout`
/// fields (see `sql` for why this is a macro).
macro_rules! impl_digest_store {
    ($ty:ty) => {
        #[async_trait::async_trait]
        impl $crate::store::DigestStore for $ty {
            async fn claim_digest_run(
                &self,
                run: &$crate::store::NewDigestRun,
            ) -> Result<bool, $crate::store::StoreError> {
                let n = $crate::store::sql::execute!(
                    self,
                    $crate::store::sql::digests::CLAIM_RUN,
                    &run.date,
                    run.trigger.as_str(),
                    &run.timezone,
                    run.started_at,
                )?;
                Ok(n == 1)
            }

            async fn finish_digest_run(
                &self,
                end: &$crate::store::DigestRunEnd<'_>,
            ) -> Result<(), $crate::store::StoreError> {
                $crate::store::sql::execute!(
                    self,
                    $crate::store::sql::digests::FINISH_RUN,
                    end.date,
                    end.finished_at,
                    end.sessions,
                    end.reset,
                    end.kept,
                    end.failed,
                    end.file,
                )?;
                Ok(())
            }

            async fn digest_run(
                &self,
                date: &str,
            ) -> Result<Option<$crate::store::DigestRunRow>, $crate::store::StoreError> {
                let q = $crate::store::sql::digests::runs("WHERE date = $1");
                $crate::store::sql::fetch!(self, query_as, fetch_optional, &q, date)
            }

            async fn latest_digest_run(
                &self,
            ) -> Result<Option<$crate::store::DigestRunRow>, $crate::store::StoreError> {
                let q = $crate::store::sql::digests::runs(
                    "ORDER BY started_at DESC, date DESC LIMIT 1",
                );
                $crate::store::sql::fetch!(self, query_as, fetch_optional, &q)
            }

            async fn digest_transcript(
                &self,
                q: &$crate::store::TranscriptQuery<'_>,
            ) -> Result<Vec<$crate::store::ContextEventRow>, $crate::store::StoreError> {
                $crate::store::sql::fetch!(
                    self,
                    query_as,
                    fetch_all,
                    &$crate::store::sql::digests::transcript(),
                    &q.session.profile,
                    &q.session.session_key,
                    &q.session.chat_id,
                    q.thread_root,
                    q.scope,
                )
            }

            async fn record_digests(
                &self,
                digests: &[$crate::store::NewDigest],
            ) -> Result<Vec<i64>, $crate::store::StoreError> {
                use $crate::store::sql::{digests as sql, transaction, within};
                transaction!(self, |tx| {
                    let mut ids = Vec::with_capacity(digests.len());
                    for d in digests {
                        let id: i64 = within!(
                            tx,
                            query_scalar,
                            fetch_one,
                            sql::INSERT_DIGEST,
                            &d.date,
                            &d.profile,
                            &d.session_key,
                            &d.session_id,
                            &d.chat_id,
                            d.chars,
                            d.messages,
                            d.last_event_id,
                            d.summary.as_deref(),
                            d.status.as_str(),
                            d.reason.as_str(),
                            d.detail.as_deref(),
                            d.now,
                        );
                        ids.push(id);
                    }
                    ids
                })
            }

            async fn digest_reset(
                &self,
                r: &$crate::store::DigestReset<'_>,
            ) -> Result<bool, $crate::store::StoreError> {
                use $crate::store::sql::{digests as sql, transaction, within};
                transaction!(self, |tx| {
                    let reset = &r.reset;
                    let row = $crate::store::sql::sessions::reset_within!(tx, reset);
                    if row.is_none() {
                        return Ok(false);
                    }
                    within!(
                        tx,
                        query,
                        execute,
                        sql::MARK,
                        reset.profile,
                        reset.key,
                        r.last_event_id,
                        reset.now,
                    );
                    let marked = within!(
                        tx,
                        query,
                        execute,
                        sql::DIGEST_RESET,
                        r.digest_id,
                        reset.new_session_id,
                        reset.now,
                    );
                    // No such digest: nothing may be reset without its record.
                    if marked.rows_affected() == 0 {
                        return Ok(false);
                    }
                    true
                })
            }

            async fn mark_digest(
                &self,
                id: i64,
                status: $crate::store::DigestStatus,
                reason: $crate::store::DigestReason,
                detail: Option<&str>,
                now: $crate::util::UnixMs,
            ) -> Result<(), $crate::store::StoreError> {
                $crate::store::sql::execute!(
                    self,
                    $crate::store::sql::digests::MARK_DIGEST,
                    id,
                    status.as_str(),
                    reason.as_str(),
                    detail,
                    now,
                )?;
                Ok(())
            }

            async fn digests_of(
                &self,
                date: &str,
            ) -> Result<Vec<$crate::store::DigestRow>, $crate::store::StoreError> {
                let q = $crate::store::sql::digests::digests_of();
                $crate::store::sql::fetch!(self, query_as, fetch_all, &q, date)
            }
        }
    };
}
pub(crate) use impl_digest_store;
