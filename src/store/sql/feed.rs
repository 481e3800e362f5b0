//! SQL of the [`crate::store::FeedStore`]: gathered items, segments packed from them.

use async_trait::async_trait;

use super::{dialect::Dialect, store::SqlStore};
use crate::{
    store::{
        FeedCounts, FeedItemRow, FeedSegmentRow, FeedStore, PackLimits, SessionFeed, SharedRead,
        StoreError,
    },
    util::UnixMs,
};

const ITEM_COLUMNS: &str = "id, profile, session_key, chat_id, message_id, sender, \
     text, said_at, gathered_at, state, segment_id";

const SEGMENT_COLUMNS: &str = "id, profile, session_key, items, chars, state, \
     packed_at, session_id, attached_at, read_at, read_by_turn";

/// Gathered items are written with their route, inside its transaction.
pub(crate) const INSERT_ITEM: &str = "\
INSERT INTO feed_items
    (profile, session_key, chat_id, message_id, sender, text, said_at, gathered_at, state)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'gathered')
ON CONFLICT DO NOTHING";

const DUE: &str = "\
SELECT session_key FROM feed_items
WHERE profile = $1 AND state = 'gathered'
GROUP BY session_key
HAVING COUNT(*) >= $2 OR MIN(gathered_at) <= $3
ORDER BY MIN(gathered_at), session_key";

const GATHERED_COUNT: &str = "\
SELECT COUNT(*) FROM feed_items WHERE profile = $1 AND session_key = $2 AND state = 'gathered'";

fn gathered_newest_first() -> String {
    format!(
        "SELECT {ITEM_COLUMNS} FROM feed_items \
         WHERE profile = $1 AND session_key = $2 AND state = 'gathered' \
         ORDER BY said_at DESC, id DESC"
    )
}

fn insert_segment() -> String {
    format!(
        "INSERT INTO feed_segments (profile, session_key, items, chars, state, packed_at) \
         VALUES ($1, $2, $3, $4, 'waiting', $5) RETURNING {SEGMENT_COLUMNS}"
    )
}

const PACK_ITEM: &str =
    "UPDATE feed_items SET state = 'packed', segment_id = $2 WHERE id = $1 AND state = 'gathered'";

const PASS_OVER_ITEM: &str =
    "UPDATE feed_items SET state = 'passed_over' WHERE id = $1 AND state = 'gathered'";

fn segments(where_clause: &str) -> String {
    format!("SELECT {SEGMENT_COLUMNS} FROM feed_segments WHERE {where_clause} ORDER BY id")
}

const ATTACHED_COUNT: &str = "\
SELECT COUNT(*) FROM feed_segments WHERE profile = $1 AND session_key = $2 AND state = 'attached'";

const MARK_ATTACHED: &str = "\
UPDATE feed_segments SET state = 'attached', session_id = $2, attached_at = $3
WHERE id = $1 AND state = 'waiting'";

const MARK_READ: &str = "\
UPDATE feed_segments SET state = 'read', read_at = $3, read_by_turn = $2
WHERE id = $1 AND state = 'attached'";

fn segment_items() -> String {
    format!(
        "SELECT {ITEM_COLUMNS} FROM feed_items WHERE segment_id = $1 AND state = 'packed' \
         ORDER BY said_at, id"
    )
}

fn gathered_oldest_first() -> String {
    format!(
        "SELECT {ITEM_COLUMNS} FROM feed_items \
         WHERE profile = $1 AND session_key = $2 AND state = 'gathered' ORDER BY said_at, id"
    )
}

const SESSIONS: &str = "\
SELECT session_key FROM feed_items WHERE profile = $1 AND state = 'gathered'
UNION
SELECT session_key FROM feed_segments WHERE profile = $1 AND state = 'waiting'
ORDER BY session_key";

