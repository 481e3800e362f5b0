//! SQL of the [`crate::store::EventLog`]: routing writes, recalls, retention, and the
//! reads that feed the selector. Every candidate read is an index range with a LIMIT,
//! so its cost does not grow with the thread's length. A run of routed messages is
//! written by `routes`.

use async_trait::async_trait;

use super::{
    decisions,
    dialect::Dialect,
    feed,
    inbox::finish_within,
    routes::routes_within,
    rungs::rungs,
    store::{SqlStore, Write},
    writes::{self, insert_events, insert_verdict},
};
use crate::{
    store::{
        BatchStep, ContextEventRow, EventLog, Finish, NewVerdict, ProcessedBatch, ProfileThread,
        RouteWrite, Routed, StoreError, VerdictRow,
    },
    util::UnixMs,
    vocab::{Candidate, ItemType, NewContextEvent},
};

/// A recall is remembered (so a late delivery is ignored) …
const RECALL_MARK: &str = "INSERT INTO recalled_messages (message_id, chat_id, recalled_at) VALUES ($1, $2, $3) \
     ON CONFLICT DO NOTHING";

/// … its text leaves the items, the inbox and every decision that held it …
const RECALL_SCRUB: [&str; 3] = [
    "UPDATE thread_context_items SET text = '' \
     WHERE event_id IN (SELECT id FROM thread_context_events WHERE message_id = $1)",
    "UPDATE inbox_events SET payload = '{}' WHERE message_id = $1",
    "UPDATE thread_context_decisions SET request_text = '', thread_context = '', selected_json = '[]', \
     prompt_preview = '[removed: a message in this decision was recalled]' \
     WHERE id IN (SELECT decision_id FROM decision_sources WHERE message_id = $1)",
];

/// … and its event-log records are marked recalled.
const RECALL_EVENTS: &str = "UPDATE thread_context_events SET text = '', metadata_json = '{}', recalled = TRUE \
     WHERE message_id = $1";

/// Retention: old events (their items go with them: `ON DELETE CASCADE`), and finished
/// inbox rows, verdicts, replies and turns of the same age; the feed and the context
/// decisions, which hold the same text, go with them (see `feed::PURGE`,
/// `decisions::PURGE`).
const PURGE: [&str; 5] = [
    "DELETE FROM thread_context_events WHERE created_at < $1",
    "DELETE FROM inbox_events WHERE received_at < $1 AND status IN ('done', 'skipped', 'failed')",
    "DELETE FROM routing_verdicts WHERE created_at < $1",
    "DELETE FROM outbound_messages WHERE created_at < $1",
    "DELETE FROM turns WHERE queued_at < $1 AND state IN ('succeeded', 'failed', 'cancelled')",
];

const EVENT_COLUMNS: &str = "e.id, e.chat_id, e.root_msg_id, e.message_id, e.event_type, \
     e.actor_type, e.actor_id, e.bot_profile, e.bridge_id, e.session_name, e.history_scope, e.text, \
     e.recalled, e.created_at, i.id AS item_id, i.author_label, i.text AS item_text";

/// Event-log records matching `where_clause`, in said order: when the message was said
/// (Feishu's create time), then its id, then the record's id (see
/// [`crate::context::selector::said_order`]; message ids compare as bytes on both
/// backends).
pub(crate) fn select_events(where_clause: &str) -> String {
    format!(
        "SELECT {EVENT_COLUMNS} FROM thread_context_events e \
         LEFT JOIN thread_context_items i ON i.event_id = e.id WHERE {where_clause} \
         ORDER BY e.created_at, e.message_id, e.id"
    )
}

pub(crate) const CANDIDATE_COLUMNS: &str = "i.id AS item_id, e.id AS event_id, e.created_at, \
     i.item_type, e.bot_profile, e.bridge_id, e.message_id, i.author_label, i.text, i.truncated, \
     e.recalled";

/// A candidate item as read: mapped to the selector's own
/// [`Candidate`], which knows nothing of the database.
#[derive(sqlx::FromRow)]
pub(crate) struct CandidateRow {
    item_id: i64,
    event_id: i64,
    created_at: UnixMs,
    #[sqlx(try_from = "String")]
    item_type: ItemType,
    bot_profile: String,
    bridge_id: String,
    message_id: String,
    author_label: String,
    text: String,
    truncated: bool,
    recalled: bool,
}

