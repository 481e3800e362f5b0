//! The thread event log and what routing writes with it: records and their items,
//! verdicts, display names, recalls and retention; and the reads that feed the selector.

use async_trait::async_trait;

use super::{NewSession, NewTurn, SessionRow, StoreError};
use crate::util::UnixMs;
use crate::{
    routing::{Reason, Verdict},
    vocab::{Candidate, EventType, NewContextEvent},
};

/// A thread as one profile recorded it: each profile reads its own records of a thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProfileThread<'a> {
    pub profile: &'a str,
    pub chat_id: &'a str,
    /// The thread's root message id.
    pub root_msg_id: &'a str,
}

impl<'a> ProfileThread<'a> {
    /// The thread under `root_msg_id` in `chat_id`, as `profile` recorded it.
    pub fn new(profile: &'a str, chat_id: &'a str, root_msg_id: &'a str) -> Self {
        Self {
            profile,
            chat_id,
            root_msg_id,
        }
    }
}

/// A routing verdict to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewVerdict {
    pub profile: String,
    pub message_id: String,
    pub chat_id: String,
    /// Ignored, observed or invoked.
    pub verdict: Verdict,
    /// Why.
    pub reason: Reason,
    /// Session, for invocations.
    pub session_key: Option<String>,
    pub created_at: UnixMs,
}

/// A stored verdict.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct VerdictRow {
    pub profile: String,
    pub message_id: String,
    pub chat_id: String,
    /// Ignored, observed or invoked.
    #[sqlx(try_from = "String")]
    pub verdict: Verdict,
    /// Why.
    #[sqlx(try_from = "String")]
    pub reason: Reason,
    /// Session, for invocations.
    pub session_key: Option<String>,
    /// The context decision made for the turn, once there is one.
    pub decision_id: Option<i64>,
    pub created_at: UnixMs,
    /// The handoff chain, for a verdict a handoff decided.
    pub chain_id: Option<String>,
}

/// Everything one routed message writes, in one transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteWrite {
    /// The verdict (the first one for a message stands).
    pub verdict: NewVerdict,
    /// Event-log records (deduplicated per profile, message and type).
    pub events: Vec<NewContextEvent>,
    /// The session to create or touch, for invocations.
    pub session: Option<NewSession>,
    /// Display names learned from the message's mentions: `(open_id, name)`.
    pub names: Vec<(String, String)>,
    /// The turn the message starts, queued in the same transaction.
    pub turn: Option<NewTurn>,
    /// The message gathered for its session's batched feed.
    pub feed: Option<super::NewFeedItem>,
}

/// What [`EventLog::apply_route`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Routed {
    /// The session mapping, when the write named one.
    pub session: Option<SessionRow>,
    /// `false` when the message had been routed before (nothing new was queued).
    pub fresh: bool,
}

/// One processed inbox event's writes, in a [`ProcessedBatch`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BatchStep {
    /// A routed message (see [`EventLog::apply_route`]).
    Route(Box<RouteWrite>),
    /// A verdict alone (a message recalled before it was processed).
    Verdict(NewVerdict),
    /// A recall (see [`EventLog::recall`]).
    Recall { message_id: String, chat_id: String },
}

/// What the worker records for a batch of inbox events, in one transaction: each
/// event's writes in arrival order, then the `done` marks of the events they finish.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ProcessedBatch {
    pub steps: Vec<BatchStep>,
    /// Inbox row ids marked `done` with the writes.
    pub done: Vec<i64>,
    pub now: UnixMs,
}

/// An event-log record with its item, as read.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct ContextEventRow {
    /// Event id (write order).
    pub id: i64,
    pub chat_id: String,
    pub root_msg_id: String,
    pub message_id: String,
    /// Event type.
    #[sqlx(try_from = "String")]
    pub event_type: EventType,
    /// `user`, `bot`, `app`.
    pub actor_type: String,
    pub actor_id: String,
    pub bot_profile: String,
    pub bridge_id: String,
    /// Session key.
    pub session_name: Option<String>,
    pub history_scope: String,
    /// Text ('' once recalled).
    pub text: String,
    pub recalled: bool,
    /// When the message was said: Feishu's create time.
    pub created_at: UnixMs,
    /// Item id, when the event has one.
    pub item_id: Option<i64>,
    /// Item author label.
    pub author_label: Option<String>,
    pub item_text: Option<String>,
}

