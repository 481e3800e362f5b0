//! SQL of the [`crate::store::EventLog`]: routing writes, recalls, retention, and the
//! reads that feed the selector. Every candidate read is an index range with a LIMIT,
//! so its cost does not grow with the thread's length.

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
     WHERE id IN (SELECT decision_id FROM decision_sources WHERE message_id = $1)",
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
/// [`crate::context::selector::Candidate`], which knows nothing of the database.
#[derive(sqlx::FromRow)]
pub(crate) struct CandidateRow {
    item_id: i64,
    event_id: i64,
    created_at: crate::util::UnixMs,
    #[sqlx(try_from = "String")]
    item_type: crate::context::kinds::ItemType,
    bot_profile: String,
    bridge_id: String,
    message_id: String,
    author_label: String,
    text: String,
    truncated: bool,
    recalled: bool,
}

/// A candidate decodes from a row of [`CANDIDATE_COLUMNS`] on either backend, so the
/// candidate reads type themselves by their return type like every other read.
impl<'r, R: sqlx::Row> sqlx::FromRow<'r, R> for crate::context::selector::Candidate
where
    CandidateRow: sqlx::FromRow<'r, R>,
{
    fn from_row(row: &'r R) -> Result<Self, sqlx::Error> {
        CandidateRow::from_row(row).map(Into::into)
    }
}

