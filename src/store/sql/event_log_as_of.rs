//! The event log's reads for what-if explain: a decision's candidates read back by id,
//! and a history scope's items as they stood when the decision was made (said no later
//! than it; a thread's are the live thread read with a cut-off). Written, like every candidate read, as bounded index reads.

use super::{
    dialect::Dialect, event_log::CANDIDATE_COLUMNS, inbox::IDS_PER_STATEMENT, store::SqlStore,
};
use crate::{store::StoreError, util::UnixMs, vocab::Candidate};

/// `SELECT` of the items with `n` ids.
fn by_id(n: usize) -> String {
    let list = (1..=n)
        .map(|i| format!("${i}"))
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "SELECT {CANDIDATE_COLUMNS} FROM thread_context_items i \
         JOIN thread_context_events e ON e.id = i.event_id WHERE i.id IN ({list}) ORDER BY i.id"
    )
}

/// The scope's newest observed items said no later than `$3`, by record id.
fn scope_said_by() -> String {
    format!(
        "SELECT {CANDIDATE_COLUMNS} FROM thread_context_events e \
         JOIN thread_context_items i ON i.event_id = e.id \
         WHERE e.bot_profile = $1 AND e.history_scope = $2 \
           AND e.event_type IN ('topic_root', 'human_message') AND e.created_at <= $3 \
         ORDER BY e.id DESC LIMIT $4"
    )
}

impl<DB: Dialect> SqlStore<DB> {
    /// See [`crate::store::EventLog::candidates_by_id`].
    pub(crate) async fn read_candidates_by_id(
        &self,
        item_ids: &[i64],
    ) -> Result<Vec<Candidate>, StoreError> {
        let mut found = Vec::new();
        for chunk in item_ids.chunks(IDS_PER_STATEMENT) {
            let q = by_id(chunk.len());
            let mut query = sqlx::query_as(&q).persistent(false);
            for id in chunk {
                query = query.bind(*id);
            }
            found.extend(self.fetch(query.fetch_all(&self.pool)).await?);
        }
        Ok(found)
    }

    /// See [`crate::store::EventLog::scope_candidates_said_by`].
    pub(crate) async fn read_scope_said_by(
        &self,
        profile: &str,
        scope: &str,
        said_by: UnixMs,
        cap: i64,
    ) -> Result<Vec<Candidate>, StoreError> {
        let q = scope_said_by();
        let query = sqlx::query_as(&q)
            .bind(profile)
            .bind(scope)
            .bind(said_by)
            .bind(cap);
        self.fetch(query.fetch_all(&self.pool)).await
    }
}
