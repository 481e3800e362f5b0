//! Reads for the web view: the recently active threads, and everything one thread's
//! timeline shows — its messages, their verdicts, its turns and context decisions, and
//! the batched-feed segments and digests of its sessions. Read only; every other surface
//! keeps its own writes.
//!
//! A thread is known by its event-log records (`root_msg_id` is unique across chats), so
//! a message ignored before anything was recorded of it (a sender not allowed, say) has
//! no place in a timeline: its verdict is found by message id (`GET /explain/message`).

use async_trait::async_trait;

use super::{DigestRow, FeedSegmentRow, StoreError, TurnRow, VerdictRow};
use crate::util::UnixMs;

/// One profile's view of a recently active thread.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct ThreadSummary {
    pub profile: String,
    pub chat_id: String,
    pub root_msg_id: String,
    /// When its newest recorded message was said.
    pub last_at: UnixMs,
    /// Distinct messages the profile recorded in it.
    pub messages: i64,
    /// The profile's turns on those messages.
    pub turns: i64,
    /// The state of the newest of them.
    pub latest_turn_state: Option<String>,
}

/// An event-log record of a thread, for the timeline.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct TimelineEvent {
    /// Record id (write order).
    pub id: i64,
    pub bot_profile: String,
    pub message_id: String,
    /// `topic_root`, `human_message`, `user_request`, `agent_output`, `command`.
    pub event_type: String,
    /// `user`, `bot`, `app`.
    pub actor_type: String,
    pub actor_id: String,
    /// The record's item (what a context decision selects or excludes), if it has one.
    pub item_id: Option<i64>,
    /// The item's author label.
    pub author_label: Option<String>,
    /// Text ('' once recalled).
    pub text: String,
    pub recalled: bool,
    /// When the message was said (Feishu's create time).
    pub created_at: UnixMs,
}

/// A context decision made in a thread.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct DecisionRef {
    pub id: i64,
    pub profile: String,
    pub message_id: String,
}

/// Which thread, and whose view of it (`None`: every profile's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ThreadOf<'a> {
    pub root_msg_id: &'a str,
    pub profile: Option<&'a str>,
}

/// The web view's reads.
#[async_trait]
pub trait TimelineStore: Send + Sync + 'static {
    /// The `limit` threads said in most recently since `since`, per profile (one row per
    /// profile and thread), newest first.
    async fn recent_threads(
        &self,
        since: UnixMs,
        limit: i64,
    ) -> Result<Vec<ThreadSummary>, StoreError>;
    /// A thread's event-log records, in said order (said time, message id, record id).
    async fn timeline_events(&self, t: ThreadOf<'_>) -> Result<Vec<TimelineEvent>, StoreError>;
    /// The verdicts on a thread's recorded messages, by message and profile.
    async fn timeline_verdicts(&self, t: ThreadOf<'_>) -> Result<Vec<VerdictRow>, StoreError>;
    /// The turns requested by a thread's recorded messages, in queue order.
    async fn timeline_turns(&self, t: ThreadOf<'_>) -> Result<Vec<TurnRow>, StoreError>;
    /// The context decisions made in a thread, oldest first.
    async fn timeline_decisions(&self, t: ThreadOf<'_>) -> Result<Vec<DecisionRef>, StoreError>;
    /// A session's newest `limit` batched-feed segments, and those its turns read from
    /// the chat's feed, oldest first.
    async fn session_segments(
        &self,
        profile: &str,
        session_key: &str,
        limit: i64,
    ) -> Result<Vec<FeedSegmentRow>, StoreError>;
    /// A session's newest `limit` digests, oldest first.
    async fn session_digests(
        &self,
        profile: &str,
        session_key: &str,
        limit: i64,
    ) -> Result<Vec<DigestRow>, StoreError>;
}
