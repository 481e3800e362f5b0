//! SQL of the [`crate::store::TimelineStore`]: reads only.
//!
//! A thread is found by its root's chat first (the root's own record, through the
//! message-id index), so the reads of its records use the said-order index on
//! `(chat_id, root_msg_id, …)`; a thread whose root was never recorded is looked for by
//! root alone.

use async_trait::async_trait;

use super::{dialect::Dialect, store::SqlStore, turns::select as select_turns};
use crate::{
    store::{
        DecisionRef, DigestRow, FeedSegmentRow, StoreError, ThreadOf, ThreadSummary, TimelineEvent,
        TimelineStore, TurnRow, VerdictRow,
    },
    util::UnixMs,
};

/// `x` records of the thread of `$1` (chat) and `$2` (root), of profile `$3` (or all).
const IN_THREAD: &str =
    "x.chat_id = $1 AND x.root_msg_id = $2 AND ($3 IS NULL OR x.bot_profile = $3)";

const ROOT_CHATS: &str = "SELECT DISTINCT chat_id FROM thread_context_events WHERE message_id = $1";

const THREAD_CHATS: &str =
    "SELECT DISTINCT chat_id FROM thread_context_events WHERE root_msg_id = $1";

/// Each profile's threads said in since `$1`, newest first; their turns are those
/// requested by any record of the thread (a handoff's request is another bot's answer).
/// The turns are counted for the `$2` threads listed only.
const RECENT: &str = "\
SELECT g.profile, g.chat_id, g.root_msg_id, g.last_at, g.messages,
    (SELECT COUNT(*) FROM turns t WHERE t.profile = g.profile AND t.message_id IN
        (SELECT x.message_id FROM thread_context_events x
         WHERE x.chat_id = g.chat_id AND x.root_msg_id = g.root_msg_id)) AS turns,
    (SELECT t.state FROM turns t WHERE t.profile = g.profile AND t.message_id IN
        (SELECT x.message_id FROM thread_context_events x
         WHERE x.chat_id = g.chat_id AND x.root_msg_id = g.root_msg_id)
     ORDER BY t.id DESC LIMIT 1) AS latest_turn_state
FROM (SELECT e.bot_profile AS profile, e.chat_id, e.root_msg_id, MAX(e.created_at) AS last_at,
        COUNT(DISTINCT e.message_id) AS messages
    FROM thread_context_events e
    WHERE e.created_at >= $1
    GROUP BY e.bot_profile, e.chat_id, e.root_msg_id
    ORDER BY last_at DESC, e.root_msg_id, e.bot_profile
    LIMIT $2) g
ORDER BY g.last_at DESC, g.root_msg_id, g.profile";

const SEGMENT_COLUMNS: &str = "s.id, s.profile, s.session_key, s.items, s.chars, s.state, \
     s.packed_at, s.session_id, s.attached_at, s.read_at, s.read_by_turn";

const DIGEST_COLUMNS: &str = "id, date, profile, session_key, session_id, chat_id, \
     chars, messages, last_event_id, summary, status, reason, detail, new_session_id, \
     created_at, updated_at";

fn events() -> String {
    format!(
        "SELECT x.id, x.bot_profile, x.message_id, x.event_type, x.actor_type, x.actor_id, \
         i.id AS item_id, i.author_label, x.text, x.recalled, x.created_at \
         FROM thread_context_events x LEFT JOIN thread_context_items i ON i.event_id = x.id \
         WHERE {IN_THREAD} ORDER BY x.created_at, x.message_id, x.id"
    )
}

const VERDICTS: &str = "\
SELECT v.profile, v.message_id, v.chat_id, v.verdict, v.reason, v.session_key, v.decision_id,
    v.created_at, v.chain_id
FROM routing_verdicts v
WHERE ($3 IS NULL OR v.profile = $3) AND v.message_id IN
    (SELECT x.message_id FROM thread_context_events x WHERE x.chat_id = $1 AND x.root_msg_id = $2)
ORDER BY v.message_id, v.profile";

fn turns() -> String {
    select_turns(
        "($3 IS NULL OR profile = $3) AND chat_id = $1 AND message_id IN \
         (SELECT x.message_id FROM thread_context_events x \
          WHERE x.chat_id = $1 AND x.root_msg_id = $2) ORDER BY id",
    )
}