impl From<CandidateRow> for crate::context::selector::Candidate {
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
/// exactly `chat_id = $2 AND root_msg_id = $3`.
pub(crate) fn thread_candidates() -> String {
    format!(
        "SELECT {CANDIDATE_COLUMNS} FROM thread_context_events e \
         JOIN thread_context_items i ON i.event_id = e.id \
         WHERE (e.chat_id, e.root_msg_id) >= ($2, $3) \
           AND (e.chat_id, e.root_msg_id, e.created_at) <= ($2, $3, 9223372036854775807) \
           AND (e.bot_profile = $1 OR e.event_type = 'agent_output') \
         ORDER BY e.chat_id DESC, e.root_msg_id DESC, e.created_at DESC, e.message_id DESC, \
           e.id DESC LIMIT $4"
    )
}

/// The newest items observed in a history scope after its watermark. Pending history
/// is "everything recorded since the last accepted turn", so this one reads by record
/// id, the watermark's own order; the selector puts what it returns in said order.
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

/// `SELECT` of the recalled among `n` message ids.
pub(crate) fn recalled_among(n: usize) -> String {
    let list = (1..=n)
        .map(|i| format!("${i}"))
        .collect::<Vec<_>>()
        .join(", ");
    format!("SELECT message_id FROM recalled_messages WHERE message_id IN ({list})")
}

/// `SELECT` of the names of `n` users of profile `$1`.
pub(crate) fn names_among(n: usize) -> String {
    let list = (2..=n + 1)
        .map(|i| format!("${i}"))
        .collect::<Vec<_>>()
        .join(", ");
    format!("SELECT open_id, name FROM user_names WHERE profile = $1 AND open_id IN ({list})")
}

/// The routed messages among `steps`.
pub(crate) fn route_writes(
    steps: &[crate::store::BatchStep],
) -> impl Iterator<Item = &crate::store::RouteWrite> {
    steps.iter().filter_map(|s| match s {
        crate::store::BatchStep::Route(w) => Some(&**w),
        _ => None,
    })
}

/// Records a run of routed messages and lone verdicts (no recall among them) inside the
/// open transaction `$tx`, with one multi-row statement per table where the writes do
/// not depend on each other — verdicts, event-log records, their items, display names —
/// then each message's session and turn in order. The same outcome as routing the
/// messages one by one: the first verdict and record of a message stand, the last name
/// learned wins. Evaluates to one entry per step (`None` for a lone verdict).
macro_rules! routes_within {
    ($tx:ident, $steps:expr) => {{
        use std::collections::{HashMap, HashSet};

        use $crate::store::{BatchStep, sql::writes};
        let steps: &[BatchStep] = $steps;
        let rows = writes::ROWS_PER_STATEMENT;
        let numbered = writes::numbered(&$tx);

        // Verdicts: the ones that went in are fresh (the first of a message only).
        let verdicts: Vec<&$crate::store::NewVerdict> = steps
            .iter()
            .filter_map(|s| match s {
                BatchStep::Route(w) => Some(&w.verdict),
                BatchStep::Verdict(v) => Some(v),
                BatchStep::Recall { .. } => None,
            })
            .collect();
        let mut fresh: HashSet<(String, String)> = HashSet::new();
        for chunk in verdicts.chunks(rows) {
            let q = writes::insert_verdicts(chunk.len(), numbered);
            let mut query = sqlx::query_as::<_, (String, String)>(&q).persistent(false);
            for v in chunk {
                query = query
                    .bind(&v.profile)
                    .bind(&v.message_id)
                    .bind(&v.chat_id)
                    .bind(v.verdict.to_string())
                    .bind(v.reason.to_string())
                    .bind(&v.session_key)
                    .bind(v.created_at);
            }
            fresh.extend(query.fetch_all(&mut *$tx).await?);
        }

        // Event-log records, then the items of those that went in (first one per key).
        let events: Vec<&$crate::store::NewContextEvent> =
            $crate::store::sql::event_log::route_writes(steps)
                .flat_map(|w| &w.events)
                .collect();
        let mut ids: HashMap<(String, String, String), i64> = HashMap::new();
        for chunk in events.chunks(rows) {
            let q = writes::insert_events_rows(chunk.len(), numbered);
            let mut query =
                sqlx::query_as::<_, (i64, String, String, String)>(&q).persistent(false);
            for e in chunk {
                query = query
                    .bind(&e.chat_id)
                    .bind(e.chat_type.as_str())
                    .bind(&e.root_msg_id)
                    .bind(&e.thread_id)
                    .bind(&e.message_id)
                    .bind(e.event_type.as_str())
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
                    .bind(e.created_at);
            }
            for (id, profile, message_id, event_type) in query.fetch_all(&mut *$tx).await? {
                ids.insert((profile, message_id, event_type), id);
            }
        }
        let items: Vec<(i64, &$crate::store::NewItem, $crate::util::UnixMs)> = events
            .iter()
            .filter_map(|e| {
                let key = (
                    e.bot_profile.clone(),
                    e.message_id.clone(),
                    e.event_type.as_str().to_owned(),
                );
                let id = ids.remove(&key)?;
                e.item.as_ref().map(|item| (id, item, e.created_at))
            })
            .collect();
        for chunk in items.chunks(rows) {
            let q = writes::insert_items_rows(chunk.len(), numbered);
            let mut query = sqlx::query(&q).persistent(false);
            for (id, item, at) in chunk {
                query = query
                    .bind(*id)
                    .bind(item.item_type.as_str())
                    .bind(item.role.as_str())
                    .bind(&item.author_label)
                    .bind(&item.text)
                    .bind(item.token_estimate)
                    .bind(item.truncated)
                    .bind(*at);
            }
            query.execute(&mut *$tx).await?;
        }

        // Display names: the last learned per (profile, open id).
        let mut names: Vec<(&str, &str, &str, $crate::util::UnixMs)> = Vec::new();
        let mut at: HashMap<(&str, &str), usize> = HashMap::new();
        for w in $crate::store::sql::event_log::route_writes(steps) {
            for (open_id, name) in &w.names {
                let row = (
                    w.verdict.profile.as_str(),
                    open_id.as_str(),
                    name.as_str(),
                    w.verdict.created_at,
                );
                match at.get(&(row.0, row.1)) {
                    Some(&i) => names[i] = row,
                    None => {
                        at.insert((row.0, row.1), names.len());
                        names.push(row);
                    }
                }
            }
        }
        // In key order: two batches (of two replicas) that both name a person lock the
        // same rows in the same order, so they wait for each other instead of deadlocking
        // (which costs a second of Postgres's deadlock_timeout and the batch a retry).
        names.sort_unstable_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)));
        for chunk in names.chunks(rows) {
            let q = writes::upsert_names(chunk.len(), numbered);
            let mut query = sqlx::query(&q).persistent(false);
            for (profile, open_id, name, at) in chunk {
                query = query.bind(*profile).bind(*open_id).bind(*name).bind(*at);
            }
            query.execute(&mut *$tx).await?;
        }

        // Sessions and turns, message by message.
        let mut out: Vec<Option<$crate::store::Routed>> = Vec::with_capacity(steps.len());
        for step in steps {
            let BatchStep::Route(w) = step else {
                out.push(None);
                continue;
            };
            let fresh = fresh.remove(&(w.verdict.profile.clone(), w.verdict.message_id.clone()));
            let session: Option<$crate::store::SessionRow> = match &w.session {
                Some(s) => Some($crate::store::sql::within!(
                    $tx,
                    query_as,
                    fetch_one,
                    &writes::upsert_session(),
                    &s.profile,
                    &s.session_key,
                    &s.session_id,
                    &s.chat_id,
                    s.chat_type.as_str(),
                    &s.user_id,
                    &s.root_msg_id,
                    &s.history_scope,
                    s.now,
                )),
                None => None,
            };
            if let Some(t) = w.turn.as_ref().filter(|_| fresh) {
                writes::insert_turn(&mut $tx, t).await?;
            }
            if let Some(f) = &w.feed {
                $crate::store::sql::within!(
                    $tx,
                    query,
                    execute,
                    $crate::store::sql::feed::INSERT_ITEM,
                    &f.profile,
                    &f.session_key,
                    &f.chat_id,
                    &f.message_id,
                    &f.sender,
                    &f.text,
                    f.said_at,
                    f.gathered_at,
                );
            }
            out.push(Some($crate::store::Routed { session, fresh }));
        }
        out
    }};
}
pub(crate) use routes_within;