/// A candidate decodes from a row of `CANDIDATE_COLUMNS` on either backend, so the
/// candidate reads type themselves by their return type like every other read.
impl<'r, R: sqlx::Row> sqlx::FromRow<'r, R> for Candidate
where
    CandidateRow: sqlx::FromRow<'r, R>,
{
    fn from_row(row: &'r R) -> Result<Self, sqlx::Error> {
        CandidateRow::from_row(row).map(Into::into)
    }
}

impl From<CandidateRow> for Candidate {
    fn from(r: CandidateRow) -> Self {
        Self {
            item_id: r.item_id,
            event_id: r.event_id,
            created_at: r.created_at,
            item_type: r.item_type,
            bot_profile: r.bot_profile,
            bridge_id: r.bridge_id,
            message_id: r.message_id,
            author_label: r.author_label,
            text: r.text,
            truncated: r.truncated,
            recalled: r.recalled,
        }
    }
}

/// The thread's newest items, newest said first (the selector puts them back in said
/// order). The thread is selected with row-value ranges rather than equalities, and
/// ordered by the full `(chat_id, root_msg_id, created_at, message_id, id)` key: only the
/// thread index (`thread_context_events_said`) can deliver that order, so a planner
/// cannot walk another index backwards and filter (fast for a busy thread, but a scan of
/// everything written since for a thread that went quiet). The two ranges together mean
/// exactly `chat_id = $2 AND root_msg_id = $3`, with nothing said after `$4` (the end of
/// time for the thread as it is; a decision's time for the thread as it was then).
fn thread_candidates() -> String {
    format!(
        "SELECT {CANDIDATE_COLUMNS} FROM thread_context_events e \
         JOIN thread_context_items i ON i.event_id = e.id \
         WHERE (e.chat_id, e.root_msg_id) >= ($2, $3) \
           AND (e.chat_id, e.root_msg_id, e.created_at) <= ($2, $3, $4) \
           AND (e.bot_profile = $1 OR e.event_type = 'agent_output') \
         ORDER BY e.chat_id DESC, e.root_msg_id DESC, e.created_at DESC, e.message_id DESC, \
           e.id DESC LIMIT $5"
    )
}

impl<DB: Dialect> SqlStore<DB> {
    /// The thread's newest `window` items said no later than `said_by` (ms).
    async fn read_thread(
        &self,
        t: ProfileThread<'_>,
        said_by: i64,
        window: i64,
    ) -> Result<Vec<Candidate>, StoreError> {
        let q = thread_candidates();
        let query = sqlx::query_as(&q)
            .bind(t.profile)
            .bind(t.chat_id)
            .bind(t.root_msg_id)
            .bind(said_by)
            .bind(window);
        self.fetch(query.fetch_all(&self.pool)).await
    }
}

