//! SQL of the [`crate::store::DigestStore`]: runs claimed by date, each session's digest,
//! and the marks that say where a session's next digest starts.

use async_trait::async_trait;

use super::{dialect::Dialect, event_log::select_events, sessions::reset_within, store::SqlStore};
use crate::{
    store::{
        CarriedDigest, ContextEventRow, DigestPostMark, DigestPostRow, DigestReason, DigestReset,
        DigestRow, DigestRunEnd, DigestRunRow, DigestStatus, DigestStore, NewDigest, NewDigestRun,
        StoreError, TranscriptQuery,
    },
    util::UnixMs,
};

const RUN_COLUMNS: &str = "date, started_by, timezone, started_at, finished_at, \
     sessions, reset, kept, failed, file";

const DIGEST_COLUMNS: &str = "id, date, profile, session_key, session_id, chat_id, \
     chars, messages, last_event_id, summary, status, reason, detail, new_session_id, \
     created_at, updated_at";

/// A date is claimed by its row: the first insert wins, on every replica.
const CLAIM_RUN: &str = "\
INSERT INTO digest_runs (date, started_by, timezone, started_at) VALUES ($1, $2, $3, $4)
ON CONFLICT (date) DO NOTHING";

const FINISH_RUN: &str = "\
UPDATE digest_runs SET finished_at = $2, sessions = $3, reset = $4, kept = $5, failed = $6,
    file = $7
WHERE date = $1";

fn runs(tail: &str) -> String {
    format!("SELECT {RUN_COLUMNS} FROM digest_runs {tail}")
}

/// A session's records after its mark: its own (`session_name`), its thread's (`$4`,
/// for `thread:` sessions) or its scope's (`$5`, for shared sessions); never a recalled
/// one, never a command.
fn transcript() -> String {
    select_events(
        "e.bot_profile = $1 AND e.recalled = FALSE AND e.event_type <> 'command' \
         AND e.id > COALESCE((SELECT m.last_event_id FROM digest_marks m \
                              WHERE m.profile = $1 AND m.session_key = $2), 0) \
         AND (e.session_name = $2 OR (e.chat_id = $3 AND e.root_msg_id = $4) \
              OR e.history_scope = $5)",
    )
}

const INSERT_DIGEST: &str = "\
INSERT INTO digests (date, profile, session_key, session_id, chat_id, chars, messages,
    last_event_id, summary, status, reason, detail, created_at, updated_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $13)
RETURNING id";

const MARK: &str = "\
INSERT INTO digest_marks (profile, session_key, last_event_id, updated_at) VALUES ($1, $2, $3, $4)
ON CONFLICT (profile, session_key)
DO UPDATE SET last_event_id = excluded.last_event_id, updated_at = excluded.updated_at";

const DIGEST_RESET: &str = "\
UPDATE digests SET status = 'reset', new_session_id = $2, updated_at = $3 WHERE id = $1";

const MARK_DIGEST: &str = "\
UPDATE digests SET status = $2, reason = $3, detail = $4, updated_at = $5 WHERE id = $1";

/// The digest that reset a session into the id it has now, and the first turn of that
/// id that succeeded (none yet: a failed first turn leaves the summary for the next).
const CARRIED: &str = "\
SELECT d.id, d.date, d.summary,
    (SELECT t.turn_id FROM turns t WHERE t.profile = d.profile
        AND t.session_key = d.session_key AND t.session_id = d.new_session_id
        AND t.state = 'succeeded' ORDER BY t.id LIMIT 1) AS first_turn
FROM digests d
JOIN sessions s ON s.profile = d.profile AND s.session_key = d.session_key
    AND s.session_id = d.new_session_id
WHERE d.profile = $1 AND d.session_key = $2 AND d.status = 'reset' AND d.summary IS NOT NULL
ORDER BY d.id DESC LIMIT 1";

fn to_post() -> String {
    format!(
        "SELECT {DIGEST_COLUMNS} FROM digests WHERE summary IS NOT NULL \
         AND status IN ('written', 'reset', 'reset_failed') AND created_at >= $1 \
         AND (post_status IS NULL OR (post_status = 'failed' AND post_attempts < $2)) \
         ORDER BY id"
    )
}

const MARK_POST: &str = "\
UPDATE digests SET post_status = $2, post_message_id = COALESCE($3, post_message_id),
    post_detail = $4, post_attempts = post_attempts + 1, updated_at = $5
WHERE id = $1";

const POSTS_OF: &str = "\
SELECT id, post_status, post_attempts, post_message_id, post_detail FROM digests
WHERE date = $1 ORDER BY id";

fn digests_of() -> String {
    format!("SELECT {DIGEST_COLUMNS} FROM digests WHERE date = $1 ORDER BY profile, session_key")
}

#[async_trait]
impl<DB: Dialect> DigestStore for SqlStore<DB> {
    async fn claim_digest_run(&self, run: &NewDigestRun) -> Result<bool, StoreError> {
        let query = sqlx::query(CLAIM_RUN)
            .bind(&run.date)
            .bind(run.trigger.as_str())
            .bind(&run.timezone)
            .bind(run.started_at);
        Ok(self.execute(query).await? == 1)
    }