const COUNTS: &str = "\
SELECT profile,
       CAST(SUM(CASE WHEN kind = 'item' THEN n ELSE 0 END) AS BIGINT),
       CAST(SUM(CASE WHEN kind = 'waiting' THEN n ELSE 0 END) AS BIGINT),
       CAST(SUM(CASE WHEN kind = 'attached' THEN n ELSE 0 END) AS BIGINT),
       CAST(SUM(CASE WHEN kind = 'read' THEN n ELSE 0 END) AS BIGINT)
FROM (
    SELECT profile, 'item' AS kind, COUNT(*) AS n FROM feed_items
    WHERE state = 'gathered' GROUP BY profile
    UNION ALL
    SELECT profile, state AS kind, COUNT(*) AS n FROM feed_segments
    WHERE state IN ('waiting', 'attached', 'read') GROUP BY profile, state
) AS c
GROUP BY profile ORDER BY profile";

/// The chat feed's segments a session has not read, newest first: packed after the
/// newest it read or was cleared past, not cleared themselves.
fn shared_unread() -> String {
    format!(
        "SELECT {SEGMENT_COLUMNS} FROM feed_segments \
         WHERE profile = $1 AND session_key = $2 AND state IN ('waiting', 'read') \
           AND id > COALESCE((SELECT MAX(segment_id) FROM feed_reads \
                              WHERE profile = $1 AND session_key = $3 AND feed_key = $2), 0) \
         ORDER BY id DESC LIMIT $4"
    )
}

const INSERT_READ: &str = "\
INSERT INTO feed_reads (segment_id, profile, session_key, feed_key, session_id, turn_id, state, at)
VALUES ($1, $2, $3, $4, $5, $6, 'read', $7)
ON CONFLICT DO NOTHING";

/// A chat-feed segment's first reader marks it read (later readers are in
/// `feed_reads`).
const FIRST_READ: &str = "\
UPDATE feed_segments SET state = 'read', read_at = $3, read_by_turn = $2
WHERE id = $1 AND state = 'waiting'";

fn read_by() -> String {
    segments(
        "read_by_turn = $1 OR id IN \
         (SELECT segment_id FROM feed_reads WHERE turn_id = $1 AND state = 'read')",
    )
}

/// What `/new` and `/reset` pass by of the chat's own feed, inside the reset's
/// transaction: the session is given only segments packed after it ($3 the chat's feed
/// key, $4 now).
pub(crate) const CLEAR_CHAT: &str = "\
INSERT INTO feed_reads (segment_id, profile, session_key, feed_key, session_id, turn_id, state, at)
SELECT s.id, $1, $2, $3, NULL, NULL, 'cleared', $4 FROM feed_segments s
WHERE s.id = (SELECT MAX(id) FROM feed_segments WHERE profile = $1 AND session_key = $3)
ON CONFLICT DO NOTHING";

/// What `/new` and `/reset` clear of a session's feed, inside the reset's transaction.
pub(crate) const CLEAR: [&str; 2] = [
    "UPDATE feed_items SET state = 'cleared' \
     WHERE profile = $1 AND session_key = $2 AND state = 'gathered'",
    "UPDATE feed_segments SET state = 'cleared' \
     WHERE profile = $1 AND session_key = $2 AND state IN ('waiting', 'attached')",
];

/// A recalled message leaves the feed (its text too), inside the recall's transaction.
pub(crate) const RECALL: &str = "\
UPDATE feed_items SET state = 'recalled', text = ''
WHERE message_id = $1 AND state IN ('gathered', 'packed')";

/// Retention, inside the event log's purge transaction: items gathered before the
/// cutoff, and segments packed before it (whose items were gathered earlier still, so
/// none is left behind without its segment).
pub(crate) const PURGE: [&str; 2] = [
    "DELETE FROM feed_items WHERE gathered_at < $1",
    "DELETE FROM feed_segments WHERE packed_at < $1",
];

/// What one item costs a segment, in characters: its sender, a separator, its text.
fn item_chars(sender: &str, text: &str) -> usize {
    sender.chars().count() + 2 + text.chars().count()
}