const DECISIONS: &str = "\
SELECT id, bot_profile AS profile, message_id FROM thread_context_decisions
WHERE chat_id = $1 AND root_msg_id = $2 AND ($3 IS NULL OR bot_profile = $3) ORDER BY id";

fn segments() -> String {
    format!(
        "SELECT {SEGMENT_COLUMNS} FROM feed_segments s WHERE s.id IN \
         (SELECT n.id FROM feed_segments n WHERE n.profile = $1 AND n.session_key = $2 \
          ORDER BY n.id DESC LIMIT $3) \
         OR s.id IN (SELECT r.segment_id FROM feed_reads r \
          WHERE r.profile = $1 AND r.session_key = $2 AND r.state = 'read' \
          ORDER BY r.segment_id DESC LIMIT $3) \
         ORDER BY s.id"
    )
}

fn digests() -> String {
    format!(
        "SELECT {DIGEST_COLUMNS} FROM digests WHERE id IN \
         (SELECT n.id FROM digests n WHERE n.profile = $1 AND n.session_key = $2 \
          ORDER BY n.id DESC LIMIT $3) ORDER BY id"
    )
}

impl<DB: Dialect> SqlStore<DB> {
    /// The chats a thread is in: its root's, or (root never recorded) any record's.
    async fn thread_chats(&self, root_msg_id: &str) -> Result<Vec<String>, StoreError> {
        let q = sqlx::query_scalar(ROOT_CHATS).bind(root_msg_id);
        let chats: Vec<String> = self.fetch(q.fetch_all(&self.pool)).await?;
        if !chats.is_empty() {
            return Ok(chats);
        }
        let q = sqlx::query_scalar(THREAD_CHATS).bind(root_msg_id);
        self.fetch(q.fetch_all(&self.pool)).await
    }

    /// Runs `q` (placeholders: chat, root, profile) for each chat of the thread.
    async fn per_chat<T>(&self, t: ThreadOf<'_>, q: &str) -> Result<Vec<T>, StoreError>
    where
        T: for<'r> sqlx::FromRow<'r, DB::Row> + Send + Unpin,
    {
        let mut out = Vec::new();
        for chat in self.thread_chats(t.root_msg_id).await? {
            let query = sqlx::query_as(q)
                .bind(chat)
                .bind(t.root_msg_id)
                .bind(t.profile);
            out.extend(self.fetch(query.fetch_all(&self.pool)).await?);
        }
        Ok(out)
    }
}

#[async_trait]
impl<DB: Dialect> TimelineStore for SqlStore<DB> {
    async fn recent_threads(
        &self,
        since: UnixMs,
        limit: i64,
    ) -> Result<Vec<ThreadSummary>, StoreError> {
        let query = sqlx::query_as(RECENT).bind(since).bind(limit);
        self.fetch(query.fetch_all(&self.pool)).await
    }

    async fn timeline_events(&self, t: ThreadOf<'_>) -> Result<Vec<TimelineEvent>, StoreError> {
        self.per_chat(t, &events()).await
    }

    async fn timeline_verdicts(&self, t: ThreadOf<'_>) -> Result<Vec<VerdictRow>, StoreError> {
        self.per_chat(t, VERDICTS).await
    }

    async fn timeline_turns(&self, t: ThreadOf<'_>) -> Result<Vec<TurnRow>, StoreError> {
        self.per_chat(t, &turns()).await
    }

    async fn timeline_decisions(&self, t: ThreadOf<'_>) -> Result<Vec<DecisionRef>, StoreError> {
        self.per_chat(t, DECISIONS).await
    }

    async fn session_segments(
        &self,
        profile: &str,
        session_key: &str,
        limit: i64,
    ) -> Result<Vec<FeedSegmentRow>, StoreError> {
        let q = segments();
        let query = sqlx::query_as(&q)
            .bind(profile)
            .bind(session_key)
            .bind(limit);
        self.fetch(query.fetch_all(&self.pool)).await
    }

    async fn session_digests(
        &self,
        profile: &str,
        session_key: &str,
        limit: i64,
    ) -> Result<Vec<DigestRow>, StoreError> {
        let q = digests();
        let query = sqlx::query_as(&q)
            .bind(profile)
            .bind(session_key)
            .bind(limit);
        self.fetch(query.fetch_all(&self.pool)).await
    }
}
