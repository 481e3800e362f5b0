//! Context decisions: what a turn's agent was given and why, as recorded for explain.

use async_trait::async_trait;

use super::StoreError;
use crate::util::UnixMs;

/// A context decision to record (and, with its id, as read back).
#[derive(Debug, Clone, PartialEq, Eq, Default, sqlx::FromRow)]
pub struct NewDecision {
    pub chat_id: String,
    pub root_msg_id: String,
    pub message_id: String,
    /// Profile's app id.
    pub bridge_id: String,
    pub bot_profile: String,
    /// This bot's open_id.
    pub target_id: Option<String>,
    /// `shared`, `owner_only`, `dm`.
    pub workspace_mode: String,
    /// Context mode(s) used.
    pub mode: String,
    pub session_key: String,
    /// Session id at the time.
    pub session_id: String,
    pub request_text: String,
    /// Rendered injected context.
    pub thread_context: String,
    /// Selected item ids, JSON array.
    pub selected_item_ids_json: String,
    /// Selected items with sources and previews, JSON array.
    pub selected_json: String,
    /// Excluded items with reasons, JSON array.
    pub excluded_json: String,
    pub prompt_preview: String,
    /// Diagnostics, JSON object.
    pub diagnostics_json: String,
    /// Every message whose text the decision holds (its request first): a recall of
    /// any of them scrubs the decision. Written to its own table, not read back.
    #[sqlx(skip)]
    pub source_message_ids: Vec<String>,
    pub created_at: UnixMs,
}

/// A recorded decision.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct DecisionRow {
    /// Decision id.
    pub id: i64,
    /// What was recorded.
    #[sqlx(flatten)]
    pub decision: NewDecision,
}

/// Recorded context decisions.
#[async_trait]
pub trait DecisionStore: Send + Sync + 'static {
    /// Records a decision and links it from the request's verdict.
    async fn record_decision(&self, d: &NewDecision) -> Result<i64, StoreError>;
    /// One decision.
    async fn decision(&self, id: i64) -> Result<Option<DecisionRow>, StoreError>;
    /// The latest decision of a profile in a thread (for one request message, if given).
    async fn latest_decision(
        &self,
        profile: &str,
        root_msg_id: &str,
        message_id: Option<&str>,
    ) -> Result<Option<DecisionRow>, StoreError>;
}
