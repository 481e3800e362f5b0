//! SQL of the [`crate::store::FeedStore`]: gathered items, segments packed from them.

pub(crate) const ITEM_COLUMNS: &str = "id, profile, session_key, chat_id, message_id, sender, \
     text, said_at, gathered_at, state, segment_id";

pub(crate) const SEGMENT_COLUMNS: &str = "id, profile, session_key, items, chars, state, \
     packed_at, session_id, attached_at, read_at, read_by_turn";

/// Gathered items are written with their route, inside its transaction.
pub(crate) const INSERT_ITEM: &str = "\
INSERT INTO feed_items
    (profile, session_key, chat_id, message_id, sender, text, said_at, gathered_at, state)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'gathered')
ON CONFLICT DO NOTHING";

pub(crate) const DUE: &str = "\
SELECT session_key FROM feed_items
WHERE profile = $1 AND state = 'gathered'
GROUP BY session_key
HAVING COUNT(*) >= $2 OR MIN(gathered_at) <= $3
ORDER BY MIN(gathered_at), session_key";

pub(crate) const GATHERED_COUNT: &str = "\
SELECT COUNT(*) FROM feed_items WHERE profile = $1 AND session_key = $2 AND state = 'gathered'";

pub(crate) fn gathered_newest_first() -> String {
    format!(
        "SELECT {ITEM_COLUMNS} FROM feed_items \
         WHERE profile = $1 AND session_key = $2 AND state = 'gathered' \
         ORDER BY said_at DESC, id DESC"
    )
}

pub(crate) fn insert_segment() -> String {
    format!(
        "INSERT INTO feed_segments (profile, session_key, items, chars, state, packed_at) \
         VALUES ($1, $2, $3, $4, 'waiting', $5) RETURNING {SEGMENT_COLUMNS}"
    )
}

pub(crate) const PACK_ITEM: &str =
    "UPDATE feed_items SET state = 'packed', segment_id = $2 WHERE id = $1 AND state = 'gathered'";

pub(crate) const PASS_OVER_ITEM: &str =
    "UPDATE feed_items SET state = 'passed_over' WHERE id = $1 AND state = 'gathered'";

pub(crate) fn segments(where_clause: &str) -> String {
    format!("SELECT {SEGMENT_COLUMNS} FROM feed_segments WHERE {where_clause} ORDER BY id")
}

pub(crate) const ATTACHED_COUNT: &str = "\
SELECT COUNT(*) FROM feed_segments WHERE profile = $1 AND session_key = $2 AND state = 'attached'";

pub(crate) const MARK_ATTACHED: &str = "\
UPDATE feed_segments SET state = 'attached', session_id = $2, attached_at = $3
WHERE id = $1 AND state = 'waiting'";

pub(crate) const MARK_READ: &str = "\
UPDATE feed_segments SET state = 'read', read_at = $3, read_by_turn = $2
WHERE id = $1 AND state = 'attached'";

pub(crate) fn segment_items() -> String {
    format!(
        "SELECT {ITEM_COLUMNS} FROM feed_items WHERE segment_id = $1 AND state = 'packed' \
         ORDER BY said_at, id"
    )
}

pub(crate) fn gathered_oldest_first() -> String {
    format!(
        "SELECT {ITEM_COLUMNS} FROM feed_items \
         WHERE profile = $1 AND session_key = $2 AND state = 'gathered' ORDER BY said_at, id"
    )
}

pub(crate) const COUNTS: &str = "\
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

/// What one item costs a segment, in characters: its sender, a separator, its text.
pub(crate) fn item_chars(sender: &str, text: &str) -> usize {
    sender.chars().count() + 2 + text.chars().count()
}

