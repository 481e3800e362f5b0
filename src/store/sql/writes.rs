//! Statements more than one surface writes, inside their own transactions: event-log
//! records with their items, verdicts, display names, session mappings, turns,
//! decisions and history watermarks. A leaf: it uses no other statement module.

use std::collections::HashMap;

use super::{
    dialect::Dialect,
    rungs::{Texts, rungs},
    store::Write,
};
use crate::{
    store::{NewDecision, NewSession, NewTurn, NewVerdict, SessionRow, StoreError},
    util::UnixMs,
    vocab::{NewContextEvent, NewItem},
};

/// The key of an event-log record: profile, message id, event type.
type EventKey = (String, String, String);

/// Inserts event-log records and their items inside an open transaction, one multi-row
/// statement per table and chunk; a record that already exists (same profile, message
/// and type, or earlier in `events`) is skipped with its item.
pub(crate) async fn insert_events<DB: Dialect>(
    tx: &mut Write<'_, DB>,
    events: &[&NewContextEvent],
) -> Result<(), StoreError> {
    let mut ids = insert_records(tx, events).await?;
    let items: Vec<(i64, &NewItem, UnixMs)> = events
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
    insert_items(tx, &items).await
}

/// Inserts event-log records; the ids of those that went in (the first one per key).
async fn insert_records<DB: Dialect>(
    tx: &mut Write<'_, DB>,
    events: &[&NewContextEvent],
) -> Result<HashMap<EventKey, i64>, StoreError> {
    let mut ids = HashMap::new();
    for chunk in rungs(events) {
        static TEXTS: Texts = Texts::new(insert_events_rows);
        let q = TEXTS.get(chunk.len(), DB::NUMBERED);
        let mut query = sqlx::query_as::<_, (i64, String, String, String)>(&q);
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
        for (id, profile, message_id, event_type) in query.fetch_all(&mut **tx).await? {
            ids.entry((profile, message_id, event_type)).or_insert(id);
        }
    }
    Ok(ids)
}

/// Inserts the items of records that went in: `(record id, item, its time)`.
async fn insert_items<DB: Dialect>(
    tx: &mut Write<'_, DB>,
    items: &[(i64, &NewItem, UnixMs)],
) -> Result<(), StoreError> {
    for chunk in rungs(items) {
        static TEXTS: Texts = Texts::new(insert_items_rows);
        let q = TEXTS.get(chunk.len(), DB::NUMBERED);
        let mut query = sqlx::query(&q);
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
        query.execute(&mut **tx).await?;
    }
    Ok(())
}

const INSERT_VERDICT: &str = "\
INSERT INTO routing_verdicts (profile, message_id, chat_id, verdict, reason, session_key, created_at)
VALUES ($1, $2, $3, $4, $5, $6, $7)
ON CONFLICT DO NOTHING";

/// The verdict insert with its values bound (the first verdict of a message stands).
pub(crate) fn insert_verdict<DB: Dialect>(
    v: &NewVerdict,
) -> sqlx::query::Query<'_, DB, <DB as sqlx::Database>::Arguments<'_>> {
    sqlx::query(INSERT_VERDICT)
        .bind(&v.profile)
        .bind(&v.message_id)
        .bind(&v.chat_id)
        .bind(v.verdict.to_string())
        .bind(v.reason.to_string())
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

/// Creates or touches a session mapping; the session.
pub(crate) async fn upsert_session_within<DB: Dialect>(
    tx: &mut Write<'_, DB>,
    s: &NewSession,
) -> Result<SessionRow, StoreError> {
    Ok(sqlx::query_as(&upsert_session())
        .bind(&s.profile)
        .bind(&s.session_key)
        .bind(&s.session_id)
        .bind(&s.chat_id)
        .bind(s.chat_type.as_str())
        .bind(&s.user_id)
        .bind(&s.root_msg_id)
        .bind(&s.history_scope)
        .bind(s.now)
        .fetch_one(&mut **tx)
        .await?)
}

pub(crate) const CONSUME: &str = "\
INSERT INTO history_watermarks (profile, history_scope, last_event_id, updated_at)
VALUES ($1, $2, $3, $4)
ON CONFLICT (profile, history_scope) DO UPDATE SET
    last_event_id = CASE WHEN excluded.last_event_id > history_watermarks.last_event_id
                         THEN excluded.last_event_id ELSE history_watermarks.last_event_id END,
    updated_at = excluded.updated_at";

const INSERT_TURN: &str = "\
INSERT INTO turns (turn_id, profile, session_key, chat_id, message_id, request_text, job_json,
                   state, queued_at, lease_owner)
VALUES ($1, $2, $3, $4, $5, $6, $7, 'queued', $8, $9)";