/// Applies a recall inside the open transaction `$tx`; evaluates to how many event-log
/// records the message had.
macro_rules! recall_within {
    ($tx:ident, $message_id:expr, $chat_id:expr, $now:expr) => {{
        use $crate::store::sql::{event_log, within, writes};
        within!(
            $tx,
            query,
            execute,
            event_log::RECALL_MARK,
            $message_id,
            $chat_id,
            $now
        );
        for q in event_log::RECALL_SCRUB {
            within!($tx, query, execute, q, $message_id);
        }
        within!($tx, query, execute, writes::RECALL, $message_id, $now);
        within!(
            $tx,
            query,
            execute,
            $crate::store::sql::feed::RECALL,
            $message_id
        );
        within!($tx, query, execute, event_log::RECALL_EVENTS, $message_id).rows_affected()
    }};
}
pub(crate) use recall_within;

/// Implements [`crate::store::EventLog`] for a backend type with `pool` and `timeout`
/// fields (see `sql` for why this is a macro).
macro_rules! impl_event_log {
    ($ty:ty) => {
        #[async_trait::async_trait]
        impl $crate::store::EventLog for $ty {
            async fn is_recalled(&self, message_id: &str) -> Result<bool, $crate::store::StoreError> {
                let n: i64 = $crate::store::sql::fetch!(
                    self, query_scalar, fetch_one,
                    "SELECT COUNT(*) FROM recalled_messages WHERE message_id = $1",
                    message_id,
                )?;
                Ok(n > 0)
            }

            async fn apply_route(
                &self,
                w: &$crate::store::RouteWrite,
            ) -> Result<$crate::store::Routed, $crate::store::StoreError> {
                // One step of a batch: the same statements, the same outcome.
                let steps = [$crate::store::BatchStep::Route(Box::new(w.clone()))];
                let mut routed: Vec<Option<$crate::store::Routed>> = $crate::store::sql::transaction!(self, |tx| {
                    $crate::store::sql::event_log::routes_within!(tx, &steps)
                })?;
                Ok(routed
                    .pop()
                    .flatten()
                    .expect("a route step answers what it did"))
            }

            async fn record_batch(
                &self,
                batch: &$crate::store::ProcessedBatch,
            ) -> Result<Vec<Option<$crate::store::Routed>>, $crate::store::StoreError> {
                use $crate::store::{BatchStep, Finish, sql::{event_log, inbox, transaction}};
                transaction!(self, |tx| {
                    let steps = &batch.steps;
                    let mut out = Vec::with_capacity(steps.len());
                    let mut i = 0;
                    while i < steps.len() {
                        if let BatchStep::Recall { message_id, chat_id } = &steps[i] {
                            // A recall sees every write before it.
                            event_log::recall_within!(tx, message_id, chat_id, batch.now);
                            out.push(None);
                            i += 1;
                            continue;
                        }
                        let end = steps[i..]
                            .iter()
                            .position(|s| matches!(s, BatchStep::Recall { .. }))
                            .map_or(steps.len(), |n| i + n);
                        out.extend(event_log::routes_within!(tx, &steps[i..end]));
                        i = end;
                    }
                    inbox::finish_within(&mut tx, &batch.done, &Finish::Done, batch.now).await?;
                    out
                })
            }

            async fn recalled_among(
                &self,
                message_ids: &[String],
            ) -> Result<Vec<String>, $crate::store::StoreError> {
                let mut found = Vec::new();
                for chunk in message_ids.chunks($crate::store::sql::inbox::IDS_PER_STATEMENT) {
                    let q = $crate::store::sql::event_log::recalled_among(chunk.len());
                    found.extend($crate::store::bounded(self.timeout, async {
                        let mut query = sqlx::query_scalar(&q).persistent(false);
                        for id in chunk {
                            query = query.bind(id);
                        }
                        Ok(query.fetch_all(&self.pool).await?)
                    })
                    .await?);
                }
                Ok(found)
            }

            async fn names_among(
                &self,
                profile: &str,
                open_ids: &[String],
            ) -> Result<Vec<(String, String)>, $crate::store::StoreError> {
                let mut found = Vec::new();
                for chunk in open_ids.chunks($crate::store::sql::inbox::IDS_PER_STATEMENT) {
                    let q = $crate::store::sql::event_log::names_among(chunk.len());
                    found.extend($crate::store::bounded(self.timeout, async {
                        let mut query = sqlx::query_as(&q).persistent(false).bind(profile);
                        for id in chunk {
                            query = query.bind(id);
                        }
                        Ok(query.fetch_all(&self.pool).await?)
                    })
                    .await?);
                }
                Ok(found)
            }

            async fn record_verdict(
                &self,
                v: &$crate::store::NewVerdict,
            ) -> Result<(), $crate::store::StoreError> {
                $crate::store::bounded(self.timeout, async {
                    let _turn = self.write_turn().await;
                    $crate::store::sql::writes::insert_verdict(v)
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
                now: $crate::util::UnixMs,
            ) -> Result<u64, $crate::store::StoreError> {
                $crate::store::sql::transaction!(self, |tx| {
                    $crate::store::sql::event_log::recall_within!(tx, message_id, chat_id, now)
                })
            }

            async fn purge(&self, cutoff: $crate::util::UnixMs) -> Result<(), $crate::store::StoreError> {
                $crate::store::sql::transaction!(self, |tx| {
                    for q in $crate::store::sql::event_log::PURGE {
                        $crate::store::sql::within!(tx, query, execute, q, cutoff);
                    }
                })
            }

            async fn name_of(
                &self,
                profile: &str,
                open_id: &str,
            ) -> Result<Option<String>, $crate::store::StoreError> {
                $crate::store::sql::fetch!(
                    self, query_scalar, fetch_optional,
                    "SELECT name FROM user_names WHERE profile = $1 AND open_id = $2",
                    profile, open_id,
                )
            }

            async fn verdicts(
                &self,
                message_id: &str,
                profile: Option<&str>,
            ) -> Result<Vec<$crate::store::VerdictRow>, $crate::store::StoreError> {
                $crate::store::sql::fetch!(
                    self, query_as, fetch_all,
                    "SELECT profile, message_id, chat_id, verdict, reason, session_key, decision_id, created_at \
                     FROM routing_verdicts WHERE message_id = $1 AND ($2 IS NULL OR profile = $2) ORDER BY profile",
                    message_id, profile,
                )
            }

            async fn thread_events(
                &self,
                t: $crate::store::ProfileThread<'_>,
            ) -> Result<Vec<$crate::store::ContextEventRow>, $crate::store::StoreError> {
                let q = $crate::store::sql::event_log::select_events(
                    "e.chat_id = $2 AND e.root_msg_id = $3 AND e.bot_profile = $1",
                );
                $crate::store::sql::fetch!(
                    self, query_as, fetch_all,
                    &q,
                    t.profile, t.chat_id, t.root_msg_id,
                )
            }

            async fn message_events(
                &self,
                message_id: &str,
            ) -> Result<Vec<$crate::store::ContextEventRow>, $crate::store::StoreError> {
                let q = $crate::store::sql::event_log::select_events("e.message_id = $1");
                $crate::store::sql::fetch!(self, query_as, fetch_all, &q, message_id)
            }

            async fn record_events(
                &self,
                events: &[$crate::store::NewContextEvent],
            ) -> Result<(), $crate::store::StoreError> {
                $crate::store::sql::transaction!(self, |tx| {
                    $crate::store::sql::writes::insert_events(&mut tx, events).await?;
                })
            }

            async fn thread_candidates(
                &self,
                t: $crate::store::ProfileThread<'_>,
                window: i64,
            ) -> Result<Vec<$crate::context::selector::Candidate>, $crate::store::StoreError> {
                let q = $crate::store::sql::event_log::thread_candidates();
                $crate::store::sql::fetch!(self, query_as, fetch_all, &q, t.profile, t.chat_id, t.root_msg_id, window)
            }

            async fn pending_candidates(
                &self,
                profile: &str,
                scope: &str,
                cap: i64,
            ) -> Result<Vec<$crate::context::selector::Candidate>, $crate::store::StoreError> {
                let q = $crate::store::sql::event_log::pending_candidates();
                $crate::store::sql::fetch!(self, query_as, fetch_all, &q, profile, scope, cap)
            }

            async fn topic_root(
                &self,
                t: $crate::store::ProfileThread<'_>,
            ) -> Result<Option<(String, String)>, $crate::store::StoreError> {
                $crate::store::sql::fetch!(
                    self, query_as, fetch_optional,
                    $crate::store::sql::event_log::TOPIC_ROOT,
                    t.profile, t.chat_id, t.root_msg_id,
                )
            }

            async fn message_text(
                &self,
                message_id: &str,
            ) -> Result<Option<(String, String)>, $crate::store::StoreError> {
                $crate::store::sql::fetch!(
                    self, query_as, fetch_optional,
                    $crate::store::sql::event_log::MESSAGE_TEXT,
                    message_id,
                )
            }
        }
    };
}
pub(crate) use impl_event_log;