/// The newest items observed in a history scope after its watermark. Pending history
/// is "everything recorded since the last accepted turn", so this one reads by record
/// id, the watermark's own order; the selector puts what it returns in said order.
fn pending_candidates() -> String {
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

const TOPIC_ROOT: &str = "\
SELECT e.text, COALESCE(i.author_label, e.actor_id) FROM thread_context_events e
LEFT JOIN thread_context_items i ON i.event_id = e.id
WHERE e.chat_id = $2 AND e.root_msg_id = $3 AND e.message_id = $3
  AND e.event_type = 'topic_root' AND e.recalled = FALSE
ORDER BY CASE WHEN e.bot_profile = $1 THEN 0 ELSE 1 END, e.id
LIMIT 1";

const MESSAGE_TEXT: &str = "\
SELECT COALESCE(i.text, e.text), COALESCE(i.author_label, e.actor_id) FROM thread_context_events e
LEFT JOIN thread_context_items i ON i.event_id = e.id
WHERE e.message_id = $1 AND e.recalled = FALSE
ORDER BY CASE WHEN i.id IS NULL THEN 1 ELSE 0 END, e.id
LIMIT 1";

/// `SELECT` of the recalled among `n` message ids.
fn recalled_among(n: usize) -> String {
    let list = (1..=n)
        .map(|i| format!("${i}"))
        .collect::<Vec<_>>()
        .join(", ");
    format!("SELECT message_id FROM recalled_messages WHERE message_id IN ({list})")
}

/// `SELECT` of the names of `n` users of profile `$1`.
fn names_among(n: usize) -> String {
    let list = (2..=n + 1)
        .map(|i| format!("${i}"))
        .collect::<Vec<_>>()
        .join(", ");
    format!("SELECT open_id, name FROM user_names WHERE profile = $1 AND open_id IN ({list})")
}

/// Applies a recall inside the open transaction `tx`; how many event-log records the
/// message had.
async fn recall_within<DB: Dialect>(
    tx: &mut Write<'_, DB>,
    message_id: &str,
    chat_id: &str,
    now: UnixMs,
) -> Result<u64, StoreError> {
    sqlx::query(RECALL_MARK)
        .bind(message_id)
        .bind(chat_id)
        .bind(now)
        .execute(&mut **tx)
        .await?;
    for q in RECALL_SCRUB {
        sqlx::query(q).bind(message_id).execute(&mut **tx).await?;
    }
    sqlx::query(writes::RECALL)
        .bind(message_id)
        .bind(now)
        .execute(&mut **tx)
        .await?;
    sqlx::query(feed::RECALL)
        .bind(message_id)
        .execute(&mut **tx)
        .await?;
    let done = sqlx::query(RECALL_EVENTS)
        .bind(message_id)
        .execute(&mut **tx)
        .await?;
    Ok(DB::rows_affected(&done))
}

const IS_RECALLED: &str = "SELECT COUNT(*) FROM recalled_messages WHERE message_id = $1";

const NAME_OF: &str = "SELECT name FROM user_names WHERE profile = $1 AND open_id = $2";

const VERDICTS: &str = "\
SELECT profile, message_id, chat_id, verdict, reason, session_key, decision_id, created_at,
    chain_id
FROM routing_verdicts WHERE message_id = $1 AND ($2 IS NULL OR profile = $2) ORDER BY profile";

#[async_trait]
impl<DB: Dialect> EventLog for SqlStore<DB> {
    async fn is_recalled(&self, message_id: &str) -> Result<bool, StoreError> {
        let query = sqlx::query_scalar(IS_RECALLED).bind(message_id);
        let n: i64 = self.fetch(query.fetch_one(&self.pool)).await?;
        Ok(n > 0)
    }

    async fn apply_route(&self, w: &RouteWrite) -> Result<Routed, StoreError> {
        // One step of a batch: the same statements, the same outcome.
        let steps = [BatchStep::Route(Box::new(w.clone()))];
        let mut routed = self
            .bounded(async {
                let mut tx = self.transaction().await?;
                let routed = routes_within(&mut tx, &steps).await?;
                tx.commit().await?;
                Ok(routed)
            })
            .await?;
        Ok(routed
            .pop()
            .flatten()
            .expect("a route step answers what it did"))
    }

    async fn record_batch(
        &self,
        batch: &ProcessedBatch,
    ) -> Result<Vec<Option<Routed>>, StoreError> {
        self.bounded(async {
            let mut tx = self.transaction().await?;
            let steps = &batch.steps;
            let mut out = Vec::with_capacity(steps.len());
            let mut i = 0;
            while i < steps.len() {
                if let BatchStep::Recall {
                    message_id,
                    chat_id,
                } = &steps[i]
                {
                    // A recall sees every write before it.
                    recall_within(&mut tx, message_id, chat_id, batch.now).await?;
                    out.push(None);
                    i += 1;
                    continue;
                }
                let end = steps[i..]
                    .iter()
                    .position(|s| matches!(s, BatchStep::Recall { .. }))
                    .map_or(steps.len(), |n| i + n);
                out.extend(routes_within(&mut tx, &steps[i..end]).await?);
                i = end;
            }
            finish_within(
                &mut tx,
                &batch.done,
                &Finish::Done,
                batch.now,
                self.holds_claims(),
            )
            .await?;
            tx.commit().await?;
            Ok(out)
        })
        .await
        .inspect(|_| self.let_go(&batch.done))
    }

    async fn recalled_among(&self, message_ids: &[String]) -> Result<Vec<String>, StoreError> {
        let mut found = Vec::new();
        for chunk in rungs(message_ids) {
            let q = recalled_among(chunk.len());
            let mut query = sqlx::query_scalar(&q);
            for id in chunk {
                query = query.bind(id);
            }
            found.extend(self.fetch(query.fetch_all(&self.pool)).await?);
        }
        Ok(found)
    }

    async fn names_among(
        &self,
        profile: &str,
        open_ids: &[String],
    ) -> Result<Vec<(String, String)>, StoreError> {
        let mut found = Vec::new();
        for chunk in rungs(open_ids) {
            let q = names_among(chunk.len());
            let mut query = sqlx::query_as(&q).bind(profile);
            for id in chunk {
                query = query.bind(id);
            }
            found.extend(self.fetch(query.fetch_all(&self.pool)).await?);
        }
        Ok(found)
    }

    async fn record_verdict(&self, v: &NewVerdict) -> Result<(), StoreError> {
        self.execute(insert_verdict(v)).await.map(drop)
    }

    async fn recall(
        &self,
        message_id: &str,
        chat_id: &str,
        now: UnixMs,
    ) -> Result<u64, StoreError> {
        self.bounded(async {
            let mut tx = self.transaction().await?;
            let n = recall_within(&mut tx, message_id, chat_id, now).await?;
            tx.commit().await?;
            Ok(n)
        })
        .await
    }

    async fn purge(&self, cutoff: UnixMs) -> Result<(), StoreError> {
        self.bounded(async {
            let mut tx = self.transaction().await?;
            let held_text = feed::PURGE.into_iter().chain([decisions::PURGE]);
            for q in PURGE.into_iter().chain(held_text) {
                sqlx::query(q).bind(cutoff).execute(&mut *tx).await?;
            }
            tx.commit().await
        })
        .await
    }

    async fn name_of(&self, profile: &str, open_id: &str) -> Result<Option<String>, StoreError> {
        let query = sqlx::query_scalar(NAME_OF).bind(profile).bind(open_id);
        self.fetch(query.fetch_optional(&self.pool)).await
    }

    async fn verdicts(
        &self,
        message_id: &str,
        profile: Option<&str>,
    ) -> Result<Vec<VerdictRow>, StoreError> {
        let query = sqlx::query_as(VERDICTS).bind(message_id).bind(profile);
        self.fetch(query.fetch_all(&self.pool)).await
    }

    async fn thread_events(
        &self,
        t: ProfileThread<'_>,
    ) -> Result<Vec<ContextEventRow>, StoreError> {
        let q = select_events("e.chat_id = $2 AND e.root_msg_id = $3 AND e.bot_profile = $1");
        let query = sqlx::query_as(&q)
            .bind(t.profile)
            .bind(t.chat_id)
            .bind(t.root_msg_id);
        self.fetch(query.fetch_all(&self.pool)).await
    }

    async fn message_events(&self, message_id: &str) -> Result<Vec<ContextEventRow>, StoreError> {
        let q = select_events("e.message_id = $1");
        self.fetch(sqlx::query_as(&q).bind(message_id).fetch_all(&self.pool))
            .await
    }

    async fn record_events(&self, events: &[NewContextEvent]) -> Result<(), StoreError> {
        self.bounded(async {
            let mut tx = self.transaction().await?;
            insert_events(&mut tx, &events.iter().collect::<Vec<_>>()).await?;
            tx.commit().await
        })
        .await
    }

    async fn thread_candidates(
        &self,
        t: ProfileThread<'_>,
        window: i64,
    ) -> Result<Vec<Candidate>, StoreError> {
        self.read_thread(t, i64::MAX, window).await
    }

    async fn pending_candidates(
        &self,
        profile: &str,
        scope: &str,
        cap: i64,
    ) -> Result<Vec<Candidate>, StoreError> {
        let q = pending_candidates();
        let query = sqlx::query_as(&q).bind(profile).bind(scope).bind(cap);
        self.fetch(query.fetch_all(&self.pool)).await
    }

    async fn candidates_by_id(&self, item_ids: &[i64]) -> Result<Vec<Candidate>, StoreError> {
        self.read_candidates_by_id(item_ids).await
    }

    async fn thread_candidates_said_by(
        &self,
        t: ProfileThread<'_>,
        said_by: UnixMs,
        window: i64,
    ) -> Result<Vec<Candidate>, StoreError> {
        self.read_thread(t, said_by.0, window).await
    }

    async fn scope_candidates_said_by(
        &self,
        profile: &str,
        scope: &str,
        said_by: UnixMs,
        cap: i64,
    ) -> Result<Vec<Candidate>, StoreError> {
        self.read_scope_said_by(profile, scope, said_by, cap).await
    }

    async fn topic_root(
        &self,
        t: ProfileThread<'_>,
    ) -> Result<Option<(String, String)>, StoreError> {
        let query = sqlx::query_as(TOPIC_ROOT)
            .bind(t.profile)
            .bind(t.chat_id)
            .bind(t.root_msg_id);
        self.fetch(query.fetch_optional(&self.pool)).await
    }

    async fn message_text(&self, message_id: &str) -> Result<Option<(String, String)>, StoreError> {
        let query = sqlx::query_as(MESSAGE_TEXT).bind(message_id);
        self.fetch(query.fetch_optional(&self.pool)).await
    }
}