/// How many of `gathered` (newest first) one segment takes, as many as fit, the first
/// always (cut when shown), and the characters they cost.
fn fitting(gathered: &[FeedItemRow], limits: PackLimits) -> (usize, usize) {
    let mut chars = 0usize;
    let mut taken = 0usize;
    for item in gathered {
        let cost = item_chars(&item.sender, &item.text);
        if taken > 0 && (taken >= limits.max_items || chars + cost > limits.max_chars) {
            break;
        }
        chars += cost;
        taken += 1;
    }
    (taken, chars.min(limits.max_chars.max(1)))
}

#[async_trait]
impl<DB: Dialect> FeedStore for SqlStore<DB> {
    async fn feed_due(
        &self,
        profile: &str,
        batch: i64,
        waited_since: UnixMs,
    ) -> Result<Vec<String>, StoreError> {
        let query = sqlx::query_scalar(DUE)
            .bind(profile)
            .bind(batch)
            .bind(waited_since);
        self.fetch(query.fetch_all(&self.pool)).await
    }

    async fn gathered_count(&self, profile: &str, session_key: &str) -> Result<i64, StoreError> {
        let query = sqlx::query_scalar(GATHERED_COUNT)
            .bind(profile)
            .bind(session_key);
        self.fetch(query.fetch_one(&self.pool)).await
    }

    async fn pack_segment(
        &self,
        profile: &str,
        session_key: &str,
        limits: PackLimits,
        now: UnixMs,
    ) -> Result<Option<FeedSegmentRow>, StoreError> {
        self.bounded(async {
            let mut tx = self.transaction().await?;
            let gathered: Vec<FeedItemRow> = sqlx::query_as(&gathered_newest_first())
                .bind(profile)
                .bind(session_key)
                .fetch_all(&mut *tx)
                .await?;
            if gathered.is_empty() {
                tx.commit().await?;
                return Ok(None);
            }
            let (taken, chars) = fitting(&gathered, limits);
            let segment: FeedSegmentRow = sqlx::query_as(&insert_segment())
                .bind(profile)
                .bind(session_key)
                .bind(taken as i64)
                .bind(chars as i64)
                .bind(now)
                .fetch_one(&mut *tx)
                .await?;
            for item in &gathered[..taken] {
                sqlx::query(PACK_ITEM)
                    .bind(item.id)
                    .bind(segment.id)
                    .execute(&mut *tx)
                    .await?;
            }
            for item in &gathered[taken..] {
                sqlx::query(PASS_OVER_ITEM)
                    .bind(item.id)
                    .execute(&mut *tx)
                    .await?;
            }
            tx.commit().await?;
            Ok(Some(segment))
        })
        .await
    }

    async fn attachable(
        &self,
        profile: &str,
        session_key: &str,
        max_unread: i64,
    ) -> Result<Vec<FeedSegmentRow>, StoreError> {
        let query = sqlx::query_scalar(ATTACHED_COUNT)
            .bind(profile)
            .bind(session_key);
        let attached: i64 = self.fetch(query.fetch_one(&self.pool)).await?;
        let room = (max_unread - attached).max(0);
        if room == 0 {
            return Ok(Vec::new());
        }
        let q = format!(
            "{} LIMIT $3",
            segments("profile = $1 AND session_key = $2 AND state = 'waiting'")
        );
        let query = sqlx::query_as(&q)
            .bind(profile)
            .bind(session_key)
            .bind(room);
        self.fetch(query.fetch_all(&self.pool)).await
    }

    async fn mark_attached(
        &self,
        segment_id: i64,
        session_id: &str,
        now: UnixMs,
    ) -> Result<bool, StoreError> {
        let query = sqlx::query(MARK_ATTACHED)
            .bind(segment_id)
            .bind(session_id)
            .bind(now);
        Ok(self.execute(query).await? == 1)
    }