/// Inserts a turn inside an open transaction.
pub(crate) async fn insert_turn<DB: Dialect>(
    tx: &mut Write<'_, DB>,
    t: &NewTurn,
) -> Result<(), StoreError> {
    sqlx::query(INSERT_TURN)
        .bind(&t.turn_id)
        .bind(&t.profile)
        .bind(&t.session_key)
        .bind(&t.chat_id)
        .bind(&t.message_id)
        .bind(&t.request_text)
        .bind(&t.job_json)
        .bind(t.queued_at)
        .bind(&t.owner)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// A recalled request: its text leaves the turn, and a turn that has not started yet
/// never will.
pub(crate) const RECALL: &str = "\
UPDATE turns SET request_text = '', job_json = '{}',
    error = CASE WHEN state = 'queued' THEN 'the request was recalled' ELSE error END,
    finished_at = CASE WHEN state = 'queued' THEN $2 ELSE finished_at END,
    state = CASE WHEN state = 'queued' THEN 'cancelled' ELSE state END
WHERE message_id = $1";

const INSERT_DECISION: &str = "\
INSERT INTO thread_context_decisions
    (chat_id, root_msg_id, message_id, bridge_id, bot_profile, target_id, workspace_mode, mode,
     session_key, session_id, request_text, thread_context, selected_item_ids_json, selected_json,
     excluded_json, prompt_preview, diagnostics_json, created_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18)
RETURNING id";

/// Inserts a decision inside an open transaction and links it from the request's
/// verdict; the decision id.
pub(crate) async fn insert_decision<DB: Dialect>(
    tx: &mut Write<'_, DB>,
    d: &NewDecision,
) -> Result<i64, StoreError> {
    let id: i64 = sqlx::query_scalar(INSERT_DECISION)
        .bind(&d.chat_id)
        .bind(&d.root_msg_id)
        .bind(&d.message_id)
        .bind(&d.bridge_id)
        .bind(&d.bot_profile)
        .bind(&d.target_id)
        .bind(&d.workspace_mode)
        .bind(&d.mode)
        .bind(&d.session_key)
        .bind(&d.session_id)
        .bind(&d.request_text)
        .bind(&d.thread_context)
        .bind(&d.selected_item_ids_json)
        .bind(&d.selected_json)
        .bind(&d.excluded_json)
        .bind(&d.prompt_preview)
        .bind(&d.diagnostics_json)
        .bind(d.created_at)
        .fetch_one(&mut **tx)
        .await?;
    for message_id in &d.source_message_ids {
        sqlx::query(INSERT_SOURCE)
            .bind(id)
            .bind(message_id)
            .execute(&mut **tx)
            .await?;
    }
    sqlx::query(LINK_VERDICT)
        .bind(id)
        .bind(&d.bot_profile)
        .bind(&d.message_id)
        .execute(&mut **tx)
        .await?;
    Ok(id)
}

/// A message whose text a decision holds (so that its recall scrubs the decision).
const INSERT_SOURCE: &str =
    "INSERT INTO decision_sources (decision_id, message_id) VALUES ($1, $2) ON CONFLICT DO NOTHING";

/// A decision is linked from its request's verdict.
const LINK_VERDICT: &str =
    "UPDATE routing_verdicts SET decision_id = $1 WHERE profile = $2 AND message_id = $3";

/// `(...), (...)` of `rows` rows of `cols` placeholders each: `$1`, `$2`, … when
/// `numbered`, else `?`.
pub(crate) fn values(rows: usize, cols: usize, numbered: bool) -> String {
    (0..rows)
        .map(|r| {
            let row: Vec<String> = (1..=cols)
                .map(|c| {
                    if numbered {
                        format!("${}", r * cols + c)
                    } else {
                        "?".to_owned()
                    }
                })
                .collect();
            format!("({})", row.join(", "))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// [`INSERT_VERDICT`] for `rows` verdicts at once; answers the `(profile, message_id)`
/// of those that went in (the first verdict of a message stands).
pub(crate) fn insert_verdicts(rows: usize, numbered: bool) -> String {
    format!(
        "INSERT INTO routing_verdicts \
         (profile, message_id, chat_id, verdict, reason, session_key, created_at) \
         VALUES {} ON CONFLICT DO NOTHING RETURNING profile, message_id",
        values(rows, 7, numbered)
    )
}

/// [`INSERT_EVENT`] for `rows` records at once; answers the id and key
/// `(bot_profile, message_id, event_type)` of those that went in.
fn insert_events_rows(rows: usize, numbered: bool) -> String {
    format!(
        "INSERT INTO thread_context_events \
         (chat_id, chat_type, root_msg_id, thread_id, message_id, event_type, actor_type, \
         actor_id, bridge_id, bot_profile, target_id, target_name, session_name, \
         history_scope, text, metadata_json, created_at) \
         VALUES {} ON CONFLICT DO NOTHING RETURNING id, bot_profile, message_id, event_type",
        values(rows, 17, numbered)
    )
}

/// [`INSERT_ITEM`] for `rows` items at once.
fn insert_items_rows(rows: usize, numbered: bool) -> String {
    format!(
        "INSERT INTO thread_context_items \
         (event_id, item_type, role, author_label, text, token_estimate, truncated, created_at) \
         VALUES {}",
        values(rows, 8, numbered)
    )
}

/// Remembers `rows` display names at once (the newest wins); each `(profile, open_id)` at
/// most once per statement (Postgres refuses to update a row twice in one).
pub(crate) fn upsert_names(rows: usize, numbered: bool) -> String {
    format!(
        "INSERT INTO user_names (profile, open_id, name, updated_at) VALUES {} \
         ON CONFLICT (profile, open_id) DO UPDATE \
         SET name = excluded.name, updated_at = excluded.updated_at",
        values(rows, 4, numbered)
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn multi_row_values_number_their_placeholders_row_by_row() {
        assert_eq!(super::values(2, 3, true), "($1, $2, $3), ($4, $5, $6)");
        assert_eq!(super::values(2, 2, false), "(?, ?), (?, ?)");
        assert!(super::insert_verdicts(2, true).contains("($8, $9, $10, $11, $12, $13, $14)"));
    }
}