/// Implements [`crate::store::FeedStore`] for a backend type with `pool` and `timeout`
/// fields (see `sql` for why this is a macro).
macro_rules! impl_feed_store {
    ($ty:ty) => {
        #[async_trait::async_trait]
        impl $crate::store::FeedStore for $ty {
            async fn feed_due(
                &self,
                profile: &str,
                batch: i64,
                waited_since: $crate::util::UnixMs,
            ) -> Result<Vec<String>, $crate::store::StoreError> {
                use $crate::store::sql::{feed, fetch};
                fetch!(
                    self,
                    query_scalar,
                    fetch_all,
                    feed::DUE,
                    profile,
                    batch,
                    waited_since
                )
            }

            async fn gathered_count(
                &self,
                profile: &str,
                session_key: &str,
            ) -> Result<i64, $crate::store::StoreError> {
                use $crate::store::sql::{feed, fetch};
                fetch!(
                    self,
                    query_scalar,
                    fetch_one,
                    feed::GATHERED_COUNT,
                    profile,
                    session_key
                )
            }

            async fn pack_segment(
                &self,
                profile: &str,
                session_key: &str,
                limits: $crate::store::PackLimits,
                now: $crate::util::UnixMs,
            ) -> Result<Option<$crate::store::FeedSegmentRow>, $crate::store::StoreError> {
                use $crate::store::sql::{feed, transaction, within};
                transaction!(self, |tx| {
                    let gathered: Vec<$crate::store::FeedItemRow> = within!(
                        tx,
                        query_as,
                        fetch_all,
                        &feed::gathered_newest_first(),
                        profile,
                        session_key,
                    );
                    if gathered.is_empty() {
                        None
                    } else {
                        // Newest first, as many as fit; the first always (cut when shown).
                        let mut chars = 0usize;
                        let mut taken = 0usize;
                        for item in &gathered {
                            let cost = feed::item_chars(&item.sender, &item.text);
                            if taken > 0
                                && (taken >= limits.max_items || chars + cost > limits.max_chars)
                            {
                                break;
                            }
                            chars += cost;
                            taken += 1;
                        }
                        let chars = chars.min(limits.max_chars.max(1));
                        let segment: $crate::store::FeedSegmentRow = within!(
                            tx,
                            query_as,
                            fetch_one,
                            &feed::insert_segment(),
                            profile,
                            session_key,
                            taken as i64,
                            chars as i64,
                            now,
                        );
                        for item in &gathered[..taken] {
                            within!(tx, query, execute, feed::PACK_ITEM, item.id, segment.id);
                        }
                        for item in &gathered[taken..] {
                            within!(tx, query, execute, feed::PASS_OVER_ITEM, item.id);
                        }
                        Some(segment)
                    }
                })
            }

            async fn attachable(
                &self,
                profile: &str,
                session_key: &str,
                max_unread: i64,
            ) -> Result<Vec<$crate::store::FeedSegmentRow>, $crate::store::StoreError> {
                use $crate::store::sql::{feed, fetch};
                let attached: i64 = fetch!(
                    self,
                    query_scalar,
                    fetch_one,
                    feed::ATTACHED_COUNT,
                    profile,
                    session_key
                )?;
                let room = (max_unread - attached).max(0);
                if room == 0 {
                    return Ok(Vec::new());
                }
                let q = format!(
                    "{} LIMIT $3",
                    feed::segments("profile = $1 AND session_key = $2 AND state = 'waiting'")
                );
                fetch!(self, query_as, fetch_all, &q, profile, session_key, room)
            }

            async fn mark_attached(
                &self,
                segment_id: i64,
                session_id: &str,
                now: $crate::util::UnixMs,
            ) -> Result<bool, $crate::store::StoreError> {
                use $crate::store::sql::{execute, feed};
                let n = execute!(self, feed::MARK_ATTACHED, segment_id, session_id, now)?;
                Ok(n == 1)
            }

            async fn attached(
                &self,
                profile: &str,
                session_key: &str,
            ) -> Result<Vec<$crate::store::FeedSegmentRow>, $crate::store::StoreError> {
                use $crate::store::sql::{feed, fetch};
                let q = feed::segments("profile = $1 AND session_key = $2 AND state = 'attached'");
                fetch!(self, query_as, fetch_all, &q, profile, session_key)
            }

            async fn segment_items(
                &self,
                segment_id: i64,
            ) -> Result<Vec<$crate::store::FeedItemRow>, $crate::store::StoreError> {
                use $crate::store::sql::{feed, fetch};
                fetch!(
                    self,
                    query_as,
                    fetch_all,
                    &feed::segment_items(),
                    segment_id
                )
            }

            async fn mark_read(
                &self,
                ids: &[i64],
                turn_id: &str,
                now: $crate::util::UnixMs,
            ) -> Result<(), $crate::store::StoreError> {
                use $crate::store::sql::{feed, transaction, within};
                if ids.is_empty() {
                    return Ok(());
                }
                transaction!(self, |tx| {
                    for id in ids {
                        within!(tx, query, execute, feed::MARK_READ, *id, turn_id, now);
                    }
                })
            }

            async fn read_by(
                &self,
                turn_id: &str,
            ) -> Result<Vec<$crate::store::FeedSegmentRow>, $crate::store::StoreError> {
                use $crate::store::sql::{feed, fetch};
                let q = feed::segments("read_by_turn = $1");
                fetch!(self, query_as, fetch_all, &q, turn_id)
            }

            async fn session_feed(
                &self,
                profile: &str,
                session_key: &str,
            ) -> Result<$crate::store::SessionFeed, $crate::store::StoreError> {
                use $crate::store::sql::{feed, fetch};
                let gathered = fetch!(
                    self,
                    query_as,
                    fetch_all,
                    &feed::gathered_oldest_first(),
                    profile,
                    session_key
                )?;
                let q = feed::segments("profile = $1 AND session_key = $2");
                let segments = fetch!(self, query_as, fetch_all, &q, profile, session_key)?;
                Ok($crate::store::SessionFeed { gathered, segments })
            }

            async fn feed_counts(
                &self,
            ) -> Result<Vec<$crate::store::FeedCounts>, $crate::store::StoreError> {
                use $crate::store::sql::{feed, fetch};
                let rows: Vec<(String, i64, i64, i64, i64)> =
                    fetch!(self, query_as, fetch_all, feed::COUNTS)?;
                Ok(rows
                    .into_iter()
                    .map(
                        |(profile, gathered, waiting, attached, read)| $crate::store::FeedCounts {
                            profile,
                            gathered,
                            waiting,
                            attached,
                            read,
                        },
                    )
                    .collect())
            }
        }
    };
}
pub(crate) use impl_feed_store;