    async fn attached(
        &self,
        profile: &str,
        session_key: &str,
    ) -> Result<Vec<FeedSegmentRow>, StoreError> {
        let q = segments("profile = $1 AND session_key = $2 AND state = 'attached'");
        let query = sqlx::query_as(&q).bind(profile).bind(session_key);
        self.fetch(query.fetch_all(&self.pool)).await
    }

    async fn segment_items(&self, segment_id: i64) -> Result<Vec<FeedItemRow>, StoreError> {
        let q = segment_items();
        self.fetch(sqlx::query_as(&q).bind(segment_id).fetch_all(&self.pool))
            .await
    }

    async fn mark_read(&self, ids: &[i64], turn_id: &str, now: UnixMs) -> Result<(), StoreError> {
        if ids.is_empty() {
            return Ok(());
        }
        self.bounded(async {
            let mut tx = self.transaction().await?;
            for id in ids {
                sqlx::query(MARK_READ)
                    .bind(*id)
                    .bind(turn_id)
                    .bind(now)
                    .execute(&mut *tx)
                    .await?;
            }
            tx.commit().await
        })
        .await
    }

    async fn shared_unread(
        &self,
        profile: &str,
        feed_key: &str,
        session_key: &str,
        limit: i64,
    ) -> Result<Vec<FeedSegmentRow>, StoreError> {
        let q = shared_unread();
        let query = sqlx::query_as(&q)
            .bind(profile)
            .bind(feed_key)
            .bind(session_key)
            .bind(limit);
        let mut newest_first: Vec<FeedSegmentRow> = self.fetch(query.fetch_all(&self.pool)).await?;
        newest_first.reverse();
        Ok(newest_first)
    }

    async fn mark_shared_read(&self, read: &SharedRead<'_>) -> Result<(), StoreError> {
        if read.ids.is_empty() {
            return Ok(());
        }
        self.bounded(async {
            let mut tx = self.transaction().await?;
            for id in read.ids {
                sqlx::query(INSERT_READ)
                    .bind(*id)
                    .bind(read.profile)
                    .bind(read.session_key)
                    .bind(read.feed_key)
                    .bind(read.session_id)
                    .bind(read.turn_id)
                    .bind(read.now)
                    .execute(&mut *tx)
                    .await?;
                sqlx::query(FIRST_READ)
                    .bind(*id)
                    .bind(read.turn_id)
                    .bind(read.now)
                    .execute(&mut *tx)
                    .await?;
            }
            tx.commit().await
        })
        .await
    }

    async fn read_by(&self, turn_id: &str) -> Result<Vec<FeedSegmentRow>, StoreError> {
        let q = read_by();
        self.fetch(sqlx::query_as(&q).bind(turn_id).fetch_all(&self.pool))
            .await
    }

    async fn session_feed(
        &self,
        profile: &str,
        session_key: &str,
    ) -> Result<SessionFeed, StoreError> {
        let q = gathered_oldest_first();
        let query = sqlx::query_as(&q).bind(profile).bind(session_key);
        let gathered = self.fetch(query.fetch_all(&self.pool)).await?;
        let q = segments("profile = $1 AND session_key = $2");
        let query = sqlx::query_as(&q).bind(profile).bind(session_key);
        let segments = self.fetch(query.fetch_all(&self.pool)).await?;
        Ok(SessionFeed { gathered, segments })
    }

    async fn feed_sessions(&self, profile: &str) -> Result<Vec<String>, StoreError> {
        let query = sqlx::query_scalar(SESSIONS).bind(profile);
        self.fetch(query.fetch_all(&self.pool)).await
    }

    async fn feed_counts(&self) -> Result<Vec<FeedCounts>, StoreError> {
        let rows: Vec<(String, i64, i64, i64, i64)> = self
            .fetch(sqlx::query_as(COUNTS).fetch_all(&self.pool))
            .await?;
        Ok(rows
            .into_iter()
            .map(|(profile, gathered, waiting, attached, read)| FeedCounts {
                profile,
                gathered,
                waiting,
                attached,
                read,
            })
            .collect())
    }
}