    async fn finish_digest_run(&self, end: &DigestRunEnd<'_>) -> Result<(), StoreError> {
        let query = sqlx::query(FINISH_RUN)
            .bind(end.date)
            .bind(end.finished_at)
            .bind(end.sessions)
            .bind(end.reset)
            .bind(end.kept)
            .bind(end.failed)
            .bind(end.file);
        self.execute(query).await.map(drop)
    }

    async fn digest_run(&self, date: &str) -> Result<Option<DigestRunRow>, StoreError> {
        let q = runs("WHERE date = $1");
        self.fetch(sqlx::query_as(&q).bind(date).fetch_optional(&self.pool))
            .await
    }

    async fn latest_digest_run(&self) -> Result<Option<DigestRunRow>, StoreError> {
        let q = runs("ORDER BY started_at DESC, date DESC LIMIT 1");
        self.fetch(sqlx::query_as(&q).fetch_optional(&self.pool))
            .await
    }

    async fn digest_transcript(
        &self,
        q: &TranscriptQuery<'_>,
    ) -> Result<Vec<ContextEventRow>, StoreError> {
        let sql = transcript();
        let query = sqlx::query_as(&sql)
            .bind(&q.session.profile)
            .bind(&q.session.session_key)
            .bind(&q.session.chat_id)
            .bind(q.thread_root)
            .bind(q.scope);
        self.fetch(query.fetch_all(&self.pool)).await
    }

    async fn record_digests(&self, digests: &[NewDigest]) -> Result<Vec<i64>, StoreError> {
        self.bounded(async {
            let mut tx = self.transaction().await?;
            let mut ids = Vec::with_capacity(digests.len());
            for d in digests {
                let id: i64 = sqlx::query_scalar(INSERT_DIGEST)
                    .bind(&d.date)
                    .bind(&d.profile)
                    .bind(&d.session_key)
                    .bind(&d.session_id)
                    .bind(&d.chat_id)
                    .bind(d.chars)
                    .bind(d.messages)
                    .bind(d.last_event_id)
                    .bind(d.summary.as_deref())
                    .bind(d.status.as_str())
                    .bind(d.reason.as_str())
                    .bind(d.detail.as_deref())
                    .bind(d.now)
                    .fetch_one(&mut *tx)
                    .await?;
                ids.push(id);
            }
            tx.commit().await?;
            Ok(ids)
        })
        .await
    }

    async fn digest_reset(&self, r: &DigestReset<'_>) -> Result<bool, StoreError> {
        self.bounded(async {
            let mut tx = self.transaction().await?;
            let reset = &r.reset;
            if reset_within(&mut tx, reset).await?.is_none() {
                return Ok(false);
            }
            sqlx::query(MARK)
                .bind(reset.profile)
                .bind(reset.key)
                .bind(r.last_event_id)
                .bind(reset.now)
                .execute(&mut *tx)
                .await?;
            let marked = sqlx::query(DIGEST_RESET)
                .bind(r.digest_id)
                .bind(reset.new_session_id)
                .bind(reset.now)
                .execute(&mut *tx)
                .await?;
            // No such digest: nothing may be reset without its record.
            if DB::rows_affected(&marked) == 0 {
                return Ok(false);
            }
            tx.commit().await?;
            Ok(true)
        })
        .await
    }

    async fn mark_digest(
        &self,
        id: i64,
        status: DigestStatus,
        reason: DigestReason,
        detail: Option<&str>,
        now: UnixMs,
    ) -> Result<(), StoreError> {
        let query = sqlx::query(MARK_DIGEST)
            .bind(id)
            .bind(status.as_str())
            .bind(reason.as_str())
            .bind(detail)
            .bind(now);
        self.execute(query).await.map(drop)
    }

    async fn digests_of(&self, date: &str) -> Result<Vec<DigestRow>, StoreError> {
        let q = digests_of();
        self.fetch(sqlx::query_as(&q).bind(date).fetch_all(&self.pool))
            .await
    }

    async fn carried_digest(
        &self,
        profile: &str,
        key: &str,
    ) -> Result<Option<CarriedDigest>, StoreError> {
        let query = sqlx::query_as(CARRIED).bind(profile).bind(key);
        self.fetch(query.fetch_optional(&self.pool)).await
    }

    async fn digests_to_post(
        &self,
        since: UnixMs,
        max_attempts: i64,
    ) -> Result<Vec<DigestRow>, StoreError> {
        let q = to_post();
        let query = sqlx::query_as(&q).bind(since).bind(max_attempts);
        self.fetch(query.fetch_all(&self.pool)).await
    }

    async fn mark_digest_post(&self, m: &DigestPostMark<'_>) -> Result<(), StoreError> {
        let query = sqlx::query(MARK_POST)
            .bind(m.id)
            .bind(m.status.as_str())
            .bind(m.message_id)
            .bind(m.detail)
            .bind(m.now);
        self.execute(query).await.map(drop)
    }

    async fn digest_posts(&self, date: &str) -> Result<Vec<DigestPostRow>, StoreError> {
        let query = sqlx::query_as(POSTS_OF).bind(date);
        self.fetch(query.fetch_all(&self.pool)).await
    }
}
