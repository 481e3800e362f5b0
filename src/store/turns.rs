//! Persisted turns: what each request asked of the agent, and how far it got.

use async_trait::async_trait;

use super::{HandoffRow, NewDecision, NewSession, StoreError};
use crate::routing::{Reason, Verdict};
use crate::util::UnixMs;
use crate::vocab::NewContextEvent;

crate::util::spelled::spelled! {
    /// A turn's state. `queued → running → succeeded | failed | cancelled`.
    #[derive(utoipa::ToSchema)]
    #[schema(rename_all = "lowercase")]
    pub enum TurnState("turn state") {
        /// Waiting behind the session's earlier turns.
        Queued,
        /// Handed to the agent (or its answer is being delivered).
        Running,
        /// Answered and the answer posted.
        Succeeded,
        /// Ended without an answer posted; `error` says why.
        Failed,
        /// Stopped by the user (or recalled before it ran).
        Cancelled,
    }
}

/// A turn to queue, written in the routing transaction of its request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewTurn {
    /// `turn_<hex>`: the webhook id, and the seed of its replies' uuids.
    pub turn_id: String,
    pub profile: String,
    pub session_key: String,
    pub chat_id: String,
    pub message_id: String,
    pub request_text: String,
    /// Everything needed to run it again after a restart (JSON).
    pub job_json: String,
    pub queued_at: UnixMs,
    /// The replica that queues it, and runs it while alive (`worker.replica_id`).
    pub owner: String,
}

/// A stored turn.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct TurnRow {
    /// Row id (queue order).
    pub id: i64,
    /// `turn_<hex>`.
    pub turn_id: String,
    pub profile: String,
    pub session_key: String,
    /// The session id it ran in (set when it starts).
    pub session_id: Option<String>,
    pub chat_id: String,
    pub message_id: String,
    /// Request text (emptied when the request is recalled).
    pub request_text: String,
    /// The job, as JSON.
    pub job_json: String,
    /// Where it stands.
    #[sqlx(try_from = "String")]
    pub state: TurnState,
    /// The context decision it made.
    pub decision_id: Option<i64>,
    /// The agent's answer, stored before it is posted.
    pub output: Option<String>,
    /// The posted reply's message id.
    pub reply_message_id: Option<String>,
    /// The card a streaming answer is shown in.
    pub card_message_id: Option<String>,
    /// That card's CardKit entity id, when it was sent as one.
    pub card_id: Option<String>,
    /// Feishu's id of the reaction showing on the request while the turn runs, until it
    /// is removed (an ended turn that still has one is removed at the next start).
    pub working_reaction_id: Option<String>,
    /// Why it failed or was cancelled.
    pub error: Option<String>,
    /// The replica that owns it (runs it, or recovers it).
    pub lease_owner: Option<String>,
    pub queued_at: UnixMs,
    pub started_at: Option<UnixMs>,
    /// Unix ms the agent answered.
    pub answered_at: Option<UnixMs>,
    pub finished_at: Option<UnixMs>,
    /// The handoff chain it runs in (a turn another bot's answer queued).
    pub chain_id: Option<String>,
    /// Its hop in that chain (1 for the first handoff).
    pub hop: Option<i64>,
    /// The structured handoff its answer asked for (JSON), stored with the answer.
    pub handoff_json: Option<String>,
}

/// Which earlier turns of a session to read back as its history.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HistoryQuery<'a> {
    pub profile: &'a str,
    pub session_key: &'a str,
    /// Only turns that ran under this session id (a reset starts a new history).
    pub session_id: &'a str,
    /// Only turns queued before this one (its row id).
    pub before_id: i64,
    /// The latest this many.
    pub limit: i64,
}

/// Everything a delivered answer writes, in one transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnCompletion {
    pub turn_id: String,
    /// The posted reply.
    pub reply_message_id: String,
    /// The answer as `agent_output`.
    pub output_event: NewContextEvent,
    /// Session whose topic root is now delivered: (profile, key, session id).
    pub topic_root_delivered: Option<(String, String, String)>,
    /// The handoff its answer asks for, written only if this completion succeeds the turn.
    pub handoff: Option<HandoffWrite>,
    pub now: UnixMs,
}