/// The event log, routing's writes, and the selector's reads.
#[async_trait]
pub trait EventLog: Send + Sync + 'static {
    /// Whether a message was recalled.
    async fn is_recalled(&self, message_id: &str) -> Result<bool, StoreError>;
    /// Writes one routed message's records, verdict and session in one transaction;
    /// returns the session mapping when one was given. A message this profile already
    /// routed (its verdict stands) queues no second turn: routing is idempotent, so an
    /// event processed again after an unrecorded outcome changes nothing.
    async fn apply_route(&self, write: &RouteWrite) -> Result<Routed, StoreError>;
    /// Writes a whole batch in one transaction (see [`ProcessedBatch`]): all of it or
    /// nothing. Answers, per step, what a [`BatchStep::Route`] did (`None` for the
    /// others).
    async fn record_batch(&self, batch: &ProcessedBatch)
    -> Result<Vec<Option<Routed>>, StoreError>;
    /// Which of these messages were recalled.
    async fn recalled_among(&self, message_ids: &[String]) -> Result<Vec<String>, StoreError>;
    /// The remembered display names of these users: `(open_id, name)`.
    async fn names_among(
        &self,
        profile: &str,
        open_ids: &[String],
    ) -> Result<Vec<(String, String)>, StoreError>;
    /// Records a verdict alone (messages that are ignored before any record).
    async fn record_verdict(&self, verdict: &NewVerdict) -> Result<(), StoreError>;
    /// Marks a message recalled everywhere and removes its text from the database
    /// (event log, items, inbox payload); returns how many event-log records it had.
    async fn recall(&self, message_id: &str, chat_id: &str, now: UnixMs)
    -> Result<u64, StoreError>;
    /// Retention, in its own transaction: deletes events (with their items), finished
    /// inbox rows, verdicts, replies and finished turns older than `cutoff`, and what
    /// else holds their text: feed items gathered and feed segments packed before it,
    /// and context decisions recorded before it.
    async fn purge(&self, cutoff: UnixMs) -> Result<(), StoreError>;
    /// A remembered display name.
    async fn name_of(&self, profile: &str, open_id: &str) -> Result<Option<String>, StoreError>;
    /// Verdicts for a message, optionally of one profile.
    async fn verdicts(
        &self,
        message_id: &str,
        profile: Option<&str>,
    ) -> Result<Vec<VerdictRow>, StoreError>;
    /// A thread's event log as one profile recorded it, in said order (Feishu's create
    /// time, then message id, then record id).
    async fn thread_events(
        &self,
        thread: ProfileThread<'_>,
    ) -> Result<Vec<ContextEventRow>, StoreError>;
    /// Every event-log record of a message, all profiles, in said order.
    async fn message_events(&self, message_id: &str) -> Result<Vec<ContextEventRow>, StoreError>;
    /// Writes event-log records without a verdict (agent outputs).
    async fn record_events(&self, events: &[NewContextEvent]) -> Result<(), StoreError>;
    /// The newest `window` items of a thread that this profile may consider, by said
    /// order: its own topic-root and discussion records and every profile's agent
    /// outputs.
    async fn thread_candidates(
        &self,
        thread: ProfileThread<'_>,
        window: i64,
    ) -> Result<Vec<Candidate>, StoreError>;
    /// The newest `cap` items observed in a history scope after its watermark (a record
    /// id: newest by record order).
    async fn pending_candidates(
        &self,
        profile: &str,
        scope: &str,
        cap: i64,
    ) -> Result<Vec<Candidate>, StoreError>;
    /// Items by id as the log holds them now, any profile (what-if explain reads back
    /// the candidates a decision looked at): a recalled item comes flagged with its text
    /// gone; an id no longer in the log (purged) is absent.
    async fn candidates_by_id(&self, item_ids: &[i64]) -> Result<Vec<Candidate>, StoreError>;
    /// [`EventLog::thread_candidates`] as of a moment: the newest `window` said no later
    /// than `said_by` (Feishu's create time).
    async fn thread_candidates_said_by(
        &self,
        thread: ProfileThread<'_>,
        said_by: UnixMs,
        window: i64,
    ) -> Result<Vec<Candidate>, StoreError>;
    /// The newest `cap` items this profile observed in a history scope, said no later
    /// than `said_by`, whatever the watermark says (newest by record order).
    async fn scope_candidates_said_by(
        &self,
        profile: &str,
        scope: &str,
        said_by: UnixMs,
        cap: i64,
    ) -> Result<Vec<Candidate>, StoreError>;
    /// The recorded topic root of a thread (this profile's record first), not recalled:
    /// (text, author label).
    async fn topic_root(
        &self,
        thread: ProfileThread<'_>,
    ) -> Result<Option<(String, String)>, StoreError>;
    /// A recorded message's text (for quoted replies), not recalled: (text, label).
    async fn message_text(&self, message_id: &str) -> Result<Option<(String, String)>, StoreError>;
}