/// What a completion writes when its answer hands over, in its transaction: the
/// handoff's record, the target's verdict on the answer (naming the chain), and for a
/// started one its session and queued turn. Written only when the completion marks its
/// turn succeeded, and only once per handoff.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HandoffWrite {
    pub record: HandoffRow,
    /// The target's verdict: invoked (`handoff`), or ignored and why.
    pub verdict: Verdict,
    pub reason: Reason,
    pub session: Option<NewSession>,
    pub turn: Option<NewTurn>,
}

/// What starting a turn writes.
#[derive(Debug, Clone, Copy)]
pub struct TurnStart<'a> {
    pub turn_id: &'a str,
    /// Its context decision (whose `session_id` the turn runs in).
    pub decision: &'a NewDecision,
    /// Pending history to consume: (profile, history scope, up to this event id).
    pub consume: Option<(&'a str, &'a str, i64)>,
    pub now: UnixMs,
    /// The replica starting it: a turn another replica took over does not start here.
    pub owner: &'a str,
}

/// A started turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StartedTurn {
    /// Its row id (queue order).
    pub row_id: i64,
    pub decision_id: i64,
}

/// Filter for listing turns.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TurnFilter {
    pub profile: Option<String>,
    pub session_key: Option<String>,
    pub state: Option<String>,
    /// At most this many, newest first.
    pub limit: i64,
}

/// Turn persistence.
#[async_trait]
pub trait TurnStore: Send + Sync + 'static {
    /// Starts a queued turn, in one transaction: it moves to running in the decision's
    /// session id, the decision is recorded (linked from the verdict and the turn), and
    /// the pending history is consumed up to the snapshot. `None`, with nothing written,
    /// when the turn is no longer queued (cancelled or finished meanwhile) or no longer
    /// this replica's.
    async fn start_turn(&self, s: &TurnStart<'_>) -> Result<Option<StartedTurn>, StoreError>;
    /// Remembers the card a streaming answer is shown in (its message, and its CardKit
    /// entity when it is one).
    async fn set_turn_card(
        &self,
        turn_id: &str,
        message_id: &str,
        card_id: Option<&str>,
    ) -> Result<(), StoreError>;
    /// Remembers the reaction showing on the turn's request (see
    /// [`TurnRow::working_reaction_id`]).
    async fn record_turn_reaction(
        &self,
        turn_id: &str,
        reaction_id: &str,
    ) -> Result<(), StoreError>;
    /// Forgets the turn's reaction once it is removed, unless another one was recorded
    /// meanwhile.
    async fn clear_turn_reaction(&self, turn_id: &str, reaction_id: &str)
    -> Result<(), StoreError>;
    /// Ended turns whose reaction is still recorded (its removal did not get through),
    /// oldest first, at most `limit`.
    async fn ended_turn_reactions(&self, limit: i64) -> Result<Vec<TurnRow>, StoreError>;
    /// Stores the agent's answer (and the structured handoff it asks for, as JSON)
    /// before it is posted.
    async fn save_turn_output(
        &self,
        turn_id: &str,
        output: &str,
        handoff_json: Option<&str>,
        now: UnixMs,
    ) -> Result<(), StoreError>;
    /// Ends an unfinished turn as failed or cancelled; `false` when it had already ended.
    async fn end_turn(
        &self,
        turn_id: &str,
        state: TurnState,
        error: &str,
        now: UnixMs,
    ) -> Result<bool, StoreError>;
    /// Records a delivered answer: the `agent_output` event, the topic root flag, the
    /// turn's success and — when this marks it succeeded — the handoff it asks for,
    /// together.
    async fn complete_turn(&self, c: &TurnCompletion) -> Result<(), StoreError>;
    /// One turn.
    async fn turn(&self, turn_id: &str) -> Result<Option<TurnRow>, StoreError>;
    /// The turn that made a decision.
    async fn turn_of_decision(&self, decision_id: i64) -> Result<Option<TurnRow>, StoreError>;
    /// Queued and running turns, in queue order.
    async fn unfinished_turns(&self) -> Result<Vec<TurnRow>, StoreError>;
    /// The session's latest `limit` succeeded turns before `before_id`, oldest first.
    async fn session_history(&self, q: &HistoryQuery<'_>) -> Result<Vec<TurnRow>, StoreError>;
    /// Turns matching a filter, newest first.
    async fn turns(&self, filter: &TurnFilter) -> Result<Vec<TurnRow>, StoreError>;
    /// (queued, running) counts.
    async fn turn_counts(&self) -> Result<(i64, i64), StoreError>;
}
